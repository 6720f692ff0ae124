package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// TestGovRuleSetRefusalAnswers: a pipeline's own rule set's limit and
// require refusals reach the sender as processors.rules_file's do: an
// OTLP partial success naming the rule (added to the rules_file's), and
// remote-write 2.0 written counts leaving them out. Another pipeline
// without the set (a remote-write exporter to a loopback server) takes
// every point; the refusal is reported all the same, since the set's
// pipeline never stores it.
func TestGovRuleSetRefusalAnswers(t *testing.T) {
	var forwarded atomic.Int64
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer down.Close()
	dir := t.TempDir()
	common, strict := filepath.Join(dir, "common.yaml"), filepath.Join(dir, "strict.yaml")
	for p, s := range map[string]string{
		common: "metrics:\n  - {name: need-team, action: require, match: gov_req, labels: [team]}\n",
		strict: "metrics:\n  - {name: cap, action: limit, match: '{__name__=~\"gov_set|gov_rw\"}', per: metric, max_series: 2}\n",
	} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	qaddr := freePort(t)
	cfg := writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}
admin: {addr: 127.0.0.1:0}
query: {addr: %s}
lake: {root: %s}
processors:
  rules_file: %s
  rule_sets:
    strict: {rules_file: %s}
exporters:
  prometheus_remote_write/raw:
    endpoints: [%s/api/v1/write]
    batch_delay: 20ms
pipelines:
  metrics/store: {receivers: [otlp, prometheus_remote_write], processors: [strict], exporters: [lake]}
  metrics/raw: {receivers: [otlp, prometheus_remote_write], exporters: [prometheus_remote_write/raw]}
shutdown_timeout: %s
`, qaddr, filepath.Join(dir, "lake"), common, strict, down.URL, runShutdownTimeout))
	s := startServer(t, cfg)
	now := time.Now().Add(-time.Minute).Truncate(time.Second)

	// Two series over the set's limit, one without the rules_file's team.
	n, msg := govExport(t, s.http, now, [3]string{"gov_set", "a", "x"}, [3]string{"gov_set", "b", "x"},
		[3]string{"gov_set", "c", "x"}, [3]string{"gov_set", "d", "x"}, [3]string{"gov_req", "a", ""})
	if n != 3 || !strings.Contains(msg, `1 data points refused by rule "need-team"`) || !strings.Contains(msg, `2 data points refused by rule "strict/cap"`) {
		t.Fatalf("partial success: %d rejected, %q; want 3 naming need-team (1) and strict/cap (2)", n, msg)
	}
	if n, msg := govExport(t, s.http, now, [3]string{"gov_set", "a", "x"}, [3]string{"gov_set", "b", "x"}); n != 0 || msg != "" {
		t.Fatalf("admitted series: partial success %d %q", n, msg)
	}

	// Remote write 2.0: the set admits two series of a metric, refuses
	// the third.
	st := writev2.NewSymbolTable()
	v2 := &writev2.Request{}
	for _, pod := range []string{"a", "b", "c"} {
		v2.Timeseries = append(v2.Timeseries, writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", "gov_rw", "pod", pod), nil),
			Samples: []writev2.Sample{{Value: 2, Timestamp: now.UnixMilli()}}})
	}
	v2.Symbols = st.Symbols()
	pb, err := v2.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	code, body, hdr := postRW(t, "http://"+qaddr, "application/x-protobuf;proto=io.prometheus.write.v2.Request", pb,
		"X-Prometheus-Remote-Write-Version", "2.0.0")
	if code != 204 || hdr.Get("X-Prometheus-Remote-Write-Samples-Written") != "2" {
		t.Fatalf("remote write 2.0, the third series over the set's limit: %d %s, Samples-Written %q; want 204 and 2",
			code, body, hdr.Get("X-Prometheus-Remote-Write-Samples-Written"))
	}
	if got := metricValue(t, s.admin, `sluice_processor_limit_exceeded_total{rule="strict/cap"}`); got != 3 {
		t.Errorf("limit_exceeded_total %v, want 3 (gov_set c and d, gov_rw c)", got)
	}
	// The other pipeline forwarded what the set refused.
	for start := time.Now(); forwarded.Load() == 0; time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatal("the pipeline without the set forwarded nothing")
		}
	}
}
