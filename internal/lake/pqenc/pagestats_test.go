package pqenc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"

	lakeformat "github.com/sluice-dev/sluice/internal/lake/format"
)

// TestCopyPagesHeaderBounds: pages pqenc writes carry their exact bounds
// in their headers when the column index cuts them, equal to the page's
// decoded min and max; a file of such pages copied verbatim (runs of a
// whole chunk and shorter) decodes none of them for the chunk's
// statistics, and holds the same rows and statistics as the copy that
// decodes and re-encodes every row. Header bounds that disagree with the
// column index (a byte of one flipped) are not taken: that page is
// decoded, and the statistics are still exact.
func TestCopyPagesHeaderBounds(t *testing.T) {
	defer func(n int) { pageRows = n }(pageRows)
	pageRows = 150
	s, li, footer := oneColumnLeaf(t, parquet.String())
	rnd := rand.New(rand.NewPCG(7, 11))
	for _, tc := range []struct {
		name  string
		value func(i, n int) string // "" is null
	}{
		{"tied prefixes", func(i, n int) string { return fmt.Sprintf("common-prefix-0123-%08d", rnd.IntN(1e8)) }},
		{"extremes inside", func(i, n int) string {
			switch i {
			case n / 3:
				return "aaaa-the-minimum-value-of-all"
			case n / 2:
				return "zzzz-the-maximum-value-of-all"
			}
			if i%5 == 0 {
				return ""
			}
			return fmt.Sprintf("mmmm-%04d-middle-%08d", i/300, rnd.IntN(1e8))
		}},
		{"short and long", func(i, n int) string {
			if i%3 == 0 {
				return fmt.Sprintf("s%d", i%10)
			}
			return fmt.Sprintf("long-value-%08d-%s", rnd.IntN(1e8), bytes.Repeat([]byte{'x'}, rnd.IntN(40)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 3000
			src := writeWithParquetGo(t, s, byteArrayRows(n, tc.value), n)
			copyFile := func(data []byte, verbatim bool, run int) (out []byte, decoded, cut, copied int) {
				t.Helper()
				return copyChunkFile(t, data, li, footer, n, verbatim, run)
			}
			// Written by pqenc: its pages carry header bounds.
			in, _, _, _ := copyFile(src, false, n)
			withStats := checkHeaderBounds(t, in)
			if withStats == 0 {
				t.Fatal("no page carries header bounds: the test does not test them")
			}
			want, _, _, _ := copyFile(in, false, n)
			for _, run := range []int{n, 1000, 333} {
				got, decoded, cut, copied := copyFile(in, true, run)
				sameFile(t, got, want)
				checkHeaderBounds(t, got) // the copies keep them
				if copied == 0 || decoded != 0 || cut != 0 {
					t.Fatalf("run %d: %d pages copied, %d with cut bounds, %d decoded for bounds; want some, 0, 0",
						run, copied, cut, decoded)
				}
			}
			// A flipped byte inside the first page's header min: no longer
			// its column index bound cut, so not taken.
			lo, _ := firstPageStats(t, in)
			bad := bytes.Clone(in)
			at := bytes.Index(bad, lo)
			if at < 0 {
				t.Fatal("header min not found")
			}
			bad[at+3] ^= 1
			got, _, cut, copied := copyFile(bad, true, n)
			sameFile(t, got, want)
			if copied == 0 || cut == 0 {
				t.Fatalf("damaged header bounds: %d pages copied, %d with cut bounds; want the damaged page cut", copied, cut)
			}
		})
	}
}

// sameFile fails unless got and want hold the same rows and chunk statistics.
func sameFile(t *testing.T, got, want []byte) {
	t.Helper()
	checkFile(t, got)
	gm, err := parquet.OpenFile(bytes.NewReader(got), int64(len(got)))
	if err != nil {
		t.Fatal(err)
	}
	wm, _ := parquet.OpenFile(bytes.NewReader(want), int64(len(want)))
	gs, ws := gm.Metadata().RowGroups[0].Columns[0].MetaData.Statistics, wm.Metadata().RowGroups[0].Columns[0].MetaData.Statistics
	if !bytes.Equal(gs.MinValue, ws.MinValue) || !bytes.Equal(gs.MaxValue, ws.MaxValue) || gs.NullCount != ws.NullCount {
		t.Fatalf("statistics [%q, %q] %d nulls, decoded [%q, %q] %d", gs.MinValue, gs.MaxValue,
			gs.NullCount, ws.MinValue, ws.MaxValue, ws.NullCount)
	}
	gr, wr := readRows(t, got), readRows(t, want)
	if len(gr) != len(wr) {
		t.Fatalf("%d rows, want %d", len(gr), len(wr))
	}
	for i := range wr {
		if !sameRow(gr[i], wr[i]) {
			t.Fatalf("row %d: %v, want %v", i, gr[i], wr[i])
		}
	}
}

// checkHeaderBounds checks every data page of data's first chunk: a page
// whose column index bounds are cut carries its exact decoded min and max
// in its header (when they fit MaxPageStatBytes), any other none. It
// returns how many pages carry them.
func checkHeaderBounds(t *testing.T, data []byte) (with int) {
	t.Helper()
	rc := readFirstRawChunk(t, data)
	ci := rc.ColumnIndex()
	if ci == nil {
		t.Fatal("no column index")
	}
	for k, p := range rc.Pages {
		lo, hi, has, err := lakeformat.ByteArrayPageBounds(rc.Bytes[p.Off:p.Off+p.Len], rc.Codec, 1, 0, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		slo, shi, ok := rc.PageStats(k)
		cut := has && (len(lo) > ColumnIndexSizeLimit || len(hi) > ColumnIndexSizeLimit)
		if want := cut && len(lo)+len(hi) <= MaxPageStatBytes; ok != want {
			t.Fatalf("page %d (bounds [%q, %q]): header bounds %v, want %v", k, lo, hi, ok, want)
		}
		if !ok {
			continue
		}
		with++
		if !bytes.Equal(slo, lo) || !bytes.Equal(shi, hi) {
			t.Fatalf("page %d: header bounds [%q, %q], decoded [%q, %q]", k, slo, shi, lo, hi)
		}
		if !cutTo(lo, ci.MinValues[k], false) || !cutTo(hi, ci.MaxValues[k], true) {
			t.Fatalf("page %d: column index [%q, %q] is not [%q, %q] cut", k, ci.MinValues[k], ci.MaxValues[k], lo, hi)
		}
	}
	return with
}

// readFirstRawChunk reads the first column chunk of the file data as it
// lies in the file.
func readFirstRawChunk(t *testing.T, data []byte) *lakeformat.RawChunk {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var rc lakeformat.RawChunk
	if err := lakeformat.ReadRawChunk(pf.RowGroups()[0].ColumnChunks()[0], &rc); err != nil {
		t.Fatal(err)
	}
	return &rc
}

func firstPageStats(t *testing.T, data []byte) (lo, hi []byte) {
	t.Helper()
	rc := readFirstRawChunk(t, data)
	lo, hi, ok := rc.PageStats(0)
	if !ok {
		t.Fatal("first page without header bounds")
	}
	return bytes.Clone(lo), bytes.Clone(hi)
}
