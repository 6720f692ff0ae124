package pqenc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
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

// TestCopyPagesCutBounds copies pages of long byte arrays whose column
// index bounds are cut to 16 bytes, without decoding them: the output
// chunk's statistics must still be its exact min and max, wherever they
// lie (in a copied page or not, values sharing their first 16 bytes with
// other pages' bounds, or 16 bytes long exactly), and pages whose cut
// bounds cannot hold them must not be decoded.
func TestCopyPagesCutBounds(t *testing.T) {
	s, li, footer := oneColumnLeaf(t, parquet.String())
	rnd := rand.New(rand.NewPCG(3, 5))
	for _, tc := range []struct {
		name string
		// value of row i of n; "" is null
		value func(i, n int) string
		// the most pages resolving the bounds may decode
		maxDecoded int
	}{
		// Every page's values share a 16-byte prefix with the others':
		// the cut bounds tie, so the tied pages are decoded.
		{"tied prefixes", func(i, n int) string {
			return fmt.Sprintf("common-prefix-0123-%08d", rnd.IntN(1e8))
		}, -1},
		// Prefixes differ by page: only the pages of the least and the
		// greatest prefix can hold the chunk's min or max.
		{"distinct prefixes", func(i, n int) string {
			if i%7 == 0 {
				return ""
			}
			return fmt.Sprintf("%05d-a-long-value-%08d", i/97, rnd.IntN(1e8))
		}, 4},
		// Values of exactly 16 bytes: bounds are whole but look cut.
		{"sixteen bytes", func(i, n int) string { return fmt.Sprintf("%016x", rnd.Uint64()) }, 4},
		// The min and the max are single rows in the middle.
		{"extremes inside", func(i, n int) string {
			switch i {
			case n / 3:
				return "aaaa-the-minimum-value-of-all"
			case n / 2:
				return "zzzz-the-maximum-value-of-all"
			}
			return fmt.Sprintf("mmmm-%04d-middle-%08d", i/300, rnd.IntN(1e8))
		}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 4000
			data := writeWithParquetGo(t, s, byteArrayRows(n, tc.value), n)
			want, _, _, _ := copyChunkFile(t, data, li, footer, n, false, n)
			for _, run := range []int{n, 1000, 333} {
				got, decoded, cut, copied := copyChunkFile(t, data, li, footer, n, true, run)
				t.Logf("run %d", run)
				sameFile(t, got, want)
				if cut == 0 {
					t.Fatalf("run %d: no page copied with cut bounds (%d copied): the test does not test it", run, copied)
				}
				if tc.maxDecoded >= 0 && decoded > tc.maxDecoded {
					t.Fatalf("run %d: %d of %d cut pages decoded for the bounds, want at most %d", run, decoded, cut, tc.maxDecoded)
				}
				t.Logf("run %d: %d pages copied, %d with cut bounds, %d of them decoded", run, copied, cut, decoded)
			}
		})
	}
}

// TestChunkDecodesBoundedAhead copies, skips and spans a chunk of many
// pages in calls far longer than maxAhead: its decoded window (the
// capacity of its value buffers) stays about maxAhead rows and a few
// pages, not the chunk, and the output is the same rows; PresentSpan over
// more than maxAhead rows answers from the page headers without decoding,
// a span holding the exact one.
func TestChunkDecodesBoundedAhead(t *testing.T) {
	s := parquet.NewSchema("t", parquet.Group{"v": parquet.Optional(parquet.String())})
	leaf, _ := s.Lookup("v")
	li, err := NewLeaf(leaf)
	if err != nil {
		t.Fatal(err)
	}
	li.Path = []string{"v"}
	const n = 20 * maxAhead
	rows := make([]parquet.Row, n)
	present := func(i int) bool { return i >= n/4 && i < n/2 && i%3 != 0 }
	for i := range rows {
		if present(i) {
			rows[i] = parquet.Row{parquet.ByteArrayValue(fmt.Appendf(nil, "%0100d", i)).Level(0, 1, 0)}
		} else {
			rows[i] = parquet.Row{parquet.NullValue().Level(0, 0, 0)}
		}
	}
	data := writeWithParquetGo(t, s, rows, n)
	var ch Chunk
	readFirstChunk(t, data, &ch)
	if !ch.pagesOK || len(ch.raw.Pages) < 20 {
		t.Fatalf("%d pages, read a page at a time %v: the test does not test it", len(ch.raw.Pages), ch.pagesOK)
	}
	maxPage := 0
	for _, p := range ch.raw.Pages {
		maxPage = max(maxPage, int(p.Rows))
	}
	first, last := ch.PresentSpan(n)
	if first < 0 || first > n/4 || last < n/2-1 || ch.wrows != 0 {
		t.Fatalf("PresentSpan: [%d, %d] after decoding %d rows, want a span holding [%d, %d], nothing decoded",
			first, last, ch.wrows, n/4+1, n/2-1)
	}
	ch.SkipNullRows(n / 4)
	var c Column
	c.Reset(&li, &parquet.Zstd)
	c.CopyRows(&ch, n/2)
	if ch.Err() != nil || c.err != nil {
		t.Fatal(ch.Err(), c.err)
	}
	ch.SkipNullRows(n / 4)
	if ch.Row() != n {
		t.Fatalf("at row %d, want %d", ch.Row(), n)
	}
	if limit := 4*maxPage + 16; cap(ch.offs) > limit || cap(ch.def) > limit || cap(ch.data) > 100*limit {
		t.Fatalf("buffers of %d values (%d bytes) and %d levels for pages of up to %d rows: decoded more than %d rows ahead",
			cap(ch.offs), cap(ch.data), cap(ch.def), maxPage, maxAhead)
	}
	var out bytes.Buffer
	f := NewFile(&out, []Leaf{li}, &parquet.Zstd)
	f.BeginRowGroup(n / 2)
	if err := f.WriteChunk(&c); err != nil {
		t.Fatal(err)
	}
	footer, err := Footer(s, parquet.Compression(&parquet.Zstd))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(footer); err != nil {
		t.Fatal(err)
	}
	checkFile(t, out.Bytes())
	got := readRows(t, out.Bytes())
	for i, r := range got {
		if !sameRow(r, rows[n/4+i]) {
			t.Fatalf("row %d: %v, want %v", n/4+i, r, rows[n/4+i])
		}
	}
}

// TestTypedDecodeNullPages decodes, with the shared page decoders, a page
// of byte arrays and then an all-null page of a dictionary column and of
// a plain one: a page of no values adds its levels only, whatever the
// decoder held from the page before (the e2e upkeep test once failed with
// "26 byte array offsets for 0 values" on an all-null body_type).
func TestTypedDecodeNullPages(t *testing.T) {
	dict := parquet.Encoded(parquet.String(), &parquet.RLEDictionary)
	s := parquet.NewSchema("t", parquet.Group{
		"a": parquet.Optional(dict), "b": parquet.Optional(parquet.String()), "c": parquet.Optional(parquet.String()),
	})
	const n = 300
	rows := make([]parquet.Row, n)
	for i := range rows {
		rows[i] = parquet.Row{parquet.NullValue().Level(0, 0, 0),
			parquet.ByteArrayValue(fmt.Appendf(nil, "value %d", i)).Level(0, 1, 1),
			parquet.NullValue().Level(0, 0, 2)}
	}
	data := writeWithParquetGo(t, s, rows, n)
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	ccs := pf.RowGroups()[0].ColumnChunks()
	var chunks [3]Chunk
	var cols [3]Column
	var leaves [3]Leaf
	for j, p := range s.Columns() {
		leaf, _ := s.Lookup(p...)
		if leaves[j], err = NewLeaf(leaf); err != nil {
			t.Fatal(err)
		}
		leaves[j].Path = p
		if err := chunks[j].Read(ccs[j], 1, 0, 0); err != nil {
			t.Fatal(err)
		}
		if !chunks[j].typed {
			t.Fatalf("column %v not decoded by the typed decoder: the test does not test it", p)
		}
		cols[j].Reset(&leaves[j], &parquet.Zstd)
	}
	for _, j := range []int{1, 0, 1, 2} {
		if chunks[j].Row() == n {
			continue
		}
		cols[j].CopyRows(&chunks[j], n)
		if err := chunks[j].Err(); err != nil {
			t.Fatalf("column %v: %v", leaves[j].Path, err)
		}
	}
}

// byteArrayRows is n rows of one optional byte-array column, value(i, n)
// each ("" for a null).
func byteArrayRows(n int, value func(i, n int) string) []parquet.Row {
	rows := make([]parquet.Row, n)
	for i := range rows {
		if v := value(i, n); v != "" {
			rows[i] = parquet.Row{parquet.ByteArrayValue([]byte(v)).Level(0, 1, 0)}
		} else {
			rows[i] = parquet.Row{parquet.NullValue().Level(0, 0, 0)}
		}
	}
	return rows
}

// copyChunkFile copies the one-column file data (n rows, leaf li) into a
// new file with footer, through a Column in runs of run rows: page by page
// where it can (verbatim, CopyRowsPages) or row by row (CopyRows). It
// returns the file and the column's pages decoded for their bounds, pages
// with cut bounds and pages copied.
func copyChunkFile(t *testing.T, data []byte, li Leaf, footer *format.FileMetaData, n int, verbatim bool, run int) (out []byte, decoded, cut, copied int) {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	f := NewFile(&buf, []Leaf{li}, &parquet.Zstd)
	f.BeginRowGroup(n)
	var ch Chunk
	if err := ch.Read(pf.RowGroups()[0].ColumnChunks()[0], 1, 0, 0); err != nil {
		t.Fatal(err)
	}
	var c Column
	c.Reset(&li, f.Codec())
	for ch.Row() < ch.Rows() {
		k := min(run, ch.Rows()-ch.Row())
		if verbatim {
			c.CopyRowsPages(&ch, k)
		} else {
			c.CopyRows(&ch, k)
		}
	}
	if ch.Err() != nil {
		t.Fatal(ch.Err())
	}
	cut = len(c.cut.pages)
	if err := f.WriteChunk(&c); err != nil {
		t.Fatal(err)
	}
	decoded, copied = c.CutPagesDecoded(), c.PagesCopied()
	ch.Release()
	m := *footer
	if err := f.Close(&m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), decoded, cut, copied
}
