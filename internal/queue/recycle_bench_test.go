package queue

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkAppendReleased is BenchmarkAppend with a consumer that releases
// what lies two segments behind the end after every append (a lake or
// exporter keeping up), on 8 MiB segments: each new segment starts in a
// released file (recycle) instead of a zero-filled new one. cpu-us/append
// is the process's CPU (user and system) per append.
func BenchmarkAppendReleased(b *testing.B) {
	for _, tc := range []struct{ size, writers int }{{64 << 10, 4}, {3 << 10, 4}} {
		b.Run(fmt.Sprintf("rec=%dKiB/writers=%d", tc.size>>10, tc.writers), func(b *testing.B) {
			const segBytes = 8 << 20
			q := mustOpen(b, Options{Dir: b.TempDir(), SegmentBytes: segBytes, MaxBytes: 2 << 30})
			defer q.Close()
			rec := payload(1, 0, tc.size)
			b.SetBytes(int64(tc.size))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			var next atomic.Int64
			var wg sync.WaitGroup
			for range tc.writers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						end, err := q.Append(rec)
						if err != nil {
							b.Error(err)
							return
						}
						if end > 2*segBytes {
							if err := q.Release(end - 2*segBytes); err != nil {
								b.Error(err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/append")
		})
	}
}
