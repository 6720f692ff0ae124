package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// seqCounts counts the records of tenant in a lake by their "seq".
func seqCounts(t *testing.T, lakeDir, tenant string) map[int64]int {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(lakeDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	segs, err := cat.List(ctx, catalog.Filter{Table: "logs", Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]int{}
	for _, s := range segs {
		f, err := lake.OpenFile(filepath.Join(lakeDir, s.Path))
		if err != nil {
			t.Fatalf("catalogued file: %v", err)
		}
		var l signal.Logs
		if err := f.ReadLogs(&l); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for i := range l.Len() {
			a := l.FindAttr(l.Attr[i], "seq")
			if a < 0 {
				t.Fatalf("%s: record without seq", s.Path)
			}
			out[l.AttrInt(a)]++
		}
	}
	return out
}

func forwardConfigs(t *testing.T, downLake, downHTTP, upLake string) (down, up string) {
	down = writeConfig(t, fmt.Sprintf(`
receivers:
  otlp: {grpc_addr: "", http_addr: %q, tenant_header: X-Scope-OrgID}
lake: {root: %q, flush_interval: 1s}
admin: {addr: 127.0.0.1:0}
query: {addr: 127.0.0.1:0}
shutdown_timeout: 10s
`, downHTTP, downLake))
	up = writeConfig(t, fmt.Sprintf(`
receivers:
  otlp: {grpc_addr: "", http_addr: 127.0.0.1:0, tenant_header: X-Scope-OrgID}
lake: {root: %q, flush_interval: 1s}
admin: {addr: 127.0.0.1:0}
query: {addr: 127.0.0.1:0}
shutdown_timeout: 10s
exporters:
  otlp/down:
    endpoints: [http://%s]
    tenant_header: X-Scope-OrgID
    compression: zstd
    batch_delay: 50ms
    retry_initial_backoff: 20ms
    retry_max_backoff: 200ms
    breaker_cooldown: 200ms
pipelines:
  logs: {receivers: [otlp], exporters: [lake, otlp/down]}
  metrics: {receivers: [otlp], exporters: [lake]}
  traces: {receivers: [otlp], exporters: [lake]}
`, upLake, downHTTP))
	return down, up
}

// TestForwardKilledDownstream: sluice run forwards OTLP to a second sluice
// run, which is killed with SIGKILL under load and restarted on the same
// address and lake. Every record the upstream acknowledged arrives in the
// downstream lake; duplicates (at-least-once) are counted and reported;
// the upstream keeps acknowledging throughout.
func TestForwardKilledDownstream(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	downLake, upLake := t.TempDir(), t.TempDir()
	// First start on port 0 to learn a free address, then keep it.
	probeCfg, _ := forwardConfigs(t, downLake, "127.0.0.1:0", upLake)
	down := startQueryRun(t, probeCfg)
	downHTTP := down.http
	downCfg, upCfg := forwardConfigs(t, downLake, downHTTP, upLake)
	up := startQueryRun(t, upCfg)

	var next atomic.Int64
	var mu sync.Mutex
	acked := map[int64]bool{}
	refused := atomic.Int64{}
	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				first := next.Add(20) - 20
				code, _ := sendLogs(t, up.http, "relay", wideBody(t, first, 20, 1, "f"))
				if code != http.StatusOK {
					refused.Add(1)
					continue
				}
				mu.Lock()
				for i := range int64(20) {
					acked[first+i] = true
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	down.cmd.Process.Kill() // SIGKILL under load
	<-down.exited
	t.Logf("downstream killed after %d records sent upstream", next.Load())
	time.Sleep(1500 * time.Millisecond) // upstream keeps acknowledging; the exporter retries
	down = startQueryRun(t, downCfg)
	time.Sleep(1500 * time.Millisecond)
	stopLoad()
	wg.Wait()
	if refused.Load() != 0 {
		t.Fatalf("upstream refused %d requests while the downstream was down", refused.Load())
	}

	// Wait until the upstream exporter has delivered everything.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if v := metricValue(t, up.admin, `sluice_exporter_queue_lag_bytes{exporter="otlp/down"}`); v == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exporter still behind after 60s:\n%s", up.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	opened := metricValue(t, up.admin, fmt.Sprintf(`sluice_exporter_breaker_opened_total{endpoint="http://%s",exporter="otlp/down"}`, downHTTP))
	retried := metricValue(t, up.admin, fmt.Sprintf(`sluice_exporter_retried_requests_total{endpoint="http://%s",exporter="otlp/down"}`, downHTTP))
	// Graceful stop commits the downstream lake.
	down.cmd.Process.Signal(os.Interrupt)
	waittest.Recv(t, down.exited, "the downstream sluice to stop on SIGINT")

	got := seqCounts(t, downLake, "relay")
	missing, dups := 0, 0
	for seq := range acked {
		switch n := got[seq]; {
		case n == 0:
			missing++
		case n > 1:
			dups += n - 1
		}
	}
	t.Logf("acknowledged upstream: %d records; downstream has %d distinct, %d duplicates; breaker opened %v times, %v retries",
		len(acked), len(got), dups, opened, retried)
	if missing > 0 {
		t.Fatalf("%d acknowledged records never reached the downstream lake", missing)
	}
	if retried == 0 {
		t.Fatal("the exporter never retried: the downstream kill did not happen under load")
	}
}
