package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/tracer"
)

// QueueName is the name under which the lake commits its queue position
// in the catalog.
const QueueName = "lake"

// Checkpoint reasons, the "reason" label of sluice_lake_checkpoints_total.
const (
	reasonInterval = "interval"
	reasonBuffered = "buffered"
	reasonQueue    = "queue"
	reasonShutdown = "shutdown"
	reasonRequest  = "request"
	reasonDisk     = "disk" // the queue refused appends for disk space
)

const (
	// catalogTimeout bounds one catalog call; SQLite answers in
	// milliseconds unless the disk is in trouble.
	catalogTimeout = time.Minute
	minBackoff     = 500 * time.Millisecond
	maxBackoff     = 30 * time.Second
	// maxPending checkpoints early when the writer rolled this many files
	// since the last checkpoint, so one transaction stays small.
	maxPending = 4096
)

// rewindMinBackoff is the first wait before a replay after a failed
// checkpoint; a variable so that a test can hold the failing state long
// enough to observe it on a loaded machine.
var rewindMinBackoff = minBackoff

// lakeLoop moves queue records into the lake; see the package doc. All
// fields below mu belong to the loop goroutine.
type lakeLoop struct {
	q        *queue.Queue
	cat      *catalog.Catalog
	store    lake.Store
	wopts    lake.Options
	log      *slog.Logger
	m        *metrics
	interval time.Duration
	maxBuf   int64 // checkpoint when the writer buffers more
	maxQueue int64 // checkpoint when this many queue bytes were read
	tail     *tail // trimmed at each commit; nil when queries do not read it

	mu        sync.Mutex
	wake      context.CancelFunc // cancels the loop's current wait
	consuming bool               // wake ends a consume (not a backoff)
	diskNudge atomic.Bool        // checkpoint now: the queue is short of disk
	lastNudge atomic.Int64       // unix ns of the last accepted nudge
	stopping  bool
	requests  []chan error
	done      chan struct{}
	err       error // why the loop ended; read after done

	w         *lake.Writer
	iow       *lake.IOWriter // io_events from the tracer source (iotrace.go)
	r         *queue.Reader
	committed queue.Position // in the catalog
	pos       queue.Position // after the last record handed to w
	pending   []lake.Segment // files w wrote since the last checkpoint
	last      time.Time      // last checkpoint
	backoff   time.Duration
	skipped   uint64 // r.Lost()+r.Corrupt() already counted

	// Poison isolation (quarantine.go): after a failed checkpoint every
	// record is first encoded alone by probe, and one that fails goes to
	// the quarantine instead of the writer, until a checkpoint succeeds.
	probe    *lake.Probe
	isolate  bool
	failures int          // consecutive failed checkpoints
	status   atomic.Value // string: why the loop is failing, "" when not

	tenants map[string]*tenantRows
	logs    signal.Logs
	metrics signal.Metrics
	spans   signal.Spans
	io      signal.IOEvents
	badLog  time.Time // last bad-record log line

	// appendPRW's scratch: the snappy-decoded request and the appender
	// that puts its points into a partition.
	prwBuf  []byte
	prwApp  prw.PlainAppender
	prwApp2 prw.PlainAppender2
	// hand holds the receiver's decoded bodies of scanned requests
	// (handoff.go); nil: every record is decoded.
	hand *handoff
	// prwDec decodes the handoff's 2.0 requests (decodeMetrics).
	prwDec prw.Decoder
}

type tenantRows struct {
	name string // owned copy: the writer keeps it in partition keys
	rows [numKinds]prometheus.Counter
}

func newLakeLoop(q *queue.Queue, cat *catalog.Catalog, wopts lake.Options, committed queue.Position, l *lakeLoop) (*lakeLoop, error) {
	l.q, l.cat, l.wopts, l.committed, l.pos = q, cat, wopts, committed, committed
	if wopts.Store == nil {
		l.store = lake.NewLocalStore(wopts.Root)
		l.wopts.Store = l.store
	} else {
		l.store = wopts.Store
	}
	l.done = make(chan struct{})
	l.tenants = make(map[string]*tenantRows)
	l.status.Store("")
	if err := l.newWriter(); err != nil {
		return nil, err
	}
	var err error
	if l.probe, err = lake.NewProbe(l.wopts); err != nil {
		return nil, err
	}
	l.r = q.NewReader(committed)
	l.last = time.Now()
	l.m.committedPos.Set(float64(committed))
	return l, nil
}

func (l *lakeLoop) newWriter() error {
	w, err := lake.NewWriter(l.wopts, func(s lake.Segment) error {
		// The file is in place; it becomes part of the lake only with the
		// checkpoint transaction (invariant 2).
		l.pending = append(l.pending, s)
		return nil
	})
	if err != nil {
		return fmt.Errorf("lake writer: %w", err)
	}
	iow, err := lake.NewIOWriter(l.wopts, ioHost(), func(s lake.Segment) error {
		l.pending = append(l.pending, s) // like the writer's files
		return nil
	})
	if err != nil {
		return fmt.Errorf("lake io_events writer: %w", err)
	}
	l.w, l.iow = w, iow
	return nil
}

// stop asks the loop to drain what the queue holds, checkpoint and end.
func (l *lakeLoop) stop() {
	l.mu.Lock()
	l.stopping = true
	if l.wake != nil {
		l.wake()
	}
	l.mu.Unlock()
}

// nudgeLowDisk asks for a checkpoint now because the queue refuses appends
// for disk space: committing what was read lets the queue release its
// segments. At most once a second, and never cutting a failure's backoff
// short (a disk that is full for other reasons would only fail faster).
func (l *lakeLoop) nudgeLowDisk() {
	now := time.Now().UnixNano()
	last := l.lastNudge.Load()
	if now-last < int64(time.Second) || !l.lastNudge.CompareAndSwap(last, now) {
		return
	}
	l.mu.Lock()
	if l.consuming && l.wake != nil {
		l.diskNudge.Store(true)
		l.wake()
	}
	l.mu.Unlock()
}

// checkpoint asks for a drain and checkpoint now and waits for it.
func (l *lakeLoop) checkpoint(ctx context.Context) error {
	ch := make(chan error, 1)
	l.mu.Lock()
	l.requests = append(l.requests, ch)
	if l.wake != nil {
		l.wake()
	}
	l.mu.Unlock()
	select {
	case err := <-ch:
		return err
	case <-l.done:
		return errors.New("pipeline: lake loop stopped")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *lakeLoop) run() {
	defer close(l.done)
	defer l.r.Close()
	for {
		ctx, cancel := context.WithDeadline(context.Background(), l.last.Add(l.interval))
		l.mu.Lock()
		l.wake = cancel
		l.consuming = true
		woken := l.stopping || len(l.requests) > 0
		l.mu.Unlock()

		var reason string
		var err error
		if !woken {
			reason, err = l.consume(ctx)
		}
		cancel()
		l.mu.Lock()
		l.consuming = false
		stop, reqs := l.stopping, l.requests
		l.requests = nil
		l.mu.Unlock()

		if errors.Is(err, queue.ErrClosed) {
			l.answer(reqs, err)
			l.err = err
			return
		}
		if err == nil {
			switch {
			case stop:
				reason = reasonShutdown
			case len(reqs) > 0:
				reason = reasonRequest
			case reason == "" && l.diskNudge.Swap(false):
				reason = reasonDisk
			case reason == "":
				reason = reasonInterval
			}
			if stop || len(reqs) > 0 {
				err = l.drain()
			}
			if err == nil {
				err = l.commitCheckpoint(reason)
			}
		}
		l.answer(reqs, err)
		if stop {
			if err == nil {
				err = errors.Join(l.w.Close(), l.iow.Close()) // nothing is buffered after the final checkpoint
			} else {
				l.log.Error("final lake checkpoint failed; the queue keeps the data for the next start", "err", err)
			}
			l.err = err
			return
		}
		if err != nil {
			l.rewind(err)
		}
	}
}

func (l *lakeLoop) answer(reqs []chan error, err error) {
	for _, ch := range reqs {
		ch <- err
	}
}

// consume hands records to the writer until ctx is done (then it returns
// "" and nil) or a size threshold asks for a checkpoint (its reason).
func (l *lakeLoop) consume(ctx context.Context) (string, error) {
	for {
		rec, pos, err := l.r.Next(ctx)
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, queue.ErrClosed) {
				return "", nil
			}
			return "", err
		}
		if err := l.handle(rec, pos); err != nil {
			return "", err
		}
		if ctx.Err() != nil {
			// Next keeps returning records on a done context; wake-ups
			// must not wait for the queue to run dry.
			return "", nil
		}
		switch {
		case l.bufferedBytes() >= l.maxBuf:
			return reasonBuffered, nil
		case int64(l.pos-l.committed) >= l.maxQueue:
			return reasonQueue, nil
		case len(l.pending) >= maxPending:
			return reasonBuffered, nil
		}
	}
}

// drain hands over every record durable now, so that a checkpoint
// requested after an acknowledgement covers it.
func (l *lakeLoop) drain() error {
	target := l.q.Stats().Last
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for l.pos < target {
		rec, pos, err := l.r.Next(done)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil // caught up (corrupt data below target was skipped)
			}
			return err
		}
		if err := l.handle(rec, pos); err != nil {
			return err
		}
	}
	return nil
}

// handle decodes one queue record into the writer. It returns an error only
// when the writer failed, which leaves its buffers incomplete (a failed
// file takes its partition with it) and calls for a rewind.
func (l *lakeLoop) handle(rec []byte, pos queue.Position) error {
	r, err := parseRecord(rec)
	if err != nil {
		l.bad(pos, err)
		if qerr := l.quarantine("", "", rec, pos, 0, err); qerr != nil {
			return qerr
		}
		l.advance(pos)
		return nil
	}
	if !r.to(lakeDest) {
		l.advance(pos) // routed to exporters only
		return nil
	}
	kind, body := r.Kind, r.Body
	t := l.tenant(r.Tenant)
	var n int
	probe := func(e error) error { // in isolation, a record the writer cannot encode alone
		if e == nil && l.isolate {
			e = l.probeRecord(kind, t.name)
			if e != nil {
				e = &poisonError{e}
			}
		}
		return e
	}
	switch kind {
	case signal.KindLogs:
		l.logs.Reset()
		if err = otlp.DecodeLogs(&l.logs, body); err == nil {
			n = l.logs.Len()
			if err = probe(nil); err == nil {
				err = l.w.WriteLogs(t.name, &l.logs)
			}
		}
	case signal.KindMetrics:
		if !l.isolate && (r.Enc == encPRW1N || r.Enc == encPRW2N || appendPlainPRW && r.Enc == encPRW1) {
			// A plain remote-write request goes straight into its
			// partition's batch (appendPRW); anything else, and a request
			// the writer does not take whole, is decoded and copied.
			var ok bool
			if ok, n, err = l.appendPRW(t.name, r.Enc, body, pos); ok || err != nil {
				break
			}
		}
		l.metrics.Reset()
		if err = l.decodeMetrics(r.Enc, body, pos); err == nil {
			n = l.metrics.Len()
			if err = probe(nil); err == nil {
				err = l.w.WriteMetrics(t.name, &l.metrics)
			}
		}
	case signal.KindTraces:
		l.spans.Reset()
		if err = otlp.DecodeTraces(&l.spans, body); err == nil {
			n = l.spans.Len()
			if err = probe(nil); err == nil {
				err = l.w.WriteSpans(t.name, &l.spans)
			}
		}
	case signal.KindIOEvents:
		l.io.Reset()
		if err = tracer.DecodeWire(&l.io, body); err == nil {
			n = l.io.Len()
			err = l.iow.Write(t.name, &l.io)
		}
	}
	var pe *poisonError
	switch {
	case err == nil:
	case n == 0 || errors.Is(err, lake.ErrInvalidTenant) || errors.As(err, &pe):
		// Undecodable (the consumer decoded it before acknowledging, so
		// this is a version or corruption problem), refused by the lake
		// for good, or unwritable alone (poison): retrying cannot help.
		// Quarantine it and go on; its position is passed like any
		// record's (see quarantine.go).
		l.bad(pos, err)
		if kind == signal.KindMetrics && n > 0 && r.Enc != encOTLP {
			body = otlp.AppendMetricsProto(nil, &l.metrics) // the quarantine keeps OTLP
		}
		if qerr := l.quarantine(tableOf(kind), t.name, body, pos, n, err); qerr != nil {
			return qerr
		}
		l.advance(pos)
		return nil
	default:
		return fmt.Errorf("write %s of tenant %s at queue position %d: %w", kind, t.name, pos, err)
	}
	t.rows[kind].Add(float64(n))
	l.advance(pos)
	return nil
}

// decodeMetrics decodes a metrics record's body into l.metrics, as
// decodeMetricsRecord does; a scanned 2.0 request (encPRW2N) is decoded
// from the receiver's decoded body when the handoff holds it, instead of
// being snappy-decoded again.
func (l *lakeLoop) decodeMetrics(enc bodyEnc, body []byte, pos queue.Position) error {
	if enc != encPRW2N || l.hand == nil {
		return decodeMetricsRecord(&l.metrics, enc, body)
	}
	_, raw, err := splitCounted(body)
	if err != nil {
		return err
	}
	hb := l.hand.take(pos, raw)
	if hb == nil {
		return decodeMetricsRecord(&l.metrics, encPRW2, raw)
	}
	defer l.hand.release(hb)
	_, err = l.prwDec.DecodeV2(&l.metrics, hb.b)
	var pe *prw.PartialError
	if errors.As(err, &pe) {
		err = nil // as decodeMetricsRecord: the good series
	}
	return err
}

// appendPlainPRW sends encPRW1 records (remote write 1.0 the receiver
// decoded instead of scanning) to appendPRW too, not only the encPRW1N
// records of requests the receiver's scan accepted. Off: an encPRW1 record
// is one the receiver did not scan (processing rules, or not the plain
// case), so appendPRW would mostly give up on it after scanning it. Tests
// turn it on to cover appendPRW's checks on records nobody scanned.
var appendPlainPRW = false

// appendPRW appends a plain remote write 1.0 or 2.0 request straight into the
// writer's partition batch (lake.Writer.AppendMetrics, prw.PlainAppender):
// no batch of the record's own is decoded and copied, and a series the
// partition holds already (the same series every scrape) is found by its
// label bytes, without parsing or hashing its labels. It returns false,
// having written nothing, when the request is not plain, spans partition
// hours, would reach a writer limit or its tenant is invalid: the caller
// then decodes it and writes it with WriteMetrics, which also quarantines
// what the lake refuses. An error is the writer's (a failed flush), as
// WriteMetrics's would be.
//
// Before (issue 13, plake6) the loop decoded every remote-write record
// (snappy, every label parsed and hashed for its series id) and copied the
// batch into the partition (a set lookup by content per series): about
// 45% of the lake loop's CPU at 1,500 samples a request.
//
// The request of a record at pos is the handoff's (the receiver decoded it
// and lent it) when it holds it, else snappy-decoded here.
func (l *lakeLoop) appendPRW(tenant string, enc bodyEnc, body []byte, pos queue.Position) (bool, int, error) {
	var req []byte
	if enc == encPRW1N || enc == encPRW2N {
		_, raw, err := splitCounted(body)
		if err != nil {
			return false, 0, nil
		}
		body = raw
		if hb := l.hand.take(pos, raw); hb != nil {
			req = hb.b
			defer l.hand.release(hb)
		}
	}
	if req == nil {
		var err error
		if l.prwBuf, err = prw.Unsnappy(l.prwBuf, body); err != nil {
			return false, 0, nil
		}
		req = l.prwBuf
	}
	var (
		times               []int64
		attrs, descs, arena int
		fill                func(*signal.Metrics) bool
	)
	if enc == encPRW2N {
		// Remote write 2.0 (issue 13, plain2): the same, its series
		// known by their resolved label strings (prw.PlainAppender2).
		pa := &l.prwApp2
		if !pa.ScanTimesV2(req) {
			return false, 0, nil
		}
		times, fill = pa.Times, pa.AppendV2
		attrs, descs, arena = pa.Bounds()
	} else {
		pa := &l.prwApp
		if !pa.ScanTimesV1(req) {
			return false, 0, nil
		}
		times, fill = pa.Times, pa.AppendV1
		attrs, descs, arena = pa.Bounds()
	}
	n := len(times)
	// Bounds, not counts: the labels are not parsed. The partition is
	// measured again after the append.
	est := lake.EstimateMetricsBytes(n, attrs, descs, arena)
	ok, err := l.w.AppendMetrics(tenant, times, est, fill)
	if errors.Is(err, lake.ErrInvalidTenant) {
		return false, 0, nil
	}
	if cap(l.prwBuf) > maxPooledBytes {
		l.prwBuf = nil // one huge request does not pin its buffer
	}
	return ok, n, err
}

// bufferedBytes is what both writers hold in memory.
func (l *lakeLoop) bufferedBytes() int64 {
	return l.w.Stats().BufferedBytes + l.iow.Stats().BufferedBytes
}

// ioHost is the host column of io_events rows: the tracer traces this
// machine.
func ioHost() string {
	h, _ := os.Hostname()
	return h
}

func (l *lakeLoop) advance(pos queue.Position) {
	l.pos = pos
	l.hand.pass(pos)
	if s := l.r.Lost() + l.r.Corrupt(); s != l.skipped {
		l.m.skippedBytes.Add(float64(s - l.skipped))
		l.skipped = s
	}
	l.m.uncommitted.Set(float64(l.pos - l.committed))
	l.m.bufferedBytes.Set(float64(l.bufferedBytes()))
}

func (l *lakeLoop) bad(pos queue.Position, err error) {
	l.m.badRecords.Inc()
	if now := time.Now(); now.Sub(l.badLog) > time.Minute {
		l.badLog = now
		l.log.Error("skipping queue record the lake cannot take (logged at most once a minute; see sluice_lake_bad_records_total)", "position", pos, "err", err)
	}
}

func (l *lakeLoop) tenant(b []byte) *tenantRows {
	if t := l.tenants[string(b)]; t != nil {
		return t
	}
	t := &tenantRows{name: string(b)}
	for k := signal.KindLogs; k <= signal.KindIOEvents; k++ {
		t.rows[k] = l.m.rows.WithLabelValues(k.String(), t.name)
	}
	l.tenants[t.name] = t
	return t
}

// commitCheckpoint flushes the writer and commits its files with the queue
// position they cover, then releases the queue below it.
func (l *lakeLoop) commitCheckpoint(reason string) error {
	start := time.Now()
	if l.pos == l.committed && len(l.pending) == 0 && l.bufferedBytes() == 0 {
		l.last = start
		return nil
	}
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("flush lake writer: %w", err)
	}
	if err := l.iow.Flush(); err != nil {
		return fmt.Errorf("flush lake io_events writer: %w", err)
	}
	segs := make([]catalog.Segment, len(l.pending))
	var rows, bytes int64
	for i, s := range l.pending {
		segs[i] = s.CatalogRow()
		rows += s.Rows
		bytes += s.Bytes
	}
	if l.pos > l.committed {
		if err := l.commit(segs); err != nil {
			return err
		}
	} else if len(segs) > 0 {
		// Records always advance the position; files without one would be
		// a bug that exactly-once cannot survive.
		panic(fmt.Sprintf("pipeline: %d lake files but the queue position did not move from %d", len(segs), l.pos))
	}
	l.committed = l.pos
	l.pending = l.pending[:0]
	l.last = time.Now()
	l.backoff = 0
	if l.tail != nil {
		// Before Release: the tail must never read below what it serves
		// (see tail).
		l.tail.trim(int64(l.committed))
	}
	l.recovered()
	if err := l.q.Release(l.committed); err != nil {
		// Only disk space is at stake; the next checkpoint retries.
		l.log.Warn("releasing committed queue segments failed", "position", l.committed, "err", err)
	}
	d := l.last.Sub(start)
	l.m.checkpoints.WithLabelValues(reason).Inc()
	l.m.checkpointSecs.Observe(d.Seconds())
	l.m.checkpointRows.Observe(float64(rows))
	l.m.checkpointBytes.Observe(float64(bytes))
	l.m.segments.Add(float64(len(segs)))
	l.m.segmentBytes.Add(float64(bytes))
	l.m.committedPos.Set(float64(l.committed))
	l.m.uncommitted.Set(0)
	l.m.bufferedBytes.Set(0)
	l.m.lastCheckpointTS.Set(float64(l.last.UnixNano()) / 1e9)
	l.log.Debug("lake checkpoint", "reason", reason, "files", len(segs), "rows", rows, "bytes", bytes, "position", l.committed, "took", d)
	return nil
}

// commit runs the checkpoint transaction. When it fails, the catalog is
// asked whether it committed anyway, so that files are deleted only when
// they are certainly not in the catalog (invariant 4).
func (l *lakeLoop) commit(segs []catalog.Segment) error {
	qc := catalog.QueueCommit{Name: QueueName, Pos: int64(l.pos)}
	backoff := minBackoff
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
		err := l.cat.AddSegmentsWithQueue(ctx, qc, segs...)
		cancel()
		if err == nil {
			return nil
		}
		cur, qerr := l.queuePosition()
		if qerr == nil {
			if cur == qc.Pos {
				// Committed: the error came after the commit, or an earlier
				// attempt whose answer was lost did it (this one then fails
				// with ErrQueueRegress).
				return nil
			}
			// ErrQueueRegress with another position means a second writer
			// on this lake, which the lock file rules out; not retryable.
			if !catalog.IsRetryable(err) || attempt >= 5 {
				return &commitError{err: err, known: true}
			}
			l.log.Warn("catalog busy; retrying the checkpoint commit", "attempt", attempt, "err", err)
		} else {
			l.log.Error("catalog commit failed and the catalog cannot say whether it committed; asking again", "err", err, "query_err", qerr)
			// The loop waits here for as long as the catalog is
			// unreachable (a PostgreSQL restart): say so in /readyz and
			// count it, as a failed checkpoint would; the next checkpoint
			// that commits clears it (recovered).
			if attempt == 1 {
				l.m.checkpointFails.Inc()
			}
			l.status.Store(fmt.Sprintf("lake checkpoint waiting for the catalog (%d attempts, last at %s): it cannot say whether the commit happened: %v; see sluice_lake_checkpoint_failures_total",
				attempt, time.Now().UTC().Format(time.RFC3339), err))
		}
		if !l.sleep(backoff) {
			// Stopping: leave files whose fate is unknown to the start-up
			// sweep, which asks the catalog.
			return &commitError{err: err, known: qerr == nil}
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

type commitError struct {
	err   error
	known bool // the catalog certainly did not commit
}

func (e *commitError) Error() string { return "commit checkpoint to the catalog: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

func (l *lakeLoop) queuePosition() (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	return l.cat.QueuePosition(ctx, QueueName)
}

func (l *lakeLoop) isStopping() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopping
}

// sleep waits d or until stop is requested; it reports whether it slept
// the whole time.
func (l *lakeLoop) sleep(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	l.mu.Lock()
	if l.stopping {
		l.mu.Unlock()
		return false
	}
	l.wake = cancel
	l.mu.Unlock()
	<-ctx.Done()
	return !l.isStopping()
}

// rewind discards everything since the committed position after a failed
// checkpoint or write, and replays from there after a backoff.
func (l *lakeLoop) rewind(cause error) {
	l.m.checkpointFails.Inc()
	l.m.rewinds.Inc()
	l.failed(cause)
	var ce *commitError
	deleteFiles := !errors.As(cause, &ce) || ce.known
	l.log.Error("lake checkpoint failed; replaying from the committed queue position",
		"err", cause, "committed", l.committed, "read_to", l.pos, "uncommitted_files", len(l.pending), "delete_files", deleteFiles)
	if deleteFiles {
		for _, s := range l.pending {
			if err := l.store.Remove(s.Path); err != nil {
				l.log.Warn("removing uncommitted lake file failed; the start-up sweep removes it", "path", s.Path, "err", err)
				continue
			}
			l.m.orphans.Inc()
		}
	}
	l.pending = nil
	// The old writer's buffers are dropped unflushed: their records are
	// above the committed position and are read again.
	if err := l.newWriter(); err != nil {
		l.log.Error("recreating the lake writer failed", "err", err)
	}
	l.r.Close()
	l.r = l.q.NewReader(l.committed)
	l.pos = l.committed
	l.skipped = 0
	l.m.uncommitted.Set(0)
	l.m.bufferedBytes.Set(0)
	l.backoff = min(max(2*l.backoff, rewindMinBackoff), maxBackoff)
	l.sleep(l.backoff)
	l.last = time.Now()
}
