package e2e

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// TestFwdHangingDownstream: a backend that accepts the TCP connection and
// never answers (a hung process, a black-holing proxy), as one of three
// endpoints of a replicating exporter and as the only endpoint of another
// exporter. Requests to it time out (the exporter's timeout), are retried
// and open its breaker; the other endpoints of the same exporter and the
// lake go on; the lag of what waits for it shows on /metrics.
func TestFwdHangingDownstream(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	hung := "http://" + ln.Addr().String() + "/api/v1/write"
	q := freePort(t)
	startServer(t, freshConfig(t, t.TempDir(), q))
	liveURL := "http://" + q + "/api/v1/write"
	policy := "batch_delay: 20ms, timeout: 500ms, retry_initial_backoff: 10ms, retry_max_backoff: 100ms, breaker_failures: 2, breaker_cooldown: 300ms"
	up := audRelay(t, fmt.Sprintf("  prometheus_remote_write/both: {endpoints: [%s, %s], %s}\n  prometheus_remote_write/hung: {endpoints: [%s], %s}",
		liveURL, hung, policy, hung, policy), "prometheus_remote_write/both", "prometheus_remote_write/hung", "lake")
	const rounds = 5
	for r := range rounds {
		audWrite(t, up.prw, fmt.Sprintf("fwd_hang_%d", r), 10)
		time.Sleep(50 * time.Millisecond)
	}
	end := time.Now()
	for r := range rounds {
		name := fmt.Sprintf("fwd_hang_%d", r)
		var n int
		if !waitFor(60*time.Second, func() bool {
			n = 0
			for _, s := range promMatrix(t, "http://"+q, name+"[1h]", end) {
				n += len(s.Values)
			}
			return n == 10
		}) {
			t.Fatalf("the live endpoint has %d of the 10 samples of %s: held back by the hung one\n%s", n, name, scrapeMetrics(t, up.admin))
		}
	}
	for _, x := range []string{"prometheus_remote_write/both", "prometheus_remote_write/hung"} {
		state := fmt.Sprintf(`sluice_exporter_breaker_state{endpoint=%q,exporter=%q}`, hung, x)
		if !waitFor(30*time.Second, func() bool { return metricValue(t, up.admin, state) == 2 }) {
			t.Fatalf("%s: the hung endpoint's breaker never opened:\n%s", x, scrapeMetrics(t, up.admin))
		}
		if f := metricValue(t, up.admin, fmt.Sprintf(`sluice_exporter_failed_requests_total{endpoint=%q,exporter=%q}`, hung, x)); f < 2 {
			t.Errorf("%s: %v failed requests to the hung endpoint, want its timeouts counted", x, f)
		}
		if lag := metricValue(t, up.admin, fmt.Sprintf(`sluice_exporter_queue_lag_bytes{exporter=%q}`, x)); lag <= 0 {
			t.Errorf("%s: lag %v, want what waits for the hung endpoint", x, lag)
		}
	}
	// The lake committed everything meanwhile (its loop never waits for
	// an exporter; lake.flush_interval is 1m here).
	if !waitFor(150*time.Second, func() bool {
		return metricValue(t, up.admin, `sluice_lake_committed_queue_position`) >= metricValue(t, up.admin, `sluice_queue_durable_position`) &&
			metricValue(t, up.admin, `sluice_lake_uncommitted_queue_bytes`) == 0
	}) {
		t.Fatalf("the relay's lake did not commit what the hung endpoint waits for:\n%s", scrapeMetrics(t, up.admin))
	}
}
