package format_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// logsJSON is a small OTLP logs request with attributes of every type.
const logsJSON = `{"resourceLogs":[{"resource":{"attributes":[
 {"key":"service.name","value":{"stringValue":"checkout"}},
 {"key":"host.cpus","value":{"intValue":"8"}}]},
 "scopeLogs":[{"scope":{"name":"s","version":"1"},"logRecords":[
  {"timeUnixNano":"1748781000000000000","severityNumber":9,"body":{"stringValue":"hello"},
   "attributes":[{"key":"a#b","value":{"doubleValue":0.5}},{"key":"ok","value":{"boolValue":true}},
   {"key":"raw","value":{"bytesValue":"AP8="}},{"key":"tags","value":{"arrayValue":{"values":[{"stringValue":"x"}]}}}]},
  {"timeUnixNano":"1748781001000000000","severityNumber":17,"body":{"kvlistValue":{"values":[{"key":"k","value":{"intValue":"1"}}]}},
   "traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708",
   "attributes":[{"key":"user","value":{"stringValue":"u-17"}},{"key":"none","value":{}}]}]}]}]}`

// lakeFile writes logsJSON through the lake writer and returns the bytes
// of the one file it makes: a real lake file, the seed of FuzzOpen.
func lakeFile(tb testing.TB) []byte {
	tb.Helper()
	var l signal.Logs
	if err := otlp.DecodeLogsJSON(&l, []byte(logsJSON)); err != nil {
		tb.Fatal(err)
	}
	root := tb.TempDir()
	var segs []lake.Segment
	w, err := lake.NewWriter(lake.Options{Root: root, Now: func() time.Time { return time.Unix(1748781000, 0) }},
		func(s lake.Segment) error { segs = append(segs, s); return nil })
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.WriteLogs("t", &l); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	if len(segs) != 1 {
		tb.Fatalf("wrote %d files, want 1", len(segs))
	}
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(segs[0].Path)))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// readAll opens b and reads every value of every column through
// format.Pages, as a reader of the lake does, guarded by format.Recover.
func readAll(b []byte) (rows int64, err error) {
	defer format.Recover(&err, "read %q", "seed")
	pf, err := format.Open(bytes.NewReader(b), int64(len(b)), "seed", parquet.SkipPageIndex(true))
	if err != nil {
		return 0, err
	}
	buf := make([]parquet.Value, 64)
	for _, rg := range pf.RowGroups() {
		for _, cc := range rg.ColumnChunks() {
			pages := format.Pages(cc)
			for {
				p, err := pages.ReadPage()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					pages.Close()
					return 0, err
				}
				vr := p.Values()
				for {
					n, err := vr.ReadValues(buf)
					if errors.Is(err, io.EOF) || (err == nil && n == 0) {
						break
					}
					if err != nil {
						parquet.Release(p)
						pages.Close()
						return 0, err
					}
				}
				parquet.Release(p)
			}
			pages.Close()
		}
		rows += rg.NumRows()
	}
	return rows, nil
}

// TestOpenLakeFile: Open reads a real lake file, footer and columns.
func TestOpenLakeFile(t *testing.T) {
	b := lakeFile(t)
	pf, err := format.Open(bytes.NewReader(b), int64(len(b)), "f.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := pf.Lookup(format.MetaTable); v != format.TableLogs {
		t.Errorf("%s = %q", format.MetaTable, v)
	}
	if v, _ := pf.Lookup(format.MetaSort); v != format.Logs.Sort {
		t.Errorf("%s = %q, want %q", format.MetaSort, v, format.Logs.Sort)
	}
	names := map[string]bool{}
	for _, p := range pf.Schema().Columns() {
		names[p[0]] = true
	}
	for _, c := range format.Logs.Columns {
		if !names[c.Name] {
			t.Errorf("column %q missing", c.Name)
		}
	}
	for _, n := range []string{format.AttrName(format.ScopeRecord, "a#b", signal.ValueDouble), "attr.a%23b#double",
		"resource.host.cpus#int", "attr.none#empty", "attr.tags#array"} {
		if !names[n] {
			t.Errorf("attribute column %q missing (have %v)", n, names)
		}
	}
	if rows, err := readAll(b); err != nil || rows != 2 {
		t.Fatalf("read %d rows, %v", rows, err)
	}
}

// TestOpenDamaged: truncated and overwritten files give an error naming the
// file, never a panic; parquet-go panics on some of these, which Open turns
// into ErrCorrupt.
func TestOpenDamaged(t *testing.T) {
	b := lakeFile(t)
	corrupt := 0
	check := func(what string, d []byte) {
		t.Helper()
		_, err := format.Open(bytes.NewReader(d), int64(len(d)), "segment.parquet")
		if err != nil {
			if !strings.Contains(err.Error(), `"segment.parquet"`) {
				t.Errorf("%s: error %q does not name the file", what, err)
			}
			if errors.Is(err, format.ErrCorrupt) {
				corrupt++
			}
			return
		}
		// Opened: reading the damaged pages errs or succeeds, never panics.
		if _, err := readAll(d); errors.Is(err, format.ErrCorrupt) {
			corrupt++
		}
	}
	failed := 0
	for _, n := range []int{0, 1, 4, 8, len(b) / 2, len(b) - 9, len(b) - 8, len(b) - 1} {
		d := b[:n]
		pf, err := format.Open(bytes.NewReader(d), int64(len(d)), "segment.parquet")
		if err == nil || pf != nil {
			t.Errorf("truncated to %d of %d bytes: opened", n, len(b))
			continue
		}
		if !strings.Contains(err.Error(), `"segment.parquet"`) {
			t.Errorf("truncated to %d: error %q does not name the file", n, err)
		}
		failed++
	}
	if failed == 0 {
		t.Fatal("no truncation failed")
	}
	defer func() { t.Logf("%d damaged files made parquet-go panic, each turned into ErrCorrupt", corrupt) }()
	// Overwrite each 16-byte window of the footer region with garbage.
	for off := max(0, len(b)-2048); off+16 <= len(b); off += 16 {
		d := bytes.Clone(b)
		for i := range 16 {
			d[off+i] ^= 0xA5
		}
		check("footer bytes at "+itoa(off), d)
	}
	// And of the pages.
	for off := 4; off+16 <= len(b)-2048; off += 64 {
		d := bytes.Clone(b)
		for i := range 16 {
			d[off+i] = 0xFF
		}
		check("page bytes at "+itoa(off), d)
	}
}

// TestRecoverKeepsNormalErrors: Recover leaves an error alone when nothing
// panicked and wraps a panic as ErrCorrupt.
func TestRecoverKeepsNormalErrors(t *testing.T) {
	want := errors.New("plain")
	f := func(panicking bool) (err error) {
		defer format.Recover(&err, "read %q", "x.parquet")
		if panicking {
			panic("index out of range")
		}
		return want
	}
	if err := f(false); err != want {
		t.Errorf("no panic: %v", err)
	}
	err := f(true)
	if !errors.Is(err, format.ErrCorrupt) || err.Error() != `read "x.parquet": corrupt parquet: index out of range` {
		t.Errorf("panic: %v", err)
	}
}

// readFile reads b as a lake logs file through format.File, the reader
// compaction and queries use.
func readFile(b []byte) (rows int, err error) {
	f, err := format.OpenReader(bytes.NewReader(b), int64(len(b)), "seed")
	if err != nil {
		return 0, err
	}
	var l signal.Logs
	if err := f.ReadLogs(&l); err != nil {
		return 0, err
	}
	return l.Len(), nil
}

// FuzzOpen: whatever the bytes, Open and reading every column (page by
// page, and as records through format.File) return an error or the rows,
// never panic nor take more memory than the caps of format.CheckChunk
// allow. Seeded with a real lake file.
func FuzzOpen(f *testing.F) {
	b := lakeFile(f)
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add(b[len(b)/2:])
	f.Add([]byte("PAR1PAR1"))
	f.Add(bombPage(f, b, "attr.user", 1<<30))
	f.Fuzz(func(t *testing.T, d []byte) {
		_, _ = readAll(d)
		_, _ = readFile(d)
	})
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// TestOpenRefusesLZ4: a file with LZ4 (or gzip) column chunks is refused
// with an error naming the column: parquet-go's LZ4 decoder grows its
// buffer without bound on a damaged page (found by fuzzing: a mutated lake
// file whose codec byte became LZ4 took 4 GiB and killed the process);
// zstd and snappy files open.
func TestOpenRefusesLZ4(t *testing.T) {
	type row struct{ V string }
	for _, codec := range []compress.Codec{&parquet.Lz4Raw, &parquet.Gzip, &parquet.Zstd, &parquet.Snappy} {
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[row](&buf, parquet.Compression(codec))
		if _, err := w.Write([]row{{"a"}, {"b"}}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		_, err := format.Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "x.parquet")
		refused := codec == compress.Codec(&parquet.Lz4Raw) || codec == compress.Codec(&parquet.Gzip)
		if refused != errors.Is(err, format.ErrUnsupportedCodec) {
			t.Errorf("%s: Open: %v", codec, err)
		} else if refused && !strings.Contains(err.Error(), `"x.parquet": column "V"`) {
			t.Errorf("error %q does not name the file and column", err)
		}
	}
}

// TestOpenFooterLengthPastFile: a footer length larger than the file is
// refused before parquet-go allocates it (up to 4 GiB: found by fuzzing).
func TestOpenFooterLengthPastFile(t *testing.T) {
	b := lakeFile(t)
	for _, n := range []uint32{uint32(len(b) - 11), 1 << 31, 0xFFFFFFFF} {
		d := bytes.Clone(b)
		binary.LittleEndian.PutUint32(d[len(d)-8:], n)
		_, err := format.Open(bytes.NewReader(d), int64(len(d)), "segment.parquet")
		if !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), `"segment.parquet"`) {
			t.Errorf("footer length %d: %v", n, err)
		}
	}
	if _, err := format.Open(bytes.NewReader([]byte("PAR1PAR1")), 8, "tiny"); !errors.Is(err, format.ErrCorrupt) {
		t.Errorf("8-byte file: %v", err)
	}
}
