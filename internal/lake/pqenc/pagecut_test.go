package pqenc

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// TestSetCutsStartsPages: a chunk with cuts starts a page at each of them
// (and where pages fill), a cut set at or before the rows added so far
// ends the current page at once, and the values, statistics and page
// indexes are those of the same chunk written without cuts: for a
// dictionary column, a plain INT64 column, and a dictionary column that
// falls back to plain values mid-chunk.
func TestSetCutsStartsPages(t *testing.T) {
	defer func(n int) { pageRows = n }(pageRows)
	pageRows = 300
	dictLi, footer := dictTestLeaf(t)
	_, intLi, intFooter := oneColumnLeaf(t, parquet.Int(64))
	fallback := dictLi
	fallback.MaxDictBytes = 600
	for _, c := range []struct {
		name   string
		li     Leaf
		footer *format.FileMetaData
		add    func(col *Column, i int)
	}{
		{"dict", dictLi, footer, func(col *Column, i int) { col.Bytes(fmt.Appendf(nil, "v%d", i/7%5), 1) }},
		{"int64", intLi, intFooter, func(col *Column, i int) {
			if i%11 == 0 {
				col.Null(1)
			} else {
				col.Int(int64(i*31%1000), 1)
			}
		}},
		{"fallback", fallback, footer, func(col *Column, i int) { col.Bytes(fmt.Appendf(nil, "value-%04d", i), 1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			const rows = 1000
			write := func(cuts bool) []byte {
				var buf bytes.Buffer
				f := NewFile(&buf, []Leaf{c.li}, &parquet.Zstd)
				var col Column
				col.Reset(&c.li, f.Codec())
				if cuts {
					col.SetCuts([]int64{100, 333, 334, 900})
				}
				for i := range rows {
					if cuts && i == 500 {
						// 450 is past: the page ends at 500.
						col.SetCuts([]int64{450, 700})
					}
					c.add(&col, i)
				}
				f.BeginRowGroup(rows)
				if err := f.WriteChunk(&col); err != nil {
					t.Fatal(err)
				}
				m := *c.footer
				if err := f.Close(&m); err != nil {
					t.Fatal(err)
				}
				return buf.Bytes()
			}
			plain, cut := write(false), write(true)
			checkFile(t, cut)
			want, got := readRows(t, plain), readRows(t, cut)
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if !sameRow(got[i], want[i]) {
					t.Fatalf("row %d: %v, want %v", i, got[i], want[i])
				}
			}
			pf, err := parquet.OpenFile(bytes.NewReader(cut), int64(len(cut)))
			if err != nil {
				t.Fatal(err)
			}
			cc := pf.RowGroups()[0].ColumnChunks()[0]
			oi, err := cc.OffsetIndex()
			if err != nil {
				t.Fatal(err)
			}
			var starts []int64
			for p := range oi.NumPages() {
				starts = append(starts, oi.FirstRowIndex(p))
			}
			for _, x := range []int64{0, 100, 333, 334, 500, 700} {
				if !slices.Contains(starts, x) {
					t.Errorf("pages start at %v, not at %d", starts, x)
				}
			}
			if slices.Contains(starts, 900) {
				t.Errorf("pages start at %v: the cut at 900 was replaced", starts)
			}
			pm := pf.Metadata().RowGroups[0].Columns[0].MetaData
			pp, err := parquet.OpenFile(bytes.NewReader(plain), int64(len(plain)))
			if err != nil {
				t.Fatal(err)
			}
			wm := pp.Metadata().RowGroups[0].Columns[0].MetaData
			if !bytes.Equal(pm.Statistics.MinValue, wm.Statistics.MinValue) || !bytes.Equal(pm.Statistics.MaxValue, wm.Statistics.MaxValue) ||
				pm.Statistics.NullCount != wm.Statistics.NullCount || pm.NumValues != wm.NumValues {
				t.Errorf("statistics %+v, want %+v", pm.Statistics, wm.Statistics)
			}
		})
	}
}
