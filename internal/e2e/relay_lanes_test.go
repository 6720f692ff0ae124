package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

// TestRelayLanes: `sluice run` relaying remote write to an exporter with
// concurrency 4. The downstream (a loopback 1.0 receiver) holds the first
// requests until 4 are in flight at once, while sluice's /metrics shows 4
// requests in flight; then every sample arrives exactly once, each
// series' samples in timestamp order, over several upstream requests.
func TestRelayLanes(t *testing.T) {
	var (
		cur, max atomic.Int64
		release  = make(chan struct{})
		mu       sync.Mutex
		got      = map[string][]int64{}
	)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := cur.Add(1)
		defer cur.Add(-1)
		for m := max.Load(); n > m && !max.CompareAndSwap(m, n); m = max.Load() {
		}
		select { // the test releases once it saw 4 in flight (or gives up)
		case <-release:
		case <-time.After(30 * time.Second):
		}
		b, _ := io.ReadAll(req.Body)
		raw, err := snappy.Decode(nil, b)
		var wr prompb.WriteRequest
		if err != nil || wr.Unmarshal(raw) != nil {
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		for _, ts := range wr.Timeseries {
			k := ""
			for _, l := range ts.Labels {
				k += l.Name + "=" + l.Value + ","
			}
			for _, s := range ts.Samples {
				got[k] = append(got[k], s.Timestamp)
			}
		}
		mu.Unlock()
		w.WriteHeader(204)
	}))
	defer down.Close()

	dir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}
  prometheus_remote_write: {listen: 127.0.0.1:0}
admin: {addr: 127.0.0.1:0}
query: {addr: %s}
lake: {root: %s}
queue: {dir: %s}
exporters:
  prometheus_remote_write/down:
    endpoints: [%s/api/v1/write]
    batch_delay: 20ms
    concurrency: 4
pipelines:
  metrics: {receivers: [prometheus_remote_write], exporters: [prometheus_remote_write/down]}
shutdown_timeout: %s
`, freePort(t), filepath.Join(dir, "lake"), filepath.Join(dir, "queue"), down.URL, runShutdownTimeout))
	relay := startServer(t, cfg)

	const series, writes = 200, 6
	t0 := time.Now().Add(-30 * time.Minute).Truncate(time.Second).UnixMilli()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api, err := remoteapi.NewAPI("http://"+relay.prw, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	for w := range writes {
		req := &prompb.WriteRequest{}
		for s := range series {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: "lanes_load"}, {Name: "series", Value: fmt.Sprint(s)}},
				Samples: []prompb.Sample{{Value: float64(w), Timestamp: t0 + int64(w)*15000}}})
		}
		if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, req); err != nil {
			t.Fatalf("write %d: %v", w, err)
		}
	}

	if !waitFor(60*time.Second, func() bool { return max.Load() >= 4 }) {
		close(release)
		t.Fatalf("%d requests in flight at most downstream, want 4", max.Load())
	}
	gauge := fmt.Sprintf(`sluice_exporter_requests_in_flight{endpoint="%s/api/v1/write",exporter="prometheus_remote_write/down"}`, down.URL)
	inFlight := metricValue(t, relay.admin, gauge)
	close(release)
	if inFlight != 4 {
		t.Errorf("%s = %v while 4 requests were held downstream", gauge, inFlight)
	}
	complete := func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ts := range got {
			n += len(ts)
		}
		return n >= series*writes
	}
	if !waitFor(60*time.Second, complete) {
		t.Fatal("not every sample arrived downstream")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != series {
		t.Fatalf("%d series downstream, want %d", len(got), series)
	}
	for k, ts := range got {
		if len(ts) != writes {
			t.Fatalf("series %s: %d samples, want %d exactly once", k, len(ts), writes)
		}
		for i := 1; i < len(ts); i++ {
			if ts[i] <= ts[i-1] {
				t.Fatalf("series %s: samples out of order: %v", k, ts)
			}
		}
	}
	if m := max.Load(); m > 4 {
		t.Fatalf("%d requests in flight at once, above concurrency 4", m)
	}
}
