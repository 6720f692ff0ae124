package processor

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"

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

// TestLimitConcurrentExact: requests in parallel through one rule set with
// two limits (a batch holds one limiter at a time and switches between
// them, lookupChunk) admit exactly max series in all, and never deadlock.
func TestLimitConcurrentExact(t *testing.T) {
	r := mustParse(t, `metrics:
  - {name: per-metric, action: limit, per: metric, max_series: 700, window: 1h}
  - {name: per-tenant, action: limit, per: tenant, max_series: 500, window: 1h}
`)
	const workers, perBatch = 4, 600
	batchOf := func(w, k int) *signal.Metrics {
		var pts []string
		for i := range perBatch {
			pts = append(pts, fmt.Sprintf(`{"timeUnixNano":"3600000000000","asDouble":1,"attributes":[{"key":"s","value":{"stringValue":"w%d_%d"}}]}`, w, (k*perBatch+i)%(2*perBatch)))
		}
		js := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"req","gauge":{"dataPoints":[` + strings.Join(pts, ",") + `]}}]}]}]}`
		var m signal.Metrics
		if err := otlp.DecodeMetricsJSON(&m, []byte(js)); err != nil {
			t.Error(err)
		}
		return &m
	}
	var mu sync.Mutex
	kept := map[string]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &Scratch{Tenant: "t", Now: time.Unix(3600, 0)}
			for k := range 6 {
				b := batchOf(w, k)
				r.ProcessMetrics(b, s)
				mu.Lock()
				for _, l := range labelsOf(b) {
					kept[l.Get("s")] = true
				}
				mu.Unlock()
			}
		}()
	}
	waittest.Wait(t, &wg, "the concurrent limiters")
	if len(kept) != 500 {
		t.Fatalf("%d distinct series kept by 4 concurrent writers under a tenant limit of 500", len(kept))
	}
}
