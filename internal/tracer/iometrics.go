package tracer

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Live I/O metrics: per syscall, calls, bytes, errors and a latency
// histogram, added a batch at a time by the goroutine that runs the
// tracer and read by Prometheus scrapes and summaries.

// LatencyBounds are the upper bounds of the metrics' latency buckets, in
// ns: powers of four from 1 µs to 4^12 µs (16.8 s): page-cache reads land in
// the first buckets, disk waits in the middle, stalls at the top.
var LatencyBounds = func() []int64 {
	var b []int64
	for ns := int64(time.Microsecond); ns <= int64(20*time.Second); ns *= 4 {
		b = append(b, ns)
	}
	return b
}()

// SyscallStats are one syscall's counts since tracing started.
type SyscallStats struct {
	Calls, Bytes, Errors int64
	DurationNs           int64
	// Buckets[i] counts calls of at most LatencyBounds[i] (not cumulative);
	// the last element counts the longer ones.
	Buckets []uint64
}

// IOMetrics aggregates traced calls for /metrics and summaries. Add and
// the readers may run on different goroutines.
type IOMetrics struct {
	mu   sync.Mutex
	sc   [NumSyscalls]SyscallStats
	lost func() uint64 // the kernel's lost-record count; nil none yet

	calls, bytes, errs, lostDesc, durDesc *prometheus.Desc
}

// NewIOMetrics makes empty metrics.
func NewIOMetrics() *IOMetrics {
	m := &IOMetrics{
		calls: prometheus.NewDesc("sluice_iotrace_calls_total", "Traced I/O syscalls that completed, by syscall.", []string{"syscall"}, nil),
		bytes: prometheus.NewDesc("sluice_iotrace_bytes_total", "Bytes moved by traced data calls that succeeded, by syscall.", []string{"syscall"}, nil),
		errs:  prometheus.NewDesc("sluice_iotrace_errors_total", "Traced I/O syscalls that failed (returned an errno), by syscall.", []string{"syscall"}, nil),
		durDesc: prometheus.NewDesc("sluice_iotrace_call_duration_seconds", "Latency of traced I/O syscalls (enter to exit), by syscall.",
			[]string{"syscall"}, nil),
		lostDesc: prometheus.NewDesc("sluice_iotrace_lost_total", "Traced calls the kernel could not hand over because its ring buffer was full; never dropped silently.", nil, nil),
	}
	for i := range m.sc {
		m.sc[i].Buckets = make([]uint64, len(LatencyBounds)+1)
	}
	return m
}

// SetLost names where the kernel's lost count is read (Tracer.Lost, or a
// final count after the tracer closed).
func (m *IOMetrics) SetLost(f func() uint64) {
	m.mu.Lock()
	m.lost = f
	m.mu.Unlock()
}

// Add counts a batch's rows.
func (m *IOMetrics) Add(b *signal.IOEvents) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range b.Len() {
		s := b.Syscall[i]
		if int(s) >= len(m.sc) {
			continue
		}
		st := &m.sc[s]
		st.Calls++
		st.Bytes += b.Bytes[i]
		if b.Errno[i] != 0 {
			st.Errors++
		}
		d := b.Duration[i]
		st.DurationNs += d
		st.Buckets[latencyBucket(d)]++
	}
}

// latencyBucket is the index of the first bound at or above ns.
func latencyBucket(ns int64) int {
	for i, ub := range LatencyBounds {
		if ns <= ub {
			return i
		}
	}
	return len(LatencyBounds)
}

// Snapshot copies the per-syscall stats (index: Syscall) and the lost count.
func (m *IOMetrics) Snapshot() ([]SyscallStats, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]SyscallStats, len(m.sc))
	for i, s := range m.sc {
		out[i] = s
		out[i].Buckets = append([]uint64(nil), s.Buckets...)
	}
	var lost uint64
	if m.lost != nil {
		lost = m.lost()
	}
	return out, lost
}

// Describe implements prometheus.Collector.
func (m *IOMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.calls, m.bytes, m.errs, m.durDesc, m.lostDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: syscalls without calls are left
// out.
func (m *IOMetrics) Collect(ch chan<- prometheus.Metric) {
	stats, lost := m.Snapshot()
	ch <- prometheus.MustNewConstMetric(m.lostDesc, prometheus.CounterValue, float64(lost))
	for i, s := range stats {
		if s.Calls == 0 {
			continue
		}
		name := Syscall(i).String()
		ch <- prometheus.MustNewConstMetric(m.calls, prometheus.CounterValue, float64(s.Calls), name)
		ch <- prometheus.MustNewConstMetric(m.bytes, prometheus.CounterValue, float64(s.Bytes), name)
		ch <- prometheus.MustNewConstMetric(m.errs, prometheus.CounterValue, float64(s.Errors), name)
		buckets := make(map[float64]uint64, len(LatencyBounds))
		var cum uint64
		for j, ub := range LatencyBounds {
			cum += s.Buckets[j]
			buckets[float64(ub)/1e9] = cum
		}
		ch <- prometheus.MustNewConstHistogram(m.durDesc, uint64(s.Calls), float64(s.DurationNs)/1e9, buckets, name)
	}
}

// WriteHistograms writes one line per named syscall with its calls in
// each latency bucket (empty buckets left out), for the headless summary.
func WriteHistograms(b *strings.Builder, stats []SyscallStats, names []string) {
	if len(names) == 0 {
		return
	}
	fmt.Fprintf(b, "-- latency by syscall (calls per bucket, upper bounds)\n")
	for _, name := range names {
		var st *SyscallStats
		for i := range stats {
			if Syscall(i).String() == name {
				st = &stats[i]
			}
		}
		if st == nil || st.Calls == 0 {
			continue
		}
		fmt.Fprintf(b, "  %-18s", name)
		for j, n := range st.Buckets {
			if n == 0 {
				continue
			}
			bound := "+Inf"
			if j < len(LatencyBounds) {
				bound = "≤" + FormatDuration(LatencyBounds[j])
			}
			fmt.Fprintf(b, " %s:%d", bound, n)
		}
		b.WriteByte('\n')
	}
}
