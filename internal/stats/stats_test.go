package stats

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// gauges decodes an OTLP/JSON request of service svc with one gauge
// "req" (unit "s": req_seconds) point per user u0..u<users-1>, each with
// code=200, at time ts (ns).
func gauges(t testing.TB, svc string, users int, ts int64) *signal.Metrics {
	t.Helper()
	var pts []string
	for i := 0; i < users; i++ {
		pts = append(pts, fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":%d,"attributes":[{"key":"user.id","value":{"stringValue":"u%d"}},{"key":"code","value":{"intValue":"200"}}]}`,
			ts, i, i))
	}
	return decode(t, `{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"`+svc+`"}}]},"scopeMetrics":[{"metrics":[{"name":"req","unit":"s","gauge":{"dataPoints":[`+
		strings.Join(pts, ",")+`]}}]}]}]}`)
}

func decode(t testing.TB, js string) *signal.Metrics {
	t.Helper()
	var m signal.Metrics
	if err := otlp.DecodeMetricsJSON(&m, []byte(js)); err != nil {
		t.Fatal(err)
	}
	return &m
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTest(t testing.TB, cfg Config) (*Stats, *clock) {
	t.Helper()
	if err := cfg.fill(); err != nil {
		t.Fatal(err)
	}
	c := &clock{time.Unix(1_700_000_000, 0)}
	c.t = c.t.Truncate(cfg.Window)
	return newWithClock(cfg, c.now), c
}

func stats(ss ...Stat) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "%s:%d ", s.Name, s.Value)
	}
	return strings.TrimSpace(b.String())
}

func TestTSDBExact(t *testing.T) {
	s, _ := newTest(t, Config{})
	b := gauges(t, "api", 5, 1_700_000_000_000_000_000)
	s.Observe("acme", b, 1000)
	s.Observe("acme", b, 1000) // the same series again: no new ones
	st := s.TSDB("acme", 10)
	if st.HeadStats.NumSeries != 5 || st.HeadStats.MinTime != 1_700_000_000_000 || st.HeadStats.MaxTime != 1_700_000_000_000 {
		t.Errorf("head %+v", st.HeadStats)
	}
	// __name__, code, job, service_name: 1 value each; user_id: 5.
	if st.HeadStats.NumLabelPairs != 9 {
		t.Errorf("label pairs %d, want 9", st.HeadStats.NumLabelPairs)
	}
	if got := stats(st.SeriesCountByMetricName...); got != "req_seconds:5" {
		t.Errorf("by metric %s", got)
	}
	if got, want := stats(st.LabelValueCountByLabelName...), "user_id:5 __name__:1 code:1 job:1 service_name:1"; got != want {
		t.Errorf("label values %s, want %s", got, want)
	}
	// len(value) × series: req_seconds 11×5, user_id 2×5, code 3×5, api 3×5.
	if got, want := stats(st.MemoryInBytesByLabelName...), "__name__:55 code:15 job:15 service_name:15 user_id:10"; got != want {
		t.Errorf("memory %s, want %s", got, want)
	}
	if got, want := stats(st.SeriesCountByLabelValuePair[:4]...), "__name__=req_seconds:5 code=200:5 job=api:5 service_name=api:5"; got != want {
		t.Errorf("pairs %s, want %s", got, want)
	}
	if n := len(s.TSDB("acme", 2).SeriesCountByLabelValuePair); n != 2 {
		t.Errorf("limit 2 gave %d pairs", n)
	}
	if other := s.TSDB("globex", 10); other.HeadStats.NumSeries != 0 || len(other.SeriesCountByMetricName) != 0 {
		t.Errorf("another tenant sees %+v", other)
	}
	sum := s.Summary("", 10)
	if len(sum.Tenants) != 1 || sum.Tenants[0].Series != 5 || sum.Tenants[0].Samples != 10 || sum.Tenants[0].Bytes != 2000 {
		t.Errorf("summary tenants %+v", sum.Tenants)
	}
	if len(sum.Metrics) != 1 || sum.Metrics[0].Metric != "req_seconds" || sum.Metrics[0].Samples != 10 || sum.Metrics[0].Bytes != 2000 {
		t.Errorf("summary metrics %+v", sum.Metrics)
	}
	var ls []string
	for _, l := range sum.Labels {
		ls = append(ls, fmt.Sprintf("%s/%s/%s:%d/%d", l.Tenant, l.Metric, l.Label, l.Values, l.Series))
	}
	if got, want := strings.Join(ls, " "), "acme/req_seconds/user_id:5/5 acme/req_seconds/code:1/5 acme/req_seconds/job:1/5 acme/req_seconds/service_name:1/5"; got != want {
		t.Errorf("labels %s, want %s", got, want)
	}
}

// A histogram with 3 bounds is 4 _bucket series, _sum and _count; a
// summary with 2 quantiles is 2 series, _sum and _count.
func TestHistogramSeries(t *testing.T) {
	s, _ := newTest(t, Config{})
	s.Observe("t", decode(t, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[
		{"name":"lat","unit":"ms","histogram":{"aggregationTemporality":2,"dataPoints":[
			{"timeUnixNano":"1000000000","count":"3","sum":6,"bucketCounts":["1","1","1","0"],"explicitBounds":[1,2.5,5]}]}},
		{"name":"rpc","summary":{"dataPoints":[
			{"timeUnixNano":"1000000000","count":"3","sum":6,"quantileValues":[{"quantile":0.5,"value":1},{"quantile":0.99,"value":3}]}]}}
		]}]}]}`), 100)
	st := s.TSDB("t", 20)
	if got, want := stats(st.SeriesCountByMetricName...), "lat_milliseconds_bucket:4 rpc:2 lat_milliseconds_count:1 lat_milliseconds_sum:1 rpc_count:1 rpc_sum:1"; got != want {
		t.Errorf("by metric %s, want %s", got, want)
	}
	if st.HeadStats.NumSeries != 10 {
		t.Errorf("series %d, want 10", st.HeadStats.NumSeries)
	}
	if got, want := stats(st.LabelValueCountByLabelName...), "__name__:6 le:4 quantile:2"; got != want {
		t.Errorf("label values %s, want %s", got, want)
	}
	var pairs []string
	for _, p := range st.SeriesCountByLabelValuePair {
		if strings.HasPrefix(p.Name, "le=") || strings.HasPrefix(p.Name, "quantile=") {
			pairs = append(pairs, p.Name)
		}
	}
	if got, want := strings.Join(pairs, " "), "le=+Inf le=1 le=2.5 le=5 quantile=0.5 quantile=0.99"; got != want {
		t.Errorf("le/quantile pairs %s, want %s", got, want)
	}
	sum := s.Summary("t", 10)
	// 6 samples from the histogram point, 4 from the summary's.
	if sum.Tenants[0].Samples != 10 {
		t.Errorf("samples %d, want 10", sum.Tenants[0].Samples)
	}
}

// A series stays active through the window after its last point, and a
// series seen in two windows counts once.
func TestWindows(t *testing.T) {
	s, c := newTest(t, Config{Window: time.Minute})
	s.Observe("t", gauges(t, "api", 4, 1e18), 10)
	c.t = c.t.Add(time.Minute)
	s.Observe("t", gauges(t, "api", 2, 1e18), 10) // u0, u1 again
	if n := s.TSDB("t", 10).HeadStats.NumSeries; n != 4 {
		t.Fatalf("window 2: %d series, want 4", n)
	}
	if got := stats(s.TSDB("t", 10).SeriesCountByLabelValuePair[:1]...); got != "__name__=req_seconds:4" {
		t.Fatalf("window 2 pairs %s", got)
	}
	c.t = c.t.Add(time.Minute) // u2, u3 last seen two windows ago
	st := s.TSDB("t", 10)
	if st.HeadStats.NumSeries != 2 || stats(st.LabelValueCountByLabelName[:1]...) != "user_id:2" {
		t.Fatalf("window 3: %+v %v", st.HeadStats, st.LabelValueCountByLabelName)
	}
	if s.used != 2 {
		t.Errorf("table holds %d series, want 2", s.used)
	}
	if l := s.Summary("t", 1).Labels; len(l) != 1 || l[0].Label != "user_id" || l[0].Values != 2 {
		t.Errorf("window 3 labels %+v", l)
	}
	c.t = c.t.Add(time.Minute)
	st = s.TSDB("t", 10)
	if st.HeadStats.NumSeries != 0 || len(st.SeriesCountByLabelValuePair) != 0 || len(s.pairs) != 0 || len(s.metrics) != 0 || s.used != 0 ||
		len(s.fpairs) != 0 || len(s.flabels) != 0 {
		t.Fatalf("window 4: %+v pairs %d metrics %d table %d family pairs %d labels %d", st, len(s.pairs), len(s.metrics), s.used, len(s.fpairs), len(s.flabels))
	}
	// After a gap of many windows a series is new again.
	c.t = c.t.Add(time.Hour)
	s.Observe("t", gauges(t, "api", 3, 1e18), 10)
	if n := s.TSDB("t", 10).HeadStats.NumSeries; n != 3 {
		t.Fatalf("after a gap: %d series, want 3", n)
	}
}

// The table keeps the low 16 bits of a series' window: across a wrap of
// those bits (window ...ffff to ...0000) a series seen in both windows is
// one series, one that skipped a window is gone, and a series whose
// window equals the current one in the low bits but not in the rest
// (2^16 windows ago) is new.
func TestWindowsWrap(t *testing.T) {
	s, c := newTest(t, Config{Window: time.Second})
	c.t = time.Unix(1_700_000_000/(1<<16)*(1<<16)+(1<<16)-1, 0) // window ...ffff
	s.Observe("t", gauges(t, "api", 4, 1e18), 10)
	c.t = c.t.Add(time.Second) // window ...0000
	s.Observe("t", gauges(t, "api", 2, 1e18), 10)
	if n, used := s.TSDB("t", 10).HeadStats.NumSeries, s.used; n != 4 || used != 4 {
		t.Fatalf("after the wrap: %d series (%d in the table), want 4", n, used)
	}
	c.t = c.t.Add(time.Second) // window ...0001: u2, u3 last seen two windows ago
	s.Observe("t", gauges(t, "api", 2, 1e18), 10)
	if n, used := s.TSDB("t", 10).HeadStats.NumSeries, s.used; n != 2 || used != 2 {
		t.Fatalf("two windows after: %d series (%d in the table), want 2", n, used)
	}
	if got := stats(s.TSDB("t", 10).SeriesCountByLabelValuePair[:1]...); got != "__name__=req_seconds:2" {
		t.Fatalf("pairs %s", got)
	}
	// 2^16 windows on, the low bits are those of the last window seen:
	// the series are new (swept at the roll-over), counted once each.
	c.t = c.t.Add((1 << 16) * time.Second)
	s.Observe("t", gauges(t, "api", 3, 1e18), 10)
	if n, used := s.TSDB("t", 10).HeadStats.NumSeries, s.used; n != 3 || used != 3 {
		t.Fatalf("2^16 windows on: %d series (%d in the table), want 3", n, used)
	}
	if got := stats(s.TSDB("t", 10).SeriesCountByLabelValuePair[:1]...); got != "__name__=req_seconds:3" {
		t.Fatalf("pairs 2^16 windows on: %s", got)
	}
}

// Samples/s covers the previous and the current window.
func TestRates(t *testing.T) {
	s, c := newTest(t, Config{Window: time.Minute})
	c.t = c.t.Add(10 * time.Second) // 10 s after start-up
	s.Observe("t", gauges(t, "api", 100, 1e18), 5000)
	sum := s.Summary("t", 10)
	if r := sum.Tenants[0].SamplesPerSec; r != 10 {
		t.Errorf("samples/s %v, want 10", r)
	}
	if r := sum.Metrics[0].BytesPerSec; r != 500 {
		t.Errorf("bytes/s %v, want 500", r)
	}
	c.t = c.t.Add(time.Minute) // previous window: start-up to 60 s, now 70 s
	s.Observe("t", gauges(t, "api", 40, 1e18), 0)
	if r := s.Summary("t", 10).Tenants[0].SamplesPerSec; r != 2 {
		t.Errorf("samples/s %v, want 140/70 = 2", r)
	}
}

// Past max_series new series are not tracked and counted; known ones go on.
func TestMaxSeries(t *testing.T) {
	s, _ := newTest(t, Config{MaxSeries: 3, MaxLabelPairs: 6, MaxMetrics: 1})
	s.Observe("t", gauges(t, "api", 5, 1e18), 10)
	sum := s.Summary("t", 10)
	if sum.TrackedSeries != 3 || sum.OverflowSeries != 2 || sum.Tenants[0].Series != 3 {
		t.Errorf("tracked %d overflow %d series %d", sum.TrackedSeries, sum.OverflowSeries, sum.Tenants[0].Series)
	}
	if len(s.pairs) != 6 || sum.OverflowLabelPairs == 0 {
		t.Errorf("%d pairs, overflow %d", len(s.pairs), sum.OverflowLabelPairs)
	}
	s.Observe("t", decode(t, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"other","gauge":{"dataPoints":[{"timeUnixNano":"1","asInt":"1"}]}}]}]}]}`), 1)
	if sum := s.Summary("t", 10); sum.OverflowMetrics != 1 || len(sum.Metrics) != 1 {
		t.Errorf("metrics %+v overflow %d", sum.Metrics, sum.OverflowMetrics)
	}
}

// The table grows past its first size and finds every series again.
func TestTableGrowth(t *testing.T) {
	s, _ := newTest(t, Config{})
	b := gauges(t, "api", 5000, 1e18)
	s.Observe("t", b, 10)
	s.Observe("t", b, 10)
	if s.used != 5000 || s.TSDB("t", 1).HeadStats.NumSeries != 5000 {
		t.Fatalf("used %d", s.used)
	}
}

func TestObserveAllocs(t *testing.T) {
	s, _ := newTest(t, Config{})
	b := gauges(t, "api", 500, 1e18)
	s.Observe("t", b, 10)
	if n := testing.AllocsPerRun(100, func() { s.Observe("t", b, 10) }); n != 0 {
		t.Errorf("Observe of known series allocates %v times", n)
	}
}

func TestConfig(t *testing.T) {
	for _, c := range []Config{{Window: time.Millisecond}, {MaxSeries: -1}, {MaxSeries: 1 << 31}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

// Label names and values are copied: a later series' labels (built in the
// same scratch) never change the names already counted.
func TestLabelsCopied(t *testing.T) {
	s, _ := newTest(t, Config{})
	s.Observe("t", gauges(t, "checkout", 2, 1e18), 10)
	s.Observe("t", gauges(t, "cart", 3, 1e18), 10)
	st := s.TSDB("t", 100)
	if got, want := stats(st.LabelValueCountByLabelName...), "user_id:3 job:2 service_name:2 __name__:1 code:1"; got != want {
		t.Errorf("label values %s, want %s", got, want)
	}
	if got, want := stats(st.SeriesCountByLabelValuePair[:3]...), "__name__=req_seconds:5 code=200:5 job=cart:3"; got != want {
		t.Errorf("pairs %s, want %s", got, want)
	}
}

// A metric name that needs no mapping is copied out of the batch, whose
// arena the next request reuses.
func TestMetricNameCopied(t *testing.T) {
	s, _ := newTest(t, Config{})
	var m signal.Metrics
	for _, name := range []string{"up", "xy"} {
		m.Reset()
		if err := otlp.DecodeMetricsJSON(&m, []byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"`+name+`","gauge":{"dataPoints":[{"timeUnixNano":"1","asInt":"1"}]}}]}]}]}`)); err != nil {
			t.Fatal(err)
		}
		s.Observe("t", &m, 1)
	}
	if got := stats(s.TSDB("t", 10).SeriesCountByMetricName...); got != "up:1 xy:1" {
		t.Errorf("by metric %s, want up:1 xy:1", got)
	}
}

// Observe and the reports run concurrently (with -race: no data race);
// every batch is counted exactly once.
func TestConcurrent(t *testing.T) {
	s, _ := newTest(t, Config{})
	done := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			b := gauges(t, fmt.Sprint("svc", w), 50, 1e18)
			for range 100 {
				s.Observe(fmt.Sprint("t", w%2), b, 10)
			}
		}()
	}
	go func() {
		defer func() { done <- struct{}{} }()
		for range 100 {
			s.TSDB("t0", 5)
			s.Summary("", 5)
		}
	}()
	for range 5 {
		waittest.Recv(t, done, "the observers and readers")
	}
	sum := s.Summary("", 10)
	if len(sum.Tenants) != 2 || sum.Tenants[0].Series != 100 || sum.Tenants[1].Series != 100 || sum.Tenants[0].Samples != 10000 {
		t.Errorf("tenants %+v", sum.Tenants)
	}
}
