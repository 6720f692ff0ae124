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

// Run forwards until ctx ends; it returns nil then, or the queue's error.
func (r *Runner) Run(ctx context.Context) error {
	var (
		batch []Record
		arena []byte
		offs  []int
	)
	c := r.o.Cursor
	for {
		batch, arena, offs = batch[:0], arena[:0], offs[:0]
		var end queue.Position
		have := false
		var fill context.Context = ctx
		cancel := func() {}
		for len(arena) < r.o.BatchBytes {
			raw, pos, err := c.Next(fill)
			if err != nil {
				if ctx.Err() != nil {
					cancel()
					return nil
				}
				if errors.Is(err, context.DeadlineExceeded) {
					break // batch delay passed
				}
				cancel()
				if errors.Is(err, queue.ErrClosed) {
					return nil
				}
				return fmt.Errorf("exporter %s: read queue: %w", r.o.Name, err)
			}
			if !have {
				// The batch's time starts at its first record, sent or
				// skipped: records this exporter skips are committed
				// too, even when no other record follows them.
				fill, cancel = context.WithTimeout(ctx, r.o.BatchDelay)
			}
			end, have = pos, true
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
			offs = append(offs, len(arena))
			arena = append(arena, rec.Body...)
			rec.Body = nil // every other field as Parse set it
			batch = append(batch, rec)
		}
		cancel()
		if !have {
			continue
		}
		for i := range batch {
			hi := len(arena)
			if i+1 < len(offs) {
				hi = offs[i+1]
			}
			batch[i].Body = arena[offs[i]:hi:hi]
		}
		if len(batch) > 0 {
			if err := r.o.Sender.Send(ctx, batch); err != nil {
				if ctx.Err() != nil {
					return nil // not committed: sent again after a restart
				}
				r.o.Logger.Warn("exporter: batch not delivered; reading it again", "err", err)
				c.Rewind()
				// Not a hot loop on an error that repeats.
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Second):
				}
				continue
			}
			r.sentRecords.Add(uint64(len(batch)))
			r.sentBytes.Add(uint64(len(arena)))
		}
		if err := c.Commit(end); err != nil {
			// The batch went out; a restart resends it (at least once).
			r.o.Logger.Error("exporter: commit cursor", "err", err)
		}
		r.lastSend.Store(time.Now().UnixNano())
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
