package processor

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// BenchmarkHostileCardinalityAllRules: a million new series a minute for
// three minutes (every point a series never seen, a fresh user_id), through
// one rule of every kind. The live heap after each minute (after a GC,
// flushing the aggregates each minute as sluice run does) shows whether
// the rules' state is bounded: it must level off, not grow by a minute's
// series each minute.
func BenchmarkHostileCardinalityAllRules(b *testing.B) {
	const perMinute, batchPoints, minutes = 1_000_000, 10_000, 3
	rules := `
metrics:
  - {name: drop, action: drop, match: '{user_id="u-1"}'}
  - {name: keep, action: keep, match: '{__name__=~"hostile_.*"}'}
  - {name: rl, action: relabel, relabel: [{action: replace, source_labels: [user_id], regex: 'u-(.)(.*)', target_label: shard, replacement: '$1'}]}
  - {name: require, action: require, labels: [user_id]}
  - {name: cap, action: limit, per: metric, max_series: 100000, window: 1h}
  - {name: strip, action: limit, per: label, label: user_id, max_values: 1000, window: 1h, exceed_action: strip_label}
  - {name: sample, action: sample, one_in: 2}
  - {name: agg, action: aggregate, interval: 1m, flush_delay: 0s, by: [shard], outputs: [sum, total, 'quantiles(0.5)', histogram_bucket], keep_input: true}
  - {name: down, action: downsample, interval: 1m, flush_delay: 0s, outputs: [avg]}
`
	m, _ := NewMetrics(nil)
	r, err := Parse([]byte(rules), m)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Unix(1_700_000_040, 0)
	batch := func(first int, at time.Time) *signal.Metrics {
		var sb strings.Builder
		sb.WriteString(`{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"h"}}]},"scopeMetrics":[{"metrics":[{"name":"hostile_total","sum":{"aggregationTemporality":2,"isMonotonic":true,"dataPoints":[`)
		for i := range batchPoints {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"timeUnixNano":"%d","asDouble":%d,"attributes":[{"key":"user_id","value":{"stringValue":"u-%d"}}]}`, at.UnixNano(), i, first+i)
		}
		sb.WriteString(`]}}]}]}]}`)
		mb := new(signal.Metrics)
		if err := otlp.DecodeMetricsJSON(mb, []byte(sb.String())); err != nil {
			b.Fatal(err)
		}
		return mb
	}
	for range b.N {
		s := &Scratch{Tenant: "hostile"}
		var ms runtime.MemStats
		start := time.Now()
		for min := range minutes {
			at := t0.Add(time.Duration(min) * time.Minute)
			s.Now = at
			for k := 0; k < perMinute; k += batchPoints {
				r.ProcessMetrics(batch(min*perMinute+k, at.Add(time.Duration(k)*time.Microsecond)), s)
			}
			m.Flush(at.Add(time.Minute), func(string, *signal.Metrics) error { return nil })
			runtime.GC()
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), fmt.Sprintf("heap-MiB-after-%dM", min+1))
		}
		b.ReportMetric(float64(minutes*perMinute)/time.Since(start).Seconds(), "series/s")
		runtime.KeepAlive(r)
	}
}
