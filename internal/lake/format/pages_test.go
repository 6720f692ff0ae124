package format_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// firstPage locates the first data page of column col of b's first row
// group: where its header and its body start, and the header.
func firstPage(t *testing.T, b []byte, col string) (hdrOff, bodyOff int, h pqformat.PageHeader) {
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
