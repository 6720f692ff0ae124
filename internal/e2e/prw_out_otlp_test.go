package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// apiBody GETs path from a query API and returns the answer's body, or ""
// with the status when it is not 200.
func apiBody(t *testing.T, base, path string) string {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("status %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

// TestRemoteWriteToOTLPSluiceToSluice: remote write (2.0 with metadata,
// exemplars, start timestamps, an integer native histogram and a
// custom-bucket histogram; 1.0 with its family metadata) into `sluice
// run`, forwarded by an otlp exporter to a second sluice: the remote-write
// records become OTLP (native histogram -> exponential histogram, custom
// buckets -> explicit histogram, metadata type/unit/help and exemplars
// kept), and the downstream's PromQL, /api/v1/metadata and
// /api/v1/query_exemplars answer byte for byte what the upstream's do.
func TestRemoteWriteToOTLPSluiceToSluice(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	down := startQueryRun(t, lakeQueryConfig(t, ""))
	up := startQueryRun(t, lakeQueryConfig(t, fmt.Sprintf(`
exporters:
  otlp/down:
    endpoints: [http://%s]
    batch_delay: 20ms
pipelines:
  metrics: {receivers: [otlp, prometheus_remote_write], exporters: [lake, otlp/down]}
  logs: {receivers: [otlp], exporters: [lake]}
  traces: {receivers: [otlp], exporters: [lake]}
`, down.http)))
	upBase, downBase := "http://"+up.query, "http://"+down.query
	api, err := remoteapi.NewAPI(upBase, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Second).UnixMilli()

	st := writev2.NewSymbolTable()
	refs := func(kv ...string) []uint32 {
		var r []uint32
		for _, s := range kv {
			r = append(r, st.Symbolize(s))
		}
		return r
	}
	nh := func(k int64) *histogram.Histogram {
		return &histogram.Histogram{Count: uint64(12 * k), ZeroCount: uint64(k), ZeroThreshold: 0.001, Sum: 12.5 * float64(k), Schema: 1,
			PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}, {Offset: 2, Length: 1}}, PositiveBuckets: []int64{2 * k, k, -k},
			NegativeSpans: []histogram.Span{{Offset: -1, Length: 1}}, NegativeBuckets: []int64{4 * k}}
	}
	cb := func(k int64) *histogram.Histogram {
		return &histogram.Histogram{Schema: histogram.CustomBucketsSchema, Count: uint64(7 * k), Sum: 4.5 * float64(k),
			PositiveSpans: []histogram.Span{{Offset: 0, Length: 3}}, PositiveBuckets: []int64{k, k, 2 * k}, CustomValues: []float64{0.25, 1}}
	}
	v2 := &writev2.Request{}
	for i := range int64(4) {
		ts := t0 + 15000*i
		v2.Timeseries = append(v2.Timeseries,
			writev2.TimeSeries{LabelsRefs: refs("__name__", "rwo_requests_total", "code", "200", "job", "api"),
				Samples:   []writev2.Sample{{Value: float64(10 + 5*i), Timestamp: ts, StartTimestamp: t0 - 60000}},
				Exemplars: []writev2.Exemplar{{LabelsRefs: refs("trace_id", fmt.Sprintf("%032x", 100+i)), Value: 1, Timestamp: ts - 5}},
				Metadata:  writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: st.Symbolize("Requests served."), UnitRef: st.Symbolize("")}},
			writev2.TimeSeries{LabelsRefs: refs("__name__", "rwo_latency_seconds", "job", "api"),
				Histograms: []writev2.Histogram{writev2.FromIntHistogram(t0-60000, ts, nh(i+1))},
				Exemplars:  []writev2.Exemplar{{LabelsRefs: refs("trace_id", fmt.Sprintf("%032x", 200+i), "span_id", fmt.Sprintf("%016x", 7+i)), Value: 0.7, Timestamp: ts - 3}},
				Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_HISTOGRAM, HelpRef: st.Symbolize("Latency."), UnitRef: st.Symbolize("seconds")}},
			writev2.TimeSeries{LabelsRefs: refs("__name__", "rwo_size_bytes", "job", "api"),
				Histograms: []writev2.Histogram{writev2.FromIntHistogram(t0-60000, ts, cb(i+1))},
				Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_HISTOGRAM, HelpRef: st.Symbolize("Sizes."), UnitRef: st.Symbolize("bytes")}},
		)
	}
	v2.Symbols = st.Symbols()
	if _, err := api.Write(ctx, remoteapi.WriteV2MessageType, v2); err != nil {
		t.Fatalf("2.0 write: %v", err)
	}
	v1 := &prompb.WriteRequest{
		Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "rwo_heap_bytes"}, {Name: "job", Value: "api"}},
			Samples: []prompb.Sample{{Value: 1024, Timestamp: t0}, {Value: 2048, Timestamp: t0 + 15000}}}},
		Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "rwo_heap_bytes", Help: "Heap in use.", Unit: "bytes"}},
	}
	if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, v1); err != nil {
		t.Fatalf("1.0 write: %v", err)
	}

	at := fmt.Sprintf("%.3f", float64(t0+50000)/1000)
	q := func(expr string) string {
		return "/api/v1/query?" + url.Values{"query": {expr}, "time": {at}}.Encode()
	}
	paths := []string{
		q(`{__name__=~"rwo_.*"}[5m]`),
		q(`rwo_latency_seconds`),
		q(`histogram_count(rate(rwo_latency_seconds[1m]))`),
		q(`histogram_quantile(0.9, rwo_size_bytes)`),
		q(`histogram_sum(rwo_size_bytes)`),
		q(`rate(rwo_requests_total[1m])`),
		"/api/v1/metadata?metric=rwo_requests_total",
		"/api/v1/metadata?metric=rwo_latency_seconds",
		"/api/v1/metadata?metric=rwo_size_bytes",
		"/api/v1/metadata?metric=rwo_heap_bytes",
		"/api/v1/query_exemplars?" + url.Values{"query": {`{__name__=~"rwo_.*"}`}, "start": {fmt.Sprint(t0/1000 - 60)}, "end": {fmt.Sprint(t0/1000 + 3600)}}.Encode(),
	}
	// The upstream's own answers, checked for what they must hold.
	want := map[string]string{}
	for _, p := range paths {
		want[p] = apiBody(t, upBase, p)
	}
	for p, needs := range map[string][]string{
		paths[0]:  {`"histograms":[[`, `"rwo_size_bytes"`, `"rwo_heap_bytes"`, `"rwo_requests_total"`},
		paths[3]:  {`"value":[`},
		paths[6]:  {`"type":"counter"`, `"help":"Requests served."`},
		paths[7]:  {`"type":"histogram"`, `"unit":"seconds"`},
		paths[9]:  {`"type":"gauge"`, `"unit":"bytes"`, `"help":"Heap in use."`},
		paths[10]: {`"trace_id":"000000000000000000000000000000c8"`, `"span_id":"0000000000000007"`, `"trace_id":"00000000000000000000000000000064"`},
	} {
		for _, n := range needs {
			if !strings.Contains(want[p], n) {
				t.Fatalf("upstream %s: %s lacks %s", p, want[p], n)
			}
		}
	}
	for _, p := range paths {
		var got string
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if got = apiBody(t, downBase, p); got == want[p] {
				break
			}
		}
		if got != want[p] {
			t.Fatalf("%s:\ndownstream %s\n  upstream %s", p, got, want[p])
		}
	}
	t.Logf("%d answers identical upstream and downstream", len(paths))
}
