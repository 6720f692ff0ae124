package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Record is one queue record as an exporter sees it: an OTLP export request
// body (or a remote-write request, see RemoteWrite) of one signal for one
// tenant. Body is owned by the batch until Send
// returns.
type Record struct {
	Kind   signal.Kind
	Tenant string
	Body   []byte
	// RemoteWrite, when 1 or 2, says Body is a remote-write request of that
	// protocol version (metrics), as received (snappy block encoded), not
	// OTLP. Only senders that
	// set Options.RemoteWrite get such records.
	RemoteWrite uint8
	// Series, when above 0, is the number of series (TimeSeries) in a 1.0
	// Body, as the receiver counted them, so that a pass-through need not
	// decode the body to count them.
	Series int
}

// Sender delivers a batch. It returns nil once every record is accepted by
// its endpoints or dropped and counted (a permanent refusal); any error
// means "not delivered, send again" (usually ctx ended).
type Sender interface {
	Send(ctx context.Context, recs []Record) error
	// Endpoints are the endpoints, for their stats and breaker state.
	Endpoints() []*sending.Endpoint
}

// ErrSkip is what Options.Parse returns for a record that is not for this
// exporter (routed to other pipelines); it is counted as skipped.
var ErrSkip = errors.New("exporter: record not for this exporter")

// Options configure a Runner.
type Options struct {
	Name       string
	Cursor     *queue.Cursor
	Parse      func(rec []byte) (Record, error) // Body may alias rec; ErrSkip: not for this exporter
	Signals    []signal.Kind                    // kinds forwarded; the rest is skipped
	Sender     Sender
	BatchBytes int           // send when a batch holds this many body bytes; default 1 MiB
	BatchDelay time.Duration // or when its first record waited this long; default 200ms
	Logger     *slog.Logger
}

// Runner moves records from its cursor to its Sender.
type Runner struct {
	o Options

	sentRecords, sentBytes, badRecords, skipped atomic.Uint64
	lastSend                                    atomic.Int64 // unix nanos of the last committed batch
}

// New checks o and returns a Runner.
func New(o Options) (*Runner, error) {
	if o.Cursor == nil || o.Sender == nil || o.Parse == nil {
		return nil, errors.New("exporter: Cursor, Sender and Parse are required")
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 1 << 20
	}
	if o.BatchDelay <= 0 {
		o.BatchDelay = 200 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Logger = o.Logger.With("exporter", o.Name)
	return &Runner{o: o}, nil
}

// Name returns the exporter's name.
func (r *Runner) Name() string { return r.o.Name }

func (r *Runner) wants(k signal.Kind) bool {
	if len(r.o.Signals) == 0 {
		return true
	}
	for _, s := range r.o.Signals {
		if s == k {
			return true
		}
	}
	return false
}

// BatchSender is a Sender that takes several batches at once (its Send
// is safe for concurrent use, and the order in which batches arrive does
// not matter to its backends).
type BatchSender interface {
	Sender
	// BatchesInFlight is how many Sends may run at once.
	BatchesInFlight() int
}

// batchBuf is one batch: its records, whose bodies are copies in arena,
// and the queue position after its last record.
type batchBuf struct {
	recs  []Record
	arena []byte
	offs  []int
	end   queue.Position
}

// fill reads the next batch from the cursor: records until BatchBytes, or
// until BatchDelay after its first record. idle, when positive, bounds
// the wait for the first record (have is false then). stop says Run
// must end, with err (nil when ctx ended or the queue closed).
func (r *Runner) fill(ctx context.Context, b *batchBuf, idle time.Duration) (have, stop bool, err error) {
	b.recs, b.arena, b.offs = b.recs[:0], b.arena[:0], b.offs[:0]
	c := r.o.Cursor
	fill := ctx
	if idle > 0 {
		var cancel context.CancelFunc
		fill, cancel = context.WithTimeout(ctx, idle)
		defer cancel()
	}
	for len(b.arena) < r.o.BatchBytes {
		raw, pos, err := c.Next(fill)
		if err != nil {
			if ctx.Err() != nil {
				return false, true, nil
			}
			if errors.Is(err, context.DeadlineExceeded) {
				break // batch delay (or idle) passed
			}
			if errors.Is(err, queue.ErrClosed) {
				return false, true, nil
			}
			return false, true, fmt.Errorf("exporter %s: read queue: %w", r.o.Name, err)
		}
		if !have {
			// The batch's time starts at its first record, sent or
			// skipped: records this exporter skips are committed
			// too, even when no other record follows them.
			// (Once per call: have stays true.)
			var cancel context.CancelFunc
			fill, cancel = context.WithTimeout(ctx, r.o.BatchDelay)
			defer cancel()
		}
		b.end, have = pos, true
		rec, perr := r.o.Parse(raw)
		if errors.Is(perr, ErrSkip) {
			r.skipped.Add(1)
			continue
		}
		if perr != nil {
			r.badRecords.Add(1)
			r.o.Logger.Warn("exporter: skipping a queue record that does not parse", "err", perr)
			continue
		}
		if !r.wants(rec.Kind) {
			r.skipped.Add(1)
			continue
		}
		// Copy: raw is valid only until the next Next.
		b.offs = append(b.offs, len(b.arena))
		b.arena = append(b.arena, rec.Body...)
		rec.Body = nil // every other field as Parse set it
		b.recs = append(b.recs, rec)
	}
	for i := range b.recs {
		hi := len(b.arena)
		if i+1 < len(b.offs) {
			hi = b.offs[i+1]
		}
		b.recs[i].Body = b.arena[b.offs[i]:hi:hi]
	}
	return have, false, nil
}

// commit records a delivered (or wholly skipped) batch.
func (r *Runner) commit(b *batchBuf) {
	if len(b.recs) > 0 {
		r.sentRecords.Add(uint64(len(b.recs)))
		r.sentBytes.Add(uint64(len(b.arena)))
	}
	if err := r.o.Cursor.Commit(b.end); err != nil {
		// The batch went out; a restart resends it (at least once).
		r.o.Logger.Error("exporter: commit cursor", "err", err)
	}
	r.lastSend.Store(time.Now().UnixNano())
}

// retryPause waits before reading a batch that was not delivered again
// (not a hot loop on an error that repeats); false when ctx ended.
func retryPause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Second):
		return true
	}
}

// Run forwards until ctx ends; it returns nil then, or the queue's error.
// A BatchSender gets up to BatchesInFlight batches at once (runWindow);
// any other Sender one batch at a time, in queue order.
func (r *Runner) Run(ctx context.Context) error {
	if bs, ok := r.o.Sender.(BatchSender); ok && bs.BatchesInFlight() > 1 {
		return r.runWindow(ctx, bs.BatchesInFlight())
	}
	var b batchBuf
	for {
		have, stop, err := r.fill(ctx, &b, 0)
		if stop {
			return err
		}
		if !have {
			continue
		}
		if len(b.recs) > 0 {
			if err := r.o.Sender.Send(ctx, b.recs); err != nil {
				if ctx.Err() != nil {
					return nil // not committed: sent again after a restart
				}
				r.o.Logger.Warn("exporter: batch not delivered; reading it again", "err", err)
				r.o.Cursor.Rewind()
				if !retryPause(ctx) {
					return nil
				}
				continue
			}
		}
		r.commit(&b)
	}
}

// windowPoll bounds the wait for a new record while batches are in
// flight, so that their commits do not wait for the next record.
const windowPoll = 20 * time.Millisecond

// runWindow is Run with up to window batches in flight at once (an
// endpoint's concurrency). The cursor is committed in queue order, past
// a batch only when it and every batch before it were delivered; a batch
// that was not (ctx ended, or an error) is read again with everything
// after it, once the batches in flight have ended (at least once).
func (r *Runner) runWindow(ctx context.Context, window int) error {
	type flight struct {
		b    *batchBuf
		done bool
		err  error
	}
	var (
		inflight []*flight // queue order
		free     []*batchBuf
		sending  int // flights whose Send has not returned
		results  = make(chan *flight, window)
	)
	// settle records the sends that ended (waiting for one when wait),
	// and commits the delivered head of inflight. failed: its head was
	// not delivered.
	settle := func(wait bool) (failed bool) {
		for {
			var f *flight
			if wait && sending > 0 {
				f = <-results
				wait = false
			} else {
				select {
				case f = <-results:
				default:
				}
			}
			if f == nil {
				break
			}
			f.done = true
			sending--
		}
		var last *flight
		for len(inflight) > 0 && inflight[0].done {
			f := inflight[0]
			if f.err != nil {
				failed = true
				break
			}
			if len(f.b.recs) > 0 {
				r.sentRecords.Add(uint64(len(f.b.recs)))
				r.sentBytes.Add(uint64(len(f.b.arena)))
			}
			last = f
			inflight = inflight[1:]
			free = append(free, f.b)
		}
		if last != nil {
			if err := r.o.Cursor.Commit(last.b.end); err != nil {
				r.o.Logger.Error("exporter: commit cursor", "err", err)
			}
			r.lastSend.Store(time.Now().UnixNano())
		}
		return failed
	}
	// drain waits for every Send in flight and commits what it can.
	drain := func() bool {
		for sending > 0 {
			settle(true)
		}
		return settle(false)
	}
	for {
		if settle(len(inflight) == window) {
			failedErr := inflight[0].err
			drain()
			if ctx.Err() != nil {
				return nil // not committed: sent again after a restart
			}
			r.o.Logger.Warn("exporter: batch not delivered; reading it and the batches after it again", "err", failedErr)
			for _, f := range inflight {
				free = append(free, f.b)
			}
			inflight = inflight[:0]
			r.o.Cursor.Rewind()
			if !retryPause(ctx) {
				return nil
			}
			continue
		}
		if len(inflight) == window {
			continue
		}
		var b *batchBuf
		if n := len(free); n > 0 {
			b, free = free[n-1], free[:n-1]
		} else {
			b = &batchBuf{}
		}
		idle := time.Duration(0)
		if len(inflight) > 0 {
			idle = windowPoll
		}
		have, stop, err := r.fill(ctx, b, idle)
		if stop {
			drain()
			return err
		}
		if !have {
			free = append(free, b)
			continue
		}
		f := &flight{b: b}
		inflight = append(inflight, f)
		if len(b.recs) == 0 {
			f.done = true // wholly skipped: committed in its turn
			continue
		}
		sending++
		go func() {
			f.err = r.o.Sender.Send(ctx, f.b.recs)
			results <- f
		}()
	}
}

// Stats is a snapshot of a Runner.
type Stats struct {
	SentRecords, SentBytes, BadRecords, Skipped uint64
	Cursor                                      queue.CursorStats
}

// Stats returns the runner's counters and its cursor's lag and drops.
func (r *Runner) Stats() Stats {
	return Stats{
		SentRecords: r.sentRecords.Load(),
		SentBytes:   r.sentBytes.Load(),
		BadRecords:  r.badRecords.Load(),
		Skipped:     r.skipped.Load(),
		Cursor:      r.o.Cursor.Stats(),
	}
}

// Endpoints returns the sender's endpoints.
func (r *Runner) Endpoints() []*sending.Endpoint { return r.o.Sender.Endpoints() }
