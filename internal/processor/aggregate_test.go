package processor

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// t0 is a whole minute.
var t0 = time.Unix(1_700_000_040, 0).UTC()

type inPoint struct {
	attrs map[string]string
	at    time.Duration // after t0
	v     float64
}

// metricBatch decodes one metric of kind gauge, counter (monotonic
// cumulative sum) or delta (monotonic delta sum) with points pts.
func metricBatch(t *testing.T, name, kind string, pts ...inPoint) *signal.Metrics {
	t.Helper()
	var js []string
	for _, p := range pts {
		var attrs []string
		keys := make([]string, 0, len(p.attrs))
		for k := range p.attrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			attrs = append(attrs, fmt.Sprintf(`{"key":%q,"value":{"stringValue":%q}}`, k, p.attrs[k]))
		}
		js = append(js, fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":%v,"attributes":[%s]}`, t0.Add(p.at).UnixNano(), p.v, strings.Join(attrs, ",")))
	}
	data := `{"dataPoints":[` + strings.Join(js, ",") + `]`
	switch kind {
	case "gauge":
		data = `"gauge":` + data + `}`
	case "counter":
		data = `"sum":` + data + `,"aggregationTemporality":2,"isMonotonic":true}`
	case "delta":
		data = `"sum":` + data + `,"aggregationTemporality":1,"isMonotonic":true}`
	}
	doc := `{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"api"}}]},"scopeMetrics":[{"metrics":[{"name":"` +
		name + `",` + data + `}]}]}]}`
	var m signal.Metrics
	if err := otlp.DecodeMetricsJSON(&m, []byte(doc)); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	return &m
}

// flushed runs m.Flush at t0+at and returns the emitted points as
// "tenant labels @seconds-after-t0 = value", sorted.
func flushed(t *testing.T, m *Metrics, at time.Duration) []string {
	t.Helper()
	var out []string
	_, err := m.Flush(t0.Add(at), func(tenant string, b *signal.Metrics) error {
		for i, l := range labelsOf(b) {
			out = append(out, fmt.Sprintf("%s %s @%ds = %g", tenant, l, (b.Time[i]-t0.UnixNano())/1e9, b.Value(i)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func parseWith(t *testing.T, y string) (*Rules, *Metrics) {
	t.Helper()
	m, _ := NewMetrics(nil)
	r, err := Parse([]byte(y), m)
	if err != nil {
		t.Fatal(err)
	}
	return r, m
}

func wantLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("emitted:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAggregateOutputsHandComputed(t *testing.T) {
	r, m := parseWith(t, `
metrics:
  - name: by-path
    action: aggregate
    match: req
    interval: 1m
    flush_delay: 0s
    by: [path]
    outputs: [sum, count, min, max, avg, last, 'quantiles(0.5, 1)', histogram_bucket]
`)
	a := map[string]string{"path": "/x", "host": "a"}
	b := map[string]string{"path": "/x", "host": "b"}
	y := map[string]string{"path": "/y", "host": "a"}
	in := metricBatch(t, "req", "gauge",
		inPoint{a, 5 * time.Second, 1}, inPoint{b, 10 * time.Second, 3}, inPoint{a, 20 * time.Second, 50},
		inPoint{y, 30 * time.Second, 7}, inPoint{a, 65 * time.Second, 10})
	s := &Scratch{Tenant: "t1"}
	if changed, kept := r.ProcessMetrics(in, s); !changed || kept != 0 {
		t.Fatalf("changed=%v kept=%d: the inputs are dropped", changed, kept)
	}
	if got := flushed(t, m, 59*time.Second); len(got) != 0 {
		t.Fatalf("emitted before the interval ended: %v", got)
	}
	// Interval [t0, t0+1m): /x has 1, 3, 50; /y has 7.
	p := `t1 {__name__="req:1m_by_path_`
	wantLines(t, flushed(t, m, 60*time.Second),
		p+`sum", path="/x"} @60s = 54`, p+`count", path="/x"} @60s = 3`, p+`min", path="/x"} @60s = 1`,
		p+`max", path="/x"} @60s = 50`, p+`avg", path="/x"} @60s = 18`, p+`last", path="/x"} @60s = 50`,
		p+`quantiles", path="/x", quantile="0.5"} @60s = 3`, p+`quantiles", path="/x", quantile="1"} @60s = 50`,
		p+`histogram_bucket", path="/x", vmrange="9.5e-1...1.0e0"} @60s = 1`,
		p+`histogram_bucket", path="/x", vmrange="2.5e0...3.0e0"} @60s = 1`,
		p+`histogram_bucket", path="/x", vmrange="4.5e1...5.0e1"} @60s = 1`,
		p+`sum", path="/y"} @60s = 7`, p+`count", path="/y"} @60s = 1`, p+`min", path="/y"} @60s = 7`,
		p+`max", path="/y"} @60s = 7`, p+`avg", path="/y"} @60s = 7`, p+`last", path="/y"} @60s = 7`,
		p+`quantiles", path="/y", quantile="0.5"} @60s = 7`, p+`quantiles", path="/y", quantile="1"} @60s = 7`,
		p+`histogram_bucket", path="/y", vmrange="6.5e0...7.0e0"} @60s = 1`,
	)
	// Emitted once: a second flush has nothing for that interval.
	if got := flushed(t, m, 61*time.Second); len(got) != 0 {
		t.Fatalf("emitted twice: %v", got)
	}
	// A point of the emitted interval is late: kept as it was, counted.
	late := metricBatch(t, "req", "gauge", inPoint{a, 50 * time.Second, 2})
	if _, kept := r.ProcessMetrics(late, s); kept != 1 {
		t.Fatalf("late point: kept %d, want 1 (not taken)", kept)
	}
	if c := counterValue(m.aggLate.WithLabelValues("by-path")); c != 1 {
		t.Fatalf("late counter %v", c)
	}
	got := flushed(t, m, 120*time.Second)
	if len(got) != 9 || !strings.Contains(strings.Join(got, "\n"), p+`sum", path="/x"} @120s = 10`) {
		t.Fatalf("second interval: %v", got)
	}
}

// TestAggregateCountersWithResets: total (running, reset-aware), increase
// (per interval) and rate_sum (per series increase over the time since
// the series' previous sample, summed) against hand-computed values.
func TestAggregateCountersWithResets(t *testing.T) {
	r, m := parseWith(t, `
metrics:
  - name: ctr
    action: aggregate
    interval: 1m
    flush_delay: 0s
    without: [host]
    outputs: [total, increase, rate_sum]
    keep_input: true
`)
	h1 := map[string]string{"host": "a"}
	h2 := map[string]string{"host": "b"}
	s := &Scratch{Tenant: "t"}
	in := metricBatch(t, "c", "counter",
		inPoint{h1, 0, 10}, inPoint{h2, 10 * time.Second, 100}, inPoint{h1, 20 * time.Second, 15},
		inPoint{h1, 40 * time.Second, 3}, // reset: +3
		inPoint{h2, 50 * time.Second, 130})
	if changed, kept := r.ProcessMetrics(in, s); changed || kept != 5 {
		t.Fatalf("keep_input: changed=%v kept=%d", changed, kept)
	}
	// h1: +5 (0s->20s), +3 (reset at 40s): 8 over 40s; h2: +30 over 40s.
	p := `t {__name__="c_total:1m_without_host_`
	wantLines(t, flushed(t, m, 60*time.Second),
		p+`total", job="api", service_name="api"} @60s = 38`,
		p+`increase", job="api", service_name="api"} @60s = 38`,
		p+`rate_sum", job="api", service_name="api"} @60s = 0.95`)
	// h1 at 60s: +5 since 40s (20s); h2 silent.
	r.ProcessMetrics(metricBatch(t, "c", "counter", inPoint{h1, 60 * time.Second, 8}), s)
	wantLines(t, flushed(t, m, 120*time.Second),
		p+`total", job="api", service_name="api"} @120s = 43`,
		p+`increase", job="api", service_name="api"} @120s = 5`,
		p+`rate_sum", job="api", service_name="api"} @120s = 0.25`)
	// Delta sums are their own increase.
	r.ProcessMetrics(metricBatch(t, "d", "delta", inPoint{h1, 125 * time.Second, 2}, inPoint{h2, 130 * time.Second, 3}), s)
	got := flushed(t, m, 180*time.Second)
	d := `t {__name__="d_total:1m_without_host_`
	if j := strings.Join(got, "\n"); !strings.Contains(j, d+`total", job="api", service_name="api"} @180s = 5`) ||
		!strings.Contains(j, d+`increase", job="api", service_name="api"} @180s = 5`) {
		t.Fatalf("delta sums: %v", got)
	}
}

func TestDownsampleHandComputed(t *testing.T) {
	r, m := parseWith(t, `
metrics:
  - {name: one, action: downsample, match: temp, interval: 1m, flush_delay: 0s, outputs: [avg]}
  - {name: many, action: downsample, match: hum, interval: 30s, flush_delay: 5s, outputs: [min, max, sum, count, last]}
`)
	a := map[string]string{"host": "a"}
	b := map[string]string{"host": "b"}
	s := &Scratch{Tenant: "t"}
	r.ProcessMetrics(metricBatch(t, "temp", "gauge",
		inPoint{a, 0, 1}, inPoint{a, 15 * time.Second, 2}, inPoint{b, 20 * time.Second, 10},
		inPoint{a, 30 * time.Second, 6}, inPoint{a, 45 * time.Second, 3}), s)
	r.ProcessMetrics(metricBatch(t, "hum", "gauge",
		inPoint{a, 0, 4}, inPoint{a, 10 * time.Second, 2}, inPoint{a, 20 * time.Second, 3}, inPoint{a, 40 * time.Second, 9}), s)
	// hum [0s, 30s) ends at 30s, emitted from 35s; temp at 60s.
	h := `t {__name__="hum:30s_`
	wantLines(t, flushed(t, m, 35*time.Second),
		h+`min", host="a", job="api", service_name="api"} @30s = 2`,
		h+`max", host="a", job="api", service_name="api"} @30s = 4`,
		h+`sum", host="a", job="api", service_name="api"} @30s = 9`,
		h+`count", host="a", job="api", service_name="api"} @30s = 3`,
		h+`last", host="a", job="api", service_name="api"} @30s = 3`)
	// One output: the series itself, under its own name and labels.
	got := flushed(t, m, 60*time.Second)
	wantLines(t, got[:2],
		`t {__name__="temp", host="a", job="api", service_name="api"} @60s = 3`,
		`t {__name__="temp", host="b", job="api", service_name="api"} @60s = 10`)
}

// TestAggregateSurvivesReload: state is kept by rule name across a reload
// of the same rule (no interval lost or emitted twice); a changed rule
// starts over, and its old intervals are still emitted once.
func TestAggregateSurvivesReload(t *testing.T) {
	const y = "metrics:\n  - {name: s, action: aggregate, interval: 1m, flush_delay: 0s, by: [host], outputs: [sum]}\n"
	m, _ := NewMetrics(nil)
	r1, err := Parse([]byte(y), m)
	if err != nil {
		t.Fatal(err)
	}
	a := map[string]string{"host": "a"}
	s := &Scratch{Tenant: "t"}
	r1.ProcessMetrics(metricBatch(t, "g", "gauge", inPoint{a, time.Second, 1}), s)
	r2, _ := Parse([]byte(y), m) // reload, same rule
	r2.ProcessMetrics(metricBatch(t, "g", "gauge", inPoint{a, 2 * time.Second, 2}), s)
	wantLines(t, flushed(t, m, time.Minute), `t {__name__="g:1m_by_host_sum", host="a"} @60s = 3`)
	r2.ProcessMetrics(metricBatch(t, "g", "gauge", inPoint{a, 61 * time.Second, 5}), s)
	r3, _ := Parse([]byte(strings.Replace(y, "[sum]", "[sum, count]", 1)), m) // changed rule
	r3.ProcessMetrics(metricBatch(t, "g", "gauge", inPoint{a, 62 * time.Second, 7}), s)
	wantLines(t, flushed(t, m, 2*time.Minute),
		`t {__name__="g:1m_by_host_count", host="a"} @120s = 1`,
		`t {__name__="g:1m_by_host_sum", host="a"} @120s = 5`,
		`t {__name__="g:1m_by_host_sum", host="a"} @120s = 7`)
	if got := flushed(t, m, 3*time.Minute); len(got) != 0 {
		t.Fatalf("emitted again: %v", got)
	}
	// The retired state is forgotten once it stayed empty long enough.
	if n := len(m.aggs.m); n != 2 {
		t.Fatalf("%d aggregators, want the rule's and the retired one", n)
	}
	for range retiredFlushes {
		flushed(t, m, 3*time.Minute)
	}
	if n := len(m.aggs.m); n != 1 {
		t.Fatalf("%d aggregators after %d empty flushes, want 1", n, retiredFlushes)
	}
}

func TestAggregateConfigErrors(t *testing.T) {
	for y, want := range map[string]string{
		"{name: x, action: aggregate, outputs: [sum]}":                                      "interval",
		"{name: x, action: aggregate, interval: 7s, outputs: [sum]}":                        "does not divide a day",
		"{name: x, action: aggregate, interval: 1m}":                                        "outputs is required",
		"{name: x, action: aggregate, interval: 1m, outputs: [median]}":                     "unknown output",
		"{name: x, action: aggregate, interval: 1m, outputs: ['quantiles(2)']}":             "not a number in [0, 1]",
		"{name: x, action: aggregate, interval: 1m, outputs: [sum, sum]}":                   "given twice",
		"{name: x, action: aggregate, interval: 1m, outputs: [sum], by: [a], without: [b]}": "one of by and without",
		"{name: x, action: downsample, interval: 1m, outputs: [total]}":                     "not a downsample output",
		"{name: x, action: downsample, interval: 1m, outputs: [avg], by: [a]}":              "per series",
		"{name: x, action: drop, interval: 1m}":                                             "only for actions aggregate and downsample",
		"{name: x, action: aggregate, interval: 1m, outputs: [sum], flush_delay: -1s}":      "negative",
	} {
		_, err := Parse([]byte("metrics:\n  - "+y+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", y, err, want)
		}
	}
}

// TestAggregateReloadUnderLoad: requests feed an aggregate rule from
// several goroutines while the rules file is reloaded (same rule) and a
// flusher emits concurrently; every point is counted exactly once in the
// emitted output.
func TestAggregateReloadUnderLoad(t *testing.T) {
	const y = "metrics:\n  - {name: cnt, action: aggregate, interval: 1m, flush_delay: 0s, by: [host], outputs: [count, sum]}\n"
	m, _ := NewMetrics(nil)
	first, err := Parse([]byte(y), m)
	if err != nil {
		t.Fatal(err)
	}
	var cur atomic.Pointer[Rules]
	cur.Store(first)
	var mu sync.Mutex
	var count, sum float64
	emit := func(_ string, b *signal.Metrics) error {
		mu.Lock()
		defer mu.Unlock()
		for i, l := range labelsOf(b) {
			switch l.Get(labels.MetricName) {
			case "g:1m_by_host_count":
				count += b.Value(i)
			case "g:1m_by_host_sum":
				sum += b.Value(i)
			}
		}
		return nil
	}
	const workers, batches, per = 4, 50, 20
	// progress[w]: the time (after t0) of worker w's next points; intervals
	// that ended by the smallest are complete and may be flushed.
	var progress [workers]atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &Scratch{Tenant: "t"}
			for k := range batches {
				// Time moves forward 5s a batch: intervals end and are
				// flushed while others fill.
				at := time.Duration(k) * 5 * time.Second
				progress[w].Store(int64(at))
				var pts []inPoint
				for p := range per {
					pts = append(pts, inPoint{map[string]string{"host": fmt.Sprint("h", p%3)}, at + time.Duration(w)*time.Millisecond, 1})
				}
				cur.Load().ProcessMetrics(metricBatch(t, "g", "gauge", pts...), s)
			}
			progress[w].Store(int64(time.Hour))
		}()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			r, err := Parse([]byte(y), m) // reload
			if err != nil {
				t.Error(err)
				return
			}
			cur.Store(r)
			// Flush what no worker can still feed.
			low := int64(time.Hour)
			for w := range workers {
				low = min(low, progress[w].Load())
			}
			if _, err := m.Flush(t0.Add(time.Duration(low)), emit); err != nil {
				t.Error(err)
			}
		}
	}()
	waittest.Wait(t, &wg, "the feeding workers")
	close(stop)
	waittest.Recv(t, done, "the reloader once stopped")
	if _, err := m.Flush(t0.Add(10*time.Minute), emit); err != nil {
		t.Fatal(err)
	}
	if want := float64(workers * batches * per); count != want || sum != want {
		t.Fatalf("emitted count %v and sum %v, want %v each", count, sum, want)
	}
	if late := counterValue(m.aggLate.WithLabelValues("cnt")); late != 0 {
		t.Fatalf("%v late points", late)
	}
	if intervals := counterValue(m.aggEmitted.WithLabelValues("cnt")) / 6; intervals != 5 {
		t.Fatalf("%v intervals emitted, want 5 (250s of points)", intervals)
	}
}

// TestVMRangeAsVmagent: histogram_bucket's buckets are vmagent's (the
// VictoriaMetrics histogram): 18 linear buckets a power of ten holding
// their upper bound, 0 and tiny and huge values in buckets of their own,
// negative values and NaN not counted.
func TestVMRangeAsVmagent(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0...0"}, {1e-10, "0...1.0e-9"}, {1e-9, "0...1.0e-9"}, {1.2e-9, "1.0e-9...1.5e-9"},
		{1.2, "1.0e0...1.5e0"}, {1.5, "1.0e0...1.5e0"}, {1.51, "1.5e0...2.0e0"}, {9.99, "9.5e0...1.0e1"},
		{10, "9.5e0...1.0e1"}, {0.3, "2.5e-1...3.0e-1"}, {12345, "1.0e4...1.5e4"},
		{1e18, "9.5e17...1.0e18"}, {2e18, "1.0e18...+Inf"}, {math.Inf(1), "1.0e18...+Inf"},
	} {
		b, ok := vmBucket(tc.v)
		if !ok || vmRange(b) != tc.want {
			t.Errorf("vmBucket(%g) = %d %v, range %q; want %q", tc.v, b, ok, vmRange(b), tc.want)
		}
	}
	for _, v := range []float64{-1, -1e-12, math.NaN(), math.Inf(-1)} {
		if _, ok := vmBucket(v); ok {
			t.Errorf("vmBucket(%g) counted; vmagent skips negative values and NaN", v)
		}
	}
}

// TestAggregateHistograms: output histogram sums explicit-bucket histogram
// points per group and interval: a cumulative series counts with its last
// point of the interval, delta points all add; a point whose bounds differ
// from its group's is not taken (kept, counted as overflow); the output
// keeps the input's temporality.
func TestAggregateHistograms(t *testing.T) {
	r, m := parseWith(t, `
metrics:
  - name: lat-by-path
    action: aggregate
    match: '{__name__=~"lat|latd"}'
    interval: 1m
    flush_delay: 0s
    by: [path]
    outputs: [histogram, sum]
`)
	pt := func(host, path string, at time.Duration, bounds string, counts string, count int, sum float64) string {
		return fmt.Sprintf(`{"timeUnixNano":"%d","count":"%d","sum":%g,"bucketCounts":[%s],"explicitBounds":[%s],"attributes":[{"key":"host","value":{"stringValue":%q}},{"key":"path","value":{"stringValue":%q}}]}`,
			t0.Add(at).UnixNano(), count, sum, counts, bounds, host, path)
	}
	js := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[` +
		`{"name":"lat","histogram":{"aggregationTemporality":2,"dataPoints":[` + strings.Join([]string{
		pt("a", "/x", 5*time.Second, "0.1,1", `"1","2","0"`, 3, 1.5),
		pt("b", "/x", 10*time.Second, "0.1,1", `"0","1","1"`, 2, 3),
		pt("a", "/x", 20*time.Second, "0.1,1", `"2","3","1"`, 6, 4),
		pt("a", "/y", 30*time.Second, "0.1,1", `"5","0","0"`, 5, 0.25),
		pt("c", "/x", 40*time.Second, "0.5,1", `"1","0","0"`, 1, 0.1), // other bounds: kept
	}, ",") + `]}},` +
		`{"name":"latd","histogram":{"aggregationTemporality":1,"dataPoints":[` + strings.Join([]string{
		pt("a", "/z", 5*time.Second, "0.1,1", `"1","0","0"`, 1, 0.05),
		pt("b", "/z", 25*time.Second, "0.1,1", `"0","2","0"`, 2, 1),
	}, ",") + `]}}]}]}]}`
	var in signal.Metrics
	if err := otlp.DecodeMetricsJSON(&in, []byte(js)); err != nil {
		t.Fatal(err)
	}
	in.ComputeSeriesIDs()
	if _, kept := r.ProcessMetrics(&in, &Scratch{Tenant: "t1"}); kept != 1 || labelsOf(&in)[0].Get("host") != "c" {
		t.Fatalf("kept %d points (%v), want only host c's, whose bounds differ", kept, labelsOf(&in))
	}
	if got := counterValue(m.aggOverflow.WithLabelValues("lat-by-path")); got != 1 {
		t.Errorf("overflow points %v, want 1 (the point with other bounds)", got)
	}
	var got []string
	if _, err := m.Flush(t0.Add(time.Minute), func(tenant string, b *signal.Metrics) error {
		for i, l := range labelsOf(b) {
			d := b.Descs[b.Desc[i]]
			got = append(got, fmt.Sprintf("%s %s type=%v temporality=%v bounds=%v counts=%v count=%d sum=%g",
				tenant, l, d.Type, d.Temporality, b.F64[b.Bounds[i].Start:b.Bounds[i].End], b.U64[b.BucketCounts[i].Start:b.BucketCounts[i].End], b.Count[i], b.Sum[i]))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	hist, cum, delta := signal.MetricHistogram, signal.TemporalityCumulative, signal.TemporalityDelta
	want := []string{
		fmt.Sprintf(`t1 {__name__="lat:1m_by_path_histogram", path="/x"} type=%v temporality=%v bounds=[0.1 1] counts=[2 4 2] count=8 sum=7`, hist, cum),
		fmt.Sprintf(`t1 {__name__="lat:1m_by_path_histogram", path="/y"} type=%v temporality=%v bounds=[0.1 1] counts=[5 0 0] count=5 sum=0.25`, hist, cum),
		fmt.Sprintf(`t1 {__name__="latd:1m_by_path_histogram", path="/z"} type=%v temporality=%v bounds=[0.1 1] counts=[1 2 0] count=3 sum=1.05`, hist, delta),
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("emitted:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
