package processor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// benchGauges decodes one OTLP request of n gauge points, one per series,
// of metric name (services x instances x endpoints labels, as
// metrics-governor's BenchmarkProcess_Aggregate_LargeGroups builds them).
func benchGauges(b *testing.B, name string, services, instances, endpoints int) *signal.Metrics {
	var sb strings.Builder
	sb.WriteString(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"` + name + `","gauge":{"dataPoints":[`)
	n := 0
	for s := range services {
		for i := range instances {
			for e := range endpoints {
				if n > 0 {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, `{"timeUnixNano":"1000000000","asDouble":%d,"attributes":[{"key":"service","value":{"stringValue":"svc_%d"}},{"key":"instance","value":{"stringValue":"inst_%d"}},{"key":"endpoint","value":{"stringValue":"/api/v1/ep_%d"}}]}`,
					s*1000+i*10+e, s, i, e)
				n++
			}
		}
	}
	sb.WriteString(`]}}]}]}]}`)
	m := new(signal.Metrics)
	if err := otlp.DecodeMetricsJSON(m, []byte(sb.String())); err != nil {
		b.Fatal(err)
	}
	return m
}

// benchRules runs r over fresh copies of src, as BenchmarkTenRulesCorpus
// does, and reports points per CPU-second of ProcessMetrics.
func benchRules(b *testing.B, r *Rules, src *signal.Metrics) {
	var work signal.Metrics
	refill := func() {
		work.Reset()
		for i := range src.Len() {
			work.CopyFrom(src, i)
		}
	}
	s := &Scratch{Tenant: "bench"}
	refill()
	r.ProcessMetrics(&work, s) // decisions and groups made
	b.ReportAllocs()
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		refill()
		b.StartTimer()
		cpu0 := processCPU()
		r.ProcessMetrics(&work, s)
		cpu += processCPU() - cpu0
	}
	b.StopTimer()
	b.ReportMetric(float64(src.Len())*float64(b.N)/cpu.Seconds(), "points/cpu-s")
	b.ReportMetric(float64(src.Len()), "points/op")
}

// BenchmarkAggregate100KGroups: 100,000 series, one point each per pass,
// aggregated by all three labels into 100,000 output series (sum, avg).
func BenchmarkAggregate100KGroups(b *testing.B) {
	src := benchGauges(b, "bench_requests", 10, 100, 100)
	r := mustParse(b, "metrics:\n  - {name: agg, action: aggregate, match: '{__name__=~\"bench_.*\"}', interval: 30s, by: [service, instance, endpoint], outputs: [sum, avg]}\n")
	benchRules(b, r, src)
}

// BenchmarkAggregateLargeGroups is metrics-governor's
// BenchmarkProcess_Aggregate_LargeGroups input: 10,000 series into 10,000
// groups, sum and avg.
func BenchmarkAggregateLargeGroups(b *testing.B) {
	src := benchGauges(b, "bench_requests", 10, 100, 10)
	r := mustParse(b, "metrics:\n  - {name: agg, action: aggregate, match: '{__name__=~\"bench_.*\"}', interval: 30s, by: [service, instance, endpoint], outputs: [sum, avg]}\n")
	benchRules(b, r, src)
}

// BenchmarkHighCardinality is metrics-governor's
// BenchmarkProcess_HighCardinality input: 100,000 series (1,000 metrics x
// 100 label sets), one point each, through a rule that adds a label to
// every series and one that keeps them.
func BenchmarkHighCardinality(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[`)
	for m := range 1000 {
		if m > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"name":"hc_metric_%04d","gauge":{"dataPoints":[`, m)
		for l := range 100 {
			if l > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"timeUnixNano":"1000000000","asDouble":%d,"attributes":[{"key":"service","value":{"stringValue":"svc_%d"}},{"key":"instance","value":{"stringValue":"inst_%d"}},{"key":"pod","value":{"stringValue":"pod_%05d"}}]}`,
				m*100+l, l%50, l/50, m*100+l)
		}
		sb.WriteString(`]}}`)
	}
	sb.WriteString(`]}]}]}`)
	src := new(signal.Metrics)
	if err := otlp.DecodeMetricsJSON(src, []byte(sb.String())); err != nil {
		b.Fatal(err)
	}
	r := mustParse(b, `
metrics:
  - name: tag-all
    action: relabel
    match: '{__name__=~"hc_.*"}'
    relabel: [{action: replace, target_label: processed, replacement: "true"}]
  - {name: keep-hc, action: keep, match: '{__name__=~"hc_.*"}'}
`)
	benchRules(b, r, src)
}
