package sending

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ErrRejected wraps a permanent refusal (a 4xx other than 429): the data is
// dropped and counted, never retried.
var ErrRejected = errors.New("sending: rejected by endpoint")

// ErrTooLarge is DoSplit's answer to a 413 (Content Too Large): the
// endpoint refuses the request for its size (Mimir, Cortex, Thanos and
// VictoriaMetrics answer 413 above their request size limit), and the
// caller sends its data again in smaller requests. It is neither retried
// nor counted as dropped: the caller counts the split (Endpoint.Split) or,
// for a request it cannot split further, the drop (Endpoint.DropTooLarge).
var ErrTooLarge = errors.New("sending: request too large for the endpoint")

// Policy configures retries, the breaker and concurrency of an endpoint.
type Policy struct {
	InitialBackoff  time.Duration // first retry delay; default 100ms
	MaxBackoff      time.Duration // cap of the delay; default 30s
	Concurrency     int           // requests in flight per endpoint; default 4
	BreakerFailures int           // consecutive failures that open the breaker; default 5
	BreakerCooldown time.Duration // open -> half-open after this; default 5s
	MaxRetryAfter   time.Duration // a Retry-After above this is capped; default 5m
	// Logger gets a line when the endpoint refuses data for good (at most
	// one per RefusalLogEvery, with the refusals since the last line) and
	// when its breaker opens or closes; default slog.Default().
	Logger *slog.Logger
}

// RefusalLogEvery spaces the log lines of an endpoint's permanent
// refusals: a backend refusing everything (a 401 after a token expired)
// gets a line at once, then one per interval, not one per request.
const RefusalLogEvery = 10 * time.Second

func (p Policy) withDefaults() Policy {
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = 100 * time.Millisecond
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = 30 * time.Second
	}
	if p.Concurrency <= 0 {
		p.Concurrency = 4
	}
	if p.BreakerFailures <= 0 {
		p.BreakerFailures = 5
	}
	if p.BreakerCooldown <= 0 {
		p.BreakerCooldown = 5 * time.Second
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = 5 * time.Minute
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	return p
}

// Outcome is what one attempt got: an HTTP status (gRPC exporters map
// their codes to one), a Retry-After if the answer had one, or a transport
// error (Status 0).
type Outcome struct {
	Status     int
	RetryAfter time.Duration
	Err        error
	Header     http.Header // the answer's headers (HTTP only)
	Body       []byte      // the answer's body, its first 4 KiB over HTTP
}

// Retryable tells the remote-write rule: transport errors, 429 and 5xx are
// retried; 2xx is success; every other status is permanent.
func (o Outcome) Retryable() bool {
	return o.Status == 0 || o.Status == http.StatusTooManyRequests || o.Status >= 500
}

// OK reports a 2xx answer without a transport error.
func (o Outcome) OK() bool { return o.Err == nil && o.Status >= 200 && o.Status < 300 }

// ParseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date.
// It returns 0 when absent or unparseable.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// PostRedirect is an exporter's http.Client.CheckRedirect: it follows a
// redirect that keeps the method and body (307, 308), at most 10; the
// others (301, 302, 303) would send a GET without the data, which a page
// there may answer 200, the data lost and counted sent: they come back as
// the answer, a refusal for good that names the status.
func PostRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if c := req.Response.StatusCode; c != http.StatusTemporaryRedirect && c != http.StatusPermanentRedirect {
		return http.ErrUseLastResponse
	}
	return nil
}

// Send sends req with hc and reports the answer as an Outcome: its status
// and Retry-After, and for a non-2xx answer the first 512 bytes of the body
// as the error. A transport error is an Outcome with Status 0.
func Send(hc *http.Client, req *http.Request) Outcome {
	resp, err := hc.Do(req)
	if err != nil {
		return Outcome{Err: err}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	o := Outcome{Status: resp.StatusCode, RetryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()), Header: resp.Header, Body: body}
	if !o.OK() {
		o.Err = fmt.Errorf("%s", bytes.TrimSpace(body[:min(len(body), 512)]))
	}
	return o
}

// Stats are an endpoint's counters. Sent/Failed/Retried/Dropped count
// requests (attempts for Failed and Retried); the exporter counts items.
type Stats struct {
	Sent, Failed, Retried, Dropped atomic.Uint64
	// Rejected counts items (records, points, spans) the endpoint refused
	// within requests it accepted (an OTLP partial success): not retried.
	Rejected atomic.Uint64
	// Splits counts requests the endpoint answered 413 that were sent
	// again in two parts (DoSplit).
	Splits atomic.Uint64
}

// Endpoint sends to one URL under a Policy.
type Endpoint struct {
	Name    string
	policy  Policy
	sem     chan struct{}
	Breaker *Breaker
	Stats   Stats
	sleep   func(context.Context, time.Duration) error
	rnd     func(int64) int64

	logMu    sync.Mutex
	refusals logEvery // permanent refusals
	partials logEvery // partial rejections
	tooLarge logEvery // single items refused for their size
}

// PartialRejection records that the endpoint accepted a request but
// refused n of its items (an OTLP partial success, with its message):
// they are counted in Stats.Rejected and logged like refusals, the first
// at once, then at most one line per RefusalLogEvery.
func (e *Endpoint) PartialRejection(n int64, msg string) {
	if n > 0 {
		e.Stats.Rejected.Add(uint64(n))
	}
	count, log := e.tick(&e.partials)
	if !log {
		return
	}
	e.policy.Logger.Warn("exporter: endpoint accepted a request but refused part of it (partial success); not retried",
		"endpoint", e.Name, "rejected", n, "message", msg, "partial_answers", count)
}

// NewEndpoint returns an endpoint for name (its URL or address).
func NewEndpoint(name string, p Policy) *Endpoint {
	p = p.withDefaults()
	return &Endpoint{
		Name:    name,
		policy:  p,
		sem:     make(chan struct{}, p.Concurrency),
		Breaker: NewBreaker(p.BreakerFailures, p.BreakerCooldown),
		sleep:   sleepCtx,
		rnd:     rand.Int64N,
	}
}

// InFlight is the number of the endpoint's requests being sent now (the
// concurrency slots taken).
func (e *Endpoint) InFlight() int { return len(e.sem) }

// Logger is where the endpoint logs (Policy.Logger).
func (e *Endpoint) Logger() *slog.Logger { return e.policy.Logger }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Backoff returns the delay before retry number attempt (0-based): random
// (jitter) between InitialBackoff*2^attempt and twice that, capped by
// MaxBackoff (at the cap between MaxBackoff/2 and MaxBackoff), but at
// least retryAfter (capped by MaxRetryAfter) when the endpoint asked for
// it. Each retry's range starts where the previous one's ends, so delays
// never shrink before the cap and the first retry waits InitialBackoff at
// least: full jitter (0 to the ceiling) retried at once half the time,
// below the 100 ms the remote-write compliance suite expects at least, and
// delays did not grow from one retry to the next as often as not.
func (e *Endpoint) Backoff(attempt int, retryAfter time.Duration) time.Duration {
	hi := e.policy.InitialBackoff << min(attempt+1, 30)
	if hi <= 0 || hi > e.policy.MaxBackoff {
		hi = e.policy.MaxBackoff
	}
	lo := max(hi/2, min(e.policy.InitialBackoff, hi))
	d := lo
	if hi > lo {
		d += time.Duration(e.rnd(int64(hi - lo)))
	}
	if ra := min(retryAfter, e.policy.MaxRetryAfter); ra > d {
		d = ra
	}
	return d
}

// Do runs attempt until it succeeds (nil), is refused for good (an error
// wrapping ErrRejected) or ctx ends. It holds one of the endpoint's
// concurrency slots while an attempt runs, and waits while the breaker is
// open.
func (e *Endpoint) Do(ctx context.Context, attempt func(context.Context) Outcome) error {
	return e.do(ctx, attempt, false)
}

// DoSplit is Do for a caller that can send the request's data again in
// parts: a 413 answer returns an error wrapping ErrTooLarge, not counted
// as dropped (Do drops it as any other 4xx).
func (e *Endpoint) DoSplit(ctx context.Context, attempt func(context.Context) Outcome) error {
	return e.do(ctx, attempt, true)
}

// Split counts a request the endpoint refused as too large (DoSplit) that
// is sent again in two parts.
func (e *Endpoint) Split() { e.Stats.Splits.Add(1) }

// DropTooLarge counts and logs a request refused as too large (DoSplit's
// err) that cannot be split further: what names the one item it holds (a
// series, a record). Logged like refusals: the first at once, then at
// most one line per RefusalLogEvery.
func (e *Endpoint) DropTooLarge(err error, what string) {
	e.Stats.Dropped.Add(1)
	n, log := e.tick(&e.tooLarge)
	if !log {
		return
	}
	e.policy.Logger.Warn("exporter: endpoint refused a request of one item as too large (413), after splitting; dropped, not retried",
		"endpoint", e.Name, "item", what, "answer", err, "refusals", n)
}

func (e *Endpoint) do(ctx context.Context, attempt func(context.Context) Outcome, splits bool) error {
	for n := 0; ; n++ {
		probe, err := e.waitBreaker(ctx)
		if err != nil {
			return err
		}
		select {
		case e.sem <- struct{}{}:
		case <-ctx.Done():
			e.Breaker.abandon(probe)
			return ctx.Err()
		}
		o := attempt(ctx)
		<-e.sem
		if o.OK() {
			e.success()
			e.Stats.Sent.Add(1)
			return nil
		}
		if ctx.Err() != nil {
			// Given up, not answered: neither a success nor a failure,
			// but a half-open probe must be handed back, or the breaker
			// waits for its answer for ever.
			e.Breaker.abandon(probe)
			return ctx.Err()
		}
		e.Stats.Failed.Add(1)
		if !o.Retryable() {
			// The endpoint is up and answered: not a breaker failure.
			e.success()
			if splits && o.Status == http.StatusRequestEntityTooLarge {
				return fmt.Errorf("%w: %s answered %d: %v", ErrTooLarge, e.Name, o.Status, o.Err)
			}
			e.Stats.Dropped.Add(1)
			e.logRefusal(o)
			return fmt.Errorf("%w: %s answered %d: %v", ErrRejected, e.Name, o.Status, o.Err)
		}
		if e.Breaker.Failure() {
			e.policy.Logger.Warn("exporter: endpoint failing; circuit breaker open, data held in the queue and retried",
				"endpoint", e.Name, "status", o.Status, "err", o.Err, "cooldown", e.policy.BreakerCooldown)
		}
		e.Stats.Retried.Add(1)
		if err := e.sleep(ctx, e.Backoff(n, o.RetryAfter)); err != nil {
			return err
		}
	}
}

// success records an answer on the breaker and logs its closing.
func (e *Endpoint) success() {
	if e.Breaker.Success() {
		e.policy.Logger.Info("exporter: endpoint answers again; circuit breaker closed", "endpoint", e.Name)
	}
}

// logEvery throttles a kind of log line: the first at once, later ones at
// most once per RefusalLogEvery, each saying how many events it stands for.
type logEvery struct {
	last    time.Time // when a line was last logged
	pending uint64    // events since
}

// tick counts one event at now and reports whether to log a line, and how
// many events that line stands for.
func (l *logEvery) tick(now time.Time) (uint64, bool) {
	l.pending++
	if !l.last.IsZero() && now.Sub(l.last) < RefusalLogEvery {
		return 0, false
	}
	n := l.pending
	l.last, l.pending = now, 0
	return n, true
}

// tick counts an event of the kind of line l logs, under logMu (logEvery.tick).
func (e *Endpoint) tick(l *logEvery) (uint64, bool) {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	return l.tick(time.Now())
}

// logRefusal logs a permanent refusal: the first at once, later ones at
// most once per RefusalLogEvery with how many came since (all are counted
// in Stats.Dropped).
func (e *Endpoint) logRefusal(o Outcome) {
	n, log := e.tick(&e.refusals)
	if !log {
		return
	}
	e.policy.Logger.Warn("exporter: endpoint refused data for good (a 4xx other than 429); dropped, not retried",
		"endpoint", e.Name, "status", o.Status, "answer", o.Err, "refusals", n)
}

// waitBreaker waits until the breaker lets a request go; probe reports
// that it goes as the half-open breaker's one probe.
func (e *Endpoint) waitBreaker(ctx context.Context) (probe bool, err error) {
	for {
		wait, ok, probe := e.Breaker.allow(time.Now())
		if ok {
			return probe, nil
		}
		if err := e.sleep(ctx, wait); err != nil {
			return false, err
		}
	}
}

// BreakerState is the state of a circuit breaker; its value is the gauge
// exported on /metrics.
type BreakerState int

const (
	Closed   BreakerState = 0
	HalfOpen BreakerState = 1
	Open     BreakerState = 2
)

func (s BreakerState) String() string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half-open"
	default:
		return "open"
	}
}

// Breaker opens after a run of consecutive failures, lets one probe through
// after the cooldown (half-open), and closes on its success.
type Breaker struct {
	mu        sync.Mutex
	failures  int
	threshold int
	cooldown  time.Duration
	state     BreakerState
	openedAt  time.Time
	probing   bool
	opened    atomic.Uint64 // transitions to open
}

// NewBreaker returns a closed breaker.
func NewBreaker(threshold int, cooldown time.Duration) *Breaker {
	return &Breaker{threshold: threshold, cooldown: cooldown}
}

// allow reports whether a request may go now; if not, how long to wait.
// A request let through a half-open breaker is its one probe (probe
// true): its caller reports the answer (Success or Failure), or hands the
// probe back (abandon).
func (b *Breaker) allow(now time.Time) (wait time.Duration, ok, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Closed:
		return 0, true, false
	case Open:
		if d := b.openedAt.Add(b.cooldown).Sub(now); d > 0 {
			return d, false, false
		}
		b.state = HalfOpen
		b.probing = true
		return 0, true, true
	default: // half-open: one probe at a time
		if b.probing {
			return min(b.cooldown, 50*time.Millisecond), false, false
		}
		b.probing = true
		return 0, true, true
	}
}

// abandon hands back a probe (allow's probe true) whose caller gave up
// before the endpoint answered: the next request probes instead.
func (b *Breaker) abandon(probe bool) {
	if !probe {
		return
	}
	b.mu.Lock()
	if b.state == HalfOpen {
		b.probing = false
	}
	b.mu.Unlock()
}

// Success records a request the endpoint answered; it reports whether
// that closed an open or half-open breaker.
func (b *Breaker) Success() (closed bool) {
	b.mu.Lock()
	closed = b.state != Closed
	b.failures, b.state, b.probing = 0, Closed, false
	b.mu.Unlock()
	return closed
}

// Failure records a failed request (transport error, 429 or 5xx); it
// reports whether that opened a closed breaker (a failed half-open probe
// opens it again, and reports false).
func (b *Breaker) Failure() (opened bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	b.probing = false
	if b.state == HalfOpen || (b.state == Closed && b.failures >= b.threshold) {
		opened = b.state == Closed
		b.state = Open
		b.openedAt = time.Now()
		b.opened.Add(1)
	}
	return opened
}

// State returns the current state.
func (b *Breaker) State() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Opened counts transitions to open.
func (b *Breaker) Opened() uint64 { return b.opened.Load() }
