package format_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
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

// bigMetricsFile is the corpus metrics repeated to over 150,000 points,
// written as one lake file: chunks of several pages each, so that ranged
// reads start and end inside chunks and cross pages.
func bigMetricsFile(t *testing.T) []byte {
	t.Helper()
	one := new(signal.Metrics)
	for _, f := range corpustest.Files(t, "metrics") {
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
		if err := otlp.DecodeMetrics(one, pb); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	m := new(signal.Metrics)
	for m.Len() < 150_000 {
		for i := range one.Len() {
			m.CopyFrom(one, i)
		}
	}
	root := t.TempDir()
	var paths []string
	w, err := lake.NewWriter(lake.Options{Root: root, Now: func() time.Time { return time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC) }},
		func(s lake.Segment) error {
			paths = append(paths, filepath.Join(root, filepath.FromSlash(s.Path)))
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMetrics("t", m); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// The largest file (the writer partitions by time).
	var big []byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > len(big) {
			big = b
		}
	}
	return big
}

// sameValue reports whether two values are equal as the column readers'
// callers see them: null or not, kind, value, levels, column.
func sameValue(a, b parquet.Value) bool {
	if a.IsNull() != b.IsNull() || a.DefinitionLevel() != b.DefinitionLevel() ||
		a.RepetitionLevel() != b.RepetitionLevel() || a.Column() != b.Column() {
		return false
	}
	return a.IsNull() || a.Kind() == b.Kind() && bytes.Equal(a.Bytes(), b.Bytes())
}

func showValue(v parquet.Value) string {
	return fmt.Sprintf("%v (null %v, def %d, rep %d, col %d)", v, v.IsNull(), v.DefinitionLevel(), v.RepetitionLevel(), v.Column())
}

// TestRangedReadersMatch: the column readers of PromQL and search
// (ReadUint64s, ReadOpt*, ReadList*, ReadValuesAt, ValuesAt, EachValue,
// ReadCodes) read every column of every corpus table, through the typed
// decoder, to the same values as through parquet-go's pages, value for
// value: whole row groups, ranges starting and ending inside pages and
// around page boundaries, single rows, with the offset index loaded (the
// pages before a range skipped) and without.
func TestRangedReadersMatch(t *testing.T) {
	files := corpusLake(t, lake.Options{})
	files["big-metrics"] = bigMetricsFile(t)
	compared := map[string]int{}
	for name, b := range files {
		for _, skipIndex := range []bool{false, true} {
			pf, err := format.Open(bytes.NewReader(b), int64(len(b)), name, parquet.SkipPageIndex(skipIndex), parquet.SkipBloomFilters(true))
			if err != nil {
				t.Fatal(err)
			}
			ois := pf.OffsetIndexes()
			schema := pf.Schema()
			for g, rg := range pf.RowGroups() {
				n := rg.NumRows()
				ccs := rg.ColumnChunks()
				for ci, path := range schema.Columns() {
					leaf, _ := schema.Lookup(path...)
					cc := ccs[ci]
					if !format.TypedChunk(cc) {
						t.Fatalf("%s column %v: not read by the typed decoder", name, path)
					}
					ranges := [][2]int64{{0, n}, {n / 3, 2 * n / 3}, {n - 1, n}}
					if !skipIndex && len(ois) > 0 {
						locs := ois[g*len(ccs)+ci].PageLocations
						for _, loc := range locs[1:min(len(locs), 4)] {
							ranges = append(ranges, [2]int64{loc.FirstRowIndex - 1, min(n, loc.FirstRowIndex+1)}, [2]int64{loc.FirstRowIndex, n})
							compared["page boundaries"]++
						}
					}
					what := fmt.Sprintf("%s (skip index %v) row group %d column %v", name, skipIndex, g, path)
					kind := leaf.Node.Type().Kind()
					if leaf.MaxRepetitionLevel > 0 {
						for _, r := range ranges {
							compareList(t, what, cc, kind, r[0], r[1])
							compared["list"]++
						}
						continue
					}
					for _, r := range ranges {
						compareFlat(t, what, cc, kind, leaf.MaxDefinitionLevel, r[0], r[1])
						compared[kind.String()]++
					}
					if !skipIndex { // whole chunks: the index plays no part
						compareValues(t, what, cc, kind, n)
						compared["values"]++
					}
				}
			}
		}
	}
	t.Logf("compared: %v", compared)
	for _, k := range []string{"list", "INT64", "DOUBLE", "INT32", "BYTE_ARRAY", "BOOLEAN", "values", "page boundaries"} {
		if compared[k] == 0 {
			t.Errorf("no %s column compared", k)
		}
	}
}

// compareFlat compares the typed readers of a flat column's type over
// rows [a, b) with parquet-go's.
func compareFlat(t *testing.T, what string, cc parquet.ColumnChunk, kind parquet.Kind, maxDef int, a, b int64) {
	t.Helper()
	m := b - a
	check := func(reader string, err1, err2 error, equal bool) {
		t.Helper()
		if err1 != nil || err2 != nil {
			t.Fatalf("%s rows [%d, %d) %s: typed %v, parquet-go %v", what, a, b, reader, err1, err2)
		}
		if !equal {
			t.Fatalf("%s rows [%d, %d) %s: typed and parquet-go values differ", what, a, b, reader)
		}
	}
	switch kind {
	case parquet.Int64:
		if maxDef == 0 {
			g, w := make([]uint64, m), make([]uint64, m)
			e1, e2 := format.ReadUint64s(cc, a, b, g), format.ReadUint64sPages(cc, a, b, w)
			check("ReadUint64s", e1, e2, slices.Equal(g, w))
		}
		g, w := make([]int64, m), make([]int64, m)
		gv, wv := make([]bool, m), make([]bool, m)
		e1, e2 := format.ReadOptInt64s(cc, a, b, g, gv), format.ReadOptInt64sPages(cc, a, b, w, wv)
		check("ReadOptInt64s", e1, e2, slices.Equal(g, w) && slices.Equal(gv, wv))
		gu, wu := make([]uint64, m), make([]uint64, m)
		e1, e2 = format.ReadOptUint64s(cc, a, b, gu, gv), format.ReadOptUint64sPages(cc, a, b, wu, wv)
		check("ReadOptUint64s", e1, e2, slices.Equal(gu, wu) && slices.Equal(gv, wv))
	case parquet.Double:
		g, w := make([]float64, m), make([]float64, m)
		gv, wv := make([]bool, m), make([]bool, m)
		e1, e2 := format.ReadOptFloat64s(cc, a, b, g, gv), format.ReadOptFloat64sPages(cc, a, b, w, wv)
		check("ReadOptFloat64s", e1, e2, slices.Equal(g, w) && slices.Equal(gv, wv))
	case parquet.Int32:
		g, w := make([]int32, m), make([]int32, m)
		gv, wv := make([]bool, m), make([]bool, m)
		e1, e2 := format.ReadOptInt32s(cc, a, b, g, gv), format.ReadOptInt32sPages(cc, a, b, w, wv)
		check("ReadOptInt32s", e1, e2, slices.Equal(g, w) && slices.Equal(gv, wv))
	}
	// Values at some rows of the range: every 7th and the last.
	var rows []int64
	for r := a; r < b; r += 7 {
		rows = append(rows, r)
	}
	if rows[len(rows)-1] != b-1 {
		rows = append(rows, b-1)
	}
	type at struct {
		i int
		v parquet.Value
	}
	collect := func(out *[]at) func(i int, v parquet.Value) {
		return func(i int, v parquet.Value) { *out = append(*out, at{i, v.Clone()}) }
	}
	same := func(g, w []at) bool {
		if len(g) != len(w) || len(g) != len(rows) {
			return false
		}
		for k := range g {
			if g[k].i != w[k].i || !sameValue(g[k].v, w[k].v) {
				return false
			}
		}
		return true
	}
	var g, w []at
	e1, e2 := format.ReadValuesAt(cc, a, b, rows, collect(&g)), format.ReadValuesAtPages(cc, a, b, rows, collect(&w))
	if e1 != nil || e2 != nil || !same(g, w) {
		for k := range min(len(g), len(w)) {
			if g[k].i != w[k].i || !sameValue(g[k].v, w[k].v) {
				t.Errorf("row %d: typed %s, parquet-go %s", rows[w[k].i], showValue(g[k].v), showValue(w[k].v))
				break
			}
		}
		t.Fatalf("%s rows %v..: ReadValuesAt: typed %d values (%v), parquet-go %d (%v)", what, rows[0], len(g), e1, len(w), e2)
	}
	g, w = nil, nil
	buf := make([]parquet.Value, 16)
	e1, e2 = format.ValuesAt(cc, buf, rows, collect(&g)), format.ValuesAtPages(cc, buf, rows, collect(&w))
	if e1 != nil || e2 != nil || !same(g, w) {
		t.Fatalf("%s rows %v..: ValuesAt: typed %d values (%v), parquet-go %d (%v)", what, rows[0], len(g), e1, len(w), e2)
	}
}

// compareList compares ReadListF64 or ReadListU64 over rows [a, b).
func compareList(t *testing.T, what string, cc parquet.ColumnChunk, kind parquet.Kind, a, b int64) {
	t.Helper()
	go1, wo := make([]int32, b-a+1), make([]int32, b-a+1)
	switch kind {
	case parquet.Double:
		g, e1 := format.ReadListF64(cc, a, b, nil, go1)
		w, e2 := format.ReadListF64Pages(cc, a, b, nil, wo)
		if e1 != nil || e2 != nil || !slices.Equal(g, w) || !slices.Equal(go1, wo) {
			t.Fatalf("%s rows [%d, %d) ReadListF64: typed %d values %v (%v), parquet-go %d %v (%v)", what, a, b, len(g), go1[:min(8, len(go1))], e1, len(w), wo[:min(8, len(wo))], e2)
		}
	case parquet.Int64:
		g, e1 := format.ReadListU64(cc, a, b, nil, go1)
		w, e2 := format.ReadListU64Pages(cc, a, b, nil, wo)
		if e1 != nil || e2 != nil || !slices.Equal(g, w) || !slices.Equal(go1, wo) {
			t.Fatalf("%s rows [%d, %d) ReadListU64: typed %d values (%v), parquet-go %d (%v)", what, a, b, len(g), e1, len(w), e2)
		}
	}
}

// compareValues compares EachValue over the whole chunk, and ReadCodes
// for byte-array and boolean columns.
func compareValues(t *testing.T, what string, cc parquet.ColumnChunk, kind parquet.Kind, n int64) {
	t.Helper()
	each := func(read func(parquet.ColumnChunk, []parquet.Value, func(int, []parquet.Value) error) error) ([]parquet.Value, error) {
		var out []parquet.Value
		err := read(cc, make([]parquet.Value, 100), func(off int, vals []parquet.Value) error {
			if off != len(out) {
				return fmt.Errorf("values at %d, want %d", off, len(out))
			}
			for _, v := range vals {
				out = append(out, v.Clone())
			}
			return nil
		})
		return out, err
	}
	g, e1 := each(format.EachValue)
	w, e2 := each(format.EachValuePages)
	if e1 != nil || e2 != nil || len(g) != len(w) || int64(len(g)) != n {
		t.Fatalf("%s EachValue: typed %d values (%v), parquet-go %d (%v), want %d", what, len(g), e1, len(w), e2, n)
	}
	for i := range g {
		if !sameValue(g[i], w[i]) {
			t.Fatalf("%s EachValue row %d: typed %s, parquet-go %s", what, i, showValue(g[i]), showValue(w[i]))
		}
	}
	if kind != parquet.ByteArray && kind != parquet.Boolean {
		return
	}
	gc, gs, e1 := format.ReadCodes(cc, n)
	wc, ws, e2 := format.ReadCodesPages(cc, n)
	if e1 != nil || e2 != nil || len(gc) != len(wc) {
		t.Fatalf("%s ReadCodes: typed %d codes (%v), parquet-go %d (%v)", what, len(gc), e1, len(wc), e2)
	}
	for i := range gc {
		if (gc[i] < 0) != (wc[i] < 0) || gc[i] >= 0 && gs[gc[i]] != ws[wc[i]] {
			t.Fatalf("%s ReadCodes row %d: typed %d, parquet-go %d", what, i, gc[i], wc[i])
		}
	}
}
