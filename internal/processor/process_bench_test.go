package processor

import (
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// tenRules are ten mixed rules of every kind over the corpus' metrics.
const tenRules = `
metrics:
  - {name: d1, action: drop, match: '{__name__=~"go_.*"}'}
  - {name: d2, action: drop, match: '{le="0.005", __name__=~".*_bucket"}'}
  - {name: d3, action: drop, match: '{service_name="does-not-exist"}'}
  - {name: k1, action: keep, match: '{__name__=~".+"}'}
  - {name: s1, action: sample, one_in: 2, match: '{__name__=~"k8s_.*"}'}
  - {name: s2, action: sample, probability: 0.9, match: '{__name__=~"system_.*"}'}
  - name: r1
    action: relabel
    match: '{__name__=~"http_.*"}'
    relabel: [{action: replace, target_label: env, replacement: prod}]
  - name: r2
    action: relabel
    relabel: [{action: labeldrop, regex: 'process_pid|container_id'}]
  - {name: sh, action: drop, shadow: true, match: '{__name__=~".*_total"}'}
  - {name: d4, action: drop, match: '{job=~"test.*"}'}
`

// BenchmarkTenRulesCorpus runs ten mixed rules over the decoded corpus
// metrics batches, as the consumer does (decode not included); points/s is
// the input rate. Steady state: the series decisions are cached. The rules
// work in place, so each pass starts from a fresh copy of the decoded
// batches, made outside the measured time (timer stopped, CPU time taken
// around ProcessMetrics only).
func BenchmarkTenRulesCorpus(b *testing.B) {
	var src []*signal.Metrics
	points := 0
	for _, f := range corpustest.Files(b, "metrics") {
		m := new(signal.Metrics)
		if err := otlp.DecodeMetrics(m, corpustest.Read(b, f)); err != nil {
			b.Fatal(err)
		}
		src = append(src, m)
		points += m.Len()
	}
	work := make([]signal.Metrics, len(src))
	refill := func() {
		for k, m := range src {
			w := &work[k]
			w.Reset()
			for i := range m.Len() {
				w.CopyFrom(m, i)
			}
		}
	}
	r := mustParse(b, tenRules)
	var s Scratch
	refill()
	for k := range work {
		r.ProcessMetrics(&work[k], &s)
	}
	b.ReportAllocs()
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		refill()
		b.StartTimer()
		cpu0 := processCPU()
		for k := range work {
			r.ProcessMetrics(&work[k], &s)
		}
		cpu += processCPU() - cpu0
	}
	b.StopTimer()
	// The machine is shared: CPU time says what the stage costs, wall
	// clock also what the neighbours take.
	b.ReportMetric(float64(points)*float64(b.N)/cpu.Seconds(), "points/cpu-s")
	b.ReportMetric(float64(points)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(float64(points), "points/op")
}

// processCPU is the user+system CPU time of the process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
