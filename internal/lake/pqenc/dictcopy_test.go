package pqenc

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	lakeformat "github.com/sluice-dev/sluice/internal/lake/format"
)

// dictTestLeaf is a leaf of one optional dictionary-encoded string
// column, and the footer of its files.
func dictTestLeaf(t testing.TB) (Leaf, *format.FileMetaData) {
	t.Helper()
	_, li, footer := oneColumnLeaf(t, parquet.Encoded(parquet.String(), &parquet.RLEDictionary))
	if !li.Dict {
		t.Fatal("the leaf is not dictionary-encoded")
	}
	return li, footer
}

// oneColumnLeaf returns the schema of one optional column "s" of node,
// its leaf and the footer of its files (zstd).
func oneColumnLeaf(t testing.TB, node parquet.Node) (*parquet.Schema, Leaf, *format.FileMetaData) {
	t.Helper()
	s := parquet.NewSchema("t", parquet.Group{"s": parquet.Optional(node)})
	leaf, _ := s.Lookup("s")
	li, err := NewLeaf(leaf)
	if err != nil {
		t.Fatal(err)
	}
	li.Path = []string{"s"}
	footer, err := Footer(s, parquet.Compression(&parquet.Zstd))
	if err != nil {
		t.Fatal(err)
	}
	return s, li, footer
}

// readFirstChunk reads the first column chunk of the file data.
func readFirstChunk(t testing.TB, data []byte, ch *Chunk) {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Read(pf.RowGroups()[0].ColumnChunks()[0], 1, 0, 0); err != nil {
		t.Fatal(err)
	}
}

// writeDictFile writes vals ("" null) as one row group of li with pqenc,
// pages ending at pageRows rows.
func writeDictFile(t testing.TB, li Leaf, footer *format.FileMetaData, vals []string) []byte {
	t.Helper()
	return writeStrFile(t, li, footer, &parquet.Zstd, vals)
}

// writeStrFile is writeDictFile compressed with codec (footer's codec).
func writeStrFile(t testing.TB, li Leaf, footer *format.FileMetaData, codec compress.Codec, vals []string) []byte {
	t.Helper()
	var buf bytes.Buffer
	f := NewFile(&buf, []Leaf{li}, codec)
	var c Column
	c.Reset(&li, f.Codec())
	for _, v := range vals {
		c.Str(v, 1)
	}
	f.BeginRowGroup(len(vals))
	if err := f.WriteChunk(&c); err != nil {
		t.Fatal(err)
	}
	m := *footer
	if err := f.Close(&m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// dictRun is a merge run: rows [from, from+n) of input in.
type dictRun struct{ in, from, n int }

// mergeDictFiles copies runs of the inputs into one chunk, row by row or
// with dictionary pages copied verbatim (or remapped); it returns the
// file, the dictionary pages copied and remapped, and whether the chunk
// fell back to plain.
func mergeDictFiles(t testing.TB, li Leaf, footer *format.FileMetaData, inputs [][]byte, runs []dictRun, verbatim bool) ([]byte, int, int, bool) {
	t.Helper()
	chunks := make([]Chunk, len(inputs))
	total := 0
	for i, data := range inputs {
		readFirstChunk(t, data, &chunks[i])
	}
	for _, r := range runs {
		total += r.n
	}
	var buf bytes.Buffer
	f := NewFile(&buf, []Leaf{li}, &parquet.Zstd)
	f.BeginRowGroup(total)
	var c Column
	c.Reset(&li, f.Codec())
	c.AllowDictPages(verbatim)
	for _, r := range runs {
		ch := &chunks[r.in]
		if ch.Row() != r.from {
			t.Fatalf("run %+v at row %d of its input", r, ch.Row())
		}
		if verbatim {
			c.CopyRowsPages(ch, r.n)
		} else {
			c.CopyRows(ch, r.n)
		}
	}
	for i := range chunks {
		if err := chunks[i].Err(); err != nil {
			t.Fatal(err)
		}
		chunks[i].Release()
	}
	if err := f.WriteChunk(&c); err != nil {
		t.Fatal(err)
	}
	m := *footer
	if err := f.Close(&m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), c.DictPagesCopied(), c.DictPagesRemapped(), c.fallback
}

// TestCopyDictPages copies runs of dictionary-encoded chunks with their
// pages copied verbatim where the output chunk's dictionary can take the
// input's, and row by row: the files hold the same rows and chunk
// statistics, their page indexes hold each page's values, pages are
// copied from the inputs whose dictionaries allow it (the first one, one
// with the same values in the same order, one whose dictionary extends
// the output's) and not from one whose dictionary orders them otherwise;
// and when the dictionary outgrows MaxDictBytes after pages were copied,
// the chunk falls back to plain values with the copied pages decoded.
func TestCopyDictPages(t *testing.T) {
	defer func(n int) { pageRows = n }(pageRows)
	pageRows = 300
	li, footer := dictTestLeaf(t)
	values := []string{"alpha", "bravo", "charlie", "", "a-value-longer-than-sixteen-bytes-0001",
		"a-value-longer-than-sixteen-bytes-0002", "echo", "zulu-and-more-than-sixteen-bytes"}
	gen := func(n, seed int, vals []string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = vals[(i/7+seed*i/13)%len(vals)]
		}
		return out
	}
	const n = 2000
	// a and b: the same values first met in the same order; c: more
	// values after a's (its dictionary extends a's); d: another order.
	a := writeDictFile(t, li, footer, gen(n, 0, values))
	b := writeDictFile(t, li, footer, gen(n, 0, values))
	c := writeDictFile(t, li, footer, append(gen(n, 0, values)[:n/2], gen(n/2, 1, append(slices.Clone(values), "xray", "yankee"))...))
	rev := slices.Clone(values)
	slices.Reverse(rev)
	d := writeDictFile(t, li, footer, gen(n, 0, rev))
	inputs := [][]byte{a, b, c, d}
	var runs []dictRun
	row := make([]int, len(inputs))
	for k := 0; ; k++ {
		in := k % len(inputs)
		m := min([]int{1000, 700, 333, 1}[k%4], n-row[in])
		if m == 0 {
			break
		}
		runs = append(runs, dictRun{in, row[in], m})
		row[in] += m
	}
	for in := range inputs {
		for row[in] < n {
			m := min(650, n-row[in])
			runs = append(runs, dictRun{in, row[in], m})
			row[in] += m
		}
	}
	for _, tc := range []struct {
		name         string
		maxDictBytes int
		fallback     bool
	}{
		{"dictionary", 0, false},
		{"falls back", 165, true}, // a's dictionary takes 157 bytes, c adds 18
	} {
		t.Run(tc.name, func(t *testing.T) {
			li := li
			li.MaxDictBytes = tc.maxDictBytes
			want, wantCopied, wantRemapped, _ := mergeDictFiles(t, li, footer, inputs, runs, false)
			got, copied, remapped, fellBack := mergeDictFiles(t, li, footer, inputs, runs, true)
			if wantCopied != 0 || wantRemapped != 0 {
				t.Fatalf("%d dictionary pages copied, %d remapped row by row", wantCopied, wantRemapped)
			}
			if copied == 0 || remapped == 0 {
				t.Fatalf("%d dictionary pages copied, %d remapped: the test does not test both", copied, remapped)
			}
			if fellBack != tc.fallback {
				t.Fatalf("fell back to plain: %v, want %v", fellBack, tc.fallback)
			}
			checkFile(t, got)
			gr, wr := readRows(t, got), readRows(t, want)
			if len(gr) != len(wr) || len(gr) != len(inputs)*n {
				t.Fatalf("%d rows, want %d", len(gr), len(wr))
			}
			for i := range wr {
				if !sameRow(gr[i], wr[i]) {
					t.Fatalf("row %d: %v, want %v", i, gr[i], wr[i])
				}
			}
			gm, _ := parquet.OpenFile(bytes.NewReader(got), int64(len(got)))
			wm, _ := parquet.OpenFile(bytes.NewReader(want), int64(len(want)))
			gc, wc := gm.Metadata().RowGroups[0].Columns[0].MetaData, wm.Metadata().RowGroups[0].Columns[0].MetaData
			gs, ws := gc.Statistics, wc.Statistics
			if !bytes.Equal(gs.MinValue, ws.MinValue) || !bytes.Equal(gs.MaxValue, ws.MaxValue) || gs.NullCount != ws.NullCount {
				t.Fatalf("statistics [%q, %q] %d nulls, row by row [%q, %q] %d", gs.MinValue, gs.MaxValue,
					gs.NullCount, ws.MinValue, ws.MaxValue, ws.NullCount)
			}
			enc := fmt.Sprint(gc.Encoding)
			if tc.fallback != strings.Contains(enc, "DELTA_LENGTH_BYTE_ARRAY") || !tc.fallback && !strings.Contains(enc, "RLE_DICTIONARY") {
				t.Fatalf("encodings %v", gc.Encoding)
			}
			// Pages of a and b are copied (and of c's first half, whose
			// dictionary extends theirs), d's are remapped (dictremap.go).
			t.Logf("%d dictionary pages copied, %d remapped", copied, remapped)
			got, onlyA, onlyD, _ := mergeDictFiles(t, li, footer, [][]byte{a, d}, []dictRun{{0, 0, n}, {1, 0, n}}, true)
			if pages := (n + pageRows - 1) / pageRows; onlyA != pages || onlyD != pages {
				t.Fatalf("a then d: %d pages copied, %d remapped, want a's %d and d's %d", onlyA, onlyD, pages, pages)
			}
			checkFile(t, got)
			defer func() { remapPages = true }()
			remapPages = false
			want, _, none, _ := mergeDictFiles(t, li, footer, [][]byte{a, d}, []dictRun{{0, 0, n}, {1, 0, n}}, true)
			if none != 0 {
				t.Fatalf("%d pages remapped with remapping off", none)
			}
			gr, wr = readRows(t, got), readRows(t, want)
			if len(gr) != len(wr) || len(gr) != 2*n {
				t.Fatalf("a then d: %d rows, want %d", len(gr), len(wr))
			}
			for i := range wr {
				if !sameRow(gr[i], wr[i]) {
					t.Fatalf("a then d: row %d: %v, want %v", i, gr[i], wr[i])
				}
			}
		})
	}
}

// TestCopyDictPagesDamagedIndexes damages the index bit width of a
// dictionary page (its CRC made to match; the page checks leave indexes
// to the decoder) that a run covers whole: copying it verbatim without
// decoding it into the window fails the chunk with ErrCorrupt, as
// decoding it would, instead of copying it.
func TestCopyDictPagesDamagedIndexes(t *testing.T) {
	defer func(n int) { pageRows = n }(pageRows)
	pageRows = 300
	li, _ := dictTestLeaf(t)
	s := parquet.NewSchema("t", parquet.Group{"s": parquet.Optional(parquet.Encoded(parquet.String(), &parquet.RLEDictionary))})
	footer, err := Footer(s, parquet.Compression(&parquet.Uncompressed))
	if err != nil {
		t.Fatal(err)
	}
	const n = 1500
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("value-%d", i/50%9)
	}
	good := writeStrFile(t, li, footer, &parquet.Uncompressed, vals)
	chunkOf := func(b []byte) parquet.ColumnChunk {
		pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		return pf.RowGroups()[0].ColumnChunks()[0]
	}
	var rc lakeformat.RawChunk
	if err := lakeformat.ReadRawChunk(chunkOf(good), &rc); err != nil {
		t.Fatal(err)
	}
	if len(rc.Pages) < 3 || rc.Pages[1].Encoding != format.RLEDictionary {
		t.Fatalf("%d pages", len(rc.Pages))
	}
	p := rc.Pages[1]
	hl, rl, dl, ok := p.LevelSpans()
	if !ok {
		t.Fatal("no level spans")
	}
	off := int(rc.Base) + p.Off
	var h format.PageHeader
	var proto thrift.CompactProtocol
	if err := thrift.Unmarshal(&proto, good[off:off+hl], &h); err != nil {
		t.Fatal(err)
	}
	var bad []byte
	for v := byte(33); v < 128 && bad == nil; v++ {
		d := bytes.Clone(good)
		d[off+hl+rl+dl] = v // the indexes' bit width
		h.CRC = int32(crc32.ChecksumIEEE(d[off+hl : off+p.Len]))
		hb, err := thrift.Marshal(&proto, &h)
		if err != nil {
			t.Fatal(err)
		}
		if len(hb) == hl {
			copy(d[off:], hb)
			bad = d
		}
	}
	if bad == nil {
		t.Fatal("no damage keeps the header's length")
	}
	// An input whose dictionary orders the values otherwise, copied
	// first: the output's dictionary is its, and the pages of good and
	// bad are remapped into it (dictremap.go).
	other := slices.Clone(vals)
	slices.Reverse(other)
	otherFile := writeStrFile(t, li, footer, &parquet.Uncompressed, other)
	for _, tc := range []struct {
		name  string
		data  []byte
		remap bool
	}{{"good", good, false}, {"damaged", bad, false}, {"good remapped", good, true}, {"damaged remapped", bad, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var ch Chunk
			if err := ch.Read(chunkOf(tc.data), 1, 0, 0); err != nil {
				t.Fatalf("read: %v (the page checks leave indexes to the decoder)", err)
			}
			var out Column
			out.Reset(&li, &parquet.Uncompressed)
			out.AllowDictPages(true)
			if tc.remap {
				var first Chunk
				if err := first.Read(chunkOf(otherFile), 1, 0, 0); err != nil {
					t.Fatal(err)
				}
				out.CopyRowsPages(&first, n)
				if out.err != nil || out.DictPagesCopied() != len(rc.Pages) {
					t.Fatalf("first input: %v; %d pages copied, want %d", out.err, out.DictPagesCopied(), len(rc.Pages))
				}
			}
			out.CopyRowsPages(&ch, n)
			err := ch.Err()
			got := out.DictPagesCopied()
			if tc.remap {
				got = out.DictPagesRemapped()
			}
			if tc.name == "good" || tc.name == "good remapped" {
				if err != nil || out.err != nil || got != len(rc.Pages) {
					t.Fatalf("%v, %v; %d pages copied or remapped, want %d", err, out.err, got, len(rc.Pages))
				}
				return
			}
			if !errors.Is(err, lakeformat.ErrCorrupt) || !errors.Is(out.err, lakeformat.ErrCorrupt) {
				t.Fatalf("chunk error %v, column error %v; want ErrCorrupt", err, out.err)
			}
			if got > 1 {
				t.Fatalf("%d pages copied or remapped: the damaged page among them", got)
			}
		})
	}
}

// TestPresentSpanDictBounded asks a dictionary chunk of many rows in few
// bytes for the span of far more than maxAhead rows: it answers from the
// page headers without decoding them (by bytes ahead alone it decoded
// every row: 5 bytes a row of every dictionary column of every input).
func TestPresentSpanDictBounded(t *testing.T) {
	defer func(n int) { pageRows = n }(pageRows)
	pageRows = 1000
	li, footer := dictTestLeaf(t)
	const n = 20 * maxAhead
	vals := make([]string, n)
	for i := n / 4; i < n/2; i++ {
		vals[i] = fmt.Sprintf("v%d", i/5000)
	}
	data := writeDictFile(t, li, footer, vals)
	var ch Chunk
	readFirstChunk(t, data, &ch)
	if !ch.pagesOK || ch.bytesAhead(n) > maxAheadBytes {
		t.Fatalf("read a page at a time %v, %d bytes: the test does not test it", ch.pagesOK, ch.bytesAhead(n))
	}
	first, last := ch.PresentSpan(n)
	if first < 0 || first > n/4 || last < n/2-1 || ch.wrows != 0 {
		t.Fatalf("PresentSpan: [%d, %d] after decoding %d rows, want a span holding [%d, %d], nothing decoded",
			first, last, ch.wrows, n/4, n/2-1)
	}
	// A span within maxAhead rows is exact.
	ch.SkipNullRows(n/4 - 100)
	if first, last := ch.PresentSpan(200); first != 100 || last != 199 {
		t.Fatalf("PresentSpan(200) at row %d: [%d, %d], want [100, 199]", ch.Row(), first, last)
	}
}
