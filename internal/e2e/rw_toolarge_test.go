package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

// TestRemoteWriteTooLargeSplit: a backend with a request size limit (it
// answers 413 over 3 KiB decoded, as Mimir, Cortex, Thanos and
// VictoriaMetrics do over theirs) gets a relayed request again in halves:
// every series that fits alone arrives once, the one series over the
// limit alone is dropped with a log line naming it, the splits and the
// drop are on /metrics, and the exporter's cursor moves past the batch.
func TestRemoteWriteTooLargeSplit(t *testing.T) {
	const limit = 3 << 10
	var mu sync.Mutex
	got := map[string]int{}
	tooLarge := 0
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		plain, err := snappy.Decode(nil, body)
		var req prompb.WriteRequest
		if err == nil {
			err = req.Unmarshal(plain)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if len(plain) > limit {
			tooLarge++
			http.Error(w, fmt.Sprintf("request of %d bytes over the limit of %d", len(plain), limit), http.StatusRequestEntityTooLarge)
			return
		}
		for _, ts := range req.Timeseries {
			for _, l := range ts.Labels {
				if l.Name == "s" {
					got[l.Value] += len(ts.Samples)
				}
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer b.Close()
	s := audRelay(t, fmt.Sprintf("  prometheus_remote_write/limited: {endpoints: [%s/api/v1/write], batch_delay: 20ms, retry_initial_backoff: 10ms}", b.URL),
		"prometheus_remote_write/limited")

	var wr prompb.WriteRequest
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	for i := range 60 {
		v := fmt.Sprint(i)
		if i == 17 {
			v = "big-" + strings.Repeat("x", limit) // over the limit alone
		}
		wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{
			Labels:  []prompb.Label{{Name: "__name__", Value: "rw_too_large"}, {Name: "job", Value: "limited"}, {Name: "s", Value: v}},
			Samples: []prompb.Sample{{Value: float64(i), Timestamp: t0}}})
	}
	api, err := remoteapi.NewAPI("http://"+s.prw, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, &wr); err != nil {
		t.Fatalf("remote write to sluice: %v", err)
	}
	const name = "prometheus_remote_write/limited"
	lag := fmt.Sprintf(`sluice_exporter_queue_lag_bytes{exporter=%q}`, name)
	dropped := fmt.Sprintf(`sluice_exporter_dropped_requests_total{endpoint="%s/api/v1/write",exporter=%q}`, b.URL, name)
	if !waitFor(30*time.Second, func() bool { return metricValue(t, s.admin, dropped) == 1 && metricValue(t, s.admin, lag) == 0 }) {
		t.Fatalf("%s = %v, %s = %v; want 1 and 0\n%s", dropped, metricValue(t, s.admin, dropped), lag, metricValue(t, s.admin, lag), scrapeMetrics(t, s.admin))
	}
	splits := fmt.Sprintf(`sluice_exporter_split_requests_total{endpoint="%s/api/v1/write",exporter=%q}`, b.URL, name)
	if v := metricValue(t, s.admin, splits); v < 1 {
		t.Errorf("%s = %v, want at least 1", splits, v)
	}
	mu.Lock()
	if len(got) != 59 {
		t.Errorf("%d series arrived, want 59 (all but the one too large)", len(got))
	}
	for i := range 60 {
		if i != 17 && got[fmt.Sprint(i)] != 1 {
			t.Errorf("series s=%d: %d samples arrived, want 1", i, got[fmt.Sprint(i)])
		}
	}
	mu.Unlock()
	if !strings.Contains(s.stderr.String(), `rw_too_large{job=\"limited\", s=\"big-xxx`) {
		t.Errorf("no log line names the series dropped:\n%s", s.stderr)
	}
}
