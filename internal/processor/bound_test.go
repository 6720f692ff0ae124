package processor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// TestDecisionsOfNewSeriesBounded: series whose decisions cannot be
// shared (a downsample gives each its own output group, a per-label limit
// its own value) are bounded by the bytes they hold, as relabeled ones:
// past maxDecisionBytes the cache starts over, and a downsample keeps no
// table of its own targets beside the decisions. Before, a million new
// series a minute held every decision and target (760 MiB after two
// minutes in BenchmarkHostileCardinalityAllRules).
func TestDecisionsOfNewSeriesBounded(t *testing.T) {
	defer func(b int64) { maxDecisionBytes = b }(maxDecisionBytes)
	maxDecisionBytes = 1 << 20
	r, _ := parseWith(t, `
metrics:
  - {name: users, action: limit, per: label, label: user_id, max_values: 1000000}
  - {name: down, action: downsample, interval: 1m, flush_delay: 0s, outputs: [avg]}
`)
	s := &Scratch{Tenant: "t", Now: t0}
	const series = 20000
	for first := 0; first < series; first += 1000 {
		var pts []string
		for i := first; i < first+1000; i++ {
			pts = append(pts, fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":1,"attributes":[{"key":"user_id","value":{"stringValue":"u%d"}}]}`, t0.UnixNano(), i))
		}
		var b signal.Metrics
		if err := otlp.DecodeMetricsJSON(&b, []byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"g","gauge":{"dataPoints":[`+strings.Join(pts, ",")+`]}}]}]}]}`)); err != nil {
			t.Fatal(err)
		}
		if _, kept := r.ProcessMetrics(&b, s); kept != 0 {
			t.Fatalf("kept %d: the downsample takes every point", kept)
		}
	}
	cached := 0
	for i := range r.cache.shards {
		cached += r.cache.shards[i].n
	}
	if cached >= series/2 || r.cache.unique.Load() > maxDecisionBytes {
		t.Errorf("%d decisions cached (%d bytes counted) of %d series: not bounded by %d bytes", cached, r.cache.unique.Load(), series, maxDecisionBytes)
	}
	if n := len(r.metrics[1].agg.targets); n != 0 {
		t.Errorf("the downsample keeps %d targets beside the decisions", n)
	}
	// Every series is still downsampled: the bound costs recomputation,
	// never a wrong answer.
	if n := len(flushedAt(t, r, time.Minute)); n != series {
		t.Errorf("%d downsampled series, want %d", n, series)
	}
}

func flushedAt(t *testing.T, r *Rules, at time.Duration) []string {
	t.Helper()
	return flushed(t, r.m, at)
}
