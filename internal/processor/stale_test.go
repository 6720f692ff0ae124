package processor

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/value"

	"github.com/sluice-dev/sluice/internal/signal"
)

// withNaN sets point i of b to the float bits nan (a stale marker or a
// plain NaN), which OTLP/JSON cannot carry.
func withNaN(b *signal.Metrics, i int, nan uint64) *signal.Metrics {
	b.NumberType[i], b.Number[i] = signal.ValueDouble, nan
	return b
}

// TestAggregateIgnoresStaleMarkersAndNaN: a Prometheus stale marker (NaN
// 0x7ff0000000000002, sent when a series ends) or a plain NaN is no
// sample: it is taken with the inputs (dropped unless keep_input, as
// vmagent's stream aggregation skips NaN) and changes no output, so it
// neither poisons an average or a sum nor, for counters, every later
// total of the group.
func TestAggregateIgnoresStaleMarkersAndNaN(t *testing.T) {
	const rules = `
metrics:
  - {name: g, action: aggregate, match: req, interval: 1m, flush_delay: 0s, by: [path],
     outputs: [sum, count, min, max, avg, last, 'quantiles(0.5)', histogram_bucket]}
  - {name: c, action: aggregate, match: ctr_total, interval: 1m, flush_delay: 0s, by: [path], outputs: [total, increase, rate_sum]}
  - {name: d, action: downsample, match: temp, interval: 1m, flush_delay: 0s, outputs: [avg]}
`
	x := map[string]string{"path": "/x"}
	s := &Scratch{Tenant: "t"}
	for _, nan := range []uint64{value.StaleNaN, math.Float64bits(math.NaN())} {
		r, m := parseWith(t, rules)
		in := withNaN(metricBatch(t, "req", "gauge", inPoint{x, 0, 1}, inPoint{x, 10 * time.Second, 3}, inPoint{x, 20 * time.Second, 0}), 2, nan)
		if _, kept := r.ProcessMetrics(in, s); kept != 0 {
			t.Fatalf("kept %d gauge points, want 0 (a stale marker is an input too)", kept)
		}
		ctr := withNaN(metricBatch(t, "ctr", "counter", inPoint{x, 0, 10}, inPoint{x, 10 * time.Second, 0},
			inPoint{x, 20 * time.Second, 14}, inPoint{x, 30 * time.Second, 0}), 1, nan)
		r.ProcessMetrics(withNaN(ctr, 3, nan), s)
		r.ProcessMetrics(withNaN(metricBatch(t, "temp", "gauge", inPoint{x, 0, 4}, inPoint{x, 30 * time.Second, 0}), 1, nan), s)
		p, q := `t {__name__="req:1m_by_path_`, `t {__name__="ctr_total:1m_by_path_`
		wantLines(t, flushed(t, m, 60*time.Second),
			p+`sum", path="/x"} @60s = 4`, p+`count", path="/x"} @60s = 2`, p+`min", path="/x"} @60s = 1`,
			p+`max", path="/x"} @60s = 3`, p+`avg", path="/x"} @60s = 2`, p+`last", path="/x"} @60s = 3`,
			p+`quantiles", path="/x", quantile="0.5"} @60s = 2`,
			p+`histogram_bucket", path="/x", vmrange="9.5e-1...1.0e0"} @60s = 1`,
			p+`histogram_bucket", path="/x", vmrange="2.5e0...3.0e0"} @60s = 1`,
			q+`total", path="/x"} @60s = 4`, q+`increase", path="/x"} @60s = 4`, q+`rate_sum", path="/x"} @60s = 0.2`,
			`t {__name__="temp", job="api", path="/x", service_name="api"} @60s = 4`)
	}
}
