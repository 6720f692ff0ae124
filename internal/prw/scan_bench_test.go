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
// back request after request: with the lake's series ids (ids, the lake
// loop's scan) and with label-set keys (keys, the receiver's).
func BenchmarkScanV1Relay(b *testing.B) {
	for _, keys := range []bool{false, true} {
		name := "ids"
		if keys {
			name = "keys"
		}
		b.Run(name, func(b *testing.B) { benchScanV1Relay(b, keys) })
	}
}

func benchScanV1Relay(b *testing.B, keys bool) {
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
	s := Scanner{LabelKeys: keys}
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

// BenchmarkScanKeys is BenchmarkScanV1 and BenchmarkScanV2 with the lake's
// series ids and with label-set keys (the receiver's scan): 2.0 writes
// each series' label fields out to hash them.
func BenchmarkScanKeys(b *testing.B) {
	for _, v := range []int{1, 2} {
		for _, c := range [][2]int{{1000, 5}, {100, 6}} {
			for _, keys := range []bool{false, true} {
				name := fmt.Sprintf("v%d/series=%d/labels=%d/ids", v, c[0], c[1])
				if keys {
					name = name[:len(name)-3] + "keys"
				}
				b.Run(name, func(b *testing.B) {
					body, body2 := benchBodies(c[0], c[1])
					scan := (*Scanner).ScanV1
					if v == 2 {
						body, scan = body2, (*Scanner).ScanV2
					}
					s := Scanner{LabelKeys: keys}
					b.ReportAllocs()
					cpu0 := cpuTime()
					for b.Loop() {
						if !scan(&s, body) {
							b.Fatal("refused")
						}
					}
					b.ReportMetric(float64(c[0])*float64(b.N)/(cpuTime()-cpu0).Seconds(), "samples/cpu-s")
				})
			}
		}
	}
}
