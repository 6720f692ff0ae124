package lake

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/signal"
)

// faultStore fails the nth Write or the Commit of the objects it creates.
type faultStore struct {
	*LocalStore
	failWriteAfter int64 // bytes; <0 never
	failCommit     bool
}

type faultWriter struct {
	ObjectWriter
	s       *faultStore
	written int64
}

var errInjected = errors.New("injected fault")

func (s *faultStore) Create(p string) (ObjectWriter, error) {
	w, err := s.LocalStore.Create(p)
	if err != nil {
		return nil, err
	}
	return &faultWriter{ObjectWriter: w, s: s}, nil
}

func (w *faultWriter) Write(b []byte) (int, error) {
	if w.s.failWriteAfter >= 0 && w.written+int64(len(b)) > w.s.failWriteAfter {
		return 0, errInjected
	}
	w.written += int64(len(b))
	return w.ObjectWriter.Write(b)
}

func (w *faultWriter) Commit() error {
	if w.s.failCommit {
		_ = w.ObjectWriter.Abort()
		return errInjected
	}
	return w.ObjectWriter.Commit()
}

// manyLogs makes n records in one hour with a few services and attributes.
func manyLogs(n int) *signal.Logs {
	l := new(signal.Logs)
	c := &l.Common
	var res []uint32
	for s := range 4 {
		res = append(res, addResource(c, func() {
			attr(c, "service.name", signal.ValueString, fmt.Sprintf("svc-%d", s))
			attr(c, "host.name", signal.ValueString, fmt.Sprintf("host-%d", s))
		}))
	}
	sc := addScope(c, "lib", "1", func() {})
	base := fixedNow.Truncate(time.Hour).UnixNano()
	for i := range n {
		j := l.AppendRecord(res[i%len(res)], sc)
		l.Time[j] = base + int64(i)*1000
		l.SeverityNum[j] = 9
		l.SeverityText[j] = c.AppendString("INFO")
		l.BodyType[j] = signal.ValueString
		l.Body[j] = uint64(c.AppendString(fmt.Sprintf("request %d served in %d ms", i, i%97)))
		l.Attr[j] = attrRange(c, func() {
			attr(c, "http.method", signal.ValueString, "GET")
			attr(c, "http.status", signal.ValueInt, 200+i%5)
		})
	}
	return l
}

// runLogs makes n records in sort order whose attribute sets come in runs
// of 1 to 13 equal sets, with duplicate keys, so that the encoder writes
// runs of rows at once (attrRuns) and takes back runs of a duplicate.
func runLogs(n int) *signal.Logs {
	l := new(signal.Logs)
	c := &l.Common
	res := addResource(c, func() { attr(c, "service.name", signal.ValueString, "svc") })
	sc := addScope(c, "lib", "1", func() {})
	base := fixedNow.Truncate(time.Hour).UnixNano()
	set, left := 0, 0
	for i := range n {
		if left == 0 {
			set, left = (set+1)%4, 1+i%13
		}
		left--
		j := l.AppendRecord(res, sc)
		l.Time[j] = base + int64(i)*1000
		l.Attr[j] = attrRange(c, func() {
			switch set {
			case 0:
				attr(c, "dup", signal.ValueString, "a")
				attr(c, "dup", signal.ValueInt, 2)
				attr(c, "k", signal.ValueString, "x")
				attr(c, "dup", signal.ValueString, "last")
			case 1:
				attr(c, "dup", signal.ValueString, "a")
				attr(c, "k", signal.ValueString, "x")
			case 2:
				attr(c, "k", signal.ValueString, "x")
				attr(c, "dup", signal.ValueInt, 3)
				attr(c, "dup", signal.ValueInt, 3)
			case 3: // none
			}
		})
	}
	return l
}

// lakeFiles lists committed files (not _tmp) under root.
func lakeFiles(t *testing.T, root string) []string {
	var out []string
	for _, f := range listFiles(t, root) {
		rel, _ := filepath.Rel(root, f)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

func TestWriteFailureLeavesNoFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(root string) *faultStore
	}{
		{"write", func(root string) *faultStore { return &faultStore{NewLocalStore(root), 1000, false} }},
		{"first-byte", func(root string) *faultStore { return &faultStore{NewLocalStore(root), 0, false} }},
		{"commit", func(root string) *faultStore { return &faultStore{NewLocalStore(root), -1, true} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			committed := 0
			w, err := NewWriter(Options{Store: tc.store(root), Now: func() time.Time { return fixedNow }},
				func(Segment) error { committed++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if err := w.WriteLogs("t", manyLogs(5000)); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); !errors.Is(err, errInjected) {
				t.Fatalf("Flush = %v, want the injected fault", err)
			}
			if files := lakeFiles(t, root); len(files) != 0 {
				t.Fatalf("files left behind: %v", files)
			}
			if committed != 0 {
				t.Fatalf("commit called %d times", committed)
			}
			if s := w.Stats(); s.BufferedBytes != 0 || s.OpenPartitions != 0 {
				t.Fatalf("partition kept after failure: %+v", s)
			}
		})
	}
}

func TestCommitErrorRemovesFile(t *testing.T) {
	root := t.TempDir()
	boom := errors.New("catalog down")
	var seen []Segment
	w, err := NewWriter(Options{Root: root, Now: func() time.Time { return fixedNow }}, func(s Segment) error {
		// The file must be durable and in place when commit runs.
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(s.Path))); err != nil {
			t.Errorf("file not in place at commit: %v", err)
		}
		seen = append(seen, s)
		return boom
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteLogs("t", manyLogs(100)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want %v", err, boom)
	}
	if len(seen) != 1 {
		t.Fatalf("commit calls: %d", len(seen))
	}
	if files := lakeFiles(t, root); len(files) != 0 {
		t.Fatalf("files left behind: %v", files)
	}
}

func TestRollAtTargetFileBytes(t *testing.T) {
	src := manyLogs(20000)
	root, segs := writeAll(t, Options{TargetFileBytes: 512 << 10}, func(w *Writer) error { return w.WriteLogs("t", src) })
	if len(segs) < 3 {
		t.Fatalf("want several files, got %d", len(segs))
	}
	var rows int64
	got := new(signal.Logs)
	for _, s := range segs {
		rows += s.Rows
		if s.Bytes <= 0 || s.SchemaHash == "" || len(s.Services) != 4 || s.Table != TableLogs || s.Day != "2025-06-01" || s.Hour != 12 {
			t.Errorf("segment %+v", s)
		}
		if !strings.HasPrefix(s.Path, "logs/tenant=t/dt=2025-06-01/hour=12/") || !strings.HasSuffix(s.Path, ".parquet") {
			t.Errorf("path %q", s.Path)
		}
		f := openSeg(t, root, s)
		if h := catalog.ParquetSchemaHash(f.Parquet().Schema()); h != s.SchemaHash {
			t.Errorf("schema hash %s, catalog computes %s", s.SchemaHash, h)
		}
		if err := f.ReadLogs(got); err != nil {
			t.Fatal(err)
		}
	}
	if rows != int64(src.Len()) {
		t.Fatalf("rows %d, want %d", rows, src.Len())
	}
	compareCanon(t, canonLogs(src), canonLogs(got))
	if segs[0].Path >= segs[1].Path {
		t.Errorf("file ids not time-sortable: %s then %s", segs[0].Path, segs[1].Path)
	}
}

func TestMemoryBound(t *testing.T) {
	// Many hours open at once: only MaxBufferedBytes forces flushes.
	const limit = 1 << 20
	batch := manyLogs(3000)
	var w *Writer
	var maxBatch int64
	_, segs := writeAll(t, Options{MaxBufferedBytes: limit, TargetFileBytes: 1 << 30}, func(ww *Writer) error {
		w = ww
		for h := range 48 {
			for i := range batch.Time {
				batch.Time[i] = fixedNow.Add(-time.Duration(h)*time.Hour).Truncate(time.Hour).UnixNano() + int64(i)
			}
			maxBatch = max(maxBatch, estimateLogs(batch))
			if err := ww.WriteLogs("t", batch); err != nil {
				return err
			}
			if s := ww.Stats(); s.BufferedBytes > limit {
				return fmt.Errorf("buffered %d > limit %d", s.BufferedBytes, limit)
			}
		}
		return nil
	})
	s := w.Stats()
	if s.PeakBufferedBytes > limit+maxBatch {
		t.Fatalf("peak %d > limit %d + batch %d", s.PeakBufferedBytes, limit, maxBatch)
	}
	if s.MemoryFlushes == 0 || len(segs) < 48 {
		t.Fatalf("memory flushes %d, segments %d", s.MemoryFlushes, len(segs))
	}
	var rows int64
	for _, sg := range segs {
		rows += sg.Rows
	}
	if rows != 48*int64(batch.Len()) || s.Rows != rows {
		t.Fatalf("rows %d (stats %d), want %d", rows, s.Rows, 48*batch.Len())
	}
}

func TestStoreWalkAndOpen(t *testing.T) {
	root, segs := writeAll(t, Options{}, func(w *Writer) error { return w.WriteLogs("t", manyLogs(10)) })
	st := NewLocalStore(root)
	var walked []string
	if err := st.Walk("logs/", func(p string, size int64) error { walked = append(walked, p); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(walked) != 1 || walked[0] != segs[0].Path {
		t.Fatalf("walk = %v, want %s", walked, segs[0].Path)
	}
	f, err := OpenObject(st, segs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int
	l := new(signal.Logs)
	for {
		if err := f.NextLogs(l); err != nil {
			break
		}
		n++
	}
	if n == 0 || l.Len() != 10 {
		t.Fatalf("streamed %d row groups, %d rows", n, l.Len())
	}
	if _, err := st.Create("../x"); err == nil {
		t.Fatal("path escaping the root accepted")
	}
}

func FuzzOpenFile(f *testing.F) {
	dir := f.TempDir()
	_, segs := writeAll(f, Options{Root: dir}, func(w *Writer) error { return w.WriteLogs("t", hostileLogs(f)) })
	for _, s := range segs[:1] {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(s.Path)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(append([]byte("PAR1"), b[len(b)-200:]...))
	}
	_, msegs := writeAll(f, Options{Root: f.TempDir()}, func(w *Writer) error { return w.WriteMetrics("t", testMetrics(f)) })
	_ = msegs
	f.Add([]byte("PAR1PAR1"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := OpenReader(bytes.NewReader(data), int64(len(data)), "fuzz")
		if err != nil {
			return
		}
		_ = file.ReadLogs(new(signal.Logs))
		_ = file.ReadMetrics(new(signal.Metrics))
		_ = file.ReadSpans(new(signal.Spans))
	})
}
