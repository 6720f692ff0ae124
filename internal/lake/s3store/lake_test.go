package s3store_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/s3store"
	"github.com/sluice-dev/sluice/internal/lake/s3store/s3test"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// The lake writer and reader work over S3 exactly as over a local root:
// the corpus logs written to both read back to the same records, in
// files at the same paths relative to the root.
func TestLakeRoundTripCorpusLogs(t *testing.T) {
	srv := s3test.Start(t)
	// Small read blocks and cache: many ranged reads, evictions included.
	st := newStore(t, srv, "lake", func(c *s3store.Config) { c.ReadBlockSize = 64 << 10; c.ReadCacheBlocks = 4 })
	now := time.Date(2025, 6, 1, 12, 30, 0, 0, time.UTC)
	var files int
	for _, path := range corpustest.Files(t, "logs") {
		if !strings.Contains(path, ".binpb") {
			continue
		}
		files++
		src := new(signal.Logs)
		if err := otlp.DecodeLogs(src, corpustest.Read(t, path)); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		write := func(opts lake.Options) []lake.Segment {
			opts.Now, opts.RowGroupRows = func() time.Time { return now }, 500
			var segs []lake.Segment
			w, err := lake.NewWriter(opts, func(s lake.Segment) error { segs = append(segs, s); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if err := w.WriteLogs("corpus", src); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return segs
		}
		read := func(s lake.Store, segs []lake.Segment) *signal.Logs {
			got := new(signal.Logs)
			for _, seg := range segs {
				f, err := lake.OpenObject(s, seg.Path)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.ReadLogs(got); err != nil {
					t.Fatalf("%s: %v", seg.Path, err)
				}
				_ = f.Close()
			}
			return got
		}
		local := lake.NewLocalStore(t.TempDir())
		segsS3, segsLocal := write(lake.Options{Store: st}), write(lake.Options{Store: local})
		if len(segsS3) == 0 || len(segsS3) != len(segsLocal) {
			t.Fatalf("%s: %d segments on S3, %d local", path, len(segsS3), len(segsLocal))
		}
		for i := range segsS3 {
			a, b := segsS3[i], segsLocal[i]
			if filepath.Dir(a.Path) != filepath.Dir(b.Path) || a.Rows != b.Rows {
				t.Errorf("segment %d: S3 %s (%d rows), local %s (%d rows)", i, a.Path, a.Rows, b.Path, b.Rows)
			}
		}
		gotS3, gotLocal := read(st, segsS3), read(local, segsLocal)
		if gotS3.Len() != src.Len() {
			t.Fatalf("%s: read %d records from S3, wrote %d", path, gotS3.Len(), src.Len())
		}
		if !bytes.Equal(otlp.AppendLogsProto(nil, gotS3), otlp.AppendLogsProto(nil, gotLocal)) {
			t.Fatalf("%s: records read from S3 differ from the local lake's", path)
		}
	}
	if files == 0 {
		corpustest.Missing(t, "corpus .binpb files in otlp/logs")
	}
	// Every committed file is listed by Walk, and only those.
	var n int
	if err := st.Walk("", func(p string, size int64) error {
		if !strings.HasPrefix(p, "logs/tenant=corpus/dt=") || !strings.HasSuffix(p, ".parquet") || size == 0 {
			t.Errorf("walk: %s %d", p, size)
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("walk found no lake files")
	}
}
