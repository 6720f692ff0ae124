package rollup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/pqenc"
)

// aggregatedHour reads the catalogued raw hour at benchHour and
// aggregates it into the default tiers.
func aggregatedHour(tb testing.TB, e *env) (*hour, []tierOut) {
	tb.Helper()
	segs, err := e.cat.List(context.Background(), catalog.Filter{Table: lake.TableMetrics})
	if err != nil {
		tb.Fatal(err)
	}
	h := newHour(benchHour.UnixNano(), benchHour.Add(time.Hour).UnixNano())
	for _, s := range segs {
		if err := readRaw(e.store, s.Path, h, nil); err != nil {
			tb.Fatal(err)
		}
	}
	outs := make([]tierOut, len(DefaultTiers))
	tiers := make([]int64, len(DefaultTiers))
	for i, d := range DefaultTiers {
		outs[i].tier, tiers[i] = d, int64(d)
	}
	var cur int32
	agg := NewAggregator(tiers, func(tier int, w *Window) { outs[tier].add(cur, w) })
	h.aggregate(agg, func(si int32) { cur = si })
	return h, outs
}

// TestEncodeRowsMatchesParquetGo writes every tier of a corpus hour with
// encodeRows and with parquet-go's writer and compares the files: schema,
// footer metadata, every row, and each column chunk's encodings and
// statistics. The 1m tier has more than one row group and many pages.
func TestEncodeRowsMatchesParquetGo(t *testing.T) {
	e := newEnv(t)
	e.write(t, "t", benchHour.Add(time.Hour), hourOfCorpus(t, 2500, 15*time.Second)...)
	h, outs := aggregatedHour(t, e)
	if outs[0].len() <= rowGroupRows {
		t.Fatalf("want more than one row group: %d rows", outs[0].len())
	}
	opts := []parquet.WriterOption{parquet.Compression(&parquet.Zstd), parquet.DataPageStatistics(false),
		parquet.KeyValueMetadata(MetaTier, "x"), parquet.CreatedBy("sluice", "rollup", "")}
	for i := range outs {
		o := &outs[i]
		schema, fixedIdx, labelIdx, err := tierSchema(h, o)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := newTierEncoding(schema, fixedIdx, labelIdx, opts)
		if err != nil || enc == nil {
			t.Fatalf("tier %s: encodeRows cannot write the schema: %v", TierName(o.tier), err)
		}
		var fast, slow bytes.Buffer
		if err := encodeTier(&fast, h, o, schema, fixedIdx, labelIdx, opts, &rowEncoder{}); err != nil {
			t.Fatal(err)
		}
		if err := encodeTier(&slow, h, o, schema, fixedIdx, labelIdx, opts, nil); err != nil {
			t.Fatal(err)
		}
		t.Logf("tier %s: %d rows, %d columns, %d bytes (parquet-go: %d)", TierName(o.tier), o.len(),
			len(schema.Columns()), fast.Len(), slow.Len())
		compareFiles(t, fast.Bytes(), slow.Bytes())
	}
}

func compareFiles(t *testing.T, got, want []byte) {
	t.Helper()
	open := func(b []byte) *parquet.File {
		pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if len(pf.ColumnIndexes()) == 0 || len(pf.OffsetIndexes()) == 0 {
			t.Fatal("no page index")
		}
		return pf
	}
	g, w := open(got), open(want)
	// Offset indexes point at each chunk's first data page.
	for _, pf := range []*parquet.File{g, w} {
		md, oi := pf.Metadata(), pf.OffsetIndexes()
		for rg := range md.RowGroups {
			for c, cc := range md.RowGroups[rg].Columns {
				locs := oi[rg*len(md.RowGroups[rg].Columns)+c].PageLocations
				if len(locs) == 0 || locs[0].Offset != cc.MetaData.DataPageOffset || locs[0].FirstRowIndex != 0 {
					t.Fatalf("row group %d column %v: page locations %v, data page at %d", rg, cc.MetaData.PathInSchema,
						locs, cc.MetaData.DataPageOffset)
				}
			}
		}
	}
	if !parquet.EqualNodes(g.Schema(), w.Schema()) {
		t.Fatalf("schemas differ:\n%s\n%s", g.Schema(), w.Schema())
	}
	gm, wm := g.Metadata(), w.Metadata()
	if gm.NumRows != wm.NumRows || !slices.Equal(gm.KeyValueMetadata, wm.KeyValueMetadata) || gm.CreatedBy != wm.CreatedBy {
		t.Fatalf("footers differ: %d rows, %v, %q; want %d, %v, %q", gm.NumRows, gm.KeyValueMetadata, gm.CreatedBy,
			wm.NumRows, wm.KeyValueMetadata, wm.CreatedBy)
	}
	if len(gm.RowGroups) != len(wm.RowGroups) {
		t.Fatalf("%d row groups, want %d", len(gm.RowGroups), len(wm.RowGroups))
	}
	for rg := range gm.RowGroups {
		for c := range gm.RowGroups[rg].Columns {
			a, b := &gm.RowGroups[rg].Columns[c].MetaData, &wm.RowGroups[rg].Columns[c].MetaData
			if a.NumValues != b.NumValues || !slices.Equal(a.Encoding, b.Encoding) || a.Type != b.Type {
				t.Errorf("row group %d column %v: %d values, %v, %v; want %d, %v, %v", rg, a.PathInSchema,
					a.NumValues, a.Encoding, a.Type, b.NumValues, b.Encoding, b.Type)
			}
			as, bs := a.Statistics, b.Statistics
			if as.NullCount != bs.NullCount || !bytes.Equal(as.MinValue, bs.MinValue) || !bytes.Equal(as.MaxValue, bs.MaxValue) {
				t.Errorf("row group %d column %v: statistics %+v, want %+v", rg, a.PathInSchema, as, bs)
			}
			if (a.DictionaryPageOffset != 0) != (b.DictionaryPageOffset != 0) {
				t.Errorf("row group %d column %v: dictionary page %v, want %v", rg, a.PathInSchema,
					a.DictionaryPageOffset != 0, b.DictionaryPageOffset != 0)
			}
		}
	}
	gr, wr := parquet.NewReader(g), parquet.NewReader(w)
	gb, wb := make([]parquet.Row, 512), make([]parquet.Row, 512)
	var n int
	for {
		gn, gerr := gr.ReadRows(gb)
		wn, werr := wr.ReadRows(wb)
		if gn != wn {
			t.Fatalf("read %d rows (%v), want %d (%v) (after %d)", gn, gerr, wn, werr, n)
		}
		for i := range gn {
			if !sameRow(gb[i], wb[i]) {
				t.Fatalf("row %d differs:\n%v\nwant\n%v", n+i, gb[i], wb[i])
			}
		}
		n += gn
		if errors.Is(gerr, io.EOF) && errors.Is(werr, io.EOF) {
			break
		}
		if gerr != nil && !errors.Is(gerr, io.EOF) || werr != nil && !errors.Is(werr, io.EOF) {
			t.Fatalf("read: %v, %v", gerr, werr)
		}
	}
	if int64(n) != wm.NumRows {
		t.Fatalf("compared %d rows of %d", n, wm.NumRows)
	}
}

// TestEncodeRowsEdgeCases compares encodeRows with parquet-go's writer on
// a synthetic hour with every label column type the lake writes, empty
// names and units, NaN and negative values, empty and mismatched
// histograms, sketches, all-null chunks and one series running over many
// pages.
func TestEncodeRowsEdgeCases(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	h := newHour(0, int64(time.Hour))
	for _, l := range []struct {
		name string
		node parquet.Node
	}{
		{"attr.s", parquet.Optional(parquet.Encoded(parquet.String(), &parquet.RLEDictionary))},
		{"attr.i", parquet.Optional(parquet.Int(64))},
		{"attr.d", parquet.Optional(parquet.Leaf(parquet.DoubleType))},
		{"attr.b", parquet.Optional(parquet.Leaf(parquet.BooleanType))},
		{"attr.x", parquet.Optional(parquet.Leaf(parquet.ByteArrayType))},
		{"attr.j", parquet.Optional(parquet.String())},
		{"attr.never", parquet.Optional(parquet.Encoded(parquet.String(), &parquet.RLEDictionary))},
	} {
		h.labelIdx[l.name] = int32(len(h.labelCols))
		h.labelCols = append(h.labelCols, labelCol{l.name, l.node})
	}
	descs := []struct{ typ, temp string }{{"gauge", ""}, {"sum", "cumulative"}, {"sum", "delta"},
		{"histogram", "delta"}, {"histogram", "cumulative"}}
	for s := range 60 {
		d := descs[s%len(descs)]
		se := series{sid: rnd.Uint64(), typ: d.typ, temporality: d.temp, monotonic: s%2 == 0}
		if s%7 != 0 {
			se.name = fmt.Sprintf("m%d", s%9)
		}
		if s%3 == 0 {
			se.unit = "By"
		}
		se.kind = KindOf(se.typ, se.temporality, se.monotonic)
		vals := []parquet.Value{parquet.ByteArrayValue([]byte(fmt.Sprint("v", s%4))), parquet.Int64Value(int64(s - 30)),
			parquet.DoubleValue([]float64{1.5, -2, math.NaN(), 0}[s%4]), parquet.BooleanValue(s%3 == 0),
			parquet.ByteArrayValue([]byte{byte(s), 0, 255}), parquet.ByteArrayValue([]byte(`["a",1]`))}
		for c, v := range vals {
			if (s+c)%3 != 0 && s < 50 { // series 50.. have no labels: all-null chunks in the last row group
				se.labels = append(se.labels, labelVal{int32(c), v})
			}
		}
		h.ser = append(h.ser, se)
	}
	o := &tierOut{tier: time.Minute}
	for s := range h.ser {
		n := 1 + rnd.IntN(40)
		if s == 1 {
			n = 3*pqenc.PageRows + 17
		}
		for k := range n {
			w := Window{Start: int64(k) * int64(time.Minute), Points: uint64(rnd.IntN(5)), FirstT: rnd.Int64(), LastT: -rnd.Int64(),
				Count: rnd.Uint64(), HasCount: rnd.IntN(4) > 0, Sum: rnd.NormFloat64(), HasSum: rnd.IntN(4) > 0,
				Min: math.Inf(-1), HasMin: rnd.IntN(2) == 0, Max: math.NaN(), HasMax: rnd.IntN(2) == 0,
				First: rnd.Float64(), Last: -rnd.Float64(), HasFirst: rnd.IntN(3) > 0,
				Increase: rnd.Float64(), Resets: uint64(rnd.IntN(3)), HasIncrease: rnd.IntN(3) > 0,
				Mismatch: rnd.IntN(5) == 0}
			w.CountF, w.HasCountF = rnd.Float64()*100, rnd.IntN(3) == 0
			if !w.Mismatch && rnd.IntN(2) == 0 {
				// Integer or float buckets (a float histogram's).
				w.HasBuckets, w.FloatBuckets = true, rnd.IntN(3) == 0
				for range rnd.IntN(4) {
					if w.FloatBuckets {
						w.BucketsF = append(w.BucketsF, rnd.Float64())
					} else {
						w.Buckets = append(w.Buckets, rnd.Uint64())
					}
					w.Bounds = append(w.Bounds, rnd.NormFloat64())
				}
			}
			if rnd.IntN(3) == 0 {
				w.Sketch = []byte(fmt.Sprint("sketch", rnd.IntN(100)))
			}
			o.add(int32(s), &w)
		}
	}
	opts := []parquet.WriterOption{parquet.Compression(&parquet.Zstd), parquet.DataPageStatistics(false)}
	schema, fixedIdx, labelIdx, err := tierSchema(h, o)
	if err != nil {
		t.Fatal(err)
	}
	if labelIdx[6] != -1 {
		t.Fatal("unused label column in the schema")
	}
	if enc, err := newTierEncoding(schema, fixedIdx, labelIdx, opts); err != nil || enc == nil {
		t.Fatalf("encodeRows cannot write the schema: %v", err)
	}
	var fast, slow bytes.Buffer
	if err := encodeTier(&fast, h, o, schema, fixedIdx, labelIdx, opts, &rowEncoder{}); err != nil {
		t.Fatal(err)
	}
	if err := encodeTier(&slow, h, o, schema, fixedIdx, labelIdx, opts, nil); err != nil {
		t.Fatal(err)
	}
	compareFiles(t, fast.Bytes(), slow.Bytes())
}

// sameRow is parquet.Row.Equal with NaN equal to NaN.
func sameRow(a, b parquet.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Kind() != y.Kind() || x.IsNull() != y.IsNull() || x.Column() != y.Column() ||
			x.DefinitionLevel() != y.DefinitionLevel() || x.RepetitionLevel() != y.RepetitionLevel() ||
			!bytes.Equal(x.AppendBytes(nil), y.AppendBytes(nil)) {
			return false
		}
	}
	return true
}

// TestEncodeTierFallsBack: a label column type the encoder does not write
// (FLOAT) makes encodeTier use parquet-go's writer, values intact.
func TestEncodeTierFallsBack(t *testing.T) {
	h := newHour(0, int64(time.Hour))
	h.labelCols = []labelCol{{"attr.f", parquet.Optional(parquet.Leaf(parquet.FloatType))}}
	h.ser = []series{{sid: 7, name: "m", typ: "gauge", kind: KindGauge, labels: []labelVal{{0, parquet.FloatValue(2.5)}}}}
	o := &tierOut{tier: time.Minute}
	o.add(0, &Window{Start: 0, Points: 1, Sum: 1, HasSum: true})
	schema, fixedIdx, labelIdx, err := tierSchema(h, o)
	if err != nil {
		t.Fatal(err)
	}
	opts := []parquet.WriterOption{parquet.Compression(&parquet.Zstd)}
	if enc, err := newTierEncoding(schema, fixedIdx, labelIdx, opts); err != nil || enc != nil {
		t.Fatalf("newTierEncoding = %v, %v; want nil, nil", enc, err)
	}
	var buf bytes.Buffer
	if err := encodeTier(&buf, h, o, schema, fixedIdx, labelIdx, opts, &rowEncoder{}); err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]parquet.Row, 1)
	r := parquet.NewReader(pf)
	if n, _ := r.ReadRows(rows); n != 1 || rows[0][labelIdx[0]].Float() != 2.5 {
		t.Fatalf("read %d rows: %v", n, rows[0])
	}
}
