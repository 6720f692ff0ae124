package format_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// corpusLake writes every corpus file of the three signals through the
// lake writer with opts and returns the bytes of the files written.
func corpusLake(t *testing.T, opts lake.Options) map[string][]byte {
	t.Helper()
	var logs signal.Logs
	var metrics signal.Metrics
	var spans signal.Spans
	for _, kind := range []string{"logs", "metrics", "traces"} {
		for _, f := range corpustest.Files(t, kind) {
			if !strings.Contains(filepath.Base(f), ".binpb") {
				continue
			}
			pb, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(f, ".gz") {
				zr, err := gzip.NewReader(bytes.NewReader(pb))
				if err != nil {
					t.Fatal(err)
				}
				if pb, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			switch kind {
			case "logs":
				err = otlp.DecodeLogs(&logs, pb)
			case "metrics":
				err = otlp.DecodeMetrics(&metrics, pb)
			default:
				err = otlp.DecodeTraces(&spans, pb)
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	opts.Root = t.TempDir()
	opts.Now = func() time.Time { return time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC) }
	var paths []string
	w, err := lake.NewWriter(opts, func(s lake.Segment) error {
		paths = append(paths, filepath.Join(opts.Root, filepath.FromSlash(s.Path)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteLogs("t", &logs); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMetrics("t", &metrics); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSpans("t", &spans); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out := make(map[string][]byte, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(opts.Root, p)
		out[rel] = b
	}
	return out
}

// readAs reads every row of a lake file, through the typed decoder or
// (legacy) parquet-go's page reader, and returns the rows as OTLP
// protobuf (every field of every record, attributes with their keys and
// types), the row count, and the batch's fixed per-row columns that
// protobuf groups away (series ids).
func readAs(t *testing.T, name string, b []byte, legacy, streaming bool) ([]byte, int, []uint64) {
	t.Helper()
	f, err := format.OpenReader(bytes.NewReader(b), int64(len(b)), name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	format.SetLegacyRead(f, legacy)
	defer f.Close()
	var logs signal.Logs
	var metrics signal.Metrics
	var spans signal.Spans
	read := func(all, next func() error) error {
		if !streaming {
			return all()
		}
		for {
			if err := next(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}
	var pb []byte
	var n int
	var ids []uint64
	switch f.Table() {
	case format.TableLogs:
		err = read(func() error { return f.ReadLogs(&logs) }, func() error { return f.NextLogs(&logs) })
		pb, n = otlp.AppendLogsProto(nil, &logs), logs.Len()
	case format.TableMetrics:
		err = read(func() error { return f.ReadMetrics(&metrics) }, func() error { return f.NextMetrics(&metrics) })
		pb, n, ids = otlp.AppendMetricsProto(nil, &metrics), metrics.Len(), metrics.SeriesID
	case format.TableTraces:
		err = read(func() error { return f.ReadSpans(&spans) }, func() error { return f.NextSpans(&spans) })
		pb, n = otlp.AppendTracesProto(nil, &spans), spans.Len()
	default:
		t.Fatalf("%s: table %q", name, f.Table())
	}
	if err != nil {
		t.Fatalf("%s (legacy %v, streaming %v): %v", name, legacy, streaming, err)
	}
	return pb, n, ids
}

// TestTypedReadMatches: the typed page decoder gives the same records as
// parquet-go's page reader (the oracle), value for value, on every table
// written from the corpus: default files, small row groups and pages
// (several row groups per file, several pages per chunk), a small
// attribute-column cap (overflow columns), read whole and row group by
// row group.
func TestTypedReadMatches(t *testing.T) {
	files := map[string][]byte{}
	for name, opts := range map[string]lake.Options{
		"default":  {},
		"small-rg": {RowGroupRows: 7000},
		"overflow": {MaxAttributeColumns: 20, RowGroupRows: 20000},
	} {
		for p, b := range corpusLake(t, opts) {
			files[name+"/"+p] = b
		}
	}
	files["json-logs"] = lakeFile(t)
	tables := map[string]int{}
	for name, b := range files {
		for _, streaming := range []bool{false, strings.HasPrefix(name, "small-rg")} {
			want, wn, wantIDs := readAs(t, name, b, true, streaming)
			got, gn, gotIDs := readAs(t, name, b, false, streaming)
			if gn != wn || !bytes.Equal(got, want) {
				t.Errorf("%s (streaming %v): typed read differs from parquet-go's: %d rows, %d bytes of protobuf; want %d rows, %d bytes",
					name, streaming, gn, len(got), wn, len(want))
			}
			if len(gotIDs) != len(wantIDs) {
				t.Errorf("%s: %d series ids, want %d", name, len(gotIDs), len(wantIDs))
			}
			for i := range min(len(gotIDs), len(wantIDs)) {
				if gotIDs[i] != wantIDs[i] {
					t.Errorf("%s: row %d series id %x, want %x", name, i, gotIDs[i], wantIDs[i])
					break
				}
			}
			if wn == 0 {
				t.Errorf("%s: no rows", name)
			}
		}
		pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		table, _ := pf.Lookup(format.MetaTable)
		tables[table]++
	}
	for _, tb := range []string{format.TableLogs, format.TableMetrics, format.TableTraces} {
		if tables[tb] == 0 {
			t.Errorf("no %s file was compared", tb)
		}
	}
	t.Logf("compared %d files: %v", len(files), tables)
}

// FuzzDecodePages: damaged pages of a real lake file (a patch of bytes at
// some offset before the footer, so the file still opens) give the typed
// decoder, on its own and without the checks against the footer, an error
// or values, never a panic or an allocation past the page caps; File reads
// (the decoder checking each page as it decodes it) give an error or the
// rows, and an error whenever CheckChunk refuses one of the file's chunks:
// the decoder's checks are at least CheckChunk's. Definition levels
// decoded as runs count the values the levels as bytes do.
func FuzzDecodePages(f *testing.F) {
	seed := lakeFile(f)
	footer := int(binary.LittleEndian.Uint32(seed[len(seed)-8:])) + 8
	body := len(seed) - footer - 4 // the pages: after "PAR1", before the footer
	f.Add(uint32(0), []byte{0xff})
	f.Add(uint32(100), []byte{0, 0, 0, 0})
	f.Add(uint32(body/2), []byte{0x7f, 0xff, 0xff, 0xff, 0x0f})
	f.Add(uint32(body-3), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, at uint32, patch []byte) {
		d := bytes.Clone(seed)
		off := 4 + int(at%uint32(body))
		copy(d[off:len(d)-footer], patch)
		pf, err := format.Open(bytes.NewReader(d), int64(len(d)), "fuzz", parquet.SkipPageIndex(true))
		if err != nil {
			return
		}
		if _, err := format.DecodeUnchecked(pf); errors.Is(err, format.ErrLevelRunsDiffer) {
			t.Fatal(err)
		}
		var checkErr error
		for _, rg := range pf.RowGroups() {
			for _, cc := range rg.ColumnChunks() {
				if _, err := format.CheckChunk(cc); err != nil && checkErr == nil {
					checkErr = err
				}
			}
		}
		if _, err := readFile(d); err == nil && checkErr != nil {
			t.Errorf("File read the file, CheckChunk refuses it: %v", checkErr)
		}
	})
}

// TestDecodeRefusesBombPage: a page claiming 2^30 (or a negative number
// of) values is refused by the typed decoder on its own, without the page
// checks before it, with an error wrapping ErrCorrupt and without
// allocating what the page claims; through File, the read fails the same
// way.
func TestDecodeRefusesBombPage(t *testing.T) {
	b := lakeFile(t)
	for _, num := range []int32{1 << 30, -1} {
		d := bombPage(t, b, "attr.user", num)
		pf, err := format.Open(bytes.NewReader(d), int64(len(d)), "bomb", parquet.SkipPageIndex(true))
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = format.DecodeUnchecked(pf)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, format.ErrCorrupt) {
			t.Errorf("%d values: decode: %v, want an error wrapping ErrCorrupt", num, err)
		} else {
			t.Logf("%d values: %v", num, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Errorf("%d values: decoding allocated %d MB", num, grew>>20)
		}
		if _, err := readFile(d); !errors.Is(err, format.ErrCorrupt) {
			t.Errorf("%d values: File read: %v, want an error wrapping ErrCorrupt", num, err)
		}
	}
}
