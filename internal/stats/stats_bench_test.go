package stats

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// benchBatches returns a 10,000-point batch and k series-id sets for it,
// so that the batch stands for k*10,000 distinct series.
func benchBatches(b *testing.B, k int) (*signal.Metrics, [][]uint64) {
	m := gauges(b, "api", 10_000, 1e18)
	ids := make([][]uint64, k)
	for j := range ids {
		ids[j] = make([]uint64, m.Len())
		for i := range ids[j] {
			ids[j][i] = m.SeriesID[i] ^ mix(uint64(j)+1)
		}
	}
	return m, ids
}

// BenchmarkObserve is the hot-path cost per point of known series (the
// steady state), at 10K, 100K and 1M active series.
func BenchmarkObserve(b *testing.B) {
	for _, k := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("series=%d", k*10_000), func(b *testing.B) {
			m, ids := benchBatches(b, k)
			s, _ := newTest(b, Config{})
			for j := range ids {
				m.SeriesID = ids[j]
				s.Observe("t", m, 1<<20)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				m.SeriesID = ids[n%k]
				s.Observe("t", m, 1<<20)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*m.Len()), "ns/point")
			b.ReportMetric(float64(len(s.slots)*8)/(1<<20), "table-MiB")
		})
	}
}

// BenchmarkObserveNew is the cost per point when every series is new
// (labels computed, pairs counted): the worst case of a churn.
func BenchmarkObserveNew(b *testing.B) {
	m, ids := benchBatches(b, 50)
	b.ReportAllocs()
	b.ResetTimer()
	var s *Stats
	for n := 0; n < b.N; n++ {
		if n%len(ids) == 0 {
			b.StopTimer()
			s, _ = newTest(b, Config{})
			b.StartTimer()
		}
		m.SeriesID = ids[n%len(ids)]
		s.Observe("t", m, 1<<20)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*m.Len()), "ns/point")
}

// BenchmarkDecodeBaseline decodes the same batch from OTLP protobuf: the
// ingest cost that Observe adds to.
func BenchmarkDecodeBaseline(b *testing.B) {
	m := gauges(b, "api", 10_000, 1e18)
	body := otlp.AppendMetricsProto(nil, m)
	var d signal.Metrics
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		d.Reset()
		if err := otlp.DecodeMetrics(&d, body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*m.Len()), "ns/point")
}

// BenchmarkObserveSeries is the relay's statistics per sample of known
// series (a scanned remote-write request of 1,500 series, ids varied to
// stand for k*1,500 distinct series), at 30K and 1.5M active series.
func BenchmarkObserveSeries(b *testing.B) {
	for _, k := range []int{20, 1000} {
		b.Run(fmt.Sprintf("series=%d", k*1500), func(b *testing.B) {
			s, c := newTest(b, Config{})
			body := rwBody(b, 1500, 0, c.t.UnixMilli())
			sc := prw.Scanner{LabelKeys: true}
			if !sc.ScanV1(body) {
				b.Fatal("refused")
			}
			var ll []prw.Label
			ss := &Series{Names: sc.Names, NameHash: sc.NameHashes(), Name: sc.Name, Time: sc.Time, Labels: func(i int, dst []Label) []Label {
				ll = sc.Labels(i, ll[:0])
				for _, l := range ll {
					dst = append(dst, Label{l.Name, l.Value})
				}
				return dst
			}}
			ids := make([][]uint64, k)
			for j := range ids {
				ids[j] = make([]uint64, len(sc.ID))
				for i := range ids[j] {
					ids[j][i] = sc.ID[i] ^ mix(uint64(j)+1)
				}
				ss.ID = ids[j]
				s.ObserveSeries("t", ss, len(body))
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for n := 0; n < b.N; n++ {
				ss.ID = ids[n%k]
				s.ObserveSeries("t", ss, len(body))
			}
			// CPU time, not wall time: the machine is shared.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*len(sc.ID)), "cpu-ns/sample")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkObserveRemoteWrite is Observe of a decoded remote-write request
// (1,500 series, one sample each, all known): the statistics of a request
// the receiver could not scan (histograms, unsorted labels) or that
// processing rules read, which key each series by its label set (rwKey).
func BenchmarkObserveRemoteWrite(b *testing.B) {
	s, c := newTest(b, Config{})
	body := rwBody(b, 1500, 0, c.t.UnixMilli())
	var m signal.Metrics
	var d prw.Decoder
	if _, err := d.DecodeV1(&m, body); err != nil {
		b.Fatal(err)
	}
	s.Observe("t", &m, len(body))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for n := 0; n < b.N; n++ {
		s.Observe("t", &m, len(body))
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*m.Len()), "cpu-ns/sample")
}
