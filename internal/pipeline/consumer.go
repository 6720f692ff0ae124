package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/processor"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/stats"
	"github.com/sluice-dev/sluice/internal/tenant"
)

// consumer is the receiver side of the pipeline: validate, count, append,
// acknowledge. Safe for concurrent use.
type consumer struct {
	q          *queue.Queue
	retryAfter time.Duration
	m          *metrics
	failed     atomic.Bool  // the queue refused appends with ErrFailed: restart needed
	tenants    tenant.Names // refuses a tenant differing only in case from a known one
	lowDisk    func()       // called when the queue refuses for disk space; may be nil
	limits     otlp.Limits
	rules      atomic.Pointer[processor.Rules] // nil: no processing rules; swapped by a reload
	// refuse marks the signals no pipeline takes (forward-only configs):
	// they are refused rather than acknowledged into a queue no sink reads.
	refuse [signal.KindTraces + 1]bool
	stats  *stats.Stats // counts the metrics queued; nil when off
	pool   sync.Pool    // *scratch
	routes *routing     // per-pipeline routes (routes.go); nil: one record for everyone
	meta   *familyMeta  // remote-write metadata sent without series (metadata.go); nil without a lake
	// handoff passes scanned requests' decoded bodies to the lake loop
	// (handoff.go); nil without a lake.
	handoff *handoff
	// forwardMeta: a remote-write exporter takes metrics, so remote-write
	// metadata sent without series is queued for it (metadata.go).
	forwardMeta bool
}

// scratch is the per-call state: one batch per signal (decoded only to
// validate and count) and the record buffer.
type scratch struct {
	logs    signal.Logs
	metrics signal.Metrics
	spans   signal.Spans
	rec     []byte
	proc    processor.Scratch
	body    []byte  // the request re-encoded after the rules changed it
	changed bool    // process re-encoded the request from proc.Out (OutLogs)
	enc     bodyEnc // the encoding of body as process returned it (prwrecord.go)
	series  int     // encPRW1N, encPRW2N: the request's TimeSeries count
	recs    [][]byte
	routes  []*routeScratch // per route (routes.go)
	// routeRefused is what the route whose chain refused the most points
	// refused (records).
	routeRefused refusals
	// An OTLP metrics request's histogram points decode removed for a
	// shape OTLP forbids (badHist), and those kept whose count disagrees
	// with their buckets (mismatch), each with a sentence for the sender.
	badHist, mismatch       int
	badHistWhy, mismatchWhy string
}

// maxPooledBytes keeps one huge request from pinning its buffers in the pool.
const maxPooledBytes = 8 << 20

func newConsumer(q *queue.Queue, retryAfter time.Duration, m *metrics) *consumer {
	c := &consumer{q: q, retryAfter: retryAfter, m: m}
	c.pool.New = func() any { return new(scratch) }
	return c
}

// decode validates body as an export request of kind, within lim, and
// returns its record count. The batch is reset first: only the count is
// kept. A metrics body the receiver decoded already (pre, remote write) is
// not decoded again: the scratch takes pre's buffers in exchange for its
// own, so the rules and the statistics see exactly that batch. A
// remote-write body without pre (rw: its version) is decoded here.
func (s *scratch) decode(kind signal.Kind, body []byte, pre *signal.Metrics, rw uint8, lim otlp.Limits) (int, error) {
	switch kind {
	case signal.KindLogs:
		s.logs.Reset()
		err := otlp.DecodeLogs(&s.logs, body)
		if err == nil {
			err = otlp.CheckLogs(&s.logs, 0, lim)
		}
		return s.logs.Len(), err
	case signal.KindMetrics:
		var err error
		switch {
		case pre != nil:
			s.metrics, *pre = *pre, s.metrics
		case rw == 1 || rw == 2:
			s.metrics.Reset()
			enc := encPRW1
			if rw == 2 {
				enc = encPRW2
			}
			err = decodeMetricsRecord(&s.metrics, enc, body)
		default:
			s.metrics.Reset()
			err = otlp.DecodeMetrics(&s.metrics, body)
			s.badHist, s.badHistWhy, s.mismatch, s.mismatchWhy = 0, "", 0, ""
			if err == nil {
				// A bad histogram point goes alone (a partial success);
				// the request is refused only when nothing else is left.
				s.badHist, s.badHistWhy = otlp.DropInvalidHistograms(&s.metrics, 0)
				s.mismatch, s.mismatchWhy = otlp.HistogramCountMismatches(&s.metrics, 0)
			}
		}
		if err == nil {
			err = otlp.CheckMetrics(&s.metrics, 0, lim)
		}
		return s.metrics.Len() + s.badHist, err
	case signal.KindTraces:
		s.spans.Reset()
		err := otlp.DecodeTraces(&s.spans, body)
		if err == nil {
			err = otlp.CheckSpans(&s.spans, 0, lim)
		}
		return s.spans.Len(), err
	}
	return 0, fmt.Errorf("unknown signal %v", kind)
}

// process applies the rules to the decoded batch and returns the body to
// queue and its record count: the original body when no rule changed
// anything, else the kept records re-encoded.
func (s *scratch) process(r *processor.Rules, kind signal.Kind, body []byte, n int) ([]byte, int) {
	s.changed = false
	switch kind {
	case signal.KindMetrics:
		if changed, kept := r.ProcessMetrics(&s.metrics, &s.proc); changed { // in place
			s.body = otlp.AppendMetricsProto(s.body[:0], &s.metrics)
			s.changed = true
			return s.body, kept
		}
	case signal.KindLogs:
		if changed, kept := r.ProcessLogs(&s.logs, &s.proc); changed {
			s.body = otlp.AppendLogsProto(s.body[:0], &s.proc.OutLogs)
			s.changed = true
			return s.body, kept
		}
	}
	return body, n
}

// dropFuture removes from an OTLP metrics request decoded into s the data
// points further ahead than the lake files by their own time
// (lake.max_future_skew; limits.MetricsFutureSkew, set when the lake is
// on), and returns how many and why. The caller answers a partial success
// naming them, or refuses the request when nothing is left, so a gateway's
// batch is not lost for one host's clock. Remote write is refused per
// series in the receiver already.
func (c *consumer) dropFuture(s *scratch, req *otlpreceiver.Request) (int, string) {
	if req.Kind != signal.KindMetrics || c.limits.MetricsFutureSkew <= 0 || req.Scanned != nil || req.Metrics != nil || req.RemoteWrite != 0 {
		return 0, ""
	}
	return otlp.DropFuture(&s.metrics, 0, c.limits.MetricsFutureSkew)
}

// refusedResult is the partial success that tells an OTLP sender which
// of its points limit and require rules refused (docs/rules.md): those of
// processors.rules_file and those of the pipelines' own rule sets, added to
// res. What drop, keep and sample rules remove by design is not reported.
func refusedResult(res otlpreceiver.Result, kind signal.Kind, r refusals) otlpreceiver.Result {
	if kind != signal.KindMetrics || r.n == 0 {
		return res
	}
	return withRejected(res, r.n, fmt.Sprintf("%d data points refused by rule %q: series over a cardinality limit or without required labels", r.n, r.by))
}

// withRejected adds n rejected records and their sentence why to res.
func withRejected(res otlpreceiver.Result, n int, why string) otlpreceiver.Result {
	res.RejectedRecords += int64(n)
	res.Message = strings.TrimPrefix(res.Message+"; "+why, "; ")
	return res
}

// queuedMetrics is the metrics batch whose points were queued (the rules
// work in place), with series ids recomputed when the rules changed it: a
// relabel keeps the ids of the input series, and the lake loop's decoder
// computes them from the labels the series now has.
func (s *scratch) queuedMetrics() *signal.Metrics {
	if s.changed {
		s.metrics.ComputeSeriesIDs()
	}
	return &s.metrics
}

func (c *consumer) put(s *scratch) {
	for _, rs := range s.routes {
		if rs.tooBig() {
			return
		}
	}
	if cap(s.rec) > maxPooledBytes || cap(s.body) > maxPooledBytes || cap(s.proc.OutLogs.Buf) > maxPooledBytes || cap(s.logs.Buf) > maxPooledBytes || cap(s.metrics.Buf) > maxPooledBytes || cap(s.spans.Buf) > maxPooledBytes {
		return
	}
	c.pool.Put(s)
}

// Consume implements otlpreceiver.Consumer. It returns nil only after the
// request's record is fsynced in the queue.
func (c *consumer) Consume(_ context.Context, req *otlpreceiver.Request) (otlpreceiver.Result, error) {
	// Until the tenant is admitted its requests count under tenant "":
	// a client sending garbage under ever new names makes no series.
	ser := c.m.seriesFor(req.Kind, c.tenantLabel(req.Tenant))
	if err := c.takes(req.Kind); err != nil {
		ser.invalid.Inc()
		return otlpreceiver.Result{}, err
	}
	s := c.pool.Get().(*scratch)
	defer c.put(s)
	// One load per request: a reload never splits a request between two
	// rule sets, nor between the scan's check and the rules.
	rules := c.rules.Load()
	sc := req.Scanned
	if sc != nil && !c.takesScanned(rules, sc) {
		sc = nil // decode the body after all
	}
	var n int
	var err error
	if sc != nil {
		n = sc.Points
	} else {
		n, err = s.decode(req.Kind, req.Body, req.Metrics, req.RemoteWrite, c.limits)
	}
	if err != nil {
		ser.invalid.Inc()
		var le *otlp.LimitError
		if errors.As(err, &le) {
			c.m.limited.WithLabelValues(req.Kind.String(), le.Limit).Inc()
		}
		return otlpreceiver.Result{}, fmt.Errorf("decode %s request: %w: %w", req.Kind, otlpreceiver.ErrInvalid, err)
	}
	if err := c.admit(req.Tenant); err != nil {
		if errors.Is(err, errTooManyTenants) {
			c.m.limited.WithLabelValues(req.Kind.String(), LimitMaxTenants).Inc()
		}
		ser.invalid.Inc()
		return otlpreceiver.Result{}, err
	}
	ser = c.m.seriesFor(req.Kind, req.Tenant)
	ser.received.Add(float64(n))
	body := req.Body
	s.changed = false
	var res otlpreceiver.Result
	dropped := false
	if req.Kind == signal.KindMetrics && s.badHist > 0 {
		ser.rejectedInvalid.Add(float64(s.badHist))
		if s.badHist == n {
			ser.invalid.Inc()
			c.m.limited.WithLabelValues(req.Kind.String(), otlp.LimitHistogram).Inc()
			return otlpreceiver.Result{}, fmt.Errorf("decode %s request: %w: %w: %s", req.Kind, otlpreceiver.ErrInvalid, otlp.ErrHistogram, s.badHistWhy)
		}
		n -= s.badHist
		res, dropped = withRejected(res, s.badHist, s.badHistWhy), true
	}
	if late, why := c.dropFuture(s, req); late > 0 {
		ser.rejectedTime.Add(float64(late))
		if late == n {
			ser.invalid.Inc()
			c.m.limited.WithLabelValues(req.Kind.String(), otlp.LimitTimestamp).Inc()
			return otlpreceiver.Result{}, fmt.Errorf("%s request: %w: %s", req.Kind, otlpreceiver.ErrInvalid, why)
		}
		n -= late
		res, dropped = withRejected(res, late, why), true
	}
	if dropped {
		s.body = otlp.AppendMetricsProto(s.body[:0], &s.metrics)
		body = s.body
	}
	if req.Kind == signal.KindMetrics && s.mismatch > 0 {
		// Kept: a warning (a partial success rejecting nothing), as the
		// OTLP specification lets a server say.
		ser.histMismatch.Add(float64(s.mismatch))
		res = withRejected(res, 0, s.mismatchWhy)
	}
	if r := rules; r != nil {
		s.proc.Tenant = req.Tenant
		if c.stats != nil && req.Kind == signal.KindMetrics {
			c.stats.ObserveBeforeRules(req.Tenant, &s.metrics)
		}
		body, n = s.process(r, req.Kind, body, n)
		res = refusedResult(res, req.Kind, refusals{s.proc.Refused, s.proc.RefusedBy})
	}
	if n == 0 {
		return res, nil // nothing to keep
	}
	s.enc = recordEnc(req, s.changed)
	if sc != nil && s.enc == encPRW1 {
		s.enc, s.series = encPRW1N, sc.NumSeries
	}
	if sc != nil && s.enc == encPRW2 {
		s.enc, s.series = encPRW2N, sc.NumSeries
	}
	recs, n, size, observe := c.records(s, req.Kind, req.Tenant, body, n)
	// The pipelines' own rule sets: a point one of them refused is
	// reported even when another pipeline took it, as that pipeline's
	// exporters never see it; the route that refused the most counts.
	res = refusedResult(res, req.Kind, s.routeRefused)
	if len(recs) == 0 {
		return res, nil // no route kept anything
	}
	if c.lends(s, sc, recs) {
		// The lake loop takes the decoded request instead of decoding
		// the record (handoff.go); filed before the record is readable.
		raw, n, body := c.handoff.hash(req.Body), len(req.Body), sc.Decoded
		var lent *handBuf
		_, err = c.q.AppendAt(func(end queue.Position) { lent = c.handoff.put(end, raw, n, body) }, recs...)
		if lent != nil {
			// The handoff has the body: the receiver decodes its next
			// request into a spare. Released once the statistics below
			// no longer read the request.
			sc.Decoded = c.handoff.getSpare()
			defer c.handoff.release(lent)
		}
	} else {
		_, err = c.q.Append(recs...)
	}
	switch {
	case err == nil:
		ser.accepted.Add(float64(n))
		ser.queuedBytes.Add(float64(size))
		switch {
		case c.stats == nil:
		case sc != nil:
			c.stats.ObserveSeries(req.Tenant, &sc.Series, size)
		case observe != nil:
			c.stats.Observe(req.Tenant, observe, size)
		}
		return res, nil
	case errors.Is(err, queue.ErrLowDisk):
		ser.rejectedDisk.Add(float64(n))
	case errors.Is(err, queue.ErrFull):
		ser.rejectedFull.Add(float64(n))
	case errors.Is(err, queue.ErrTooLarge):
		ser.invalid.Inc()
	default:
		ser.rejectedError.Add(float64(n))
	}
	return otlpreceiver.Result{}, c.appendFailed(err, len(req.Body))
}

// lends reports whether the receiver's decoded body of a scanned request
// goes to the handoff (handoff.go): a lake, an encPRW1N or encPRW2N record
// for everyone, a body given, and room for it.
func (c *consumer) lends(s *scratch, sc *otlpreceiver.Scanned, recs [][]byte) bool {
	return c.handoff != nil && sc != nil && (s.enc == encPRW1N || s.enc == encPRW2N) && len(recs) == 1 &&
		len(sc.Decoded) > 0 && c.handoff.room(cap(sc.Decoded))
}

// appendFailed is the answer to a request of size bytes whose records the
// queue refused with err: backpressure for a full queue or disk (which
// also nudges the lake loop), invalid for a request too large for a
// segment, an error otherwise (after ErrFailed the process needs a
// restart).
func (c *consumer) appendFailed(err error, size int) error {
	switch {
	case errors.Is(err, queue.ErrLowDisk):
		if c.lowDisk != nil {
			c.lowDisk()
		}
		return otlpreceiver.Backpressure(c.retryAfter, err)
	case errors.Is(err, queue.ErrFull):
		return otlpreceiver.Backpressure(c.retryAfter, err)
	case errors.Is(err, queue.ErrTooLarge):
		return fmt.Errorf("request of %d bytes: %w: %w", size, otlpreceiver.ErrInvalid, err)
	case errors.Is(err, queue.ErrFailed):
		c.failed.Store(true)
	}
	return fmt.Errorf("append to queue: %w", err)
}

// takes refuses a request of kind when no pipeline takes it.
func (c *consumer) takes(kind signal.Kind) error {
	if int(kind) < len(c.refuse) && c.refuse[kind] {
		return fmt.Errorf("no pipeline takes %s (pipelines: in the config; the lake is off): %w", kind, otlpreceiver.ErrInvalid)
	}
	return nil
}

// admit refuses a tenant the lake would refuse after the request was
// acknowledged (the receiver validates tenants too), or one differing
// only in case from a known tenant.
func (c *consumer) admit(tn string) error {
	if !tenant.Valid(tn) {
		return fmt.Errorf("tenant %q: %w", tn, otlpreceiver.ErrInvalid)
	}
	known, ok := c.tenants.Admit(tn)
	switch {
	case ok:
	case known == "":
		return fmt.Errorf("tenant %q is new and %d tenants are known, the most receivers.otlp.max_tenants allows: %w: %w",
			tn, c.tenants.Max, errTooManyTenants, otlpreceiver.ErrInvalid)
	default:
		return fmt.Errorf("tenant %q differs only in case from the existing tenant %q (they would share one directory on a case-insensitive file system): %w",
			tn, known, otlpreceiver.ErrInvalid)
	}
	return nil
}

var errTooManyTenants = errors.New("too many tenants")

// LimitMaxTenants names receivers.otlp.max_tenants in the limit label of
// sluice_pipeline_limited_requests_total.
const LimitMaxTenants = "max_tenants"

// tenantLabel is tn when it is an admitted tenant, else "": the one
// client-chosen label value of the metrics stays bounded by max_tenants.
func (c *consumer) tenantLabel(tn string) string {
	if c.tenants.Known(tn) {
		return tn
	}
	return ""
}

// TakesScanned implements prwreceiver.ScanTaker: without processing rules
// and with no pipeline running a processor chain on metrics, nothing
// needs a remote-write request's batch.
func (c *consumer) TakesScanned() bool { return c.takesScanned(c.rules.Load(), nil) }

// takesScanned reports whether a request can be queued without its batch
// under rules, and sc (when not nil) is within the attribute limits (else
// the decode names the limit, as for any request).
func (c *consumer) takesScanned(rules *processor.Rules, sc *otlpreceiver.Scanned) bool {
	if rules != nil {
		return false
	}
	if rt := c.routes; rt != nil && !rt.plain[signal.KindMetrics] {
		return false
	}
	if sc == nil {
		return true
	}
	lim := c.limits
	return (lim.MaxAttrsPerRequest <= 0 || sc.Attrs <= lim.MaxAttrsPerRequest) &&
		(lim.MaxAttrsPerRecord <= 0 || sc.MaxAttrs <= lim.MaxAttrsPerRecord)
}

// appendEmitted appends rec, a record of points the rules emitted
// (aggregate and downsample output) for tenant, to the queue and counts
// them as accepted.
func (c *consumer) appendEmitted(tenant string, rec []byte, points int) error {
	if _, err := c.q.Append(rec); err != nil {
		if errors.Is(err, queue.ErrFailed) {
			c.failed.Store(true)
		}
		return fmt.Errorf("append aggregate output: %w", err)
	}
	ser := c.m.seriesFor(signal.KindMetrics, tenant)
	ser.accepted.Add(float64(points))
	ser.queuedBytes.Add(float64(len(rec)))
	if c.stats != nil {
		c.observeEmitted(tenant, rec)
	}
	return nil
}

// observeEmitted counts an emitted record in the statistics, which count
// what is stored. It decodes the record again: the emitter queues bytes,
// once per tenant and interval, not per request.
func (c *consumer) observeEmitted(tenant string, rec []byte) {
	r, err := parseRecord(rec)
	if err != nil {
		return // appendRecord made it: cannot happen
	}
	if rt := c.routes; rt != nil && rt.lake && !r.to(lakeDest) {
		return // the statistics count what the lake stores (routes.go)
	}
	body := r.Body
	s := c.pool.Get().(*scratch)
	defer c.put(s)
	s.metrics.Reset()
	if otlp.DecodeMetrics(&s.metrics, body) == nil {
		c.stats.Observe(tenant, &s.metrics, len(rec))
	}
}
