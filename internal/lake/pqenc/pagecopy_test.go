package pqenc

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestCopyRowsPagesAPageAtATime copies every column of a file of many
// small pages in runs, with CopyRowsPages and with CopyRows: the two files
// hold the same rows, the verbatim one passes checkFile (statistics, page
// indexes, bloom filters against its pages), some pages were copied
// without being decoded, and a chunk's decoded window never held more
// than a run and two pages.
func TestCopyRowsPagesAPageAtATime(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 11))
	s := testSchema()
	rows := randomRows(rnd, s, 6000, "p")
	data := writeWithParquetGo(t, s, rows, len(rows))
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var leaves []Leaf
	for _, p := range s.Columns() {
		leaf, _ := s.Lookup(p...)
		li, err := NewLeaf(leaf)
		if err != nil {
			t.Fatal(err)
		}
		li.Path = p
		li.Bloom = p[0] == "c_str"
		leaves = append(leaves, li)
	}
	footer, err := Footer(s, parquet.Compression(&parquet.Zstd))
	if err != nil {
		t.Fatal(err)
	}
	const run = 1500
	skipped, copied := 0, 0
	write := func(verbatim bool) []byte {
		var out bytes.Buffer
		f := NewFile(&out, leaves, &parquet.Zstd)
		f.BeginRowGroup(len(rows))
		rg := pf.RowGroups()[0]
		for j, cc := range rg.ColumnChunks() {
			li := &leaves[j]
			var ch Chunk
			if err := ch.Read(cc, int(li.MaxDef), int(li.MaxRep), 0); err != nil {
				t.Fatal(err)
			}
			if !ch.pagesOK {
				t.Fatalf("column %v: pages not decodable one at a time", li.Path)
			}
			maxPage := 0
			for _, p := range ch.raw.Pages {
				maxPage = max(maxPage, int(p.Rows))
			}
			var c Column
			c.Reset(li, f.Codec())
			for ch.Row() < ch.Rows() {
				n := min(run, ch.Rows()-ch.Row())
				if verbatim {
					c.CopyRowsPages(&ch, n)
				} else {
					c.CopyRows(&ch, n)
				}
				if ch.Err() != nil {
					t.Fatalf("column %v: %v", li.Path, ch.Err())
				}
				if ch.wrows > run+2*maxPage {
					t.Fatalf("column %v: %d rows decoded at once, pages of up to %d rows", li.Path, ch.wrows, maxPage)
				}
			}
			if err := f.WriteChunk(&c); err != nil {
				t.Fatal(err)
			}
			if verbatim {
				skipped += ch.skipped
				copied += c.PagesCopied()
			}
			ch.Release()
		}
		m := *footer
		if err := f.Close(&m); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	got, want := write(true), write(false)
	checkFile(t, got)
	gr, wr := readRows(t, got), readRows(t, want)
	if len(gr) != len(rows) || len(wr) != len(rows) {
		t.Fatalf("%d and %d rows, want %d", len(gr), len(wr), len(rows))
	}
	for i := range gr {
		if !sameRow(gr[i], wr[i]) || !sameRow(gr[i], rows[i]) {
			t.Fatalf("row %d:\n verbatim %v\n    rows  %v\n    input %v", i, gr[i], wr[i], rows[i])
		}
	}
	if copied == 0 || skipped == 0 {
		t.Fatalf("%d pages copied, %d of them not decoded: the test does not test it", copied, skipped)
	}
	t.Logf("%d pages copied verbatim, %d never decoded", copied, skipped)
}
