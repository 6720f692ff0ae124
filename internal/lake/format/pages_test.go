package format_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// firstPage locates the first data page of column col of b's first row
// group: where its header and its body start, and the header.
func firstPage(t testing.TB, b []byte, col string) (hdrOff, bodyOff int, h pqformat.PageHeader) {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	leaf, ok := pf.Schema().Lookup(col)
	if !ok {
		t.Fatalf("no column %q", col)
	}
	md := pf.Metadata().RowGroups[0].Columns[leaf.ColumnIndex].MetaData
	off := int(md.DataPageOffset)
	var proto thrift.CompactProtocol
	r := proto.NewReaderFromBytes(b[off:])
	if err := thrift.NewDecoder(r).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return off, off + r.BytesRead(), h
}

// TestCheckChunkLakeFile: every chunk of a real lake file passes, and
// holds its row group's rows.
func TestCheckChunkLakeFile(t *testing.T) {
	b := lakeFile(t)
	pf, err := format.Open(bytes.NewReader(b), int64(len(b)), "f.parquet")
	if err != nil {
		t.Fatal(err)
	}
	for _, rg := range pf.RowGroups() {
		for i, cc := range rg.ColumnChunks() {
			rows, err := format.CheckChunk(cc)
			if err != nil || rows != rg.NumRows() {
				t.Errorf("column %d: %d rows of %d, %v", i, rows, rg.NumRows(), err)
			}
		}
	}
	if n, err := readFile(b); err != nil || n != 2 {
		t.Fatalf("File read %d rows, %v", n, err)
	}
}

// TestCheckChunkRefusesDamagedPages: pages that claim more than they hold
// (the kinds of damage that made parquet-go allocate gigabytes: FuzzOpen)
// are refused by CheckChunk, by format.Pages and by format.File, with an
// error wrapping ErrCorrupt, before parquet-go decodes them.
func TestCheckChunkRefusesDamagedPages(t *testing.T) {
	b := lakeFile(t)
	const col = "attr.user" // optional: one null, one value
	_, body, h := firstPage(t, b, col)
	if h.Type != pqformat.DataPageV2 || h.DataPageHeaderV2.V.DefinitionLevelsByteLength == 0 {
		t.Fatalf("first page of %s: %+v", col, h)
	}
	damage := map[string]func(d []byte){
		// The first definition-level run claims 63 values in a page of 2.
		"level run": func(d []byte) { d[body] = 63 << 1 },
		// The zstd frame of the values claims another content size.
		"zstd content size": func(d []byte) {
			v := body + int(h.DataPageHeaderV2.V.DefinitionLevelsByteLength) + int(h.DataPageHeaderV2.V.RepetitionLevelsByteLength)
			if binary.LittleEndian.Uint32(d[v:]) != 0xFD2FB528 {
				t.Fatalf("no zstd frame at %d", v)
			}
			d[v+5+boolInt(d[v+4]&0x20 == 0)] ^= 0x7F // first byte of the content size
		},
	}
	for name, fn := range damage {
		d := bytes.Clone(b)
		fn(d)
		pf, err := format.Open(bytes.NewReader(d), int64(len(d)), "f.parquet")
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := pf.Schema().Lookup(col)
		cc := pf.RowGroups()[0].ColumnChunks()[leaf.ColumnIndex]
		if _, err := format.CheckChunk(cc); !errors.Is(err, format.ErrCorrupt) || !errors.Is(err, format.ErrPage) {
			t.Errorf("%s: CheckChunk: %v", name, err)
		}
		if _, err := format.Pages(cc).ReadPage(); !errors.Is(err, format.ErrCorrupt) {
			t.Errorf("%s: Pages: %v", name, err)
		}
		if _, err := readFile(d); !errors.Is(err, format.ErrCorrupt) {
			t.Errorf("%s: File: %v", name, err)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// bombPage returns b with the first data page of column col rewritten to
// claim num values (its CRC dropped and the count's varint padded so that
// the header keeps its length): the damage that made parquet-go allocate
// gigabytes (levels and values are sized by the claimed count).
func bombPage(t testing.TB, b []byte, col string, num int32) []byte {
	t.Helper()
	hdr, _, h := firstPage(t, b, col)
	if h.Type != pqformat.DataPageV2 || h.CRC == 0 {
		t.Fatalf("first page of %s: %+v", col, h)
	}
	varint := func(p int) int { // length of the varint at p
		n := 1
		for b[p+n-1]&0x80 != 0 {
			n++
		}
		return n
	}
	// Fields 1-4 (type, sizes, CRC: i32, header byte 0x15), then field 8
	// (the v2 header, 0x4C) whose field 1 (0x15) is num_values.
	p := hdr
	var crcAt, crcLen int
	for f := 1; f <= 4; f++ {
		if b[p] != 0x15 {
			t.Fatalf("page header layout: field %d header %#x", f, b[p])
		}
		n := 1 + varint(p+1)
		if f == 4 {
			crcAt, crcLen = p, n
		}
		p += n
	}
	if b[p] != 0x4C || b[p+1] != 0x15 {
		t.Fatalf("page header layout: %#x %#x", b[p], b[p+1])
	}
	nvLen := varint(p + 2)
	rest := p + 2 + nvLen
	// The new count: zigzag, as a varint padded to the bytes freed.
	want := crcLen + nvLen
	z := uint32(num<<1) ^ uint32(num>>31)
	var enc []byte
	for z >= 0x80 {
		enc = append(enc, byte(z)|0x80)
		z >>= 7
	}
	enc = append(enc, byte(z))
	if len(enc) > want {
		t.Fatalf("count needs %d bytes, %d free", len(enc), want)
	}
	for len(enc) < want {
		enc[len(enc)-1] |= 0x80
		enc = append(enc, 0)
	}
	d := bytes.Clone(b[:crcAt])
	d = append(d, 0x5C, 0x15) // field 8 now follows field 3
	d = append(d, enc...)
	d = append(d, b[rest:]...)
	if len(d) != len(b) {
		t.Fatalf("rewritten file of %d bytes, want %d", len(d), len(b))
	}
	return d
}

// TestCheckChunkBoundsMemory: a page claiming 2^30 values in a file of a
// few KB is refused, and reading the whole file through format's readers
// allocates a few MB at most; parquet-go's own page reader allocated 1,246
// MB for one such page before failing (measured once; not repeated here).
func TestCheckChunkBoundsMemory(t *testing.T) {
	b := lakeFile(t)
	for _, col := range []string{"attr.user", format.ColBody} {
		d := bombPage(t, b, col, 1<<30)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err1 := readAll(d)
		_, err2 := readFile(d)
		runtime.ReadMemStats(&after)
		if !errors.Is(err1, format.ErrCorrupt) || !errors.Is(err2, format.ErrCorrupt) {
			t.Errorf("%s: pages: %v; File: %v", col, err1, err2)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
			t.Errorf("%s: reading allocated %d MB", col, alloc>>20)
		}
	}
}

// TestCheckChunkAcceptsParquetGoFiles: what parquet-go writes (lake files
// before pqenc were its) passes the checks: data pages v1 and v2, zstd,
// snappy and none, dictionary, optional, list and delta columns, many
// pages per chunk; every chunk holds its row group's rows.
func TestCheckChunkAcceptsParquetGoFiles(t *testing.T) {
	type row struct {
		S string    `parquet:"s,dict"`
		O *int64    `parquet:"o,optional"`
		L []float64 `parquet:"l,list"`
		P string    `parquet:"p"`
		I int64     `parquet:"i,delta"`
	}
	var rows []row
	for i := range 20000 {
		x := int64(i)
		r := row{S: "s" + itoa(i%7), P: "p" + itoa(i), I: x * 3, L: []float64{1, float64(i)}}
		if i%3 == 0 {
			r.O, r.L = &x, nil
		}
		rows = append(rows, r)
	}
	for _, codec := range []compress.Codec{&parquet.Zstd, &parquet.Snappy, &parquet.Uncompressed} {
		for _, v := range []int{1, 2} {
			var buf bytes.Buffer
			w := parquet.NewGenericWriter[row](&buf, parquet.Compression(codec), parquet.DataPageVersion(v), parquet.PageBufferSize(4096))
			if _, err := w.Write(rows); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			b := buf.Bytes()
			pf, err := format.Open(bytes.NewReader(b), int64(len(b)), "x.parquet")
			if err != nil {
				t.Fatal(err)
			}
			for _, rg := range pf.RowGroups() {
				for i, cc := range rg.ColumnChunks() {
					if n, err := format.CheckChunk(cc); err != nil || n != rg.NumRows() {
						t.Errorf("%s, pages v%d, column %d: %d rows of %d: %v", codec, v, i, n, rg.NumRows(), err)
					}
				}
			}
			if n, err := readAll(b); err != nil || n != int64(len(rows)) {
				t.Errorf("%s, pages v%d: read %d rows: %v", codec, v, n, err)
			}
		}
	}
}
