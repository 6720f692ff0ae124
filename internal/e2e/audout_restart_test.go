package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAudoutRestartResumes: an otlp exporter's cursor survives restarts.
// What the backend accepted before a graceful stop is not sent again after
// the restart; what was acknowledged while the backend was down survives a
// kill -9 of sluice and arrives once the backend is back, after the next
// start.
func TestAudoutRestartResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	b := newOTLPLogsBackend(t)
	dir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: "", http_addr: 127.0.0.1:0, tenant_header: X-Scope-OrgID}
admin: {addr: 127.0.0.1:0}
lake: {root: %s}
queue: {dir: %s}
exporters:
  otlp/r:
    endpoints: [%s]
    batch_delay: 20ms
    retry_initial_backoff: 10ms
    retry_max_backoff: 100ms
    breaker_cooldown: 100ms
pipelines:
  logs: {receivers: [otlp], exporters: [otlp/r]}
shutdown_timeout: %s
`, filepath.Join(dir, "lake"), filepath.Join(dir, "queue"), b.URL, runShutdownTimeout))
	g := newLoadGen(10)
	client := &http.Client{Timeout: 30 * time.Second}
	sendN := func(s *server, n int) {
		t.Helper()
		for range n {
			if !g.send(t, t.Context(), client, s.http) {
				t.Fatalf("a request was refused (%d refused, %d failed)", g.refused.Load(), g.failed.Load())
			}
		}
	}
	lag := `sluice_exporter_queue_lag_bytes{exporter="otlp/r"}`

	// 1: delivered, then a graceful stop.
	s := startServer(t, cfg)
	sendN(s, 20)
	if !waitFor(30*time.Second, func() bool { return b.distinct() == 200 && metricValue(t, s.admin, lag) == 0 }) {
		t.Fatalf("phase 1: %d of 200 records delivered, lag %v", b.distinct(), metricValue(t, s.admin, lag))
	}
	s.cmd.Process.Signal(os.Interrupt)
	if code, _ := s.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("graceful stop: exit %d\n%s", code, s.stderr)
	}

	// 2: the backend is down; acknowledged records wait; kill -9.
	b.down.Store(true)
	s = startServer(t, cfg)
	sendN(s, 30)
	if !waitFor(30*time.Second, func() bool { return metricValue(t, s.admin, lag) > 0 }) {
		t.Fatal("no lag while the backend is down")
	}
	s.cmd.Process.Kill()
	s.wait(t, 30*time.Second)

	// 3: restart, the backend comes back: everything arrives, and what
	// phase 1 delivered is not sent again.
	s = startServer(t, cfg)
	b.down.Store(false)
	want := g.ackedCount()
	if !waitFor(60*time.Second, func() bool { return b.distinct() == want }) {
		t.Fatalf("after the restart the backend has %d of %d acknowledged records", b.distinct(), want)
	}
	for seq := int64(0); seq < 200; seq++ {
		if n := b.count(seq); n != 1 {
			t.Fatalf("record %d, delivered before a graceful stop, arrived %d times", seq, n)
		}
	}
}
