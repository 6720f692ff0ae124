package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// floatSeries are float native histograms as recording rules over native
// histograms send them (fractional counts; one of custom buckets, one a
// gauge histogram, one with NaN counts), n samples each 15 s apart from t0.
func floatSeries(t0 int64, n int) map[string][]*histogram.FloatHistogram {
	out := map[string][]*histogram.FloatHistogram{}
	for i := range n {
		x := float64(i+1) / 7
		out["fh_rate_seconds"] = append(out["fh_rate_seconds"], &histogram.FloatHistogram{Schema: 3, ZeroThreshold: 1e-4,
			ZeroCount: x / 3, Count: x/3 + x + 2*x + x/11 + 0.1, Sum: 3.3 * x,
			PositiveSpans: []histogram.Span{{Offset: -3, Length: 2}, {Offset: 4, Length: 1}}, PositiveBuckets: []float64{x, 2 * x, x / 11},
			NegativeSpans: []histogram.Span{{Offset: 2, Length: 1}}, NegativeBuckets: []float64{0.1}})
		out["fh_size_bytes"] = append(out["fh_size_bytes"], &histogram.FloatHistogram{Schema: histogram.CustomBucketsSchema,
			CustomValues: []float64{0.1, 1, 10}, Count: 0.6 * x, Sum: 1.7 * x,
			PositiveSpans: []histogram.Span{{Offset: 1, Length: 3}}, PositiveBuckets: []float64{0.1 * x, 0.2 * x, 0.3 * x}})
		out["fh_queue"] = append(out["fh_queue"], &histogram.FloatHistogram{CounterResetHint: histogram.GaugeType, Schema: 0,
			Count: 2.5 - x/10, Sum: -1.25,
			PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []float64{1.5, 1 - x/10}})
		// A ratio of histograms by a zero: NaN counts, which Prometheus
		// accepts, every other sample.
		nan := x
		if i%2 == 0 {
			nan = math.NaN()
		}
		out["fh_nan_ratio"] = append(out["fh_nan_ratio"], &histogram.FloatHistogram{CounterResetHint: histogram.GaugeType,
			Schema: histogram.CustomBucketsSchema, CustomValues: []float64{1, 2}, Count: nan, Sum: nan,
			PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []float64{nan, 0.5}})
	}
	return out
}

// histBuckets is a histogram as the query API's JSON carries it: count,
// sum and non-empty buckets, every number by its bits.
func histBuckets(h *histogram.FloatHistogram) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "count=%x sum=%x", math.Float64bits(h.Count), math.Float64bits(h.Sum))
	for it := h.AllBucketIterator(); it.Next(); {
		if b := it.At(); b.Count != 0 {
			fmt.Fprintf(&sb, " (%x,%x]:%x", math.Float64bits(b.Lower), math.Float64bits(b.Upper), math.Float64bits(b.Count))
		}
	}
	return sb.String()
}

// jsonHistogram is histBuckets of a histogram of the query API's JSON
// ({"count","sum","buckets":[[boundaries, lower, upper, count]]}).
func jsonHistogram(t *testing.T, raw json.RawMessage) string {
	var h struct {
		Count   string   `json:"count"`
		Sum     string   `json:"sum"`
		Buckets [][4]any `json:"buckets"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	f := func(s any) uint64 {
		str, _ := s.(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return math.Float64bits(v)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "count=%x sum=%x", f(h.Count), f(h.Sum))
	for _, b := range h.Buckets {
		fmt.Fprintf(&sb, " (%x,%x]:%x", f(b[1]), f(b[2]), f(b[3]))
	}
	return sb.String()
}

// rangeHistograms asks base's /api/v1/query_range for name over
// [start, end] at step and returns each sample's histogram (histBuckets
// form) by timestamp (ms).
func rangeHistograms(t *testing.T, base, name string, start, end time.Time, step time.Duration) map[int64]string {
	t.Helper()
	resp, err := http.PostForm(base+"/api/v1/query_range", url.Values{"query": {name},
		"start": {fmt.Sprintf("%.3f", float64(start.UnixMilli())/1000)}, "end": {fmt.Sprintf("%.3f", float64(end.UnixMilli())/1000)},
		"step": {fmt.Sprint(step.Seconds())}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Histograms [][2]json.RawMessage `json:"histograms"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &a); err != nil || a.Status != "success" {
		t.Fatalf("%s: %s (%v)", name, b, err)
	}
	out := map[int64]string{}
	for _, r := range a.Data.Result {
		for _, p := range r.Histograms {
			var ts float64
			if err := json.Unmarshal(p[0], &ts); err != nil {
				t.Fatal(err)
			}
			out[int64(math.Round(ts*1000))] = jsonHistogram(t, p[1])
		}
	}
	return out
}

// Float native histograms with fractional counts, sent with the reference
// remote write 2.0 client (client_golang/exp/api/remote, writev2 types) to
// a real `sluice run`, come back from its /api/v1/query_range exactly as
// sent (every count by its bits), and from a second `sluice run` that the
// first forwards them to over remote write 2.0 (as received, and
// converted: the forwarder shards); the gauge histogram's hint survives
// both (its resets() over falling counts is the buckets' count, a
// counter's would be that too, but delta() is only quiet on a gauge).
func TestRemoteWriteFloatHistogramsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, shard := range []bool{false, true} {
		t.Run(fmt.Sprintf("shard=%v", shard), func(t *testing.T) {
			down := startQueryRun(t, lakeQueryConfig(t, ""))
			mode := "replicate"
			if shard {
				mode = "shard"
			}
			up := startQueryRun(t, lakeQueryConfig(t, fmt.Sprintf(`
exporters:
  prometheus_remote_write/down:
    endpoints: [http://%s/api/v1/write]
    protocol: "2.0"
    mode: %s
    batch_delay: 20ms
pipelines:
  metrics: {receivers: [otlp, prometheus_remote_write], exporters: [lake, prometheus_remote_write/down]}
  logs: {receivers: [otlp], exporters: [lake]}
  traces: {receivers: [otlp], exporters: [lake]}
`, down.query, mode)))

			const n = 8
			t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
			sent := floatSeries(t0, n)
			st := writev2.NewSymbolTable()
			req := &writev2.Request{}
			for name, hs := range sent {
				ts := writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", name, "job", "rules"), nil),
					Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_HISTOGRAM}}
				for i, h := range hs {
					ts.Histograms = append(ts.Histograms, writev2.FromFloatHistogram(0, t0+int64(i)*15000, h))
				}
				req.Timeseries = append(req.Timeseries, ts)
			}
			req.Symbols = st.Symbols()
			api, err := remoteapi.NewAPI("http://"+up.query, remoteapi.WithAPIPath("api/v1/write"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stats, err := api.Write(ctx, remoteapi.WriteV2MessageType, req)
			if err != nil {
				t.Fatalf("2.0 write: %v", err)
			}
			if stats.Histograms != len(sent)*n {
				t.Fatalf("written stats %+v, want %d histograms", stats, len(sent)*n)
			}
			start, end := time.UnixMilli(t0), time.UnixMilli(t0+(n-1)*15000)
			for _, run := range []struct {
				name string
				q    *queryRun
			}{{"sluice run", up}, {"forwarded to a second sluice run", down}} {
				for name, hs := range sent {
					want := map[int64]string{}
					for i, h := range hs {
						want[t0+int64(i)*15000] = histBuckets(h)
					}
					var got map[int64]string
					waitFor(60*time.Second, func() bool {
						got = rangeHistograms(t, "http://"+run.q.query, name, start, end, 15*time.Second)
						return fmt.Sprint(got) == fmt.Sprint(want)
					})
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("%s: %s:\n got %v\nwant %v\nstderr:\n%s", run.name, name, got, want, run.q.stderr)
					}
				}
				// The gauge hint: rate() over a gauge histogram warns that
				// it is not a counter; delta() does not warn (over a
				// counter histogram it would).
				if w := queryWarnings(t, "http://"+run.q.query, `rate(fh_queue[2m])`, end); !strings.Contains(w, "not a counter") {
					t.Errorf("%s: rate over the gauge histogram warns %q, want \"not a counter\"", run.name, w)
				}
				if w := queryWarnings(t, "http://"+run.q.query, `delta(fh_queue[2m])`, end); w != "" {
					t.Errorf("%s: delta over the gauge histogram warns %q", run.name, w)
				}
				if w := queryWarnings(t, "http://"+run.q.query, `delta(fh_rate_seconds[2m])`, end); !strings.Contains(w, "not a gauge") {
					t.Errorf("%s: delta over a counter histogram warns %q, want \"not a gauge\"", run.name, w)
				}
			}
		})
	}
}

// queryWarnings runs an instant query on base and returns its warnings and
// infos, joined.
func queryWarnings(t *testing.T, base, expr string, at time.Time) string {
	t.Helper()
	resp, err := http.PostForm(base+"/api/v1/query", url.Values{"query": {expr}, "time": {fmt.Sprintf("%.3f", float64(at.UnixMilli())/1000)}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct {
		Status   string   `json:"status"`
		Warnings []string `json:"warnings"`
		Infos    []string `json:"infos"`
	}
	if err := json.Unmarshal(b, &a); err != nil || a.Status != "success" {
		t.Fatalf("%s: %s (%v)", expr, b, err)
	}
	return strings.Join(append(a.Warnings, a.Infos...), "; ")
}
