package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// postRW posts a remote-write body (protobuf, snappy-encoded here) with
// content type ct and returns the status, body and answer headers.
func postRW(t *testing.T, base, ct string, pb []byte, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, pb)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Content-Encoding", "snappy")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestAudinExemplarOnlySeries sends exemplars as Prometheus sends them (its
// queue manager puts every exemplar in a TimeSeries of its own, without
// samples, in 1.0 and 2.0, often in a later request than its sample): they
// are served on /api/v1/query_exemplars on their series, counted in the
// 2.0 answer's Exemplars-Written header (Prometheus's 2.0 sender counts a
// 2xx that says nothing was written as a failure), and add no sample to
// PromQL, from the unflushed tail and from the lake after a restart.
func TestAudinExemplarOnlySeries(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	cfg := freshConfig(t, lakeDir, qaddr)
	s := startServer(t, cfg)
	base := "http://" + qaddr
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
	ex := func(trace string, v float64, ts int64) prompb.Exemplar {
		return prompb.Exemplar{Labels: []prompb.Label{{Name: "trace_id", Value: trace}}, Value: v, Timestamp: ts}
	}
	l1 := []prompb.Label{{Name: "__name__", Value: "aex1_total"}, {Name: "job", Value: "a"}}
	for _, r := range []*prompb.WriteRequest{
		{Timeseries: []prompb.TimeSeries{
			{Labels: l1, Samples: []prompb.Sample{{Value: 5, Timestamp: t0}}},
			{Labels: l1, Exemplars: []prompb.Exemplar{ex("t1", 5, t0)}},
		}},
		{Timeseries: []prompb.TimeSeries{{Labels: l1, Exemplars: []prompb.Exemplar{ex("t2", 6, t0+15000)}}}},
	} {
		pb, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if code, body, h := postRW(t, base, "application/x-protobuf", pb); code != http.StatusNoContent || h.Get("X-Prometheus-Remote-Write-Exemplars-Written") != "" {
			t.Fatalf("1.0: %d %s %v", code, body, h)
		}
	}

	api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := writev2.NewSymbolTable()
	refs := func(s ...string) []uint32 {
		var out []uint32
		for _, x := range s {
			out = append(out, st.Symbolize(x))
		}
		return out
	}
	h := &histogram.Histogram{Count: 4, Sum: 3, Schema: 0, PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{1, 2}}
	v2 := &writev2.Request{Timeseries: []writev2.TimeSeries{
		{LabelsRefs: refs("__name__", "aex2_total", "job", "b"), Samples: []writev2.Sample{{Value: 7, Timestamp: t0}}},
		{LabelsRefs: refs("__name__", "aex2_hist", "job", "b"), Histograms: []writev2.Histogram{writev2.FromIntHistogram(0, t0, h)}},
		{LabelsRefs: refs("__name__", "aex2_hist", "job", "b"), Exemplars: []writev2.Exemplar{{LabelsRefs: refs("trace_id", "h1"), Value: 1.5, Timestamp: t0}}},
	}}
	v2.Symbols = st.Symbols()
	if stats, err := api.Write(ctx, remoteapi.WriteV2MessageType, v2); err != nil || stats.Samples != 1 || stats.Histograms != 1 || stats.Exemplars != 1 {
		t.Fatalf("2.0 write: %+v %v, want 1 sample, 1 histogram, 1 exemplar written", stats, err)
	}
	// An exemplar alone in its request: as Prometheus's queue manager
	// checks, the answer must say it was written.
	st = writev2.NewSymbolTable()
	v2 = &writev2.Request{Timeseries: []writev2.TimeSeries{
		{LabelsRefs: refs("__name__", "aex2_total", "job", "b"), Exemplars: []writev2.Exemplar{{LabelsRefs: refs("trace_id", "u2"), Value: 8, Timestamp: t0 + 15000}}},
	}}
	v2.Symbols = st.Symbols()
	if stats, err := api.Write(ctx, remoteapi.WriteV2MessageType, v2); err != nil || stats.Exemplars != 1 || stats.Samples != 0 {
		t.Fatalf("2.0 exemplar-only write: %+v %v, want 1 exemplar written", stats, err)
	}

	sec := func(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }
	check := func(when string) {
		t.Helper()
		for q, want := range map[string]string{
			"aex1_total": `[map[__name__:aex1_total job:a]:[5@t0 map[trace_id:t1] 6@t0+15000 map[trace_id:t2]]]`,
			"aex2_total": `[map[__name__:aex2_total job:b]:[8@t0+15000 map[trace_id:u2]]]`,
			"aex2_hist":  `[map[__name__:aex2_hist job:b]:[1.5@t0 map[trace_id:h1]]]`,
		} {
			got := queryExemplars(t, base, http.MethodGet, url.Values{"query": {q}, "start": {sec(t0 - 1000)}, "end": {sec(t0 + 60000)}})
			var s []string
			for _, r := range got {
				e := fmt.Sprint(r.SeriesLabels) + ":["
				for i, x := range r.Exemplars {
					if i > 0 {
						e += " "
					}
					e += fmt.Sprintf("%s@t0+%d %v", x.Value, int64(x.Timestamp*1000+0.5)-t0, x.Labels)
				}
				s = append(s, e+"]")
			}
			gs := fmt.Sprint(s)
			if w := want; gs != stripT0(w) {
				t.Fatalf("%s: query_exemplars %s:\n got %s\nwant %s", when, q, gs, stripT0(w))
			}
		}
		// The exemplars' points are no samples: one sample each, the
		// value unchanged after them (no stale marker, no zero).
		for q, want := range map[string]string{
			`count_over_time(aex1_total[20m])`: "1",
			`count_over_time(aex2_total[20m])`: "1",
			`count_over_time(aex2_hist[20m])`:  "1",
			`histogram_count(aex2_hist)`:       "4",
			`count({__name__=~"aex.*"})`:       "3",
		} {
			got := promMatrix(t, base, q, time.UnixMilli(t0+30000))
			if len(got) != 1 || got[0].Values[0][1] != want {
				t.Fatalf("%s: %s = %v, want %s", when, q, got, want)
			}
		}
		for q, want := range map[string]string{`aex1_total`: "5", `aex2_total`: "7"} {
			got := promMatrix(t, base, q, time.UnixMilli(t0+30000))
			if len(got) != 1 || got[0].Values[0][1] != want {
				t.Fatalf("%s: %s = %v, want %s", when, q, got, want)
			}
		}
	}
	check("unflushed")
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := s.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, s.stderr)
	}
	startServer(t, cfg)
	check("after a restart")
}

// stripT0 keeps want strings readable: "@t0" alone means "@t0+0".
func stripT0(s string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte("@t0 "), []byte("@t0+0 ")))
}
