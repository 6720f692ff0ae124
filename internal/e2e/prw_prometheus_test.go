package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestPrometheusRemoteWritesToSluice runs Debian's real Prometheus
// scraping itself every second and remote-writing (1.0, what 2.42 speaks)
// to a real `sluice run`; then the same PromQL queries, at an evaluation
// time both have all data for, agree series by series: raw samples of
// every scraped series, labels and values exactly.
func TestPrometheusRemoteWritesToSluice(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr))

	paddr := freePort(t)
	pbase, stderr := startPrometheus(t, paddr, selfScrapeConfig(paddr, qaddr, ""))
	sbase := "http://" + qaddr
	// A few scrapes after the first one.
	for start := time.Now(); len(promMatrix(t, pbase, `up`, time.Now())) == 0; time.Sleep(200 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("prometheus scraped nothing:\n%s", stderr)
		}
	}
	time.Sleep(4 * time.Second)
	at := time.Now().Add(-time.Second)

	queries := []string{
		`{job="self"}[4s]`,
		`up`,
		`count({job="self"})`,
		`sum by (job, instance) (prometheus_tsdb_head_series)`,
		`rate(prometheus_tsdb_head_samples_appended_total[3s])`,
	}
	// Remote write lags the scrape by up to a batch deadline and a retry:
	// wait until sluice has every series Prometheus has at the time.
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := promMatrix(t, pbase, queries[2], at)
		s := promMatrix(t, sbase, queries[2], at)
		if fmt.Sprint(p) == fmt.Sprint(s) && len(p) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice never caught up: prometheus %v, sluice %v\n%s", p, s, stderr)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, q := range queries {
		var p, s []rwSeries
		// The last scrape before `at` may still be on its way: retry a while.
		for range 20 {
			p, s = promMatrix(t, pbase, q, at), promMatrix(t, sbase, q, at)
			if fmt.Sprint(p) == fmt.Sprint(s) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if len(p) == 0 {
			t.Fatalf("%s: prometheus has no series", q)
		}
		if fmt.Sprint(p) != fmt.Sprint(s) {
			for i := range max(len(p), len(s)) {
				var a, b rwSeries
				if i < len(p) {
					a = p[i]
				}
				if i < len(s) {
					b = s[i]
				}
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Errorf("%s: first difference at series %d:\nprometheus %v\nsluice     %v", q, i, a, b)
					break
				}
			}
			t.Fatalf("%s: %d series from prometheus, %d from sluice", q, len(p), len(s))
		}
		t.Logf("%s: %d series agree", q, len(p))
	}
}

// selfScrapeConfig is the configuration of a Prometheus on paddr that
// scrapes itself every second and remote-writes to sluice's query address
// qaddr, with more remote_write settings in extra (indented lines).
func selfScrapeConfig(paddr, qaddr, extra string) string {
	return fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: self
    static_configs: [{targets: ["%s"]}]
remote_write:
  - url: http://%s/api/v1/write
    queue_config: {batch_send_deadline: 500ms, min_backoff: 100ms}
%s`, paddr, qaddr, extra)
}
