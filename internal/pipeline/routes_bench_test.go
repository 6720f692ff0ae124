package pipeline

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/processor"
	"github.com/sluice-dev/sluice/internal/signal"
)

// BenchmarkRoutesCorpus: the consumer's record making for the corpus
// metrics requests, decode included: "plain" is one record for everyone
// (no per-pipeline processors); "two-routes" is two metric pipelines with
// a chain each (a drop of go_* series; a labeldrop relabel), so every
// request is copied once, runs both chains and is encoded twice.
func BenchmarkRoutesCorpus(b *testing.B) {
	var bodies [][]byte
	points := 0
	for _, f := range corpustest.Files(b, "metrics") {
		body := corpustest.Read(b, f)
		var m signal.Metrics
		if err := otlp.DecodeMetrics(&m, body); err != nil {
			b.Fatal(err)
		}
		points += m.Len()
		bodies = append(bodies, body)
	}
	for _, bc := range []struct{ name, cfg string }{
		{"plain", `pipelines:
  metrics/a: {receivers: [otlp], exporters: [lake]}
`},
		{"two-routes", `processors: {rule_sets: {a: {rules_file: a.yaml}, b: {rules_file: b.yaml}}}
exporters: {otlp/x: {endpoints: ['http://127.0.0.1:1']}}
pipelines:
  metrics/a: {receivers: [otlp], processors: [a], exporters: [lake]}
  metrics/b: {receivers: [otlp], processors: [b], exporters: [otlp/x]}
`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rt := routingOf(b, bc.cfg)
			if set := rt.sets["a"]; set != nil {
				r, err := processor.ParseSet([]byte("metrics:\n  - {name: d, action: drop, match: '{__name__=~\"go_.*\"}'}\n"), nil, "a")
				if err != nil {
					b.Fatal(err)
				}
				set.rules.Store(r)
			}
			if set := rt.sets["b"]; set != nil {
				r, err := processor.ParseSet([]byte("metrics:\n  - {name: r, action: relabel, relabel: [{action: labeldrop, regex: 'process_pid|container_id|host_name'}]}\n"), nil, "b")
				if err != nil {
					b.Fatal(err)
				}
				set.rules.Store(r)
			}
			c := &consumer{}
			if rt.active() {
				c.routes = rt
			}
			s := new(scratch)
			s.proc.Tenant = "bench"
			pass := func() {
				for _, body := range bodies {
					n, err := s.decode(signal.KindMetrics, body, nil, 0, otlp.Limits{})
					if err != nil {
						b.Fatal(err)
					}
					s.changed = false
					if recs, _, _, _ := c.records(s, signal.KindMetrics, "bench", body, n); len(recs) == 0 {
						b.Fatal("no record")
					}
				}
			}
			pass() // steady state: the series' decisions are cached
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				pass()
			}
			b.ReportMetric(float64(points)*float64(b.N)/(float64(cpuTime()-cpu0)/1e9), "points/cpu-s")
		})
	}
}
