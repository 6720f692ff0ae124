package prom

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
)

func TestMetricName(t *testing.T) {
	for _, c := range []struct {
		name, unit, typ, temp string
		mono                  bool
		want                  string
	}{
		{"http.server.duration", "ms", "histogram", "cumulative", false, "http_server_duration_milliseconds"},
		{"system.cpu.time", "s", "sum", "cumulative", true, "system_cpu_time_seconds_total"},
		{"system.cpu.utilization", "1", "gauge", "unspecified", false, "system_cpu_utilization_ratio"},
		{"system.network.io", "By", "sum", "cumulative", true, "system_network_io_bytes_total"},
		{"http.server.active_requests", "{request}", "sum", "cumulative", false, "http_server_active_requests"},
		{"api-gateway.movie_play_starts", "", "sum", "delta", true, "api_gateway_movie_play_starts_total"},
		{"flamethrower.gauge.0", "", "gauge", "unspecified", false, "flamethrower_gauge_0"},
		{"otelcol_exporter_queue_size", "{batches}", "gauge", "unspecified", false, "otelcol_exporter_queue_size"},
		{"x", "", "exponential_histogram", "delta", false, "x"},
		{"x", "", "bogus", "", false, ""},
		{"net.io", "By/s", "gauge", "unspecified", false, "net_io_bytes_per_second"},
		{"requests", "1", "sum", "cumulative", true, "requests_total"},
		{"requests.total", "", "sum", "cumulative", true, "requests_total"},
		{"rpc.duration", "ms", "summary", "unspecified", false, "rpc_duration_milliseconds"},
	} {
		if got := MetricName(c.name, c.unit, c.typ, c.temp, c.mono); got != c.want {
			t.Errorf("MetricName(%q, %q, %q, %q, %v) = %q, want %q", c.name, c.unit, c.typ, c.temp, c.mono, got, c.want)
		}
	}
}

func TestLabelName(t *testing.T) {
	for key, want := range map[string]string{
		"http.method":      "http_method",
		"http.status_code": "http_status_code",
		"a..b":             "a_b",
		"123abc":           "key_123abc",
		"service.name":     "exported_service_name",
		"job":              "exported_job",
		"le":               "exported_le",
		"__name__":         "exported___name__",
		"":                 "",
		"día":              "d_a",
	} {
		if got := LabelName(key); got != want {
			t.Errorf("LabelName(%q) = %q, want %q", key, got, want)
		}
	}
}

var synthStart = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func defaultSynth() promtest.Synth {
	return promtest.Synth{Start: synthStart, Interval: 15 * time.Second, Points: 240,
		Services: []string{"checkout", "cart"}, Routes: []string{"/a", "/b"},
		CounterStep: 30, Bounds: []float64{0.1, 0.5, 1}, HistStep: []int{1, 2, 1, 0}}
}

func newEngine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
}

func instant(t *testing.T, q storage.Queryable, expr string, ts time.Time) promql.Vector {
	t.Helper()
	qry, err := newEngine().NewInstantQuery(context.Background(), q, nil, expr, ts)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", expr, res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

func byLabel(v promql.Vector, name string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range v {
		out[s.Metric.Get(name)] = s.F
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// The expected values are worked out by hand from the synthetic workload
// (see synth): the counter of route i grows by 30*(i+1) every 15 s, so its
// rate is 2*(i+1)/s, and Prometheus's extrapolation is exact here because
// samples sit on the window's end and every 15 s.
func TestPromQLOverLake(t *testing.T) {
	l := newTestLake(t)
	s := defaultSynth()
	l.Write(t, "acme", 100, s.JSON()) // small row groups: runs span several
	q := adapterOf(t, l).Queryable("acme", Limits{})
	end := s.Start.Add(time.Duration(s.Points-1) * s.Interval)

	v := instant(t, q, `test_queue_depth{service_name="checkout", http_route="/a"}`, end)
	if len(v) != 1 || v[0].F != float64(s.Points-1) {
		t.Fatalf("plain selector: %v", v)
	}
	want := labels.FromStrings("__name__", "test_queue_depth", "http_route", "/a", "job", "checkout", "service_name", "checkout")
	if !labels.Equal(v[0].Metric, want) {
		t.Fatalf("labels %v, want %v", v[0].Metric, want)
	}

	got := byLabel(instant(t, q, `sum by (service_name) (rate(test_requests_total[5m]))`, end), "service_name")
	if len(got) != 2 || !near(got["checkout"], 6) || !near(got["cart"], 6) {
		t.Fatalf("sum by rate: %v, want 6 per service", got)
	}
	got = byLabel(instant(t, q, `increase(test_requests_total{service_name="cart"}[1h])`, end), "http_route")
	if !near(got["/a"], 30*239) || !near(got["/b"], 60*239) {
		t.Fatalf("increase: %v", got)
	}
	v = instant(t, q, `avg_over_time(test_queue_depth{service_name="cart",http_route="/b"}[10m])`, end)
	if len(v) != 1 || !near(v[0].F, 219.5) {
		t.Fatalf("avg_over_time: %v, want 219.5", v)
	}
	// Buckets (0.1, 0.5, 1, +Inf] get 1, 2, 1, 0 per interval: rank 0.9*4
	// = 3.6 falls in (0.5, 1] at 0.6 of its 1 count: 0.5 + 0.5*0.6.
	v = instant(t, q, `histogram_quantile(0.9, sum by (le) (rate(test_latency_seconds_bucket[5m])))`, end)
	if len(v) != 1 || !near(v[0].F, 0.8) {
		t.Fatalf("histogram_quantile: %v, want 0.8", v)
	}
	v = instant(t, q, `sum(test_latency_seconds_count)`, end)
	if len(v) != 1 || v[0].F != 4*4*239 {
		t.Fatalf("_count: %v", v)
	}
	v = instant(t, q, `sum(test_latency_seconds_sum)`, end)
	if len(v) != 1 || !near(v[0].F, 4*4*239*0.25) {
		t.Fatalf("_sum: %v", v)
	}
	v = instant(t, q, `count(test_latency_seconds_bucket)`, end)
	if len(v) != 1 || v[0].F != 2*2*4 {
		t.Fatalf("bucket series: %v", v)
	}
	// Regex on the name, and a name that does not exist.
	v = instant(t, q, `count by (__name__) ({__name__=~"test_.*_total|test_queue_depth"})`, end)
	if got := byLabel(v, "__name__"); len(got) != 2 || got["test_requests_total"] != 4 || got["test_queue_depth"] != 4 {
		t.Fatalf("regex on name: %v", got)
	}
	if v := instant(t, q, `nope_total`, end); len(v) != 0 {
		t.Fatalf("missing metric: %v", v)
	}
	// Before the data: nothing.
	if v := instant(t, q, `test_queue_depth`, s.Start.Add(-time.Hour)); len(v) != 0 {
		t.Fatalf("before the data: %v", v)
	}

	// A range query: one point per minute, each the gauge's index.
	qry, err := newEngine().NewRangeQuery(context.Background(), q, nil, `test_queue_depth{service_name="cart",http_route="/a"}`,
		s.Start, end, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res := qry.Exec(context.Background())
	m, err := res.Matrix()
	if err != nil || len(m) != 1 {
		t.Fatalf("range: %v %v", m, err)
	}
	if len(m[0].Floats) != 60 {
		t.Fatalf("range: %d points, want 60", len(m[0].Floats))
	}
	for k, p := range m[0].Floats {
		if p.F != float64(k*4) {
			t.Fatalf("range point %d = %v, want %d", k, p.F, k*4)
		}
	}
}

func TestLabelsAPI(t *testing.T) {
	l := newTestLake(t)
	l.Write(t, "acme", 0, defaultSynth().JSON())
	a := adapterOf(t, l)
	q, _ := a.Queryable("acme", Limits{}).Querier(0, math.MaxInt64/2_000_000)
	names, _, err := q.LabelValues(context.Background(), "__name__", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"test_latency_seconds_bucket", "test_latency_seconds_count", "test_latency_seconds_sum", "test_queue_depth", "test_requests_total"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("names %v, want %v", names, want)
	}
	ln, _, err := q.LabelNames(context.Background(), nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "test_latency_seconds_bucket"))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ln) != "[__name__ http_route job le service_name]" {
		t.Fatalf("label names %v", ln)
	}
	les, _, err := q.LabelValues(context.Background(), "le", nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "test_latency_seconds_bucket"))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(les) != "[+Inf 0.1 0.5 1]" {
		t.Fatalf("le values %v", les)
	}
}

func TestLimits(t *testing.T) {
	l := newTestLake(t)
	s := defaultSynth()
	l.Write(t, "acme", 0, s.JSON())
	a := adapterOf(t, l)
	end := s.Start.Add(time.Hour)
	for _, lim := range []Limits{{MaxSeries: 3}, {MaxSamples: 50}, {MaxBytes: 100}} {
		qry, err := newEngine().NewInstantQuery(context.Background(), a.Queryable("acme", lim), nil, `count(test_queue_depth)`, end)
		if err != nil {
			t.Fatal(err)
		}
		res := qry.Exec(context.Background())
		if !errors.Is(res.Err, ErrLimit) {
			t.Fatalf("limits %+v: err %v, want ErrLimit", lim, res.Err)
		}
	}
}

// Point attributes whose label names collide are joined with ";" in the
// order of their keys; a point attribute named like a label sluice sets is
// renamed exported_*.
func TestLabelCollisions(t *testing.T) {
	l := newTestLake(t)
	js := fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[%s,%s,%s]},"scopeMetrics":[{"metrics":[
		{"name":"g","gauge":{"dataPoints":[{"attributes":[%s,%s,%s,{"key":"n","value":{"intValue":"7"}}],"timeUnixNano":"%d","asDouble":1.5}]}}]}]}]}`,
		attr("service.name", "svc"), attr("service.namespace", "shop"), attr("service.instance.id", "i-1"),
		attr("a_b", "second"), attr("a.b", "first"), attr("job", "mine"), synthStart.UnixNano())
	l.Write(t, "acme", 0, []byte(js))
	v := instant(t, adapterOf(t, l).Queryable("acme", Limits{}), `g`, synthStart.Add(time.Second))
	want := labels.FromStrings("__name__", "g", "a_b", "first;second", "exported_job", "mine", "instance", "i-1",
		"job", "shop/svc", "n", "7", "service_name", "svc")
	if len(v) != 1 || !labels.Equal(v[0].Metric, want) || v[0].F != 1.5 {
		t.Fatalf("got %v, want %v 1.5", v, want)
	}
}

// Summaries, exponential histograms and delta sums, as docs/query.md says.
func TestOtherTypes(t *testing.T) {
	l := newTestLake(t)
	ts := synthStart.UnixNano()
	js := fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[%s]},"scopeMetrics":[{"metrics":[
		{"name":"rpc.duration","unit":"ms","summary":{"dataPoints":[{"timeUnixNano":"%d","count":"10","sum":20,
			"quantileValues":[{"quantile":0.5,"value":1.5},{"quantile":0.99,"value":3}]}]}},
		{"name":"e","exponentialHistogram":{"aggregationTemporality":2,"dataPoints":[{"timeUnixNano":"%d","count":"5","sum":2.5,
			"scale":0,"zeroCount":"1","positive":{"offset":0,"bucketCounts":["4"]}}]}},
		{"name":"d","sum":{"aggregationTemporality":1,"isMonotonic":true,"dataPoints":[{"timeUnixNano":"%d","asInt":"7"}]}}
	]}]}]}`, attr("service.name", "svc"), ts, ts, ts)
	l.Write(t, "acme", 0, []byte(js))
	q := adapterOf(t, l).Queryable("acme", Limits{})
	at := synthStart.Add(time.Second)
	for expr, want := range map[string]float64{
		`rpc_duration_milliseconds{quantile="0.99"}`: 3,
		`rpc_duration_milliseconds{quantile="0.5"}`:  1.5,
		`rpc_duration_milliseconds_count`:            10,
		`rpc_duration_milliseconds_sum`:              20,
		`e_count`:                                    5,
		`e_sum`:                                      2.5,
		`d_total`:                                    7,
		`histogram_count(e)`:                         5,
		`histogram_sum(e)`:                           2.5,
		`count({__name__=~"e.*"})`:                   3, // e (native), e_sum, e_count
	} {
		v := instant(t, q, expr, at)
		if len(v) != 1 || v[0].F != want {
			t.Errorf("%s = %v, want %v", expr, v, want)
		}
	}
}

// A damaged file fails the query with an error naming it, never a panic.
func TestCorruptFile(t *testing.T) {
	l := newTestLake(t)
	l.Write(t, "acme", 0, defaultSynth().JSON())
	segs, err := l.Catalog.List(context.Background(), catalog.Filter{Table: "metrics"})
	if err != nil || len(segs) == 0 {
		t.Fatal(segs, err)
	}
	p := filepath.Join(l.Root, segs[0].Path)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i < len(b)-200 && i < 40000; i += 7 {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	qry, err := newEngine().NewInstantQuery(context.Background(), adapterOf(t, l).Queryable("acme", Limits{}), nil,
		`sum(rate(test_requests_total[1h]))`, synthStart.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	res := qry.Exec(context.Background())
	if res.Err == nil || !strings.Contains(res.Err.Error(), segs[0].Path) {
		t.Fatalf("err %v, want one naming %s", res.Err, segs[0].Path)
	}
}

// service_name="x" prunes segments by the services the catalog records.
func TestServicePruning(t *testing.T) {
	l := newTestLake(t)
	a, b := defaultSynth(), defaultSynth()
	a.Services, b.Services = []string{"only-a"}, []string{"only-b"}
	l.Write(t, "acme", 0, a.JSON())
	l.Write(t, "acme", 0, b.JSON())
	ad := adapterOf(t, l)
	q := ad.Queryable("acme", Limits{})
	end := synthStart.Add(time.Hour)
	v := instant(t, q, `count(test_queue_depth{service_name="only-b"})`, end)
	if len(v) != 1 || v[0].F != 2 {
		t.Fatalf("got %v", v)
	}
	if n := ad.Stats.Files.Load(); n != 1 {
		t.Fatalf("opened %d files, want 1 (the other service's file pruned)", n)
	}
}

// nameMayMap must never rule out a name the real mapping produces: every
// OTLP name × unit × type gives Prometheus names (with their _bucket, _sum,
// _count) that it accepts, and it rejects names of other metrics.
func TestNameMayMap(t *testing.T) {
	names := []string{"http.server.duration", "total.requests", "requests.total.count", "ratio", "1st.metric",
		"a..b", "api-gateway.movie_play_starts", "x", "ünïcode.metric", "ns:sub:metric", "cpu_ratio_total", "__x__"}
	units := []string{"", "1", "s", "ms", "By", "By/s", "{request}", "total", "1/s", "total/ratio"}
	types := []struct {
		typ, temp string
		mono      bool
	}{{"gauge", "", false}, {"sum", "cumulative", true}, {"sum", "delta", true}, {"sum", "cumulative", false},
		{"histogram", "cumulative", false}, {"exponential_histogram", "delta", false}, {"summary", "", false}}
	for _, n := range names {
		for _, u := range units {
			for _, ty := range types {
				d := metricDesc{otlpName: n, unit: u, mtype: ty.typ, temporality: ty.temp, monotonic: ty.mono}
				d.describe()
				for _, o := range d.outputs {
					if !nameMayMap(n, o.name) {
						t.Errorf("nameMayMap(%q, %q) = false, but unit %q type %s maps it there", n, o.name, u, ty.typ)
					}
				}
			}
		}
	}
	for _, c := range [][2]string{
		{"http.server.duration", "http_server_requests_total"}, {"http.server", "http_client_duration_seconds"},
		{"test.queue.depth", "test_requests_total"}, {"a.b.c", "a_b"},
	} {
		if nameMayMap(c[0], c[1]) {
			t.Errorf("nameMayMap(%q, %q) = true, want false", c[0], c[1])
		}
	}
}

// A __name__ matcher skips, by the catalog's metric names alone, the
// segments that cannot hold the metric.
func TestMetricNamePruning(t *testing.T) {
	l := newTestLake(t)
	l.Write(t, "acme", 0, defaultSynth().JSON())
	ts := synthStart.Add(time.Hour - 30*time.Second).UnixNano()
	other := fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[%s]},"scopeMetrics":[{"metrics":[`+
		`{"name":"other.depth","gauge":{"dataPoints":[{"timeUnixNano":"%d","asInt":"7"}]}}]}]}]}`,
		attr("service.name", "svc"), ts)
	l.Write(t, "acme", 0, []byte(other))
	end := synthStart.Add(time.Hour)
	for _, c := range []struct {
		expr  string
		files int64
	}{
		{`count(test_queue_depth)`, 1},
		{`other_depth`, 1},
		{`count({__name__=~"test_queue_depth|other_depth"})`, 2}, // a regex is not pruned
	} {
		ad := adapterOf(t, l)
		v := instant(t, ad.Queryable("acme", Limits{}), c.expr, end)
		if len(v) == 0 {
			t.Fatalf("%s: no result", c.expr)
		}
		if n := ad.Stats.Files.Load(); n != c.files {
			t.Errorf("%s opened %d files, want %d", c.expr, n, c.files)
		}
	}
}
