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

// BenchmarkLimitStage1MSeries: the whole stage (decision lookup, replay,
// limiter) with one per-metric limit rule and 1M active series of 100
// metrics, in batches of 10,000 points; each pass sends one point of every
// series. The heap after the first pass (state of the limiter and the
// decision cache) is reported.
func BenchmarkLimitStage1MSeries(b *testing.B) {
	benchLimitStage(b, "metrics:\n  - {name: cap, action: limit, per: metric, max_series: 20000, window: 1h}\n")
}

// BenchmarkStripStage1MSeries is BenchmarkLimitStage1MSeries with a
// strip_label limit of 1,000 pod values a metric (99% of the series are
// stripped and fold into one a metric) followed by a drop rule on pod, which
// sees the stripped series.
func BenchmarkStripStage1MSeries(b *testing.B) {
	benchLimitStage(b, "metrics:\n  - {name: cap, action: limit, per: label, label: pod, max_values: 1000, window: 1h, exceed_action: strip_label}\n"+
		"  - {name: d, action: drop, match: '{pod=\"pod_0\"}'}\n")
}

func benchLimitStage(b *testing.B, rules string) {
	const metrics, perMetric, batchPoints = 100, 10000, 10000
	var src []*signal.Metrics
	for m := range metrics {
		var sb strings.Builder
		fmt.Fprintf(&sb, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"lim_metric_%03d","gauge":{"dataPoints":[`, m)
		for i := range perMetric {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"timeUnixNano":"1000000000","asDouble":1,"attributes":[{"key":"pod","value":{"stringValue":"pod_%d"}}]}`, i)
		}
		sb.WriteString(`]}}]}]}]}`)
		mb := new(signal.Metrics)
		if err := otlp.DecodeMetricsJSON(mb, []byte(sb.String())); err != nil {
			b.Fatal(err)
		}
		src = append(src, mb)
	}
	r := mustParse(b, rules)
	s := &Scratch{Tenant: "bench", Now: time.Unix(3600, 0)}
	var work signal.Metrics
	refill := func(m *signal.Metrics) {
		work.Reset()
		for i := range m.Len() {
			work.CopyFrom(m, i)
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, m := range src {
		refill(m)
		if _, kept := r.ProcessMetrics(&work, s); kept < batchPoints-1 {
			b.Fatalf("kept %d", kept)
		}
	}
	work = signal.Metrics{}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportAllocs()
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		for _, m := range src {
			b.StopTimer()
			refill(m)
			b.StartTimer()
			cpu0 := processCPU()
			r.ProcessMetrics(&work, s)
			cpu += processCPU() - cpu0
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(metrics*perMetric)*float64(b.N)/cpu.Seconds(), "points/cpu-s")
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/(1<<20), "stateMiB")
}
