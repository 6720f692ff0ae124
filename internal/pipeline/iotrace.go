package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/tracer"
)

// ioSource is the eBPF I/O tracer as a source (receivers.iotrace): every
// batch the tracer hands over becomes one queue record of kind io_events,
// appended and fsynced like a received request, and the lake loop writes
// it into the io_events table with the same checkpoints. The kernel does
// not wait: while the queue refuses appends (full, or short of disk) the
// source retries, the ring buffer fills, and the kernel counts what it
// could not send (sluice_iotrace_lost_total), never silently.
type ioSource struct {
	tr     *tracer.Tracer
	q      *queue.Queue
	tenant string
	log    *slog.Logger
	retry  time.Duration
	m      *ioMetrics

	cancel context.CancelFunc // stops tracing; Run then drains the ring
	abort  context.CancelFunc // stops retrying appends that the queue refuses
	done   chan struct{}
	err    error // why Run ended; read after done
	rec    []byte

	agg      *ioAgg     // receivers.iotrace.metrics; nil off
	emit     *ioEmitter // queues agg every interval
	emitStop func()     // stops emit's ticker and waits for it
}

// ioOptions turns the config into tracer options; errors name the key.
func ioOptions(c config.IOTrace) (tracer.Options, error) {
	const r = "receivers.iotrace."
	o := tracer.Options{
		PID: c.PID, TID: c.TID, Comm: c.Comm, Cgroup: c.Cgroup, MinDuration: c.MinDuration.D(),
		PathPrefix: c.PathPrefix, PathGlob: c.PathGlob, RingBytes: int(c.RingBytes),
	}
	var err error
	if o.Syscalls, err = tracer.ParseSyscalls(c.Syscalls); err != nil {
		return o, fmt.Errorf("%ssyscalls: %w", r, err)
	}
	if o.Attach, err = tracer.ParseAttachMode(c.Attach); err != nil {
		return o, fmt.Errorf("%sattach: %w", r, err)
	}
	if err = tracer.CheckPathFilter(c.PathPrefix, false); err != nil {
		return o, fmt.Errorf("%spath_prefix: %w", r, err)
	}
	if err = tracer.CheckPathFilter(c.PathGlob, true); err != nil {
		return o, fmt.Errorf("%spath_glob: %w", r, err)
	}
	return o, nil
}

// validateIOTrace checks receivers.iotrace's filters as sluice run would
// at start; nil when tracing is off.
func validateIOTrace(cfg *config.Config) error {
	if !cfg.Receivers.IOTrace.Enabled {
		return nil
	}
	_, err := ioOptions(cfg.Receivers.IOTrace)
	return err
}

// startIOTrace opens the tracer (failing Start with the tracer's words when
// this machine cannot trace) and starts reading it.
func (p *Pipeline) startIOTrace() error {
	c := p.cfg.Receivers.IOTrace
	opts, err := ioOptions(c)
	if err != nil {
		return err
	}
	if known, ok := p.cons.tenants.Seed(c.Tenant); !ok { // the operator's choice, not a client's
		return fmt.Errorf("receivers.iotrace.tenant %q differs only in case from the existing tenant %q", c.Tenant, known)
	}
	tr, err := tracer.Open(opts)
	if err != nil {
		return fmt.Errorf("receivers.iotrace: %w", err)
	}
	s := &ioSource{tr: tr, q: p.q.Load(), tenant: c.Tenant, log: p.log.With("component", "iotrace"),
		retry: min(p.cfg.Queue.RetryAfter.D(), 100*time.Millisecond), m: p.iom, done: make(chan struct{})}
	if s.retry <= 0 {
		s.retry = 100 * time.Millisecond
	}
	p.iom.attach(tr)
	if mc := c.Metrics; mc.Enabled {
		s.agg = newIOAgg(mc.PathDepth, mc.MaxSeries, p.iom.mc.overflow)
		s.emit = &ioEmitter{agg: s.agg, cons: p.cons, tenant: c.Tenant, host: hostName(), log: s.log,
			emitted: p.iom.mc.emitted, failures: p.iom.mc.failures}
		ectx, ecancel := context.WithCancel(context.Background())
		edone := make(chan struct{})
		go func() { defer close(edone); everyTick(ectx, mc.Interval.D(), s.emit.emit) }()
		s.emitStop = func() { ecancel(); <-edone }
	}
	ctx, cancel := context.WithCancel(context.Background())
	abortCtx, abort := context.WithCancel(context.Background())
	s.cancel, s.abort = cancel, abort
	p.io = s
	s.log.Info("tracing I/O syscalls into the lake", "tenant", c.Tenant, "attach", tr.Attachment(), "fallback_reason", tr.FallbackReason())
	go func() {
		defer close(s.done)
		s.err = tr.Run(ctx, func(b *signal.IOEvents) error { return s.queueBatch(abortCtx, b) })
	}()
	return nil
}

// queueBatch counts a batch in the live metrics and appends it as a queue
// record.
func (s *ioSource) queueBatch(abort context.Context, b *signal.IOEvents) error {
	if b.Len() == 0 {
		return nil
	}
	s.m.io.Add(b) // what the kernel reported, queued or not
	if s.agg != nil {
		s.agg.Add(b)
	}
	s.queueRows(abort, b)
	return nil
}

// queueRows appends b as one record. It retries while the queue refuses
// for space (the kernel counts what the ring cannot hold meanwhile) until
// abort, then counts the rows as dropped; a batch too large for one record
// (long distinct paths) is halved until it fits.
func (s *ioSource) queueRows(abort context.Context, b *signal.IOEvents) {
	n := b.Len()
	s.rec = tracer.AppendWire(appendRecord(s.rec[:0], signal.KindIOEvents, s.tenant, nil), b)
	for {
		_, err := s.q.Append(s.rec)
		switch {
		case err == nil:
			s.m.queued.Add(float64(n))
			s.m.queuedBytes.Add(float64(len(s.rec)))
			return
		case errors.Is(err, queue.ErrTooLarge) && n > 1:
			var lo, hi signal.IOEvents
			lo.AppendRows(b, 0, n/2)
			hi.AppendRows(b, n/2, n)
			s.queueRows(abort, &lo)
			s.queueRows(abort, &hi)
			return
		case errors.Is(err, queue.ErrFull) || errors.Is(err, queue.ErrLowDisk):
			s.m.queueWaits.Inc()
			t := time.NewTimer(s.retry)
			select {
			case <-t.C:
				continue
			case <-abort.Done():
				t.Stop()
			}
		}
		// Refused for good, or still refused when stopping: never silent.
		s.m.dropped.Add(float64(n))
		s.log.Error("traced I/O batch dropped: the queue refused it", "rows", n, "err", err)
		return
	}
}

// stop ends tracing, lets Run hand over what is left in the ring (retrying
// a refusing queue until ctx is done) and closes the tracer.
func (s *ioSource) stop(ctx context.Context) error {
	s.cancel()
	stop := context.AfterFunc(ctx, s.abort)
	defer stop()
	<-s.done
	s.abort()
	if s.emit != nil {
		// The last counts, including what Run drained, once more.
		s.emitStop()
		s.emit.emit(time.Now())
	}
	s.m.detach(s.tr)
	err := s.tr.Close()
	if s.err != nil {
		return fmt.Errorf("iotrace: %w", s.err)
	}
	return err
}

// ioMetrics are the tracer source's counters (sluice_iotrace_*).
type ioMetrics struct {
	queued, queuedBytes, dropped, queueWaits prometheus.Counter
	io                                       *tracer.IOMetrics // calls, bytes, errors, latency per syscall; lost
	mc                                       ioMetricsCounters // receivers.iotrace.metrics
}

func newIOMetrics() *ioMetrics {
	return &ioMetrics{
		queued: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_iotrace_queued_rows_total",
			Help: "Traced I/O calls made durable in the queue (receivers.iotrace)."}),
		queuedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_iotrace_queued_bytes_total",
			Help: "Bytes of io_events queue records appended."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_iotrace_dropped_rows_total",
			Help: "Traced calls read from the kernel but dropped because the queue refused them until shutdown or for good."}),
		queueWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_iotrace_queue_waits_total",
			Help: "Times an io_events batch waited because the queue was full or short of disk (the kernel ring fills meanwhile)."}),
		io: tracer.NewIOMetrics(),
		mc: newIOMetricsCounters(),
	}
}

func (m *ioMetrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.queued, m.queuedBytes, m.dropped, m.queueWaits, m.io, m.mc.emitted, m.mc.failures, m.mc.overflow} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *ioMetrics) attach(tr *tracer.Tracer) { m.io.SetLost(tr.Lost) }

// detach keeps the last lost count: the tracer's maps close with it.
func (m *ioMetrics) detach(tr *tracer.Tracer) {
	last := tr.Lost()
	m.io.SetLost(func() uint64 { return last })
}
