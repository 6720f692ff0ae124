package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// rwSeries is one series of a matrix answer.
type rwSeries struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

func promMatrix(t *testing.T, base, expr string, at time.Time) []rwSeries {
	t.Helper()
	resp, err := http.PostForm(base+"/api/v1/query", url.Values{"query": {expr}, "time": {fmt.Sprintf("%.3f", float64(at.UnixMilli())/1000)}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &a); err != nil || a.Status != "success" {
		t.Fatalf("%s: %s (%v)", expr, b, err)
	}
	var out []rwSeries
	switch a.Data.ResultType {
	case "matrix":
		json.Unmarshal(a.Data.Result, &out)
	case "vector":
		var vs []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		json.Unmarshal(a.Data.Result, &vs)
		for _, v := range vs {
			out = append(out, rwSeries{Metric: v.Metric, Values: [][2]any{v.Value}})
		}
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i].Metric) < fmt.Sprint(out[j].Metric) })
	return out
}

// TestRemoteWriteRoundTrip sends remote write 1.0 and 2.0 with the
// reference client (client_golang/exp/api/remote, the protocol layer of
// Prometheus's storage/remote) to a real `sluice run` and reads the series
// back from its PromQL API (a native histogram as a native histogram):
// exactly the sent names and labels (job,
// instance, le and service_name included, no suffix added), identical
// values and timestamps, and a stale marker that ends the series.
func TestRemoteWriteRoundTrip(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr))
	base := "http://" + qaddr
	api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
	stale := math.Float64frombits(value.StaleNaN)
	v1 := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "instance", Value: "a:9100"}, {Name: "__name__", Value: "rw_requests_total"}, {Name: "job", Value: "api"}, {Name: "code", Value: "200"}},
			Samples: []prompb.Sample{{Value: 1, Timestamp: t0}, {Value: 2.5, Timestamp: t0 + 15000}, {Value: 7, Timestamp: t0 + 30000}, {Value: stale, Timestamp: t0 + 45000}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "rw_latency:bucket"}, {Name: "le", Value: "0.5"}, {Name: "service_name", Value: "svc"}},
			Samples: []prompb.Sample{{Value: 3, Timestamp: t0}}},
	}}
	// Sent twice, as a sender retrying after a lost answer would: the
	// answers below must not change (PromQL reads one sample per series
	// and millisecond).
	for range 2 {
		if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, v1); err != nil {
			t.Fatalf("1.0 write: %v", err)
		}
	}
	st := writev2.NewSymbolTable()
	v2 := &writev2.Request{Timeseries: []writev2.TimeSeries{{
		LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("rw2_temperature"), st.Symbolize("room"), st.Symbolize("b")},
		Samples:    []writev2.Sample{{Value: 21.5, Timestamp: t0, StartTimestamp: t0 - 60000}, {Value: -3, Timestamp: t0 + 15000}},
		Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize("Room temperature."), UnitRef: st.Symbolize("celsius")},
	}}}
	// A native histogram (schema 1): stored as an exponential histogram,
	// served to PromQL as a native histogram under its own name.
	h := &histogram.Histogram{Count: 9, ZeroCount: 1, ZeroThreshold: 0.001, Sum: 12.5, Schema: 1,
		PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}, {Offset: 2, Length: 1}}, PositiveBuckets: []int64{2, 1, -1},
		NegativeSpans: []histogram.Span{{Offset: -1, Length: 1}}, NegativeBuckets: []int64{1}}
	v2.Timeseries = append(v2.Timeseries, writev2.TimeSeries{
		LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("rwh_latency"), st.Symbolize("job"), st.Symbolize("h")},
		Histograms: []writev2.Histogram{writev2.FromIntHistogram(0, t0, h)}})
	v2.Symbols = st.Symbols()
	stats, err := api.Write(ctx, remoteapi.WriteV2MessageType, v2)
	if err != nil {
		t.Fatalf("2.0 write: %v", err)
	}
	if stats.Histograms != 1 {
		t.Fatalf("2.0 written stats %+v, want 1 histogram", stats)
	}
	for q, want := range map[string]string{`histogram_count(rwh_latency{job="h"})`: "9", `histogram_sum(rwh_latency{job="h"})`: "12.5"} {
		got := promMatrix(t, base, q, time.UnixMilli(t0+1000))
		if len(got) != 1 || got[0].Values[0][1] != want || got[0].Metric["job"] != "h" {
			t.Fatalf("%s: %v, want one series {job=\"h\"} at %s", q, got, want)
		}
	}
	// Exactly its name, as Prometheus serves a native histogram: no
	// _count or _sum series beside it.
	if got := promMatrix(t, base, `{__name__=~"rwh_latency.+"}`, time.UnixMilli(t0+1000)); len(got) != 0 {
		t.Fatalf("series beside the native histogram rwh_latency: %v", got)
	}
	if stats.Samples != 2 {
		t.Fatalf("2.0 written stats %+v, want 2 samples", stats)
	}

	end := time.UnixMilli(t0 + 50000)
	got := promMatrix(t, base, `{__name__=~"rw_.*|rw2_.*"}[5m]`, end)
	want := []rwSeries{
		{Metric: map[string]string{"__name__": "rw2_temperature", "room": "b"}, Values: [][2]any{{float64(t0) / 1000, "21.5"}, {float64(t0+15000) / 1000, "-3"}}},
		{Metric: map[string]string{"__name__": "rw_latency:bucket", "le": "0.5", "service_name": "svc"}, Values: [][2]any{{float64(t0) / 1000, "3"}}},
		{Metric: map[string]string{"__name__": "rw_requests_total", "code": "200", "instance": "a:9100", "job": "api"},
			Values: [][2]any{{float64(t0) / 1000, "1"}, {float64(t0+15000) / 1000, "2.5"}, {float64(t0+30000) / 1000, "7"}}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("PromQL answer\n got %v\nwant %v", got, want)
	}
	// The stale marker ends the series: an instant query after it finds
	// nothing, where the 5m lookback would otherwise still return 7.
	if v := promMatrix(t, base, `rw_requests_total`, time.UnixMilli(t0+46000)); len(v) != 0 {
		t.Fatalf("after the stale marker: %v, want no series", v)
	}
	if v := promMatrix(t, base, `rw_requests_total`, time.UnixMilli(t0+44000)); len(v) != 1 || v[0].Values[0][1] != "7" {
		t.Fatalf("before the stale marker: %v, want 7", v)
	}
	// Unsupported encodings are refused with 415.
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/write", strings.NewReader("x"))
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("gzip: %d, want 415", resp.StatusCode)
	}
}

// TestRemoteWriteMetadata sends remote write 2.0 series with metadata, a
// 1.0 series with its family's MetricMetadata and a 1.0 series without
// any, next to an OTLP gauge, to a real `sluice run`: /api/v1/metadata
// reports each remote-write metric with exactly the type, help and unit
// sent ("unknown" when none was sent) and the OTLP metric as before.
func TestRemoteWriteMetadata(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	s := startServer(t, freshConfig(t, lakeDir, qaddr))
	base := "http://" + qaddr
	api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Second).UnixMilli()

	st := writev2.NewSymbolTable()
	series := func(name string, typ writev2.Metadata_MetricType, help, unit string) writev2.TimeSeries {
		return writev2.TimeSeries{
			LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize(name), st.Symbolize("job"), st.Symbolize("m")},
			Samples:    []writev2.Sample{{Value: 1, Timestamp: t0}},
			Metadata:   writev2.Metadata{Type: typ, HelpRef: st.Symbolize(help), UnitRef: st.Symbolize(unit)},
		}
	}
	v2 := &writev2.Request{Timeseries: []writev2.TimeSeries{
		series("rwm_requests_total", writev2.Metadata_METRIC_TYPE_COUNTER, "Requests served.", ""),
		series("rwm_heap_bytes", writev2.Metadata_METRIC_TYPE_GAUGE, "Heap in use.", "bytes"),
		series("rwm_build_info", writev2.Metadata_METRIC_TYPE_INFO, "Build.", ""),
		series("rwm_latency_seconds_sum", writev2.Metadata_METRIC_TYPE_SUMMARY, "Latency.", "seconds"),
		series("rwm_untyped", writev2.Metadata_METRIC_TYPE_UNSPECIFIED, "", ""),
	}}
	v2.Symbols = st.Symbols()
	if _, err := api.Write(ctx, remoteapi.WriteV2MessageType, v2); err != nil {
		t.Fatalf("2.0 write: %v", err)
	}
	v1 := &prompb.WriteRequest{
		Timeseries: []prompb.TimeSeries{
			{Labels: []prompb.Label{{Name: "__name__", Value: "rwm_jobs_total"}}, Samples: []prompb.Sample{{Value: 2, Timestamp: t0}}},
			{Labels: []prompb.Label{{Name: "__name__", Value: "rwm_bare"}}, Samples: []prompb.Sample{{Value: 3, Timestamp: t0}}},
		},
		Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "rwm_jobs", Help: "Jobs run.", Unit: "jobs"}},
	}
	if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, v1); err != nil {
		t.Fatalf("1.0 write: %v", err)
	}
	freshBatch(t, s.http, 1, 2) // OTLP gauge fresh_temp, no unit

	want := map[string][]metaEntry{
		"rwm_requests_total":      {{"counter", "Requests served.", ""}},
		"rwm_heap_bytes":          {{"gauge", "Heap in use.", "bytes"}},
		"rwm_build_info":          {{"info", "Build.", ""}},
		"rwm_latency_seconds_sum": {{"summary", "Latency.", "seconds"}},
		"rwm_untyped":             {{"unknown", "", ""}},
		"rwm_jobs_total":          {{"counter", "Jobs run.", "jobs"}},
		"rwm_bare":                {{"unknown", "", ""}},
		"fresh_temp":              {{"gauge", "", ""}},
	}
	var got map[string][]metaEntry
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got = getMetadata(t, base, "")
		if fmt.Sprint(got) == fmt.Sprint(want) || time.Now().After(deadline) {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("metadata\n got %v\nwant %v", got, want)
	}
	// ?metric= narrows to one name, with its metadata.
	resp, err := http.Get(base + "/api/v1/metadata?metric=rwm_heap_bytes")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if w := `{"rwm_heap_bytes":[{"help":"Heap in use.","type":"gauge","unit":"bytes"}]}`; !strings.Contains(string(b), w) {
		t.Fatalf("metadata?metric=rwm_heap_bytes: %s, want data %s", b, w)
	}
}
