package prw

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/signal"
)

// benchBodies builds a 1.0 and a 2.0 request of n series with one sample
// each and nl labels besides __name__ (the shape Prometheus sends: 1,000 to
// 2,000 samples per request, 5 to 10 labels).
func benchBodies(n, nl int) ([]byte, []byte) {
	return benchBodiesNamed(n, nl, func(i int) int { return i % 50 })
}

// benchBodiesNamed is benchBodies with series i named metric_<name(i)>_total.
func benchBodiesNamed(n, nl int, name func(int) int) ([]byte, []byte) {
	return benchRequests(n, nl, name, func(k, i int) string { return fmt.Sprintf("value_%d_%d", k, i) })
}

// benchRequests builds a 1.0 and a 2.0 request of n series with one sample
// each: series i is named metric_<name(i)>_total and has labels label_<k>
// = value(k, i) for k < nl.
func benchRequests(n, nl int, name func(int) int, value func(k, i int) string) ([]byte, []byte) {
	r1 := &prompb.WriteRequest{}
	st := writev2.NewSymbolTable()
	r2 := &writev2.Request{}
	for i := range n {
		ls := []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("metric_%d_total", name(i))}}
		for k := range nl {
			ls = append(ls, prompb.Label{Name: fmt.Sprintf("label_%d", k), Value: value(k, i)})
		}
		ts := int64(1700000000000 + i)
		r1.Timeseries = append(r1.Timeseries, prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: float64(i), Timestamp: ts}}})
		var refs []uint32
		for _, l := range ls {
			refs = append(refs, st.Symbolize(l.Name), st.Symbolize(l.Value))
		}
		r2.Timeseries = append(r2.Timeseries, writev2.TimeSeries{LabelsRefs: refs, Samples: []writev2.Sample{{Value: float64(i), Timestamp: ts}}})
	}
	r2.Symbols = st.Symbols()
	b1, _ := r1.Marshal()
	b2, _ := r2.Marshal()
	return b1, b2
}

func benchDecode(b *testing.B, v, n, nl int) {
	b1, b2 := benchBodies(n, nl)
	benchDecodeBodies(b, v, n, b1, b2)
}

func benchDecodeBodies(b *testing.B, v, n int, b1, b2 []byte) {
	body := b1
	if v == 2 {
		body = b2
	}
	var m signal.Metrics
	var d Decoder
	// One decode first grows the batch and the decoder to the request's
	// size, so allocs/op is the steady state (0, as
	// TestDecodeAllocatesNothingInSteadyState asserts) rather than that
	// first growth spread over b.N.
	if _, err := decode(&d, v, &m, body); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	cpu0 := cpuTime()
	for b.Loop() {
		m.Reset()
		if _, err := decode(&d, v, &m, body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	// On a shared machine wall time overstates the cost: samples per
	// second of this process's CPU time is the per-core figure.
	b.ReportMetric(float64(n)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "samples/cpu-s")
}

func BenchmarkDecodeV1(b *testing.B) {
	for _, c := range [][2]int{{1000, 5}, {2000, 10}} {
		b.Run(fmt.Sprintf("series=%d/labels=%d", c[0], c[1]), func(b *testing.B) { benchDecode(b, 1, c[0], c[1]) })
	}
}

func BenchmarkDecodeV2(b *testing.B) {
	for _, c := range [][2]int{{1000, 5}, {2000, 10}} {
		b.Run(fmt.Sprintf("series=%d/labels=%d", c[0], c[1]), func(b *testing.B) { benchDecode(b, 2, c[0], c[1]) })
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecodeV1Grouped: series of one metric follow each other (20 per
// name), as in a target's scrape order.
func BenchmarkDecodeV1Grouped(b *testing.B) {
	b1, b2 := benchBodiesNamed(1000, 5, func(i int) int { return i / 20 })
	benchDecodeBodies(b, 1, 1000, b1, b2)
}

// benchBodiesShared builds 1.0 and 2.0 requests of n series with nl
// labels besides __name__ shaped like a scrape: label k < nl-2 holds its
// value for runs of 10<<k series (job, namespace, instance, pod...), the
// last two change with every series (as an id or a path would), and 20
// consecutive series share a metric name.
func benchBodiesShared(n, nl int) ([]byte, []byte) {
	return benchRequests(n, nl, func(i int) int { return i / 20 }, func(k, i int) string {
		if k < nl-2 {
			return fmt.Sprintf("value_%d_%d", k, i/(10<<k))
		}
		return fmt.Sprintf("value_%d_%d", k, i)
	})
}

// BenchmarkDecodeShared: 2,000 series x 10 labels shaped like a scrape
// (benchBodiesShared), where most label values repeat from one series to
// the next, unlike BenchmarkDecodeV1's per-series values.
func BenchmarkDecodeShared(b *testing.B) {
	b1, b2 := benchBodiesShared(2000, 10)
	for _, v := range []int{1, 2} {
		b.Run(fmt.Sprintf("v%d", v), func(b *testing.B) { benchDecodeBodies(b, v, 2000, b1, b2) })
	}
}

// BenchmarkScanV1: the scan a relay runs instead of the decode when no
// rule needs the batch (Scanner).
func BenchmarkScanV1(b *testing.B) { benchScan(b, 1) }

// BenchmarkScanV2: the same for remote write 2.0 (ScanV2).
func BenchmarkScanV2(b *testing.B) { benchScan(b, 2) }

func benchScan(b *testing.B, v int) {
	// 100 x 6: the relay benchmark's small requests.
	for _, c := range [][2]int{{1000, 5}, {2000, 10}, {100, 6}} {
		b.Run(fmt.Sprintf("series=%d/labels=%d", c[0], c[1]), func(b *testing.B) {
			body, body2 := benchBodies(c[0], c[1])
			scan := (*Scanner).ScanV1
			if v == 2 {
				body, scan = body2, (*Scanner).ScanV2
			}
			var s Scanner
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
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

// BenchmarkDecodeCycle: 16 requests of 2,000 series x 10 labels, each its
// own series (32,000 in all, as a sender's shards send its whole active
// series set every scrape), decoded round robin, so that a request's bytes
// and the batch's columns are not all in L2 from the iteration before, as
// they are in BenchmarkDecodeV1's one request decoded again and again.
func BenchmarkDecodeCycle(b *testing.B) {
	const n, reqs = 2000, 16
	var b1s, b2s [][]byte
	for r := range reqs {
		b1, b2 := benchRequests(n, 10, func(i int) int { return i % 50 }, func(k, i int) string {
			return fmt.Sprintf("value_%d_%d", k, r*n+i)
		})
		b1s, b2s = append(b1s, b1), append(b2s, b2)
	}
	for _, v := range []int{1, 2} {
		b.Run(fmt.Sprintf("v%d", v), func(b *testing.B) {
			bodies := b1s
			if v == 2 {
				bodies = b2s
			}
			var m signal.Metrics
			var d Decoder
			for _, body := range bodies {
				m.Reset()
				if _, err := decode(&d, v, &m, body); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			r := 0
			for b.Loop() {
				m.Reset()
				if _, err := decode(&d, v, &m, bodies[r]); err != nil {
					b.Fatal(err)
				}
				r = (r + 1) % reqs
			}
			b.ReportMetric(float64(n)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "samples/cpu-s")
		})
	}
}

// BenchmarkDecodeChurn: 61 requests of 2,000 series x 10 labels, each its
// own series (122,000 in all), decoded round robin (61: prime to the
// memo's admission period of 16 calls). "new": the decoder's series id
// memo (IDMemo) has 64 slots, so every series is a miss, as on a load of
// series never seen before: what such a load pays for the memo (its
// admission, idBlock). "rotation": the process's memo (131,072 slots),
// which holds most of the rotation. "-v2": the same in remote
// write 2.0.
func BenchmarkDecodeChurn(b *testing.B) {
	const n, reqs = 2000, 61
	var b1s, b2s [][]byte
	for r := range reqs {
		b1, b2 := benchRequests(n, 10, func(i int) int { return i % 50 }, func(k, i int) string {
			return fmt.Sprintf("churn_%d_%d", k, r*n+i)
		})
		b1s, b2s = append(b1s, b1), append(b2s, b2)
	}
	for _, c := range []string{"new", "rotation", "new-v2", "rotation-v2"} {
		b.Run(c, func(b *testing.B) {
			v, bodies := 1, b1s
			if strings.HasSuffix(c, "-v2") {
				v, bodies = 2, b2s
			}
			var m signal.Metrics
			var d Decoder
			if strings.HasPrefix(c, "new") {
				d.useIDMemo(NewIDMemo(64))
			}
			for _, body := range bodies {
				m.Reset()
				if _, err := decode(&d, v, &m, body); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			r := 0
			for b.Loop() {
				m.Reset()
				if _, err := decode(&d, v, &m, bodies[r]); err != nil {
					b.Fatal(err)
				}
				r = (r + 1) % reqs
			}
			b.ReportMetric(float64(n)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "samples/cpu-s")
		})
	}
}
