package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

// TestRemoteWriteLakeHandoff sends plain remote write 1.0 requests (sorted
// labels, float samples: the receiver's scanned case) to a real `sluice
// run`: the lake loop takes every one of them snappy-decoded from the
// receiver (sluice_lake_handoff_taken_total, lake.handoff_max_bytes'
// default) instead of decoding it from the queue, and PromQL reads back
// exactly the samples sent, each once, before and after a checkpoint.
func TestRemoteWriteLakeHandoff(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	cfg := fmt.Sprintf("receivers:\n  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}\nadmin: {addr: 127.0.0.1:0}\nquery: {addr: %s}\nlake: {root: %s, flush_interval: 1s}\nshutdown_timeout: %s\n",
		qaddr, lakeDir, runShutdownTimeout)
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, p)
	base := "http://" + qaddr
	api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const requests, series = 5, 40
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
	for r := range requests {
		req := &prompb.WriteRequest{}
		for i := range series {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: "handoff_gauge"}, {Name: "job", Value: "j"}, {Name: "series", Value: fmt.Sprintf("s%02d", i)}},
				Samples: []prompb.Sample{{Value: float64(r*1000 + i), Timestamp: t0 + int64(r)*15000}},
			})
		}
		if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, req); err != nil {
			t.Fatalf("request %d: %v", r, err)
		}
	}
	taken := `sluice_lake_handoff_taken_total`
	if !waitFor(60*time.Second, func() bool { return metricValue(t, s.admin, taken) >= requests }) {
		t.Fatalf("%s = %v, want %d: the lake loop decoded the requests again", taken, metricValue(t, s.admin, taken), requests)
	}
	if v := metricValue(t, s.admin, `sluice_lake_handoff_dropped_total`); v != 0 {
		t.Fatalf("sluice_lake_handoff_dropped_total = %v, want 0", v)
	}
	check := func(when string) {
		t.Helper()
		got := promMatrix(t, base, `handoff_gauge[5m]`, time.UnixMilli(t0+int64(requests)*15000))
		if len(got) != series {
			t.Fatalf("%s: %d series, want %d", when, len(got), series)
		}
		for _, g := range got {
			var i int
			if _, err := fmt.Sscanf(g.Metric["series"], "s%d", &i); err != nil || g.Metric["job"] != "j" || len(g.Metric) != 3 {
				t.Fatalf("%s: series %v", when, g.Metric)
			}
			if len(g.Values) != requests {
				t.Fatalf("%s: series %v has %d samples, want %d", when, g.Metric, len(g.Values), requests)
			}
			for r, v := range g.Values {
				if want := fmt.Sprint(r*1000 + i); v[1] != want || v[0] != float64(t0+int64(r)*15000)/1000 {
					t.Fatalf("%s: series %v sample %d is %v, want %s at %v", when, g.Metric, r, v, want, float64(t0+int64(r)*15000)/1000)
				}
			}
		}
	}
	check("taken")
	committed := func() bool {
		return metricValue(t, s.admin, `sluice_lake_committed_queue_position`) >= metricValue(t, s.admin, `sluice_queue_durable_position`) &&
			metricValue(t, s.admin, `sluice_lake_uncommitted_queue_bytes`) == 0
	}
	if !waitFor(60*time.Second, committed) {
		t.Fatal("the lake did not commit the requests in 60s (lake.flush_interval 1s)")
	}
	check("committed")
}
