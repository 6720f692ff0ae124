package prw

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/prompb"
)

// BenchmarkScanV1Relay: ScanV1 on the relay benchmark's shape (1,500
// series of 8 labels per request, scripts/bench-relay.sh) over 30,000
// distinct series in 20 requests, as a relay sees a sender's series come
// back request after request.
func BenchmarkScanV1Relay(b *testing.B) {
	bodies := make([][]byte, 20)
	for k := range bodies {
		req := &prompb.WriteRequest{}
		for i := range 1500 {
			id := k*1500 + i
			ls := []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("relay_metric_%d", id%50)}}
			for j, l := range []string{"container", "instance", "job", "namespace", "pod", "zone"} {
				ls = append(ls, prompb.Label{Name: l, Value: fmt.Sprintf("%s-%d", l, (id>>j)%97+id%7)})
			}
			ls = append(ls, prompb.Label{Name: "series", Value: fmt.Sprint(id)})
			slices.SortFunc(ls, func(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) })
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: float64(i), Timestamp: 1700000000000}}})
		}
		bodies[k], _ = req.Marshal()
	}
	var s Scanner
	b.ReportAllocs()
	cpu0 := cpuTime()
	k := 0
	for b.Loop() {
		if !s.ScanV1(bodies[k%len(bodies)]) {
			b.Fatal("refused")
		}
		k++
	}
	b.ReportMetric(1500*float64(b.N)/(cpuTime()-cpu0).Seconds(), "samples/cpu-s")
}
