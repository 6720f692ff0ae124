package prom

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/sluice-dev/sluice/internal/jsonw"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Exemplars of histogram points: an OTLP explicit-bucket point's go to the
// _bucket series of their value's bucket (least le >= value, +Inf past the
// last bound), as Prometheus's OTLP ingestion puts them; an exponential
// histogram's and a remote-write native histogram's to the bare name.
func TestHistogramExemplars(t *testing.T) {
	l := newTestLake(t)
	ts := synthStart.UnixNano()
	ex := func(v float64, trace string) string {
		return fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":%g,"traceId":"%s","filteredAttributes":[%s]}`, ts, v, trace, attr("user", "u"+trace[:1]))
	}
	js := fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[%s]},"scopeMetrics":[{"metrics":[
		{"name":"req.latency","unit":"s","histogram":{"aggregationTemporality":2,"dataPoints":[{"timeUnixNano":"%d","count":"6","sum":4,
			"bucketCounts":["1","2","2","1"],"explicitBounds":[0.1,0.5,1],"exemplars":[%s,%s,%s,%s]}]}},
		{"name":"exp.latency","unit":"s","exponentialHistogram":{"aggregationTemporality":2,"dataPoints":[{"timeUnixNano":"%d","count":"1","sum":3,
			"scale":0,"positive":{"offset":1,"bucketCounts":["1"]},"exemplars":[%s]}]}}
	]}]}]}`, attr("service.name", "svc"), ts,
		ex(0.05, "a1000000000000000000000000000000"), ex(0.5, "b1000000000000000000000000000000"),
		ex(0.7, "c1000000000000000000000000000000"), ex(3, "d1000000000000000000000000000000"),
		ts, ex(3, "e1000000000000000000000000000000"))
	l.Write(t, "acme", 0, []byte(js))
	// A remote-write 2.0 native histogram with an exemplar.
	st := writev2.NewSymbolTable()
	h := &histogram.Histogram{Count: 2, Sum: 3, Schema: 0, PositiveSpans: []histogram.Span{{Offset: 1, Length: 1}}, PositiveBuckets: []int64{2}}
	req := &writev2.Request{Timeseries: []writev2.TimeSeries{{
		LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", "rw_latency", "job", "api"), nil),
		Histograms: []writev2.Histogram{writev2.FromIntHistogram(0, synthStart.UnixMilli(), h)},
		Exemplars:  []writev2.Exemplar{{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("trace_id", "f1"), nil), Value: 1.5, Timestamp: synthStart.UnixMilli()}},
	}}}
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
	l.WriteBatches(t, "acme", &m)

	ad := adapterOf(t, l)
	get := func(sels ...string) string {
		t.Helper()
		var sets [][]*labels.Matcher
		for _, sel := range sels {
			ms, err := parserMatchers(sel)
			if err != nil {
				t.Fatal(err)
			}
			sets = append(sets, ms)
		}
		res, err := ad.Exemplars(context.Background(), "acme", Limits{}, synthStart.Add(-time.Minute).UnixMilli(), synthStart.Add(time.Minute).UnixMilli(), sets)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range res {
			var es []string
			for _, e := range r.Exemplars {
				es = append(es, fmt.Sprintf("%g/%s", e.Value, e.Labels.Get("trace_id")[:2]))
			}
			out = append(out, r.SeriesLabels.Get("__name__")+"{le="+r.SeriesLabels.Get("le")+"}:"+strings.Join(es, ","))
		}
		return strings.Join(out, " ")
	}
	for sel, want := range map[string]string{
		`req_latency_seconds_bucket`:           "req_latency_seconds_bucket{le=+Inf}:3/d1 req_latency_seconds_bucket{le=0.1}:0.05/a1 req_latency_seconds_bucket{le=0.5}:0.5/b1 req_latency_seconds_bucket{le=1}:0.7/c1",
		`req_latency_seconds_bucket{le="1"}`:   "req_latency_seconds_bucket{le=1}:0.7/c1",
		`req_latency_seconds_count`:            "",
		`exp_latency_seconds`:                  "exp_latency_seconds{le=}:3/e1",
		`rw_latency`:                           "rw_latency{le=}:1.5/f1",
		`{__name__=~"exp_latency_seconds_.+"}`: "",
	} {
		if got := get(sel); got != want {
			t.Errorf("%s:\n got %s\nwant %s", sel, got, want)
		}
	}
	// Several sets: their union, each exemplar once, read in one pass
	// over the files (no more files than one set selecting everything).
	files := ad.Stats.Files.Load()
	get(`{__name__=~".+"}`)
	all := ad.Stats.Files.Load() - files
	files = ad.Stats.Files.Load()
	want := "exp_latency_seconds{le=}:3/e1 req_latency_seconds_bucket{le=1}:0.7/c1 rw_latency{le=}:1.5/f1"
	if got := get(`req_latency_seconds_bucket{le="1"}`, `rw_latency`, `exp_latency_seconds`, `req_latency_seconds_bucket{le=~"1|5"}`, `nothing_here`); got != want {
		t.Errorf("five sets:\n got %s\nwant %s", got, want)
	}
	if n := ad.Stats.Files.Load() - files; n > all {
		t.Errorf("five sets opened %d files, one set selecting everything %d", n, all)
	}
}

func parserMatchers(sel string) ([]*labels.Matcher, error) {
	return parser.NewParser(parser.Options{}).ParseMetricSelector(sel)
}

// An exemplar value is read in every form the lake writes a double
// (protojson, jsonw.AppendFloat): a number, "NaN", "Infinity",
// "-Infinity"; a remote-write exemplar may carry any of them. Reading
// them as numbers only failed every exemplar query over the file.
func TestParseExemplarsSpecialValues(t *testing.T) {
	var js []byte
	js = append(js, '[')
	vals := []float64{0.25, math.NaN(), math.Inf(1), math.Inf(-1), -1e-10, 5e-324}
	for i, v := range vals {
		if i > 0 {
			js = append(js, ',')
		}
		js = fmt.Appendf(js, `{"timeUnixNano":"%d","asDouble":`, (1000+i)*1e6)
		js = jsonw.AppendFloat(js, v)
		js = append(js, '}')
	}
	js = append(js, `,{"timeUnixNano":"1010000000","asDouble":"2.5"},{"timeUnixNano":"1011000000","asInt":"7"}]`...)
	es, err := parseExemplars(js, 0, 2000)
	if err != nil {
		t.Fatal(err)
	}
	want := append(vals, 2.5, 7)
	if len(es) != len(want) {
		t.Fatalf("%d exemplars, want %d", len(es), len(want))
	}
	for i, e := range es {
		if math.Float64bits(e.Value) != math.Float64bits(want[i]) && !(math.IsNaN(e.Value) && math.IsNaN(want[i])) {
			t.Errorf("exemplar %d: %v, want %v", i, e.Value, want[i])
		}
	}
	for _, bad := range []string{`"Inf"`, `"x"`, `true`} {
		if _, err := parseExemplars([]byte(`[{"timeUnixNano":"1000000000","asDouble":`+bad+`}]`), 0, 2000); err == nil {
			t.Errorf("asDouble %s read as a double", bad)
		}
	}
}
