package pipeline

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMetricsPromtool: /metrics of a running pipeline that took data
// passes `promtool check metrics` (names, units, _total, HELP), which a
// Prometheus operator runs: sluice_pipeline_histogram_count_mismatch_points_total
// did not (promtool 2.42: "metric name should not include type
// 'histogram'").
func TestMetricsPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_ALL") != "" {
			t.Fatal("promtool not found and SLUICE_REQUIRE_ALL is set")
		}
		t.Skip("promtool not found")
	}
	p := start(t, testConfig(t))
	if code, body := postBody(t, p, "acme", attrsRequest(2, 1, 0)); code != 200 {
		t.Fatalf("request: %d %s", code, body)
	}
	_, m := get(t, p, "/metrics")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(m)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
