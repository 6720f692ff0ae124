package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpsSignals: the signals an operator sends to a real `sluice run`.
// SIGHUP without processing rules used to end the process (Go's default
// action) with no drain; now it is answered in the log and sluice keeps
// serving. A second SIGTERM during a long final checkpoint stops at once
// (exit 1 naming it), and what was acknowledged but not yet committed is
// in the lake after the next start: nothing acknowledged is lost.
func TestOpsSignals(t *testing.T) {
	lakeDir := t.TempDir()
	// No checkpoint before the shutdown: the final one has all the data to
	// write, which makes it long enough to interrupt.
	cfg := fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
    tenant_header: X-Scope-OrgID
admin:
  addr: 127.0.0.1:0
query:
  addr: ""
queue:
  segment_bytes: 64MiB
  max_bytes: 2GiB
lake:
  root: %s
  flush_interval: 10m
  checkpoint_buffered_bytes: 4GiB
  checkpoint_queue_bytes: 2GiB
  max_buffered_bytes: 4GiB
upkeep:
  enabled: false
shutdown_timeout: 60s
`, lakeDir)
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, p)

	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, s, "SIGHUP: nothing to reload")
	g := newLoadGen(1000)
	client := &http.Client{Timeout: 5 * time.Second}
	if !g.send(t, context.Background(), client, s.http) {
		t.Fatalf("no request acknowledged after SIGHUP:\n%s", s.stderr)
	}

	ctx, cancel := context.WithCancel(context.Background())
	wg := g.run(t, ctx, s.http, 4)
	deadline := time.Now().Add(20 * time.Second)
	for g.ackedCount() < 300_000 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLog(t, s, "a second SIGTERM or SIGINT stops at once")
	// During the drain the process is alive (healthz) and not ready.
	if code, body := getBody(t, "http://"+s.admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("readyz while draining: %d %q, want 503 saying shutting down", code, body)
	}
	if code, _ := getBody(t, "http://"+s.admin+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz while draining: %d, want 200", code)
	}
	select {
	case <-s.exited:
		t.Fatalf("the final checkpoint of %d records took under 100ms; nothing left to interrupt:\n%s", g.ackedCount(), s.stderr)
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, took := s.wait(t, 10*time.Second)
	if code != 1 || took > 2*time.Second || !strings.Contains(s.stderr.String(), "second signal: stopping at once") {
		t.Fatalf("second SIGTERM: exit %d after %v, want 1 within 2s and the log naming it:\n%s", code, took, s.stderr)
	}
	t.Logf("second SIGTERM: exit %d after %v with %d records acknowledged", code, took.Round(time.Millisecond), g.ackedCount())

	// The next start replays the queue; a clean stop commits it.
	s2 := startServer(t, p)
	if err := s2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := s2.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("stop after restart: exit %d\n%s", code, s2.stderr)
	}
	acked, found, dups := checkLake(t, lakeDir, g)
	if found < acked || dups > 0 {
		t.Errorf("after the interrupted stop and a restart: acknowledged %d, found %d, duplicates %d", acked, found, dups)
	}
}

// waitLog waits for text in the server's log.
func waitLog(t *testing.T, s *server, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.stderr.String(), text) {
		select {
		case <-s.exited:
			t.Fatalf("sluice run exited %d waiting for %q:\n%s", s.exitCode, text, s.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", text, s.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
