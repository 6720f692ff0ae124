package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/corpustest"
)

// TestAudoutExporterMetricsAsDocumented: the exporter families on
// /metrics are the ones docs/config.md lists ("Metrics per exporter"),
// with the labels it names, for an otlp and a prometheus_remote_write
// exporter alike: every family on /metrics is documented, every
// documented family is there from the start (but those documented as
// appearing once counted), and the labels agree.
func TestAudoutExporterMetricsAsDocumented(t *testing.T) {
	root, err := corpustest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(sluice_exporter_[a-z_]+)` \\| ([^|]*) \\| ([^\n]*)\\|$")
	documented := map[string]string{} // family -> sorted labels
	lazy := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		var labels []string
		for _, l := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[2], -1) {
			labels = append(labels, l[1])
		}
		slices.Sort(labels)
		documented[m[1]] = strings.Join(labels, ",")
		lazy[m[1]] = strings.Contains(m[3], "a line once one is counted")
	}
	if len(documented) < 10 {
		t.Fatalf("docs/config.md lists %d exporter metrics: %v", len(documented), documented)
	}

	b := newAudBackend(t, nil)
	o := newOTLPLogsBackend(t)
	s := audRelay(t, fmt.Sprintf("  prometheus_remote_write/m: {endpoints: [%s]}\n  otlp/m: {endpoints: [%s]}", b.URL, o.URL),
		"prometheus_remote_write/m", "otlp/m")
	line := regexp.MustCompile(`(?m)^(sluice_exporter_[a-z_]+)\{([^}]*)\} `)
	exposed := map[string]string{}
	perExporter := map[string]map[string]bool{}
	for _, m := range line.FindAllStringSubmatch(scrapeMetrics(t, s.admin), -1) {
		var labels []string
		exp := ""
		for _, kv := range strings.Split(m[2], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels = append(labels, k)
			if k == "exporter" {
				exp = strings.Trim(v, `"`)
			}
		}
		slices.Sort(labels)
		got := strings.Join(labels, ",")
		if prev, ok := exposed[m[1]]; ok && prev != got {
			t.Errorf("%s: labels %s and %s", m[1], prev, got)
		}
		exposed[m[1]] = got
		if perExporter[m[1]] == nil {
			perExporter[m[1]] = map[string]bool{}
		}
		perExporter[m[1]][exp] = true
	}
	for name, labels := range exposed {
		want, ok := documented[name]
		if !ok {
			t.Errorf("/metrics has %s{%s}, which docs/config.md does not list", name, labels)
		} else if want != labels {
			t.Errorf("%s: labels %s on /metrics, %s in docs/config.md", name, labels, want)
		}
	}
	for name := range documented {
		if _, ok := exposed[name]; !ok && !lazy[name] {
			t.Errorf("docs/config.md lists %s, which /metrics does not have", name)
		}
	}
	// The families every exporter has (not the remote-write ones).
	for _, name := range []string{"sluice_exporter_sent_records_total", "sluice_exporter_failed_requests_total", "sluice_exporter_retried_requests_total",
		"sluice_exporter_dropped_requests_total", "sluice_exporter_dropped_bytes_total", "sluice_exporter_queue_lag_bytes",
		"sluice_exporter_queue_lag_seconds", "sluice_exporter_breaker_state"} {
		for _, exp := range []string{"prometheus_remote_write/m", "otlp/m"} {
			if !perExporter[name][exp] {
				t.Errorf("%s has no line for %s", name, exp)
			}
		}
	}
}
