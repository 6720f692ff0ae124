package prom

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// nhSeries is one native histogram series of the reference workload: the
// histograms as a sender has them.
type nhSeries struct {
	lbls labels.Labels
	ts   []int64
	hs   []*histogram.FloatHistogram
	ints []*histogram.Histogram // set when sent as integer histograms
	// gauge: sent with the metadata type gaugehistogram (hs carry the
	// gauge hint)
	gauge bool
}

// nativeWorkload builds cumulative native histograms of three kinds, each
// with a reset: integer exponential (schema 1, negative and zero
// buckets), float exponential with whole counts (schema 3) and custom
// buckets (schema -53).
func nativeWorkload(start time.Time, points int) []nhSeries {
	r := rand.New(rand.NewPCG(13, 42))
	t0 := start.UnixMilli()
	mk := func(name, kind string) labels.Labels {
		return labels.FromStrings("__name__", name, "job", "api", "kind", kind)
	}
	out := []nhSeries{{lbls: mk("nh_latency_seconds", "int")}, {lbls: mk("nh_latency_seconds", "float")}, {lbls: mk("nh_size_bytes", "custom")}}
	for si := range out {
		s := &out[si]
		var pos, neg []float64
		var zero, sum float64
		first := int32(-3)
		custom := []float64{0.1, 0.5, 1, 5, 10}
		schema := int32(1)
		switch si {
		case 1:
			schema, first = 3, 5
		case 2:
			schema, first = histogram.CustomBucketsSchema, 0
		}
		npos := 9
		if si == 2 {
			npos = len(custom) + 1
		}
		pos = make([]float64, npos)
		neg = make([]float64, 3)
		for i := range points {
			if i == points*2/3 { // a counter reset
				clear(pos)
				clear(neg)
				zero, sum = 0, 0
			}
			for b := range pos {
				if r.IntN(3) > 0 {
					d := float64(r.IntN(5))
					pos[b] += d
					sum += d * (float64(b) + 0.5)
				}
			}
			if si != 2 {
				for b := range neg {
					d := float64(r.IntN(2))
					neg[b] += d
					sum -= d * float64(b+1)
				}
				zero += float64(r.IntN(2))
			}
			h := &histogram.FloatHistogram{Schema: schema, Count: zero, Sum: sum,
				PositiveSpans: []histogram.Span{{Offset: first, Length: uint32(len(pos))}}, PositiveBuckets: slices.Clone(pos)}
			for _, c := range pos {
				h.Count += c
			}
			if si == 2 {
				h.CustomValues = custom
			} else {
				h.ZeroThreshold, h.ZeroCount = 0.001, zero
				h.NegativeSpans, h.NegativeBuckets = []histogram.Span{{Offset: 0, Length: uint32(len(neg))}}, slices.Clone(neg)
				for _, c := range neg {
					h.Count += c
				}
			}
			h = h.Compact(0)
			s.ts = append(s.ts, t0+int64(i)*15_000)
			s.hs = append(s.hs, h)
			if si != 1 {
				s.ints = append(s.ints, toInt(h))
			}
		}
	}
	return out
}

// toInt converts a whole-count float histogram to an integer one (deltas).
func toInt(h *histogram.FloatHistogram) *histogram.Histogram {
	deltas := func(b []float64) []int64 {
		out := make([]int64, len(b))
		prev := int64(0)
		for i, v := range b {
			out[i] = int64(v) - prev
			prev = int64(v)
		}
		return out
	}
	return &histogram.Histogram{Schema: h.Schema, Count: uint64(h.Count), Sum: h.Sum, ZeroThreshold: h.ZeroThreshold,
		ZeroCount: uint64(h.ZeroCount), PositiveSpans: h.PositiveSpans, NegativeSpans: h.NegativeSpans,
		PositiveBuckets: deltas(h.PositiveBuckets), NegativeBuckets: deltas(h.NegativeBuckets), CustomValues: h.CustomValues}
}

// remoteWrite2 encodes the workload as one remote write 2.0 request with
// the reference types (writev2) and decodes it with sluice's decoder, as
// the receiver does.
func remoteWrite2(t testing.TB, ws []nhSeries) *signal.Metrics {
	t.Helper()
	st := writev2.NewSymbolTable()
	req := &writev2.Request{}
	for _, s := range ws {
		ts := writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(s.lbls, nil),
			Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_HISTOGRAM}}
		if s.gauge {
			ts.Metadata.Type = writev2.Metadata_METRIC_TYPE_GAUGEHISTOGRAM
		}
		for i := range s.ts {
			if s.ints != nil {
				ts.Histograms = append(ts.Histograms, writev2.FromIntHistogram(0, s.ts[i], s.ints[i]))
			} else {
				ts.Histograms = append(ts.Histograms, writev2.FromFloatHistogram(0, s.ts[i], s.hs[i]))
			}
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
	stats, err := d.DecodeV2(&m, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(ws) * len(ws[0].ts); stats.Histograms != want {
		t.Fatalf("decoded %d histograms, want %d", stats.Histograms, want)
	}
	return &m
}

// memQueryable serves the reference series from memory: the Prometheus
// engine over the samples exactly as sent.
func memQueryable(ws []nhSeries) storage.Queryable {
	return storage.QueryableFunc(func(mint, maxt int64) (storage.Querier, error) { return memQuerier(ws), nil })
}

type memQuerier []nhSeries

func (m memQuerier) Select(_ context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
	for _, s := range m {
		ok := true
		for _, mt := range ms {
			ok = ok && mt.Matches(s.lbls.Get(mt.Name))
		}
		if !ok {
			continue
		}
		var hp []promql.HPoint
		for i, t := range s.ts {
			if hints == nil || (t >= hints.Start && t <= hints.End) {
				hp = append(hp, promql.HPoint{T: t, H: s.hs[i].Copy()})
			}
		}
		out = append(out, promql.NewStorageSeries(promql.Series{Metric: s.lbls, Histograms: hp}))
	}
	slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &listSet{s: out, i: -1}
}

func (memQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}
func (memQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}
func (memQuerier) Close() error { return nil }

type listSet struct {
	s []storage.Series
	i int
}

func (l *listSet) Next() bool                        { l.i++; return l.i < len(l.s) }
func (l *listSet) At() storage.Series                { return l.s[l.i] }
func (l *listSet) Err() error                        { return nil }
func (l *listSet) Warnings() annotations.Annotations { return nil }

// nativeQueries are the PromQL a Prometheus user runs over native
// histograms.
var nativeQueries = []string{
	`nh_latency_seconds`,
	`nh_size_bytes`,
	`histogram_count(nh_latency_seconds)`,
	`histogram_sum(nh_size_bytes)`,
	`histogram_count(rate(nh_latency_seconds[2m]))`,
	`histogram_sum(rate(nh_latency_seconds[2m]))`,
	`histogram_quantile(0.9, rate(nh_latency_seconds[2m]))`,
	`histogram_quantile(0.5, rate(nh_size_bytes[5m]))`,
	`histogram_quantile(0.99, sum by (job) (rate(nh_latency_seconds[2m])))`,
	`histogram_fraction(0, 2, rate(nh_latency_seconds[2m]))`,
	`histogram_fraction(0, 1, nh_size_bytes)`,
	`histogram_avg(rate(nh_latency_seconds[2m]))`,
	`histogram_stddev(nh_latency_seconds)`,
	`sum(increase(nh_latency_seconds[5m]))`,
	`resets(nh_latency_seconds[30m])`,
	`count_over_time({__name__=~"nh_.*"}[10m])`,
}

// Native histograms sent by remote write 2.0 (integer, float, custom
// buckets) come back from the lake as native histograms: every query of
// nativeQueries gives, instant and range, what the PromQL engine gives
// over the same samples held in memory.
func TestNativeHistogramsMatchPrometheus(t *testing.T) {
	l := newTestLake(t)
	ws := nativeWorkload(synthStart, 120)
	l.WriteBatches(t, "acme", remoteWrite2(t, ws))
	ad := adapterOf(t, l)
	lake, ref := ad.Queryable("acme", Limits{}), memQueryable(ws)
	matchEngine(t, newEngine(), lake, ref, nativeQueries,
		[]time.Time{synthStart.Add(90 * time.Second), synthStart.Add(20 * time.Minute), synthStart.Add(27*time.Minute + 7*time.Second)},
		synthStart.Add(30*time.Minute))
}

// matchEngine runs each of exprs on lake and on ref (the PromQL engine over
// the same samples in memory), instant at each of instants and as a range
// query from synthStart to end at a 30 s step, and fails on any
// difference: floats within near, histograms bucket for bucket.
func matchEngine(t *testing.T, eng *promql.Engine, lake, ref storage.Queryable, exprs []string, instants []time.Time, end time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, expr := range exprs {
		for _, at := range instants {
			got, want := evalInstant(t, eng, lake, expr, at), evalInstant(t, eng, ref, expr, at)
			if len(want) == 0 {
				t.Fatalf("%s at %v: the reference has no result", expr, at)
			}
			if d := diffVectors(got, want); d != "" {
				t.Errorf("%s at %v: %s", expr, at, d)
			}
		}
		qr := func(q storage.Queryable) promql.Matrix {
			qry, err := eng.NewRangeQuery(ctx, q, nil, expr, synthStart, end, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			res := qry.Exec(ctx)
			if res.Err != nil {
				t.Fatalf("%s: %v", expr, res.Err)
			}
			m, err := res.Matrix()
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		got, want := qr(lake), qr(ref)
		if len(got) != len(want) {
			t.Fatalf("%s range: %d series, want %d", expr, len(got), len(want))
		}
		for i := range want {
			if !labels.Equal(got[i].Metric, want[i].Metric) || len(got[i].Floats) != len(want[i].Floats) || len(got[i].Histograms) != len(want[i].Histograms) {
				t.Fatalf("%s range series %d: %v (%d floats, %d histograms), want %v (%d, %d)", expr, i, got[i].Metric,
					len(got[i].Floats), len(got[i].Histograms), want[i].Metric, len(want[i].Floats), len(want[i].Histograms))
			}
			for k := range want[i].Floats {
				if g, w := got[i].Floats[k], want[i].Floats[k]; g.T != w.T || !near(g.F, w.F) && !(math.IsNaN(g.F) && math.IsNaN(w.F)) {
					t.Fatalf("%s range %v at %d: %v, want %v", expr, want[i].Metric, w.T, g.F, w.F)
				}
			}
			for k := range want[i].Histograms {
				if g, w := got[i].Histograms[k], want[i].Histograms[k]; g.T != w.T || !sameHistogram(g.H, w.H) {
					t.Fatalf("%s range %v at %d: %v, want %v", expr, want[i].Metric, w.T, g.H, w.H)
				}
			}
		}
	}
}

func evalInstant(t *testing.T, eng *promql.Engine, q storage.Queryable, expr string, at time.Time) promql.Vector {
	t.Helper()
	qry, err := eng.NewInstantQuery(context.Background(), q, nil, expr, at)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", expr, res.Err)
	}
	if res.Value.Type() != parser.ValueTypeVector {
		t.Fatalf("%s: %s", expr, res.Value.Type())
	}
	v, _ := res.Vector()
	return v
}

func diffVectors(got, want promql.Vector) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d samples, want %d: %v vs %v", len(got), len(want), got, want)
	}
	slices.SortFunc(got, func(a, b promql.Sample) int { return labels.Compare(a.Metric, b.Metric) })
	slices.SortFunc(want, func(a, b promql.Sample) int { return labels.Compare(a.Metric, b.Metric) })
	for i := range want {
		g, w := got[i], want[i]
		if !labels.Equal(g.Metric, w.Metric) || (g.H == nil) != (w.H == nil) {
			return fmt.Sprintf("sample %d: %v, want %v", i, g, w)
		}
		if w.H != nil {
			if !sameHistogram(g.H, w.H) {
				return fmt.Sprintf("%v: histogram %v, want %v", w.Metric, g.H, w.H)
			}
		} else if !near(g.F, w.F) && !(math.IsNaN(g.F) && math.IsNaN(w.F)) {
			return fmt.Sprintf("%v: %v, want %v", w.Metric, g.F, w.F)
		}
	}
	return ""
}

// sameHistogram compares two histograms bucket by bucket (empty buckets
// and span layout aside), counts and sums within float tolerance.
func sameHistogram(a, b *histogram.FloatHistogram) bool {
	if a.Schema != b.Schema || !near(a.Count, b.Count) || !(near(a.Sum, b.Sum) || math.IsNaN(a.Sum) && math.IsNaN(b.Sum)) ||
		a.ZeroThreshold != b.ZeroThreshold || !near(a.ZeroCount, b.ZeroCount) || !slices.Equal(a.CustomValues, b.CustomValues) {
		return false
	}
	buckets := func(h *histogram.FloatHistogram) string {
		var sb strings.Builder
		for it := h.AllBucketIterator(); it.Next(); {
			if bk := it.At(); bk.Count != 0 {
				fmt.Fprintf(&sb, "%g:%g:%.9g ", bk.Lower, bk.Upper, bk.Count)
			}
		}
		return sb.String()
	}
	return buckets(a) == buckets(b)
}

// OTLP exponential histograms are native histograms under their bare
// name (unit suffix added, as Prometheus's own OTLP ingestion names them):
// OTLP bucket i of offset o is Prometheus bucket o+i+1, the zero bucket
// keeps its threshold, a scale above 8 is reduced to 8, one below -4 has
// no Prometheus form (no sample), and delta points add up to a
// cumulative histogram.
func TestOTLPExponentialHistograms(t *testing.T) {
	l := newTestLake(t)
	ts := synthStart.UnixNano()
	point := func(t int64, scale, zero int, count int, sum float64, pos, neg string) string {
		return fmt.Sprintf(`{"timeUnixNano":"%d","count":"%d","sum":%g,"scale":%d,"zeroCount":"%d","zeroThreshold":0.5,"positive":%s,"negative":%s}`,
			t, count, sum, scale, zero, pos, neg)
	}
	none := `{}`
	js := fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[%s]},"scopeMetrics":[{"metrics":[
		{"name":"rpc.latency","unit":"s","exponentialHistogram":{"aggregationTemporality":2,"dataPoints":[%s]}},
		{"name":"fine","exponentialHistogram":{"aggregationTemporality":2,"dataPoints":[%s]}},
		{"name":"coarse","exponentialHistogram":{"aggregationTemporality":2,"dataPoints":[%s]}},
		{"name":"ops","exponentialHistogram":{"aggregationTemporality":1,"dataPoints":[%s,%s]}}
	]}]}]}`, attr("service.name", "svc"),
		point(ts, 0, 1, 10, 7, `{"offset":0,"bucketCounts":["4","0","2"]}`, `{"offset":1,"bucketCounts":["3"]}`),
		point(ts, 10, 0, 4, 9, `{"offset":1024,"bucketCounts":["1","1","1","1"]}`, none),
		point(ts, -5, 0, 1, 9, `{"offset":0,"bucketCounts":["1"]}`, none),
		point(ts, 0, 0, 2, 3, `{"offset":0,"bucketCounts":["2"]}`, none),
		point(ts+15e9, 0, 0, 3, 4, `{"offset":1,"bucketCounts":["3"]}`, none))
	l.Write(t, "acme", 0, []byte(js))
	q := adapterOf(t, l).Queryable("acme", Limits{})
	buckets := func(h *histogram.FloatHistogram) string {
		var out []string
		for it := h.AllBucketIterator(); it.Next(); {
			if b := it.At(); b.Count != 0 {
				out = append(out, fmt.Sprintf("%g..%g:%g", b.Lower, b.Upper, b.Count))
			}
		}
		return strings.Join(out, " ")
	}
	at := synthStart.Add(time.Second)
	for _, c := range []struct {
		expr, buckets string
		schema        int32
		count, sum    float64
	}{
		{`rpc_latency_seconds`, "-4..-2:3 -0.5..0.5:1 1..2:4 4..8:2", 0, 10, 7},
		{`fine`, fmt.Sprintf("2..%g:4", math.Exp2(1+1.0/256)), 8, 4, 9},
		{`ops`, "1..2:2 2..4:3", 0, 5, 7}, // two delta points summed
	} {
		ts := at
		if c.expr == `ops` {
			ts = at.Add(15 * time.Second)
		}
		v := instant(t, q, c.expr, ts)
		if len(v) != 1 || v[0].H == nil {
			t.Fatalf("%s: %v, want one histogram sample", c.expr, v)
		}
		h := v[0].H
		if got := buckets(h); got != c.buckets || h.Schema != c.schema || h.Count != c.count || h.Sum != c.sum {
			t.Errorf("%s: schema %d count %g sum %g buckets %s, want %d %g %g %s", c.expr, h.Schema, h.Count, h.Sum, got,
				c.schema, c.count, c.sum, c.buckets)
		}
	}
	if v := instant(t, q, `coarse`, at); len(v) != 0 {
		t.Errorf("coarse (scale -5): %v, want no sample", v)
	}
	if v := instant(t, q, `histogram_quantile(0.5, rpc_latency_seconds)`, at); len(v) != 1 || !(v[0].F > 1 && v[0].F <= 2) {
		t.Errorf("median: %v, want in (1, 2]", v)
	}
	// The classic-compatible _sum and _count of OTLP exponential
	// histograms stay.
	if v := instant(t, q, `rpc_latency_seconds_count`, at); len(v) != 1 || v[0].F != 10 {
		t.Errorf("rpc_latency_seconds_count: %v, want 10", v)
	}
}

// A histogram sample is charged to the query's memory reservation at its
// size (fixed part and buckets), not as a float sample.
func TestHistogramSamplesAreChargedBySize(t *testing.T) {
	l := newTestLake(t)
	ws := nativeWorkload(synthStart, 40)
	l.WriteBatches(t, "acme", remoteWrite2(t, ws))
	var charged int64
	q := adapterOf(t, l).Queryable("acme", Limits{Charge: func(b int64) error { charged += b; return nil }})
	v := instant(t, q, `count_over_time(nh_latency_seconds[1h])`, synthStart.Add(time.Hour-time.Second))
	if len(v) != 2 || v[0].F != 40 {
		t.Fatalf("count_over_time: %v, want 2 series of 40", v)
	}
	var want int64
	for _, s := range ws[:2] {
		for _, h := range s.hs {
			want += HistogramSampleBytes + 8*int64(len(h.PositiveBuckets)+len(h.NegativeBuckets)+len(h.PositiveSpans)+len(h.NegativeSpans))
		}
	}
	if charged < want || want < 80*HistogramSampleBytes {
		t.Fatalf("charged %d bytes for 80 histogram samples, want at least %d", charged, want)
	}
	// And a reservation too small for them stops the query.
	q = adapterOf(t, l).Queryable("acme", Limits{Charge: func(b int64) error {
		if charged += b; charged > 40*SampleBytes*3 {
			return fmt.Errorf("%w: over budget", ErrLimit)
		}
		return nil
	}})
	charged = 0
	qry, err := newEngine().NewInstantQuery(context.Background(), q, nil, `count_over_time(nh_latency_seconds[1h])`, synthStart.Add(time.Hour-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if res := qry.Exec(context.Background()); res.Err == nil || !strings.Contains(res.Err.Error(), "over budget") {
		t.Fatalf("err %v, want over budget", res.Err)
	}
}

// Rollup tiers keep no native buckets: with rollups on and the hour
// rolled up, native histogram selectors read raw points and answer as the
// engine does over the samples in memory, and the rollup-derived series
// of another kind (_bucket, _sum, _count) never appear.
func TestNativeHistogramsWithRollups(t *testing.T) {
	l := newTestLake(t)
	ws := nativeWorkload(synthStart, 120)
	l.WriteBatches(t, "acme", remoteWrite2(t, ws))
	rollUp(t, l)
	on, err := NewAdapter(Options{Catalog: l.Catalog, Store: l.Store, Rollups: true})
	if err != nil {
		t.Fatal(err)
	}
	lake, ref := on.Queryable("acme", Limits{}), memQueryable(ws)
	for _, expr := range []string{`rate(nh_latency_seconds[5m])`, `increase(nh_size_bytes[10m])`, `last_over_time(nh_latency_seconds[1h])`,
		`histogram_count(sum_over_time(nh_size_bytes[5m]))`, `nh_latency_seconds`, `count({__name__=~"nh_.+"})`} {
		for _, m := range []int{10, 25} {
			at := synthStart.Add(time.Duration(m) * time.Minute)
			got, err := instantMatrix(lake, expr, at)
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			want, err := instantMatrix(ref, expr, at)
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			if got != want || want == "" {
				t.Errorf("%s at %dm:\n got %s\nwant %s", expr, m, got, want)
			}
		}
	}
	if on.Stats.RollupSelects.Load() != 0 {
		t.Errorf("%d selectors read rollups", on.Stats.RollupSelects.Load())
	}
}

// A remote-write series sent with the metadata type gaugehistogram reads
// as gauge histograms (the gauge hint): the engine's answers and its
// annotations (delta on a gauge histogram: none; rate: "not a counter")
// are those over the same gauge histograms in memory, and a counter
// histogram of the same request keeps the unknown hint.
func TestGaugeHistograms(t *testing.T) {
	ws := nativeWorkload(synthStart, 60)[:2]
	ws[0].lbls = labels.FromStrings("__name__", "nh_queue", "job", "api")
	ws[0].gauge = true
	for _, h := range ws[0].hs {
		h.CounterResetHint = histogram.GaugeType
	}
	l := newTestLake(t)
	l.WriteBatches(t, "acme", remoteWrite2(t, ws))
	lake, ref := adapterOf(t, l).Queryable("acme", Limits{}), memQueryable(ws)
	at := synthStart.Add(12 * time.Minute)
	for _, expr := range []string{`histogram_count(delta(nh_queue[5m]))`, `histogram_count(rate(nh_queue[5m]))`,
		`histogram_count(delta(nh_latency_seconds[5m]))`, `nh_queue`, `resets(nh_queue[15m])`} {
		run := func(q storage.Queryable) (string, []string) {
			qry, err := newEngine().NewInstantQuery(context.Background(), q, nil, expr, at)
			if err != nil {
				t.Fatal(err)
			}
			defer qry.Close()
			res := qry.Exec(context.Background())
			if res.Err != nil {
				t.Fatalf("%s: %v", expr, res.Err)
			}
			ws, infos := res.Warnings.AsStrings(expr, 10, 10)
			return res.Value.String(), append(ws, infos...)
		}
		gv, ga := run(lake)
		wv, wa := run(ref)
		if gv != wv || fmt.Sprint(ga) != fmt.Sprint(wa) || wv == "" {
			t.Errorf("%s:\n got %s %q\nwant %s %q", expr, gv, ga, wv, wa)
		}
		t.Logf("%s: %q", expr, wa)
	}
}

// The metadata APIs list native histograms by their bare name: metric
// names, series of a selector, and /api/v1/metadata's type.
func TestNativeHistogramNamesAndMetadata(t *testing.T) {
	l := newTestLake(t)
	l.WriteBatches(t, "acme", remoteWrite2(t, nativeWorkload(synthStart, 5)))
	js := fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[%s]},"scopeMetrics":[{"metrics":[
		{"name":"e","unit":"s","exponentialHistogram":{"aggregationTemporality":2,"dataPoints":[{"timeUnixNano":"%d","count":"1","scale":0,
			"positive":{"offset":0,"bucketCounts":["1"]}}]}}]}]}]}`, attr("service.name", "svc"), synthStart.UnixNano())
	l.Write(t, "acme", 0, []byte(js))
	ad := adapterOf(t, l)
	q, err := ad.Queryable("acme", Limits{}).Querier(synthStart.UnixMilli(), synthStart.Add(time.Hour).UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	names, _, err := q.LabelValues(context.Background(), labels.MetricName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[e_seconds e_seconds_count e_seconds_sum nh_latency_seconds nh_size_bytes]"; fmt.Sprint(names) != want {
		t.Errorf("metric names %v, want %s", names, want)
	}
	ss := q.Select(context.Background(), true, &storage.SelectHints{Start: synthStart.UnixMilli(), End: synthStart.Add(time.Hour).UnixMilli(), Func: "series"},
		labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "nh_latency_seconds"))
	var got []string
	for ss.Next() {
		got = append(got, ss.At().Labels().String())
	}
	if ss.Err() != nil || fmt.Sprint(got) != `[{__name__="nh_latency_seconds", job="api", kind="float"} {__name__="nh_latency_seconds", job="api", kind="int"}]` {
		t.Errorf("series %v (%v)", got, ss.Err())
	}
	md, err := ad.Metadata(context.Background(), "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(md) != "[{e_seconds histogram  s} {nh_latency_seconds histogram  } {nh_size_bytes histogram  }]" {
		t.Errorf("metadata %v", md)
	}
}

// denseSide lays out any dense counts as valid spans holding exactly the
// non-empty buckets at their indexes, with no empty bucket at either end.
func TestDenseSide(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		counts := make([]uint64, r.IntN(20))
		for i := range counts {
			if r.IntN(3) == 0 {
				counts[i] = uint64(r.IntN(5))
			}
		}
		first := int32(r.IntN(40) - 20)
		spans, buckets := denseSide(counts, first)
		want := map[int32]float64{}
		var total float64
		for i, c := range counts {
			if c != 0 {
				want[first+int32(i)] = float64(c)
				total += float64(c)
			}
		}
		h := &histogram.FloatHistogram{Schema: 0, Count: total, PositiveSpans: spans, PositiveBuckets: buckets}
		if err := h.Validate(); err != nil {
			t.Fatalf("%v from %v: %v", spans, counts, err)
		}
		got := map[int32]float64{}
		for it := h.PositiveBucketIterator(); it.Next(); {
			if b := it.At(); b.Count != 0 {
				got[b.Index] = b.Count
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("counts %v at %d: buckets %v, want %v", counts, first, got, want)
		}
		if len(buckets) > 0 && (buckets[0] == 0 || buckets[len(buckets)-1] == 0) {
			t.Fatalf("counts %v: empty bucket at an end: %v", counts, buckets)
		}
	}
}

// A stale marker of a native histogram (sum = the stale NaN, as
// Prometheus sends when a series goes away) ends the series as it does in
// Prometheus: the sample before it answers, nothing after it.
func TestNativeHistogramStaleMarker(t *testing.T) {
	ws := nativeWorkload(synthStart, 10)[:1]
	s := &ws[0]
	stale := &histogram.Histogram{Sum: math.Float64frombits(value.StaleNaN)}
	s.ts = append(s.ts, s.ts[len(s.ts)-1]+15_000)
	s.ints = append(s.ints, stale)
	s.hs = append(s.hs, stale.ToFloat(nil))
	l := newTestLake(t)
	l.WriteBatches(t, "acme", remoteWrite2(t, ws))
	lake, ref := adapterOf(t, l).Queryable("acme", Limits{}), memQueryable(ws)
	last := time.UnixMilli(s.ts[len(s.ts)-1])
	for _, c := range []struct {
		at   time.Time
		want int
	}{{last.Add(-time.Second), 1}, {last.Add(time.Second), 0}, {last.Add(time.Minute), 0}} {
		got, want := evalInstant(t, newEngine(), lake, `nh_latency_seconds`, c.at), evalInstant(t, newEngine(), ref, `nh_latency_seconds`, c.at)
		if len(got) != c.want || len(want) != c.want || diffVectors(got, want) != "" {
			t.Errorf("at %v: %v, want %v (%d samples)", c.at, got, want, c.want)
		}
	}
}

// FuzzHistogramAt: whatever a (damaged) row holds, building its histogram
// never panics and gives nil or a histogram that Prometheus validates.
func FuzzHistogramAt(f *testing.F) {
	f.Add(true, int8(0), int32(0), int32(-1), uint64(7), []byte{1, 0, 2, 0, 0, 0, 3}, []byte{1}, 0.5)
	f.Add(true, int8(12), int32(2147483600), int32(0), uint64(1), []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, []byte{}, 0.0)
	f.Add(false, int8(-53), int32(0), int32(0), uint64(3), []byte{1, 2, 0}, []byte{10, 5}, 0.0)
	f.Fuzz(func(t *testing.T, exp bool, scale int8, po, no int32, count uint64, pos, neg []byte, zt float64) {
		sc := &scan{cnt: []uint64{count}, cntOK: []bool{true}, sums: []float64{1.5}, sumOK: []bool{true}}
		counts := func(b []byte) []uint64 {
			out := make([]uint64, len(b))
			for i, x := range b {
				out[i] = uint64(x)
			}
			return out
		}
		if exp {
			sc.h = histCols{exp: true, scale: []int32{int32(scale)}, scaleOK: []bool{true}, zc: []uint64{1}, zcOK: []bool{true},
				zt: []float64{zt}, ztOK: []bool{true}, po: []int32{po}, poOK: []bool{true}, no: []int32{no}, noOK: []bool{no != 0},
				pb: counts(pos), pbOff: []int32{0, int32(len(pos))}, nb: counts(neg), nbOff: []int32{0, int32(len(neg))}}
		} else {
			// neg bytes are the bounds here, in whatever order the row has.
			bnd := make([]float64, len(neg))
			for i, x := range neg {
				bnd[i] = float64(x) / 4
			}
			sc.bnd, sc.bndOff = bnd, []int32{0, int32(len(bnd))}
			sc.bkt, sc.bktOff = counts(pos), []int32{0, int32(len(pos))}
		}
		h := sc.histogramAt(0)
		if h == nil {
			return
		}
		if zt >= 0 && !math.IsNaN(zt) || !exp {
			if err := h.Validate(); err != nil {
				t.Fatalf("%v: %v", h, err)
			}
		}
	})
}
