package pipeline

import (
	"bytes"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/tracer"
)

// Traced I/O as OTLP-shaped metrics (receivers.iotrace.metrics): the
// iotrace source adds every batch to cumulative counters per (comm,
// syscall, path_prefix) and every interval queues them as one OTLP metrics
// request of the iotrace tenant, like a received request, so they land in
// the metrics table and PromQL serves them as sluice_io_operations_total,
// sluice_io_bytes_total, sluice_io_errors_total and
// sluice_io_duration_seconds_{bucket,sum,count}.

// ioOverflow is the comm and path_prefix of the series that new series
// beyond max_series are folded into.
const ioOverflow = "other"

// ioSeries is one (comm, syscall, path_prefix) series' cumulative counts.
type ioSeries struct {
	comm, prefix string
	sc           uint16
	ops, bytes   uint64
	errs         uint64
	durNs        uint64
	buckets      []uint64 // per tracer.LatencyBounds, not cumulative; last: longer
	folded       bool     // the overflow series of sc
}

// ioAgg aggregates traced calls into bounded cumulative series. Add runs on
// the tracer's goroutine, snapshot on the emitter's.
type ioAgg struct {
	depth, max int
	start      int64 // start time of every cumulative point, Unix ns
	overflow   prometheus.Counter

	mu     sync.Mutex
	comms  map[string]map[string]*[tracer.NumSyscalls]*ioSeries // comm -> path_prefix -> by syscall
	n      int                                                  // series, not counting the overflow ones
	series []*ioSeries                                          // in creation order
}

func newIOAgg(depth, maxSeries int, overflow prometheus.Counter) *ioAgg {
	return &ioAgg{depth: depth, max: maxSeries, start: time.Now().UnixNano(), overflow: overflow,
		comms: map[string]map[string]*[tracer.NumSyscalls]*ioSeries{}}
}

// pathPrefix is p's first depth components with their leading "/" (a
// relative path keeps none): /var/lib/x/y at depth 2 is /var/lib. A path of
// depth components or fewer is its own prefix.
func pathPrefix(p []byte, depth int) []byte {
	i := 0
	for i < len(p) && p[i] == '/' {
		i++
	}
	for n := 0; i < len(p); n++ {
		j := bytes.IndexByte(p[i:], '/')
		if j < 0 {
			return p
		}
		if n+1 == depth {
			return p[:i+j]
		}
		i += j
		for i < len(p) && p[i] == '/' {
			i++
		}
	}
	return bytes.TrimRight(p, "/")
}

// Add counts a batch's rows.
func (a *ioAgg) Add(b *signal.IOEvents) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var folded int
	defer func() {
		if folded > 0 {
			a.overflow.Add(float64(folded))
		}
	}()
	var s *ioSeries // the previous row's: runs of calls on one file are common
	for i := range b.Len() {
		sc := b.Syscall[i]
		if int(sc) >= int(tracer.NumSyscalls) {
			continue
		}
		if s == nil || sc != b.Syscall[i-1] || b.Comm[i] != b.Comm[i-1] || b.Path[i] != b.Path[i-1] {
			s = a.lookup(b.StrBytes(b.Comm[i]), pathPrefix(b.StrBytes(b.Path[i]), a.depth), sc)
		}
		s.ops++
		if s.folded {
			folded++
		}
		if b.Errno[i] != 0 {
			s.errs++
		}
		if b.Bytes[i] > 0 {
			s.bytes += uint64(b.Bytes[i])
		}
		d := max(b.Duration[i], 0)
		s.durNs += uint64(d)
		k := 0
		for k < len(tracer.LatencyBounds) && tracer.LatencyBounds[k] < d {
			k++
		}
		s.buckets[k]++
	}
}

// lookup finds or makes a series; beyond max it is the syscall's overflow
// series.
func (a *ioAgg) lookup(comm, prefix []byte, sc uint16) *ioSeries {
	if paths, ok := a.comms[string(comm)]; ok {
		if bySc, ok := paths[string(prefix)]; ok && bySc[sc] != nil {
			return bySc[sc]
		}
	}
	c, p := string(comm), string(prefix)
	folded := a.n >= a.max
	if folded {
		c, p = ioOverflow, ioOverflow
		if bySc := a.comms[c][p]; bySc != nil && bySc[sc] != nil {
			return bySc[sc]
		}
	} else {
		a.n++
	}
	paths := a.comms[c]
	if paths == nil {
		paths = map[string]*[tracer.NumSyscalls]*ioSeries{}
		a.comms[c] = paths
	}
	bySc := paths[p]
	if bySc == nil {
		bySc = new([tracer.NumSyscalls]*ioSeries)
		paths[p] = bySc
	}
	s := &ioSeries{comm: c, prefix: p, sc: sc, buckets: make([]uint64, len(tracer.LatencyBounds)+1), folded: folded}
	bySc[sc] = s
	a.series = append(a.series, s)
	return s
}

// snapshot appends every series' cumulative points at now to dst (reset
// first): resource service.name sluice-iotrace and host.name; it returns
// false when there is no series yet.
func (a *ioAgg) snapshot(dst *signal.Metrics, host string, now int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	dst.Reset()
	if len(a.series) == 0 {
		return false
	}
	c := &dst.Common
	ra := uint32(c.Attrs.Len())
	c.Attrs.Append(c.Keys.IDString("service.name"), signal.ValueString, uint64(c.AppendString("sluice-iotrace")))
	c.Attrs.Append(c.Keys.IDString("host.name"), signal.ValueString, uint64(c.AppendString(host)))
	c.Resources = append(c.Resources, signal.Resource{Attrs: signal.Range{Start: ra, End: uint32(c.Attrs.Len())}})
	c.Scopes = append(c.Scopes, signal.Scope{Name: c.AppendString("sluice/iotrace")})
	sum := func(name, unit, desc string) uint32 {
		dst.Descs = append(dst.Descs, signal.MetricDesc{Name: c.AppendString(name), Unit: c.AppendString(unit),
			Description: c.AppendString(desc), Type: signal.MetricSum, Temporality: signal.TemporalityCumulative, Monotonic: true})
		return uint32(len(dst.Descs) - 1)
	}
	dOps := sum("sluice.io.operations", "{operation}", "Traced I/O syscalls that completed.")
	dBytes := sum("sluice.io.bytes", "By", "Bytes moved by traced data calls that succeeded.")
	dErrs := sum("sluice.io.errors", "{error}", "Traced I/O syscalls that failed (returned an errno).")
	dst.Descs = append(dst.Descs, signal.MetricDesc{Name: c.AppendString("sluice.io.duration"), Unit: c.AppendString("s"),
		Description: c.AppendString("Latency of traced I/O syscalls (enter to exit)."), Type: signal.MetricHistogram, Temporality: signal.TemporalityCumulative})
	dDur := uint32(len(dst.Descs) - 1)
	kComm, kSc, kPrefix := c.Keys.IDString("comm"), c.Keys.IDString("syscall"), c.Keys.IDString("path_prefix")
	bounds := uint32(len(dst.F64))
	for _, b := range tracer.LatencyBounds {
		dst.F64 = append(dst.F64, float64(b)/1e9)
	}
	boundsR := signal.Range{Start: bounds, End: uint32(len(dst.F64))}
	for _, s := range a.series {
		at := uint32(c.Attrs.Len())
		c.Attrs.Append(kComm, signal.ValueString, uint64(c.AppendString(s.comm)))
		c.Attrs.Append(kSc, signal.ValueString, uint64(c.AppendString(tracer.SyscallName(s.sc))))
		c.Attrs.Append(kPrefix, signal.ValueString, uint64(c.AppendString(s.prefix)))
		attrs := signal.Range{Start: at, End: uint32(c.Attrs.Len())}
		point := func(d uint32) int {
			i := dst.AppendPoint(d, 0, 0)
			dst.StartTime[i], dst.Time[i], dst.Attr[i] = a.start, now, attrs
			return i
		}
		for _, v := range []struct {
			d uint32
			n uint64
		}{{dOps, s.ops}, {dBytes, s.bytes}, {dErrs, s.errs}} {
			i := point(v.d)
			dst.NumberType[i] = signal.ValueInt
			dst.Number[i] = v.n
		}
		i := point(dDur)
		dst.Count[i] = s.ops
		dst.Sum[i] = float64(s.durNs) / 1e9
		dst.Has[i] = signal.HasSum
		u := uint32(len(dst.U64))
		dst.U64 = append(dst.U64, s.buckets...)
		dst.BucketCounts[i] = signal.Range{Start: u, End: uint32(len(dst.U64))}
		dst.Bounds[i] = boundsR
	}
	return true
}

// ioEmitter queues the aggregate every interval (and once at stop) as an
// OTLP metrics record of the tenant. The counts are cumulative, so a
// snapshot the queue refuses is counted and skipped: the next one carries
// its counts.
type ioEmitter struct {
	agg      *ioAgg
	cons     *consumer
	tenant   string
	host     string
	log      *slog.Logger
	emitted  prometheus.Counter // points queued
	failures prometheus.Counter
	mu       sync.Mutex
	b        signal.Metrics
}

func (e *ioEmitter) emit(now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.agg.snapshot(&e.b, e.host, now.UnixNano()) {
		return
	}
	rec := appendRecord(nil, signal.KindMetrics, e.tenant, otlp.AppendMetricsProto(nil, &e.b))
	if err := e.cons.appendEmitted(e.tenant, rec, e.b.Len()); err != nil {
		e.failures.Inc()
		e.log.Warn("traced I/O metrics not queued; the next interval carries their counts", "err", err)
		return
	}
	e.emitted.Add(float64(e.b.Len()))
}

// ioMetricsCounters are the metrics emitter's own counters, registered
// with the other iotrace counters.
type ioMetricsCounters struct {
	emitted, failures, overflow prometheus.Counter
}

func newIOMetricsCounters() ioMetricsCounters {
	return ioMetricsCounters{
		emitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_iotrace_metrics_points_total",
			Help: "Points of the traced I/O metrics (receivers.iotrace.metrics) queued into the pipeline."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_iotrace_metrics_emit_failures_total",
			Help: "Snapshots of the traced I/O metrics the queue refused (the next interval carries their cumulative counts)."}),
		overflow: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_iotrace_metrics_overflow_total",
			Help: "Traced calls counted in comm=other, path_prefix=other because receivers.iotrace.metrics.max_series was reached."}),
	}
}

func hostName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}
