//go:build linux

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// sumMetric adds up every sample of metric on base's /metrics.
func sumMetric(t *testing.T, base, metric string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	found := false
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(metric)+`(?:\{[^}]*\})? (\S+)$`).FindAllSubmatch(b, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		sum += v
		found = true
	}
	return sum, found
}

// TestPrometheusRetriesWhileDiskIsLow runs Debian's real Prometheus
// remote-writing to a `sluice run` whose queue is on a small tmpfs, then
// takes the disk below queue.min_free_bytes for a while. sluice refuses
// the appends, and Prometheus, configured as by default
// (retry_on_http_429 off), must take the answer as one to retry: no
// sample it counts as failed (dropped for good), and once the disk has
// room again sluice holds every sample Prometheus scraped through the
// outage. A 429 there was a non-recoverable error to Prometheus, which
// dropped each batch sent while the disk was low.
func TestPrometheusRetriesWhileDiskIsLow(t *testing.T) {
	mnt := mountTmpfs(t, 64<<20)
	lakeDir := filepath.Join(mnt, "lake")
	const minFree = 12 << 20
	qaddr := freePort(t)
	cfgPath := filepath.Join(t.TempDir(), "sluice.yaml")
	cfg := fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
    max_request_bytes: 256KiB
admin:
  addr: 127.0.0.1:0
query:
  addr: %s
upkeep:
  enabled: false
queue:
  segment_bytes: 1MiB
  min_free_bytes: %d
lake:
  root: %s
  flush_interval: 1s
  checkpoint_queue_bytes: 4MiB
shutdown_timeout: %s
`, qaddr, minFree, lakeDir, runShutdownTimeout)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfgPath)
	paddr := freePort(t)
	pbase, stderr := startPrometheus(t, paddr, selfScrapeConfig(paddr, qaddr, ""))
	sbase := "http://" + qaddr
	start := time.Now()
	for len(promMatrix(t, sbase, `up`, time.Now())) == 0 {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("sluice got nothing from prometheus:\n%s\n%s", stderr, s.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The disk goes below min_free_bytes: every append is refused.
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, freeBytes(t, mnt)-minFree/2), 0o644); err != nil {
		t.Fatal(err)
	}
	refused := func() float64 {
		v, _ := sumMetric(t, "http://"+s.admin, "sluice_pipeline_rejected_records_total")
		return v
	}
	for start := time.Now(); refused() == 0; time.Sleep(200 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("sluice refused nothing with the disk below min_free_bytes:\n%s", s.stderr)
		}
	}
	time.Sleep(6 * time.Second) // several scrapes and sends refused
	retried, _ := sumMetric(t, pbase, "prometheus_remote_storage_samples_retried_total")
	failed, ok := sumMetric(t, pbase, "prometheus_remote_storage_samples_failed_total")
	if !ok {
		t.Fatalf("prometheus has no prometheus_remote_storage_samples_failed_total")
	}
	t.Logf("while the disk was low: sluice refused %v records; prometheus retried %v samples, failed %v", refused(), retried, failed)
	if failed != 0 {
		t.Errorf("prometheus dropped %v samples for good while sluice's disk was low: its answer must be one prometheus retries", failed)
	}
	if retried == 0 {
		t.Errorf("prometheus retried nothing while sluice refused its requests")
	}

	// Room again: what Prometheus held back arrives.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Second)
	q := fmt.Sprintf(`count_over_time(up[%ds])`, int(time.Since(start).Seconds())+2)
	var p, got []rwSeries
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		p, got = promMatrix(t, pbase, q, at), promMatrix(t, sbase, q, at)
		if len(p) == 1 && fmt.Sprint(p) == fmt.Sprint(got) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: prometheus %v, sluice %v after the disk had room again", q, p, got)
		}
	}
	t.Logf("%s: prometheus and sluice agree: %v", q, p)
	if failed, _ := sumMetric(t, pbase, "prometheus_remote_storage_samples_failed_total"); failed != 0 {
		t.Errorf("prometheus dropped %v samples for good", failed)
	}
}
