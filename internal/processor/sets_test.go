package processor

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRuleSetsApart: the rules of a named set are named <set>/<rule>, so
// the same limit in two sets keeps two states and two counters.
func TestRuleSetsApart(t *testing.T) {
	reg := prometheus.NewRegistry()
	pm, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	src := []byte("metrics:\n  - {name: cap, action: limit, per: metric, max_series: 3, window: 1h}\n")
	a, err := ParseSet(src, pm, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseSet(src, pm, "b")
	if err != nil {
		t.Fatal(err)
	}
	var s Scratch
	s.Tenant = "t"
	if _, kept := a.ProcessMetrics(batch(t, 5, 5), &s); kept != 3 {
		t.Fatalf("set a kept %d of 5 new series, want 3", kept)
	}
	if _, kept := b.ProcessMetrics(batch(t, 5, 5), &s); kept != 3 {
		t.Fatalf("set b kept %d of 5 new series, want 3 (a state of its own)", kept)
	}
	if _, kept := a.ProcessMetrics(batch(t, 5, 5), &s); kept != 3 {
		t.Fatalf("set a again kept %d, want the 3 it admitted", kept)
	}
	for rule, want := range map[string]float64{"a/cap": 4, "b/cap": 2} {
		if got := counterValue(pm.exceeded.WithLabelValues(rule)); got != want {
			t.Errorf("sluice_processor_limit_exceeded_total{rule=%q} = %v, want %v", rule, got, want)
		}
	}
	if _, err := ParseSet([]byte("metrics:\n  - {name: x, action: frobnicate}\n"), nil, "a"); err == nil || !strings.Contains(err.Error(), `"a/x"`) {
		t.Fatalf("an error in a set names the rule as <set>/<rule>: %v", err)
	}
}
