package prw

import (
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

// BenchmarkPlainAppend: PlainAppender and PlainAppender2 alone (scan and
// append into a partition's batch, no lake writer around them), as the
// lake loop uses them: 20 requests of 1,500 series of 8 labels, 30,000
// series in all, each request appended 10 times into one batch, so that a
// series is new once and known nine times (RemoteWriteToLake's shape).
func BenchmarkPlainAppend(b *testing.B) {
	const reqs, perReq, times = 20, 1500, 10
	var v1, v2 [][]byte
	for r := range reqs {
		b1, b2 := benchRequests(perReq, 7, func(i int) int { return (r*perReq + i) % 50 },
			func(k, i int) string { return fmt.Sprintf("value_%d_%d", k, r*perReq+i) })
		v1, v2 = append(v1, b1), append(v2, b2)
	}
	run := func(b *testing.B, bodies [][]byte, scan func([]byte) bool, app func(*signal.Metrics) bool) {
		var dst signal.Metrics
		dst.ShareAttrSets = true
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			dst.Reset()
			for range times {
				for _, body := range bodies {
					if !scan(body) || !app(&dst) {
						b.Fatal("not plain")
					}
				}
			}
		}
		b.ReportMetric(float64(reqs*perReq*times)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "samples/cpu-s")
	}
	b.Run("v1", func(b *testing.B) {
		var pa PlainAppender
		run(b, v1, pa.ScanTimesV1, pa.AppendV1)
	})
	b.Run("v2", func(b *testing.B) {
		var pa PlainAppender2
		run(b, v2, pa.ScanTimesV2, pa.AppendV2)
	})
}
