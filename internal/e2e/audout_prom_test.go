package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

// TestAudoutRemoteWrite2IntoPrometheus1Only: a prometheus_remote_write
// exporter configured for 2.0 in front of Debian's Prometheus 2.42, which
// takes 1.0 only and does not check the Content-Type: it answers a 2.0
// request 204 without having written anything (it reads it as an empty
// 1.0 WriteRequest) and without the X-Prometheus-Remote-Write-*-Written
// headers a 2.0 receiver must send. sluice must notice (as Prometheus's
// own 2.0 sender does), fall back to 1.0 for that endpoint as on a 415,
// and every sample must arrive.
func TestAudoutRemoteWrite2IntoPrometheus1Only(t *testing.T) {
	prom := startPrometheusReceiver(t)
	name := "prometheus_remote_write/p242"
	s := audRelay(t, fmt.Sprintf("  %s: {endpoints: [%s/api/v1/write], protocol: \"2.0\", batch_delay: 20ms}", name, prom), name)
	api, err := remoteapi.NewAPI("http://"+s.prw, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
	const series, per = 20, 10
	for round := range 2 {
		req := &prompb.WriteRequest{}
		for i := range series / 2 {
			ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "aud_v2_fallback"}, {Name: "job", Value: "audout"},
				{Name: "s", Value: fmt.Sprint(round*series/2 + i)}}}
			for j := range per {
				ts.Samples = append(ts.Samples, prompb.Sample{Value: float64(j), Timestamp: t0 + int64(j)*15000})
			}
			req.Timeseries = append(req.Timeseries, ts)
		}
		if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, req); err != nil {
			t.Fatal(err)
		}
	}
	at := time.UnixMilli(t0 + per*15000)
	var got float64
	if !waitFor(30*time.Second, func() bool {
		got = queryCount(t, prom, "", `count(count_over_time(aud_v2_fallback[1h]))`, at)
		return got == series
	}) {
		t.Fatalf("Prometheus 2.42 holds %v of %d series sent through a 2.0 exporter\n%s", got, series, scrapeMetrics(t, s.admin))
	}
	if n := queryCount(t, prom, "", `sum(count_over_time(aud_v2_fallback[1h]))`, at); n != series*per {
		t.Fatalf("Prometheus 2.42 holds %v samples, want %d", n, series*per)
	}
	if v := metricValue(t, s.admin, `sluice_exporter_protocol_fallbacks_total{exporter="`+name+`"}`); v != 1 {
		t.Errorf("sluice_exporter_protocol_fallbacks_total = %v, want 1", v)
	}
	if !strings.Contains(s.stderr.String(), "takes remote write 1.0 only") {
		t.Errorf("no log line says the endpoint takes 1.0 only:\n%s", s.stderr)
	}
}
