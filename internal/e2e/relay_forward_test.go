package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

// TestRelayForwardOnly: `sluice run` whose only pipeline forwards remote
// write to a prometheus_remote_write exporter, with no lake. Remote write
// arrives both on the receiver's own listener and on query.addr; a second
// sluice (with a lake) receives every sample with its value and timestamp,
// the relay writes no lake directory (no catalog, no table), and OTLP logs,
// which no pipeline takes, are refused instead of acknowledged into a
// queue nobody reads.
func TestRelayForwardOnly(t *testing.T) {
	downLake := t.TempDir()
	downQuery := freePort(t)
	startServer(t, freshConfig(t, downLake, downQuery))

	dir := t.TempDir()
	relayLake := filepath.Join(dir, "lake")
	relayQuery := freePort(t)
	cfg := writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}
  prometheus_remote_write: {listen: 127.0.0.1:0}
admin: {addr: 127.0.0.1:0}
query: {addr: %s}
lake: {root: %s}
queue: {dir: %s}
exporters:
  prometheus_remote_write/down:
    endpoints: [http://%s/api/v1/write]
    batch_delay: 20ms
pipelines:
  metrics: {receivers: [prometheus_remote_write], exporters: [prometheus_remote_write/down]}
shutdown_timeout: %s
`, relayQuery, relayLake, filepath.Join(dir, "queue"), downQuery, runShutdownTimeout))
	if r := run(t, "validate", "--config", cfg); r.code != 0 || !strings.Contains(r.stdout, "config OK") {
		t.Fatalf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	relay := startServer(t, cfg)
	if relay.prw == "" || relay.prw == "off" {
		t.Fatalf("no remote-write listener printed (prw=%q)", relay.prw)
	}

	const series, perSeries = 50, 40
	t0 := time.Now().Add(-30 * time.Minute).Truncate(time.Second).UnixMilli()
	var wantSum float64
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, base := range []string{"http://" + relay.prw, "http://" + relayQuery} {
		api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
		if err != nil {
			t.Fatal(err)
		}
		req := &prompb.WriteRequest{}
		for s := i * series / 2; s < (i+1)*series/2; s++ {
			ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "fw_load"}, {Name: "job", Value: "relay"},
				{Name: "series", Value: fmt.Sprint(s)}}}
			for j := range perSeries {
				v := float64(s*1000 + j)
				wantSum += v
				ts.Samples = append(ts.Samples, prompb.Sample{Value: v, Timestamp: t0 + int64(j)*15000})
			}
			req.Timeseries = append(req.Timeseries, ts)
		}
		if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, req); err != nil {
			t.Fatalf("write to %s: %v", base, err)
		}
	}

	// Logs: no pipeline takes them, so they are refused (400), not queued.
	resp, err := http.Post("http://"+relay.http+"/v1/logs", "application/json", strings.NewReader(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"}}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("OTLP logs into a metrics-only relay: status %d, want 400", resp.StatusCode)
	}
	// No query API on a relay: query.addr serves remote write only.
	if resp, err := http.Get("http://" + relayQuery + "/api/v1/query?query=up"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /api/v1/query on a relay: status %d, want 404", resp.StatusCode)
	}

	end := time.UnixMilli(t0 + perSeries*15000)
	base := "http://" + downQuery
	var gotN, gotSum float64
	ok := waitFor(60*time.Second, func() bool {
		gotN = queryCount(t, base, "", `sum(count_over_time(fw_load{job="relay"}[1h]))`, end)
		gotSum = queryCount(t, base, "", `sum(sum_over_time(fw_load{job="relay"}[1h]))`, end)
		return gotN == series*perSeries && gotSum == wantSum
	})
	if !ok {
		t.Fatalf("downstream holds %v samples summing to %v; want %d summing to %v", gotN, gotSum, series*perSeries, wantSum)
	}
	if _, err := os.Stat(relayLake); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(relayLake)
		t.Fatalf("the forward-only relay wrote its lake directory %s (%v): %v", relayLake, err, entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "queue")); err != nil {
		t.Fatalf("relay queue: %v", err)
	}
	t.Logf("%d samples relayed through a lake-less sluice, sum %v", series*perSeries, gotSum)
}
