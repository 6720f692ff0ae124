package tracer

import (
	"math"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestIOMetrics checks the Prometheus form of the live metrics: counts,
// bytes, errors and cumulative latency buckets per syscall, and lost.
func TestIOMetrics(t *testing.T) {
	m := NewIOMetrics()
	m.SetLost(func() uint64 { return 3 })
	b := new(signal.IOEvents)
	for _, r := range []struct {
		sc    Syscall
		dur   int64
		bytes int64
		errno int32
	}{
		{SysPread64, 500, 4096, 0}, {SysPread64, 3000, 4096, 0}, {SysPread64, 2e9, 0, 5}, {SysFsync, 5e6, 0, 0},
	} {
		b.Append(&signal.IOEvent{Syscall: uint16(r.sc), Duration: r.dur, Bytes: r.bytes, Errno: r.errno})
	}
	m.Add(b)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.Metric {
			key := mf.GetName()
			for _, l := range mt.Label {
				key += "/" + l.GetValue()
			}
			switch {
			case mt.Counter != nil:
				got[key] = mt.Counter.GetValue()
			case mt.Histogram != nil:
				got[key+"/count"] = float64(mt.Histogram.GetSampleCount())
				got[key+"/sum"] = mt.Histogram.GetSampleSum()
				for _, bk := range mt.Histogram.Bucket {
					if bk.GetUpperBound() == 4e-6 || bk.GetUpperBound() == float64(LatencyBounds[len(LatencyBounds)-1])/1e9 {
						got[key+"/le"+formatFloat(bk.GetUpperBound())] = float64(bk.GetCumulativeCount())
					}
				}
			}
		}
	}
	for k, v := range map[string]float64{
		"sluice_iotrace_lost_total":                                3,
		"sluice_iotrace_calls_total/pread64":                       3,
		"sluice_iotrace_bytes_total/pread64":                       8192,
		"sluice_iotrace_errors_total/pread64":                      1,
		"sluice_iotrace_calls_total/fsync":                         1,
		"sluice_iotrace_call_duration_seconds/pread64/count":       3,
		"sluice_iotrace_call_duration_seconds/pread64/le4e-06":     2, // 500 ns and 3 µs
		"sluice_iotrace_call_duration_seconds/pread64/le16.777216": 3,
		"sluice_iotrace_call_duration_seconds/fsync/le4e-06":       0,
		"sluice_iotrace_call_duration_seconds/pread64/sum":         (500 + 3000 + 2e9) / 1e9,
	} {
		if g, ok := got[k]; !ok || math.Abs(g-v) > 1e-12 {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, ok := got["sluice_iotrace_calls_total/write"]; ok {
		t.Error("a syscall without calls is exported")
	}
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// BenchmarkIOMetricsAdd measures the live metrics' cost per traced call.
func BenchmarkIOMetricsAdd(b *testing.B) {
	m := NewIOMetrics()
	batch := new(signal.IOEvents)
	for i := range 8192 {
		batch.Append(&signal.IOEvent{Syscall: uint16(SysRead + Syscall(i%8)), Duration: int64(200 + i*37%100000), Bytes: 4096})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		m.Add(batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch.Len()), "ns/call")
}
