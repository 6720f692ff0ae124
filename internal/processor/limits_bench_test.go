package processor

import (
	"runtime"
	"testing"
	"time"
)

// BenchmarkLimiter1MSeries: the limiter of one limit rule holding 1M active
// series (one group), admitting points of those series in batches as
// replay does. It measures the limit bookkeeping only, not the rest of
// the stage (matching is cached per series, see BenchmarkTenRulesCorpus).
func BenchmarkLimiter1MSeries(b *testing.B) {
	const active = 1 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := (&limiters{}).get("bench", limitSpec{max: 2 * active, maxGroups: 1, window: time.Hour})
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	ids := make([]uint64, active)
	for i := range ids {
		ids[i] = mix(uint64(i) + 1)
		l.admit(1, ids[i], now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	cpu0 := processCPU()
	b.ResetTimer()
	n := 0
	for i := range b.N {
		id := ids[(i*7919)%active]
		if l.admit(1, id, now) {
			n++
		}
	}
	b.StopTimer()
	if n != b.N {
		b.Fatal("an admitted series was refused")
	}
	b.ReportMetric(float64(b.N)/(processCPU()-cpu0).Seconds(), "points/cpu-s")
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/(1<<20), "heapMiB")
}
