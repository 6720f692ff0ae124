package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// sendOTLPMetrics posts one OTLP/HTTP metrics request and fails the test
// unless it is accepted.
func sendOTLPMetrics(t *testing.T, addr string, md pmetric.Metrics) {
	t.Helper()
	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+addr+"/v1/metrics", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OTLP metrics: %d %s", resp.StatusCode, b)
	}
}

// outMetrics: per method (get, put, post) a cumulative exponential
// histogram rpc.duration (seconds) and a counter http.requests, n points
// 15 s apart from t0, each counter point and histogram point with an
// exemplar carrying a trace and span id; and an explicit histogram
// ex.latency (seconds) with an exemplar in each of its three buckets.
func outMetrics(t0 time.Time, n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "checkout")
	rm.Resource().Attributes().PutStr("service.instance.id", "i-1")
	rm.Resource().Attributes().PutStr("host.name", "h1")
	sm := rm.ScopeMetrics().AppendEmpty()
	start := pcommon.NewTimestampFromTime(t0.Add(-time.Minute))
	h := sm.Metrics().AppendEmpty()
	h.SetName("rpc.duration")
	h.SetUnit("s")
	h.SetDescription("RPC latency.")
	eh := h.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	c := sm.Metrics().AppendEmpty()
	c.SetName("http.requests")
	sum := c.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	l := sm.Metrics().AppendEmpty()
	l.SetName("ex.latency")
	l.SetUnit("s")
	lh := l.SetEmptyHistogram()
	lh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	ex := func(es pmetric.ExemplarSlice, at pcommon.Timestamp, v float64, k int) {
		e := es.AppendEmpty()
		e.SetTimestamp(at)
		e.SetDoubleValue(v)
		e.SetTraceID(pcommon.TraceID{0xaa, byte(k), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14})
		e.SetSpanID(pcommon.SpanID{0xbb, byte(k), 1, 2, 3, 4, 5, 6})
		e.FilteredAttributes().PutStr("user.tier", "gold")
	}
	for m, method := range []string{"get", "put", "post"} {
		for i := range n {
			at := pcommon.NewTimestampFromTime(t0.Add(time.Duration(i) * 15 * time.Second))
			k := uint64(i + 1)
			p := eh.DataPoints().AppendEmpty()
			p.SetStartTimestamp(start)
			p.SetTimestamp(at)
			p.Attributes().PutStr("method", method)
			p.SetScale(2)
			p.SetZeroCount(k)
			p.SetZeroThreshold(1e-6)
			p.Positive().SetOffset(int32(-4 + m))
			p.Positive().BucketCounts().FromRaw([]uint64{k, 2 * k, 0, 0, 0, 3 * k})
			p.Negative().SetOffset(1)
			p.Negative().BucketCounts().FromRaw([]uint64{k})
			p.SetCount(8 * k)
			p.SetSum(float64(10*k) + float64(m))
			ex(p.Exemplars(), at-1e6, 0.9, 10*m+i)

			q := sum.DataPoints().AppendEmpty()
			q.SetStartTimestamp(start)
			q.SetTimestamp(at)
			q.Attributes().PutStr("method", method)
			q.SetIntValue(int64(100*m) + int64(7*k))
			ex(q.Exemplars(), at-2e6, float64(k), 100+10*m+i)
		}
	}
	for i := range n {
		at := pcommon.NewTimestampFromTime(t0.Add(time.Duration(i) * 15 * time.Second))
		p := lh.DataPoints().AppendEmpty()
		p.SetStartTimestamp(start)
		p.SetTimestamp(at)
		p.ExplicitBounds().FromRaw([]float64{0.1, 1})
		p.BucketCounts().FromRaw([]uint64{uint64(i + 1), 1, 1})
		p.SetCount(uint64(i + 3))
		p.SetSum(float64(i) + 5)
		for b, v := range []float64{0.05, 0.5, 7} {
			ex(p.Exemplars(), at-pcommon.Timestamp(b+3)*1e6, v, 200+10*i+b)
		}
	}
	return md
}

// TestPRWOutNativeHistogramsIntoPrometheus: `sluice run` forwards OTLP
// exponential histograms with its prometheus_remote_write exporter over
// remote write 1.0 with send_native_histograms: true to a real Prometheus
// 2.42 (--enable-feature=native-histograms). They arrive as native
// histograms: histogram_count, histogram_sum, and histogram_count of a
// rate answer in Prometheus exactly as in sluice's own PromQL, per series
// (sluice's series also carry service_name, so the queries aggregate by
// job, instance and method), Prometheus has no _sum/_count series for
// them, and its exemplar storage serves the exemplars sluice sent (on the
// counter, the native histogram, the _bucket series of their buckets) as
// sluice's own /api/v1/query_exemplars does.
func TestPRWOutNativeHistogramsIntoPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	prom, _ := startPrometheus(t, freePort(t), "global: {}\n", "--web.enable-remote-write-receiver", "--enable-feature=native-histograms,exemplar-storage")
	cfg := writeConfig(t, fmt.Sprintf(`
receivers:
  otlp: {grpc_addr: "", http_addr: 127.0.0.1:0}
lake: {root: %q, flush_interval: 1s}
admin: {addr: 127.0.0.1:0}
query: {addr: 127.0.0.1:0}
shutdown_timeout: 10s
exporters:
  prometheus_remote_write/prom:
    endpoints: [%s/api/v1/write]
    protocol: "1.0"
    send_native_histograms: true
    batch_delay: 20ms
pipelines:
  metrics: {receivers: [otlp], exporters: [lake, prometheus_remote_write/prom]}
  logs: {receivers: [otlp], exporters: [lake]}
  traces: {receivers: [otlp], exporters: [lake]}
`, t.TempDir(), prom))
	s := startQueryRun(t, cfg)
	sl := "http://" + s.query
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
	const n = 5
	sendOTLPMetrics(t, s.http, outMetrics(t0, n))
	at := t0.Add((n-1)*15*time.Second + time.Second)

	queries := []string{
		`sum by (job, instance, method) (histogram_count(rpc_duration_seconds))`,
		`sum by (job, instance, method) (histogram_sum(rpc_duration_seconds))`,
		`sum by (job, instance, method) (histogram_count(rate(rpc_duration_seconds[2m])))`,
		`sum by (job, instance, method) (histogram_sum(increase(rpc_duration_seconds[2m])))`,
	}
	for _, q := range queries {
		want := fmt.Sprint(promMatrix(t, sl, q, at))
		if len(promMatrix(t, sl, q, at)) != 3 {
			t.Fatalf("sluice answers %s with %s, want 3 series", q, want)
		}
		var got string
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got = fmt.Sprint(promMatrix(t, prom, q, at)); got == want {
				break
			}
		}
		if got != want {
			t.Fatalf("%s:\nPrometheus %s\n    sluice %s\nsluice stderr:\n%s", q, got, want, s.stderr)
		}
		t.Logf("%s agrees: %s", q, got)
	}
	// The raw native histogram of one series, bucket by bucket.
	h, ok := nhQuery(t, prom, `rpc_duration_seconds{method="put"}`, at)
	hs, ok2 := nhQuery(t, sl, `rpc_duration_seconds{method="put"}`, at)
	if !ok || !ok2 || len(h) != 1 || len(hs) != 1 || h[0].points[0].h == nil || fmt.Sprint(*h[0].points[0].h) != fmt.Sprint(*hs[0].points[0].h) {
		t.Fatalf("raw native histogram: Prometheus %+v, sluice %+v", h, hs)
	}
	if extra := promMatrix(t, prom, `{__name__=~"rpc_duration_seconds_(sum|count|bucket)"}`, at); len(extra) != 0 {
		t.Fatalf("Prometheus got classic series beside the native histograms: %v", extra)
	}
	// Exemplars (--enable-feature=exemplar-storage): Prometheus serves
	// the ones sluice sent on the counter, the native histogram and the
	// explicit histogram's _bucket series as sluice's own query API does.
	form := url.Values{
		"query": {`{__name__=~"http_requests_total|ex_latency_seconds_bucket|rpc_duration_seconds"}`},
		"start": {fmt.Sprint(t0.Add(-time.Minute).Unix())},
		"end":   {fmt.Sprint(t0.Add(time.Hour).Unix())},
	}
	all := exemplarKeys(queryExemplars(t, sl, http.MethodGet, form))
	if len(all) != 9*n {
		t.Fatalf("sluice answers %d exemplars, want %d", len(all), 9*n)
	}
	// Prometheus 2.42's write handler appends a series' exemplars before
	// its histograms, so the exemplar that comes with the first sample of
	// a native histogram series finds no series yet and is dropped there
	// (its 1.0 receiver, whoever the sender): Prometheus is expected to
	// lack those three.
	var want []string
	first := fmt.Sprintf("@%d", t0.UnixMilli()-1)
	for _, k := range all {
		if !(strings.HasPrefix(k, "rpc_duration_seconds ") && strings.HasSuffix(k, first)) {
			want = append(want, k)
		}
	}
	if len(want) != 9*n-3 {
		t.Fatalf("first native histogram exemplars not found in %v", all)
	}
	var got []string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got = exemplarKeys(queryExemplars(t, prom, http.MethodGet, form)); strings.Join(got, "\n") == strings.Join(want, "\n") {
			break
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("exemplars in Prometheus:\n%s\nsluice:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// exemplarKeys flattens a query_exemplars answer to sorted lines "name
// le | labels value @ms" (series labels other than __name__ and le left
// out: sluice's own PromQL adds service_name to OTLP series).
func exemplarKeys(a exemplarAnswer) []string {
	var out []string
	for _, s := range a {
		for _, e := range s.Exemplars {
			var ls []string
			for k, v := range e.Labels {
				ls = append(ls, k+"="+v)
			}
			sort.Strings(ls)
			out = append(out, fmt.Sprintf("%s %s %s | %s %s @%.0f", s.SeriesLabels["__name__"], s.SeriesLabels["le"], s.SeriesLabels["method"], strings.Join(ls, ","), e.Value, e.Timestamp*1000))
		}
	}
	sort.Strings(out)
	return out
}

// TestPRWOutExemplarsSluiceToSluice: OTLP exemplars go through sluice's
// prometheus_remote_write exporter (2.0, then 1.0) into a second sluice's
// remote-write receiver, and the downstream's /api/v1/query_exemplars
// answers the same exemplars as the upstream's own: on the counter's
// series, on the _bucket series of each exemplar's bucket, on the native
// histogram (2.0; over 1.0 with send_native_histograms), with trace_id,
// span_id and the filtered attribute as labels.
func TestPRWOutExemplarsSluiceToSluice(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, protocol := range []string{"2.0", "1.0"} {
		t.Run(protocol, func(t *testing.T) {
			down := startQueryRun(t, lakeQueryConfig(t, ""))
			up := startQueryRun(t, lakeQueryConfig(t, fmt.Sprintf(`
exporters:
  prometheus_remote_write/down:
    endpoints: [http://%s/api/v1/write]
    protocol: %q
    send_native_histograms: true
    batch_delay: 20ms
pipelines:
  metrics: {receivers: [otlp], exporters: [lake, prometheus_remote_write/down]}
  logs: {receivers: [otlp], exporters: [lake]}
  traces: {receivers: [otlp], exporters: [lake]}
`, down.query, protocol)))
			t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
			const n = 3
			sendOTLPMetrics(t, up.http, outMetrics(t0, n))
			form := url.Values{
				"query": {`{__name__=~"http_requests_total|ex_latency_seconds_bucket|rpc_duration_seconds"}`},
				"start": {fmt.Sprint(t0.Add(-time.Minute).Unix())},
				"end":   {fmt.Sprint(t0.Add(time.Hour).Unix())},
			}
			want := exemplarKeys(queryExemplars(t, "http://"+up.query, http.MethodPost, form))
			// 3 methods x n points on the counter and on the native
			// histogram, 3 buckets x n points on the explicit histogram.
			if len(want) != 3*n+3*n+3*n {
				t.Fatalf("upstream answers %d exemplars, want %d:\n%s", len(want), 9*n, strings.Join(want, "\n"))
			}
			var got []string
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if got = exemplarKeys(queryExemplars(t, "http://"+down.query, http.MethodPost, form)); strings.Join(got, "\n") == strings.Join(want, "\n") {
					break
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("downstream exemplars:\n%s\nupstream:\n%s\nupstream stderr:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), up.stderr)
			}
			t.Logf("%d exemplars agree, e.g. %s", len(got), got[0])
		})
	}
}
