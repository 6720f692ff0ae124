package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/stats"
)

// seriesAt returns the series of expr at at as "name{k=v,...} value",
// sorted (labels sorted, __name__ first).
func seriesAt(t *testing.T, base, expr string, at time.Time) []string {
	t.Helper()
	var out []string
	for _, s := range promMatrix(t, base, expr, at) {
		var ls []string
		for k, v := range s.Metric {
			if k != "__name__" {
				ls = append(ls, k+"="+v)
			}
		}
		slices.Sort(ls)
		v := ""
		if len(s.Values) > 0 {
			v = fmt.Sprint(s.Values[len(s.Values)-1][1])
		}
		out = append(out, fmt.Sprintf("%s{%s} %s", s.Metric["__name__"], strings.Join(ls, ","), v))
	}
	slices.Sort(out)
	return out
}

// TestRulesPerPipeline: three metric pipelines of one `sluice run`, each
// with its own processor chain: metrics/lake runs the rule set "lakeonly"
// (drop rpp_debug) into the lake; metrics/down runs "down" (labeldrop
// user_id, add route="down") into a remote-write exporter; metrics/raw
// has no processors and forwards to the same downstream sluice. Each
// destination gets exactly its chain's output; "down"'s aggregate rule's
// output goes to its route only (not to the lake), with the request's
// tenant (no processors.rules_file here). The downstream is down at
// first: the routed records wait in the queue across a restart of the
// relay and drain when it comes up. Then a valid new "lakeonly" and a
// broken "down" are written: the lake's chain changes, the other keeps its
// old rules.
func TestRulesPerPipeline(t *testing.T) {
	dir := t.TempDir()
	lakeOnly := filepath.Join(dir, "lakeonly.yaml")
	down := filepath.Join(dir, "down.yaml")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(lakeOnly, `metrics:
  - {name: drop-debug, match: '{__name__="rpp_debug"}', action: drop}
`)
	write(down, `metrics:
  - name: tidy
    match: '{__name__=~"rpp_.*"}'
    action: relabel
    relabel:
      - {action: labeldrop, regex: user_id}
      - {action: replace, target_label: route, replacement: down}
  - {name: agg, action: aggregate, match: rpp_kept, interval: 1m, flush_delay: 0s, outputs: [sum], keep_input: true}
`)
	downLake, downQuery := t.TempDir(), freePort(t)
	query := freePort(t)
	cfg := writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}
admin: {addr: 127.0.0.1:0}
query: {addr: %[1]s}
lake: {root: %[2]s}
queue: {dir: %[3]s}
processors:
  reload_interval: 100ms
  rule_sets:
    lakeonly: {rules_file: %[4]s}
    down: {rules_file: %[5]s}
exporters:
  prometheus_remote_write/down:
    endpoints: [http://%[6]s/api/v1/write]
    batch_delay: 20ms
    retry_initial_backoff: 50ms
    retry_max_backoff: 500ms
    breaker_cooldown: 200ms
  prometheus_remote_write/raw:
    endpoints: [http://%[6]s/api/v1/write]
    batch_delay: 20ms
    retry_initial_backoff: 50ms
    retry_max_backoff: 500ms
    breaker_cooldown: 200ms
pipelines:
  metrics/lake: {receivers: [otlp, prometheus_remote_write], processors: [lakeonly], exporters: [lake]}
  metrics/down: {receivers: [otlp, prometheus_remote_write], processors: [down], exporters: [prometheus_remote_write/down]}
  metrics/raw: {receivers: [otlp, prometheus_remote_write], exporters: [prometheus_remote_write/raw]}
shutdown_timeout: %[7]s
`, query, filepath.Join(dir, "lake"), filepath.Join(dir, "queue"), lakeOnly, down, downQuery, runShutdownTimeout))
	relay := startServer(t, cfg)

	t0 := time.Now().Add(-20 * time.Minute).Truncate(time.Second)
	t1 := t0.Add(6 * time.Minute)
	send := func(at time.Time) {
		t.Helper()
		api, err := remoteapi.NewAPI("http://"+query, remoteapi.WithAPIPath("api/v1/write"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ms := at.UnixMilli()
		req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			{Labels: []prompb.Label{{Name: "__name__", Value: "rpp_requests_total"}, {Name: "job", Value: "a"}, {Name: "user_id", Value: "42"}},
				Samples: []prompb.Sample{{Value: 3, Timestamp: ms}}},
			{Labels: []prompb.Label{{Name: "__name__", Value: "rpp_debug"}, {Name: "job", Value: "a"}},
				Samples: []prompb.Sample{{Value: 1, Timestamp: ms}}},
			{Labels: []prompb.Label{{Name: "__name__", Value: "rpp_kept"}, {Name: "job", Value: "a"}},
				Samples: []prompb.Sample{{Value: 5, Timestamp: ms}}},
		}}
		if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, req); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	expect := func(what, base, expr string, at time.Time, want ...string) {
		t.Helper()
		var got []string
		if !waitFor(60*time.Second, func() bool {
			got = seriesAt(t, base, expr, at)
			return slices.Equal(got, want)
		}) {
			t.Fatalf("%s: %s at %s:\n got  %q\n want %q", what, expr, at.Format(time.TimeOnly), got, want)
		}
	}
	raw := []string{`rpp_debug{job=a} 1`, `rpp_kept{job=a} 5`, `rpp_requests_total{job=a,user_id=42} 3`}

	send(t0)
	// The lake has its chain's output while the downstream is still down.
	expect("lake", "http://"+query, `{__name__=~"rpp_.*"}`, t0.Add(time.Second),
		`rpp_kept{job=a} 5`, `rpp_requests_total{job=a,user_id=42} 3`)
	// The statistics count the samples before the rule sets too (no
	// processors.rules_file here), so that KEPT shows what they kept.
	statMetrics := func() []stats.MetricSummary {
		resp, err := http.Get("http://" + query + "/api/v1/status/sluice")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var doc struct{ Data stats.Status }
		if json.NewDecoder(resp.Body).Decode(&doc) != nil || doc.Data.Stats == nil {
			return nil
		}
		return doc.Data.Stats.Metrics
	}
	if !waitFor(60*time.Second, func() bool {
		for _, m := range statMetrics() {
			if m.Metric == "rpp_requests_total" && m.Before >= 1 && m.Samples >= 1 {
				return true
			}
		}
		return false
	}) {
		resp, _ := http.Get("http://" + query + "/api/v1/status/sluice")
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/api/v1/status/sluice: rpp_requests_total has no samples counted before the rule sets:\n%s", b)
	}
	// The "down" set's aggregate output is queued for its route only.
	if !waitFor(60*time.Second, func() bool {
		return metricValue(t, relay.admin, `sluice_processor_aggregate_emitted_points_total{rule="down/agg"}`) >= 1
	}) {
		t.Fatalf("down/agg emitted nothing:\n%s", relay.stderr)
	}
	aggEnd := t0.Truncate(time.Minute).Add(time.Minute)
	for _, m := range statMetrics() {
		if m.Metric == "rpp_kept:1m_sum" { // queued for the down route only: not stored in the lake
			t.Errorf("the statistics count the down route's aggregate output: %+v", m)
		}
	}

	// Restart the relay with the forwarded records still queued, then
	// bring the downstream up: they drain to it, each to its exporter.
	if err := relay.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := relay.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("relay exit %d after SIGTERM\n%s", code, relay.stderr)
	}
	startServer(t, freshConfig(t, downLake, downQuery))
	relay = startServer(t, cfg)
	expect("downstream, down route", "http://"+downQuery, `{__name__=~"rpp_.*",route="down"}`, t0.Add(time.Second),
		`rpp_debug{job=a,route=down} 1`, `rpp_kept{job=a,route=down} 5`, `rpp_requests_total{job=a,route=down} 3`)
	expect("downstream, raw route", "http://"+downQuery, `{__name__=~"rpp_.*",route=""}`, t0.Add(time.Second), raw...)
	expect("downstream, down route's aggregate", "http://"+downQuery, `{__name__="rpp_kept:1m_sum"}`, aggEnd,
		`rpp_kept:1m_sum{job=a,route=down} 5`)
	if got := seriesAt(t, "http://"+query, `{__name__="rpp_kept:1m_sum"}`, aggEnd); len(got) != 0 {
		t.Fatalf("the lake got the down route's aggregate output: %q", got)
	}
	expect("lake after the restart", "http://"+query, `{__name__=~"rpp_.*"}`, t0.Add(time.Second),
		`rpp_kept{job=a} 5`, `rpp_requests_total{job=a,user_id=42} 3`)

	// Reload: "lakeonly" now drops rpp_kept too; "down" is broken and
	// keeps its old rules.
	reloads := metricValue(t, relay.admin, "sluice_processor_reloads_total")
	failures := metricValue(t, relay.admin, "sluice_processor_reload_failures_total")
	write(lakeOnly, `metrics:
  - {name: drop-debug, match: '{__name__=~"rpp_debug|rpp_kept"}', action: drop}
`)
	write(down, "metrics:\n  - {name: tidy, action: frobnicate}\n")
	if !waitFor(60*time.Second, func() bool {
		return metricValue(t, relay.admin, "sluice_processor_reloads_total") > reloads &&
			metricValue(t, relay.admin, "sluice_processor_reload_failures_total") > failures
	}) {
		t.Fatalf("no reload and failed reload counted:\n%s", relay.stderr)
	}
	if !strings.Contains(relay.stderr.String(), "processors.rule_sets.down") {
		t.Fatalf("the failed reload's log does not name the rule set:\n%s", relay.stderr)
	}
	send(t1)
	expect("lake after the reload", "http://"+query, `{__name__=~"rpp_.*"}`, t1.Add(time.Second),
		`rpp_requests_total{job=a,user_id=42} 3`)
	expect("downstream, down route, old rules", "http://"+downQuery, `{__name__=~"rpp_.*",route="down"}`, t1.Add(time.Second),
		`rpp_debug{job=a,route=down} 1`, `rpp_kept{job=a,route=down} 5`, `rpp_requests_total{job=a,route=down} 3`)
	expect("downstream, raw route after the reload", "http://"+downQuery, `{__name__=~"rpp_.*",route=""}`, t1.Add(time.Second), raw...)
}

// TestValidateRuleSets: sluice validate loads every rule set's file and
// names the set of a broken one.
func TestValidateRuleSets(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("metrics:\n  - {name: d, match: '{__name__=\"x\"}', action: drop}\n"), 0o644)
	os.WriteFile(bad, []byte("metrics:\n  - {name: d, action: frobnicate}\n"), 0o644)
	cfg := func(file string) string {
		p := filepath.Join(t.TempDir(), "sluice.yaml")
		os.WriteFile(p, []byte(fmt.Sprintf(`lake: {root: %s}
processors: {rule_sets: {strict: {rules_file: %s}}}
pipelines:
  metrics: {receivers: [otlp], processors: [strict], exporters: [lake]}
`, filepath.Join(dir, "lake"), file)), 0o644)
		return p
	}
	if r := run(t, "validate", "--config", cfg(good)); r.code != 0 || !strings.Contains(r.stdout, "config OK") {
		t.Fatalf("validate of a good rule set: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, "validate", "--config", cfg(bad)); r.code == 0 || !strings.Contains(r.stderr, "processors.rule_sets.strict") {
		t.Fatalf("validate of a broken rule set: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
