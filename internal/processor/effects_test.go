package processor

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// twoMetrics decodes a request of n points of gauge "req" (unit "s":
// req_seconds, user=u<i%4>) and n of gauge "other" (unit "1": other_ratio),
// from service "api".
func twoMetrics(t testing.TB, n int) *signal.Metrics {
	t.Helper()
	pts := func(off int) string {
		var p []string
		for i := 0; i < n; i++ {
			p = append(p, fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":%d,"attributes":[{"key":"user.id","value":{"stringValue":"u%d"}}]}`,
				1700000000000000000+int64(i+off)*1e9, i, i%4))
		}
		return strings.Join(p, ",")
	}
	js := `{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"api"}}]},"scopeMetrics":[{"metrics":[` +
		`{"name":"req","unit":"s","gauge":{"dataPoints":[` + pts(0) + `]}},` +
		`{"name":"other","unit":"1","gauge":{"dataPoints":[` + pts(1000) + `]}}]}]}]}`
	var m signal.Metrics
	if err := otlp.DecodeMetricsJSON(&m, []byte(js)); err != nil {
		t.Fatal(err)
	}
	return &m
}

const effectsRules = `
metrics:
  - name: drop-other
    match: 'other_ratio'
    action: drop
  - name: anon-u0
    match: 'req_seconds'
    action: relabel
    relabel:
      - {source_labels: [user_id], regex: u0, target_label: user_id, replacement: anon}
`

func sortedEffects(m *Metrics, tenant string) []RuleEffect {
	e := m.RuleEffects(tenant)
	slices.SortFunc(e, func(a, b RuleEffect) int {
		return strings.Compare(a.Rule+"\x00"+a.Tenant+"\x00"+a.Metric, b.Rule+"\x00"+b.Tenant+"\x00"+b.Metric)
	})
	return e
}

// TestRuleEffectsPerTenantAndMetric: a known batch through a drop by name
// and a relabel changing one metric gives exact per (rule, tenant, metric)
// counts, kept apart by tenant, equal to the rules' counters.
func TestRuleEffectsPerTenantAndMetric(t *testing.T) {
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse([]byte(effectsRules), m)
	if err != nil {
		t.Fatal(err)
	}
	var s Scratch
	s.Tenant = "acme"
	for range 2 { // two batches add up
		if changed, kept := r.ProcessMetrics(twoMetrics(t, 8), &s); !changed || kept != 8 {
			t.Fatalf("changed=%v kept=%d, want true 8", changed, kept)
		}
	}
	s.Tenant = "beta"
	r.ProcessMetrics(twoMetrics(t, 4), &s)

	want := []RuleEffect{
		{Rule: "anon-u0", Tenant: "acme", Metric: "req_seconds", Changed: 4}, // u0 is 2 of 8 points, twice
		{Rule: "anon-u0", Tenant: "beta", Metric: "req_seconds", Changed: 1},
		{Rule: "drop-other", Tenant: "acme", Metric: "other_ratio", Dropped: 16},
		{Rule: "drop-other", Tenant: "beta", Metric: "other_ratio", Dropped: 4},
	}
	if got := sortedEffects(m, ""); !slices.Equal(got, want) {
		t.Fatalf("effects\n got %+v\nwant %+v", got, want)
	}
	if got := sortedEffects(m, "beta"); !slices.Equal(got, []RuleEffect{want[1], want[3]}) {
		t.Fatalf("tenant beta's effects %+v", got)
	}
	// The per-metric counts add up to the rules' counters.
	if v := counterValue(m.dropped.WithLabelValues("drop-other")); v != 20 {
		t.Fatalf("sluice_processor_rule_dropped_total{rule=drop-other} = %v, want 20", v)
	}
	if v := counterValue(m.changed.WithLabelValues("anon-u0")); v != 5 {
		t.Fatalf("sluice_processor_rule_changed_total{rule=anon-u0} = %v, want 5", v)
	}
	// A reload keeps the table (by rule name).
	r2, err := Parse([]byte(effectsRules), m)
	if err != nil {
		t.Fatal(err)
	}
	r2.ProcessMetrics(twoMetrics(t, 4), &s)
	if got := sortedEffects(m, "beta"); got[1].Dropped != 8 || got[0].Changed != 2 {
		t.Fatalf("after a reload, tenant beta's effects %+v, want dropped 8, changed 2", got)
	}
}

// TestRuleEffectsBound: past max entries, new (rule, tenant, metric)
// entries are not made and their points are counted as overflow; existing
// entries keep counting.
func TestRuleEffectsBound(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SetMaxRuleEffects(3)
	r, err := Parse([]byte(effectsRules), m)
	if err != nil {
		t.Fatal(err)
	}
	var s Scratch
	for _, tn := range []string{"a", "b", "a"} { // a: 2 entries, b: 1 fits, 1 does not
		s.Tenant = tn
		r.ProcessMetrics(twoMetrics(t, 8), &s)
	}
	got := sortedEffects(m, "")
	if len(got) != 3 {
		t.Fatalf("%d entries, want 3: %+v", len(got), got)
	}
	if got[0] != (RuleEffect{Rule: "anon-u0", Tenant: "a", Metric: "req_seconds", Changed: 4}) ||
		got[2] != (RuleEffect{Rule: "drop-other", Tenant: "a", Metric: "other_ratio", Dropped: 16}) {
		t.Fatalf("entries %+v", got)
	}
	// A batch's cells are flushed in the order they were first touched:
	// req_seconds's points come first, so tenant b's relabel entry is made
	// and its drop is the overflow.
	if got[1] != (RuleEffect{Rule: "anon-u0", Tenant: "b", Metric: "req_seconds", Changed: 2}) {
		t.Fatalf("tenant b's entry %+v", got[1])
	}
	if v := counterValue(m.eff.overflow); v != 8 {
		t.Fatalf("sluice_processor_rule_effects_overflow_points_total = %v, want 8", v)
	}
}

// TestRuleEffectsNameMetricsOverALimit: a limit that only reports (and
// one that refuses) names the metrics whose series are over it, with the
// points counted as sluice_processor_limit_exceeded_total counts them: a
// report-only limit drops and changes nothing, so without this nothing
// said which metric went over.
func TestRuleEffectsNameMetricsOverALimit(t *testing.T) {
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse([]byte(`
metrics:
  - name: watch
    action: limit
    per: metric
    max_series: 2
    exceed_action: report
  - name: cap-req
    match: 'req_seconds'
    action: limit
    per: metric
    max_series: 3
`), m)
	if err != nil {
		t.Fatal(err)
	}
	var s Scratch
	s.Tenant = "acme"
	// 8 points each of req_seconds and other_ratio over 4 users: 4 series
	// each. watch admits 2 per metric: the points of the other 2 (4 of 8)
	// are over it. cap-req admits 3 of req_seconds': 2 points over.
	if _, kept := r.ProcessMetrics(twoMetrics(t, 8), &s); kept != 14 {
		t.Fatalf("kept %d points, want 14", kept)
	}
	want := []RuleEffect{
		{Rule: "cap-req", Tenant: "acme", Metric: "req_seconds", Dropped: 2, Exceeded: 2},
		{Rule: "watch", Tenant: "acme", Metric: "other_ratio", Exceeded: 4},
		{Rule: "watch", Tenant: "acme", Metric: "req_seconds", Exceeded: 4},
	}
	if got := sortedEffects(m, ""); !slices.Equal(got, want) {
		t.Fatalf("effects:\n got %+v\nwant %+v", got, want)
	}
	if n := counterValue(m.exceeded.WithLabelValues("watch")); n != 8 {
		t.Fatalf("sluice_processor_limit_exceeded_total{rule=watch} = %v, want 8", n)
	}
}
