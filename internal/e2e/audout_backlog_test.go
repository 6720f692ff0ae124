package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAudoutDeadBackendBounded: one sluice run stores logs in its lake and
// forwards them over OTLP/gRPC (gzip) to a second sluice run (otlp/live)
// and to an endpoint that is down (otlp/dead), whose backlog is bounded by
// max_backlog_bytes. The dead endpoint blocks neither ingestion (no
// request refused), nor the lake, nor the live exporter: every
// acknowledged record is in the local lake and, over gRPC, in the
// downstream's; the dead exporter drops whole segments past its bound and
// counts them (sluice_exporter_dropped_bytes_total{reason="max_backlog_bytes"}),
// its lag staying within the bound and one segment.
func TestAudoutDeadBackendBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	downLake, upLake := t.TempDir(), t.TempDir()
	down := startServer(t, writeConfig(t, fmt.Sprintf(`
receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: "", tenant_header: X-Scope-OrgID}
lake: {root: %q, flush_interval: 1s}
admin: {addr: 127.0.0.1:0}
query: {addr: 127.0.0.1:0}
shutdown_timeout: 10s
`, downLake)))
	dead := freePort(t) // nothing listens there
	const maxBacklog, segment = 2 << 20, 1 << 20
	up := startServer(t, writeConfig(t, fmt.Sprintf(`
receivers:
  otlp: {grpc_addr: "", http_addr: 127.0.0.1:0, tenant_header: X-Scope-OrgID, max_request_bytes: 512KiB}
lake: {root: %q, flush_interval: 1s}
queue: {max_bytes: 32MiB, segment_bytes: %d}
admin: {addr: 127.0.0.1:0}
query: {addr: 127.0.0.1:0}
shutdown_timeout: 10s
exporters:
  otlp/live:
    endpoints: [%s]
    protocol: grpc
    compression: gzip
    tenant_header: X-Scope-OrgID
    batch_delay: 20ms
  otlp/dead:
    endpoints: [%s]
    protocol: grpc
    max_backlog_bytes: %d
    retry_initial_backoff: 10ms
    retry_max_backoff: 100ms
    breaker_cooldown: 100ms
pipelines:
  logs: {receivers: [otlp], exporters: [lake, otlp/live, otlp/dead]}
`, upLake, segment, down.grpc, dead, maxBacklog)))

	g := newLoadGen(200)
	client := &http.Client{Timeout: 30 * time.Second}
	ctx := t.Context()
	for i := 0; i < 300; i++ {
		if !g.send(t, ctx, client, up.http) {
			t.Fatalf("request %d refused while an endpoint was down (%d refused, %d failed)", i, g.refused.Load(), g.failed.Load())
		}
	}
	drop := `sluice_exporter_dropped_bytes_total{exporter="otlp/dead",reason="max_backlog_bytes"}`
	if !waitFor(60*time.Second, func() bool { return metricValue(t, up.admin, drop) > 0 }) {
		t.Fatalf("%s stayed 0 with %d acknowledged records behind a dead endpoint:\n%s", drop, g.ackedCount(), scrapeMetrics(t, up.admin))
	}
	if lag := metricValue(t, up.admin, `sluice_exporter_queue_lag_bytes{exporter="otlp/dead"}`); lag > maxBacklog+segment {
		t.Errorf("the dead exporter's lag is %v bytes, over max_backlog_bytes (%d) and a segment", lag, maxBacklog)
	}
	if v := metricValue(t, up.admin, `sluice_exporter_dropped_bytes_total{exporter="otlp/live",reason="max_backlog_bytes"}`); v != 0 {
		t.Errorf("the live exporter dropped %v bytes", v)
	}
	if !waitFor(60*time.Second, func() bool {
		return metricValue(t, up.admin, `sluice_exporter_queue_lag_bytes{exporter="otlp/live"}`) == 0
	}) {
		t.Fatalf("the live exporter never caught up behind a dead one:\n%s", scrapeMetrics(t, up.admin))
	}
	for _, s := range []*server{down, up} {
		s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(60 * time.Second):
			t.Fatal("sluice run did not stop")
		}
	}
	for name, dir := range map[string]string{"local lake": upLake, "downstream over gRPC": downLake} {
		got := seqCounts(t, dir, "load")
		missing := 0
		for seq := range g.acked {
			if got[seq] == 0 {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("%s: %d of %d acknowledged records missing", name, missing, len(g.acked))
		}
	}
	if _, err := os.Stat(filepath.Join(upLake, "_queue")); err != nil {
		t.Logf("queue dir: %v", err)
	}
}

// TestAudoutBacklogAge: an exporter whose endpoint is down drops, past
// max_backlog_age, the whole queue segments it has not delivered, and
// counts them (reason="max_backlog_age"); ingestion goes on meanwhile.
func TestAudoutBacklogAge(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dead := freePort(t)
	dir := t.TempDir()
	s := startServer(t, writeConfig(t, fmt.Sprintf(`
receivers:
  otlp: {grpc_addr: "", http_addr: 127.0.0.1:0, tenant_header: X-Scope-OrgID, max_request_bytes: 512KiB}
lake: {root: %q}
queue: {dir: %q, max_bytes: 32MiB, segment_bytes: 1MiB}
admin: {addr: 127.0.0.1:0}
shutdown_timeout: 10s
exporters:
  otlp/dead:
    endpoints: [http://%s]
    max_backlog_age: 1s
    retry_initial_backoff: 10ms
    retry_max_backoff: 100ms
pipelines:
  logs: {receivers: [otlp], exporters: [otlp/dead]}
`, filepath.Join(dir, "lake"), filepath.Join(dir, "queue"), dead)))
	g := newLoadGen(200)
	client := &http.Client{Timeout: 30 * time.Second}
	drop := `sluice_exporter_dropped_bytes_total{exporter="otlp/dead",reason="max_backlog_age"}`
	// Keep sending (segments fill, are sealed and age) until the drop.
	if !waitFor(60*time.Second, func() bool {
		for range 10 {
			if !g.send(t, t.Context(), client, s.http) {
				t.Fatalf("a request was refused behind a dead endpoint (%d refused, %d failed)", g.refused.Load(), g.failed.Load())
			}
		}
		return metricValue(t, s.admin, drop) > 0
	}) {
		t.Fatalf("%s stayed 0:\n%s", drop, scrapeMetrics(t, s.admin))
	}
	if !strings.Contains(s.stderr.String(), "backlog over its bound") {
		t.Errorf("no log line says a segment was dropped for the exporter:\n%s", s.stderr)
	}
}
