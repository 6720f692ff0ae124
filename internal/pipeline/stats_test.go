package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// The statistics count what is queued: the points the rules keep, and the
// aggregate rules' emitted output, not the inputs an aggregate drops.
func TestStatsCountQueuedAndEmitted(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`
metrics:
  - {name: agg, action: aggregate, match: agg_in, interval: 1m, flush_delay: 0s, outputs: [sum]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Processors.RulesFile = rules
	p := start(t, cfg)

	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	at := pcommon.NewTimestampFromTime(time.Now().Truncate(time.Minute).Add(-3 * time.Minute))
	for _, name := range []string{"kept", "agg_in"} {
		g := sm.Metrics().AppendEmpty()
		g.SetName(name)
		pts := g.SetEmptyGauge().DataPoints()
		for i := range 3 {
			dp := pts.AppendEmpty()
			dp.SetTimestamp(at)
			dp.SetDoubleValue(1)
			dp.Attributes().PutInt("i", int64(i))
		}
	}
	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	if resp := post(t, p, "/v1/metrics", "acme", body); resp.StatusCode != 200 {
		t.Fatalf("export: %d", resp.StatusCode)
	}
	series := func() map[string]int64 {
		out := map[string]int64{}
		for _, m := range p.stats.Summary("acme", 100).Metrics {
			if m.Series > 0 {
				out[m.Metric] = m.Series
			}
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := series()
		var emitted string
		for name := range got {
			if strings.HasPrefix(name, "agg_in:") {
				emitted = name
			}
		}
		if emitted != "" {
			// No by or without: the output keeps every label (3 series).
			if got["kept"] != 3 || got[emitted] != 3 || len(got) != 2 {
				t.Fatalf("series by metric %v: want kept 3, %s 3, no agg_in", got, emitted)
			}
			// Samples before the rules and stored: the aggregate took all
			// of agg_in's; kept passed whole.
			for _, m := range p.stats.Summary("acme", 100).Metrics {
				want := map[string][2]uint64{"kept": {3, 3}, "agg_in": {3, 0}, emitted: {0, 3}}[m.Metric]
				if got := [2]uint64{m.Before, m.Samples}; got != want {
					t.Errorf("%s: before the rules %d, stored %d; want %d, %d", m.Metric, got[0], got[1], want[0], want[1])
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the aggregate's output never showed in the statistics: %v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stats.enabled: false keeps no statistics and ingests as before.
func TestStatsOff(t *testing.T) {
	cfg := testConfig(t)
	cfg.Stats.Enabled = false
	p := start(t, cfg)
	if p.stats != nil || p.cons.stats != nil {
		t.Fatal("statistics kept with stats.enabled false")
	}
	if resp := post(t, p, "/v1/metrics", "acme", metricsRequest(t, 10)); resp.StatusCode != 200 {
		t.Fatalf("export: %d", resp.StatusCode)
	}
}
