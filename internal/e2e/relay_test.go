package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
)

// startPrometheusReceiver runs Debian's prometheus with the remote-write
// receiver on a free loopback port and returns its base URL.
func startPrometheusReceiver(t *testing.T) string {
	t.Helper()
	base, _ := startPrometheus(t, freePort(t), "global: {}\n", "--web.enable-remote-write-receiver")
	return base
}

// TestRelayRemoteWriteIntoPrometheus: sluice as a metrics relay. Remote
// write 1.0 from the reference client into `sluice run`, forwarded by its
// prometheus_remote_write exporter through the queue to a real Prometheus:
// Prometheus holds exactly the sent series (names, labels, values,
// timestamps; the stale marker ends the series there too), the same as
// sluice's own PromQL answers.
func TestRelayRemoteWriteIntoPrometheus(t *testing.T) {
	prom := startPrometheusReceiver(t)
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	cfgPath := freshConfig(t, lakeDir, qaddr)
	extra := fmt.Sprintf(`exporters:
  prometheus_remote_write:
    endpoints: [%s/api/v1/write]
    batch_delay: 20ms
pipelines:
  metrics: {receivers: [otlp, prometheus_remote_write], exporters: [lake, prometheus_remote_write]}
  logs: {receivers: [otlp], exporters: [lake]}
  traces: {receivers: [otlp], exporters: [lake]}
`, prom)
	f, _ := os.OpenFile(cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(extra)
	f.Close()
	startServer(t, cfgPath)
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
	if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, v1); err != nil {
		t.Fatalf("1.0 write: %v", err)
	}
	end := time.UnixMilli(t0 + 50000)
	want := fmt.Sprint(promMatrix(t, base, `{__name__=~"rw.*"}[5m]`, end))
	var got string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if got = fmt.Sprint(promMatrix(t, prom, `{__name__=~"rw.*"}[5m]`, end)); got == want {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got != want {
		t.Fatalf("relayed into Prometheus:\n got %s\nsluice answers %s", got, want)
	}
	t.Logf("Prometheus and sluice agree: %s", got)
	for _, at := range []int64{t0 + 44000, t0 + 46000} {
		a, b := promMatrix(t, prom, `rw_requests_total`, time.UnixMilli(at)), promMatrix(t, base, `rw_requests_total`, time.UnixMilli(at))
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("at %d (around the stale marker): prometheus %v, sluice %v", at, a, b)
		}
	}
}
