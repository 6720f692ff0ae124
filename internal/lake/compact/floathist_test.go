package compact

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/lake/rollup"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// floatHistBatch decodes a remote write 2.0 request of native histograms
// (float with fractional counts, integer, custom buckets; every reset
// hint) of series named by prefix, one sample per 10 s from the ingest
// hour's start.
func floatHistBatch(t *testing.T, prefix string, points int) *signal.Metrics {
	t.Helper()
	st := writev2.NewSymbolTable()
	req := &writev2.Request{}
	t0 := ingestNow.Truncate(time.Hour).UnixMilli()
	hints := []histogram.CounterResetHint{histogram.UnknownCounterReset, histogram.CounterReset, histogram.NotCounterReset, histogram.GaugeType}
	for si, kind := range []string{"float", "int", "custom"} {
		ts := writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", prefix+"_"+kind, "job", "x"), nil)}
		for i := range points {
			fh := &histogram.FloatHistogram{CounterResetHint: hints[(i+si)%4], Schema: 1, ZeroThreshold: 0.001,
				ZeroCount: float64(i%3) / 3, Sum: float64(i) * 1.1,
				PositiveSpans: []histogram.Span{{Offset: -1, Length: 3}}, PositiveBuckets: []float64{0.1 * float64(i), 1.0 / 7, 2},
				NegativeSpans: []histogram.Span{{Offset: 2, Length: 1}}, NegativeBuckets: []float64{float64(i) / 9}}
			if kind == "custom" {
				fh.Schema, fh.CustomValues, fh.ZeroThreshold, fh.ZeroCount = histogram.CustomBucketsSchema, []float64{1, 2, 3}, 0, 0
				fh.PositiveSpans[0].Offset, fh.NegativeSpans, fh.NegativeBuckets = 0, nil, nil
			}
			fh.Count = fh.ZeroCount
			for _, c := range append(slices.Clone(fh.PositiveBuckets), fh.NegativeBuckets...) {
				fh.Count += c
			}
			tm := t0 + int64(i)*10_000
			if kind == "int" {
				h := &histogram.Histogram{CounterResetHint: fh.CounterResetHint, Schema: 0, Count: uint64(3 + i), Sum: 1,
					ZeroCount: 1, PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{1, int64(i)}}
				ts.Histograms = append(ts.Histograms, writev2.FromIntHistogram(0, tm, h))
				continue
			}
			ts.Histograms = append(ts.Histograms, writev2.FromFloatHistogram(0, tm, fh))
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	req.Symbols = st.Symbols()
	b, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var m signal.Metrics
	var d prw.Decoder
	if _, err := d.DecodeV2(&m, b); err != nil {
		t.Fatal(err)
	}
	return &m
}

// canonHist renders a point with its float counts and reset hint.
func canonHist(m *signal.Metrics, i int) string {
	d := m.Descs[m.Desc[i]]
	f := func(r signal.Range) string {
		var sb strings.Builder
		for _, x := range m.F64[r.Start:r.End] {
			fmt.Fprintf(&sb, "%x,", math.Float64bits(x))
		}
		return sb.String()
	}
	return fmt.Sprintf("%s t=%d count=%d has=%d zero=%d pos=%v@%d neg=%v@%d buckets=%v bounds=%s float=%s", m.String(d.Name), m.Time[i],
		m.Count[i], m.Has[i], m.ZeroCount[i], m.U64[m.PosCounts[i].Start:m.PosCounts[i].End], m.PosOffset[i],
		m.U64[m.NegCounts[i].Start:m.NegCounts[i].End], m.NegOffset[i], m.U64[m.BucketCounts[i].Start:m.BucketCounts[i].End],
		f(m.Bounds[i]), f(m.FloatCounts[i]))
}

// newColumns are the metrics columns float histograms and reset hints
// added; files written before them lack them.
var newColumns = []string{format.ColCountFloat, format.ColExpZeroCountFloat, format.ColBucketCountsFloat,
	format.ColExpPositiveBucketCountsFloat, format.ColExpNegativeBucketCountsFloat, format.ColResetHint}

// dropColumns rewrites the parquet file at path without cols, as a file
// written before they existed (footer metadata kept), and returns its
// size and schema hash.
func dropColumns(t *testing.T, path string, cols []string) (int64, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	g := parquet.Group{}
	for _, fl := range f.Schema().Fields() {
		if !slices.Contains(cols, fl.Name()) {
			g[fl.Name()] = fl
		}
	}
	schema := parquet.NewSchema(f.Schema().Name(), g)
	conv, err := parquet.Convert(schema, f.Schema())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w := parquet.NewWriter(&out, schema)
	for _, kv := range f.Metadata().KeyValueMetadata {
		w.SetKeyValueMetadata(kv.Key, kv.Value)
	}
	for _, rg := range f.RowGroups() {
		if _, err := w.WriteRowGroup(parquet.ConvertRowGroup(rg, conv)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return int64(out.Len()), catalog.ParquetSchemaHash(schema)
}

// A partition holding a file written before the float count and reset
// hint columns (integer histograms only, as such files held) and files
// with them (float histograms, hints) compacts into files that keep every
// point: the old file's points read back as integer histograms with an
// unknown hint, the new files' as they were written.
func TestCompactFloatHistogramsWithOldFiles(t *testing.T) {
	e := newEnv(t)
	old := floatHistBatch(t, "old", 30)
	// What an old file held: integer histograms, no hints.
	keep := 0
	for i := range old.Len() {
		if !old.IsFloatHist(i) {
			old.MovePoint(keep, i)
			old.Has[keep] &^= signal.HintMask
			keep++
		}
	}
	old.Truncate(keep)
	batches := []*signal.Metrics{old, floatHistBatch(t, "new", 40), floatHistBatch(t, "new", 40)}
	var want []string
	for bi, b := range batches {
		var segs []catalog.Segment
		w, err := lake.NewWriter(lake.Options{Store: e.store, RowGroupRows: 16, Now: func() time.Time { return ingestNow }},
			func(s lake.Segment) error { segs = append(segs, s.CatalogRow()); return nil })
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Len() {
			want = append(want, canonHist(b, i))
		}
		if err := w.WriteMetrics("acme", b); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if bi == 0 {
			for i := range segs {
				segs[i].Bytes, segs[i].SchemaHash = dropColumns(t, filepath.Join(e.root, filepath.FromSlash(segs[i].Path)), newColumns)
			}
		}
		if err := e.cat.AddSegments(t.Context(), segs...); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	read := func() []string {
		segs, err := e.cat.List(t.Context(), catalog.Filter{Table: lake.TableMetrics})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range segs {
			f, err := lake.OpenObject(e.store, s.Path)
			if err != nil {
				t.Fatal(err)
			}
			var m signal.Metrics
			if err := f.ReadMetrics(&m); err != nil {
				t.Fatalf("read %s: %v", s.Path, err)
			}
			_ = f.Close()
			for i := range m.Len() {
				got = append(got, canonHist(&m, i))
			}
		}
		slices.Sort(got)
		return got
	}
	if got := read(); !slices.Equal(got, want) {
		t.Fatalf("before compaction: %d points differ from the %d written:\n%s", len(got), len(want), firstDiff(got, want))
	}
	checkRollup(t, e, map[string]int{"old_int": 30, "new_float": 80, "new_int": 80, "new_custom": 80})
	if rows, _ := compactAll(t, e, Options{}); rows != int64(len(want)) {
		t.Fatalf("compacted %d rows, want %d", rows, len(want))
	}
	got := read()
	if !slices.Equal(got, want) {
		t.Fatalf("after compaction:\n%s", firstDiff(got, want))
	}
	floats := 0
	for _, s := range got {
		if !strings.HasSuffix(s, "float=") {
			floats++
		}
	}
	if floats != 2*2*40 {
		t.Fatalf("%d float histograms after compaction, want %d", floats, 2*2*40)
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("got  %s\nwant %s", got[i], want[i])
		}
	}
	return fmt.Sprintf("%d vs %d points", len(got), len(want))
}

// checkRollup rolls the lake's hours up (old files beside new ones) and
// checks that every series named in points has windows covering that
// many raw points in the 1m tier: a float histogram's rows are rolled up
// like the integer ones (sum, points, sketch; its count is null).
func checkRollup(t *testing.T, e *lakeEnv, points map[string]int) {
	t.Helper()
	opts := rollup.Options{Store: e.store, Now: func() time.Time { return ingestNow.Add(2 * time.Hour) }}
	jobs, err := rollup.Plan(t.Context(), e.cat, opts)
	if err != nil || len(jobs) == 0 {
		t.Fatalf("rollup plan: %d jobs, %v", len(jobs), err)
	}
	for _, j := range jobs {
		if _, err := rollup.Run(t.Context(), e.cat, e.store, j, opts); err != nil {
			t.Fatalf("rollup %+v: %v", j, err)
		}
	}
	segs, err := e.cat.List(t.Context(), catalog.Filter{Table: format.TableRollup})
	if err != nil || len(segs) == 0 {
		t.Fatalf("rollup segments: %d, %v", len(segs), err)
	}
	got := map[string]int{}
	counts := map[string]int{}
	for _, s := range segs {
		b, err := os.ReadFile(filepath.Join(e.root, filepath.FromSlash(s.Path)))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) int {
			leaf, ok := f.Schema().Lookup(name)
			if !ok {
				t.Fatalf("rollup file without %s", name)
			}
			return leaf.ColumnIndex
		}
		cName, cTier, cPoints, cCount := col(format.ColMetricName), col(format.ColTier), col(format.ColPoints), col(format.ColCount)
		r := parquet.NewReader(f)
		rows := make([]parquet.Row, 64)
		for {
			n, err := r.ReadRows(rows)
			for _, row := range rows[:n] {
				vals := map[int]parquet.Value{}
				for _, v := range row {
					vals[v.Column()] = v
				}
				if vals[cTier].String() != "1m" {
					continue
				}
				name := vals[cName].String()
				got[name] += int(vals[cPoints].Uint64())
				if !vals[cCount].IsNull() {
					counts[name]++
				}
			}
			if err != nil {
				break
			}
		}
	}
	for name, want := range points {
		if got[name] != want {
			t.Errorf("1m rollup of %s covers %d points, want %d (all: %v)", name, got[name], want, got)
		}
	}
	if counts["new_float"] != 0 || counts["old_int"] == 0 {
		t.Errorf("windows with a count: %v; want none for the float histograms, some for the integer ones", counts)
	}
}
