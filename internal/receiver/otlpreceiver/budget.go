package otlpreceiver

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// maxAdmitWait is how long a request whose body is read waits for a
// processing slot or for body bytes before it gets 429: long enough to
// ride out a burst that group commit absorbs in milliseconds, short
// enough that a client is never left hanging on a saturated server.
const maxAdmitWait = 250 * time.Millisecond

// errNoBudget is a body that could not reserve its bytes in time.
var errNoBudget = errors.New("receiver: in-flight request bytes at their limit")

// byteBudget bounds the bytes of request bodies held at once, whether
// still being read or being consumed (Config.MaxInflightBytes). Bodies
// reserve as they grow, so a client trickling its body holds only what it
// has sent, and a slot is never held for reading.
type byteBudget struct {
	mu      sync.Mutex
	used    int64
	max     int64
	waiters int
	freed   chan struct{} // closed when bytes come back while someone waits
}

func newByteBudget(max int64) *byteBudget {
	return &byteBudget{max: max, freed: make(chan struct{})}
}

// acquire reserves n bytes, waiting at most maxAdmitWait for others to
// release them.
func (b *byteBudget) acquire(ctx context.Context, n int64) bool {
	b.mu.Lock()
	if b.used+n <= b.max {
		b.used += n
		b.mu.Unlock()
		return true
	}
	if n > b.max {
		b.mu.Unlock()
		return false
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		b.waiters++
		ch := b.freed
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(maxAdmitWait)
		}
		var ok bool
		select {
		case <-ch:
			ok = true
		case <-timer.C:
		case <-ctx.Done():
		}
		b.mu.Lock()
		b.waiters--
		if b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return true
		}
		if !ok {
			b.mu.Unlock()
			return false
		}
	}
}

func (b *byteBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.waiters > 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
	b.mu.Unlock()
}

// inUse is the bytes reserved now (for the gauge and tests).
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// acquireSlot takes a processing slot, waiting at most maxAdmitWait. The
// body is already read: refusing at once would throw away bytes a
// moment's wait could have kept.
func (r *Receiver) acquireSlot(ctx context.Context) bool {
	select {
	case r.sem <- struct{}{}:
		r.metrics.inFlight.Inc()
		return true
	default:
	}
	t := time.NewTimer(maxAdmitWait)
	defer t.Stop()
	select {
	case r.sem <- struct{}{}:
		r.metrics.inFlight.Inc()
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (r *Receiver) releaseSlot() {
	<-r.sem
	r.metrics.inFlight.Dec()
}

// rateLimit cuts a body that arrives slower than a minimum rate after a
// grace period: by time start+grace+t the client must have sent rate×t
// bytes. It moves the connection's (HTTP/2: the stream's) read deadline
// forward as bytes arrive, so a client that stops sending fails its next
// read with a timeout.
//
// Cost: the clock is read once per `every` bytes (rate×grace/2), and the
// deadline moved only when less than a grace is left, so a fast body pays
// one deadline at the start and one at the end. A client at or above the
// rate sends `every` bytes in at most grace/2, so it reaches the next check
// before a deadline that had at least grace/2 left; bytes sent since the
// last check are not credited, so a client falling behind is cut up to
// grace/2 early.
type rateLimit struct {
	rc       http.ResponseController
	start    time.Time
	grace    time.Duration
	rate     int64     // bytes per second; 0 disables
	hard     time.Time // ReadTimeout's bound, never extended past
	deadline time.Time // the read deadline set now
	n        int64     // bytes read
	every    int64     // bytes between clock reads
	checkAt  int64     // n at which to read the clock next
	armed    bool
}

func (l *rateLimit) arm(w http.ResponseWriter, grace time.Duration, rate int64, readTimeout time.Duration) {
	if rate <= 0 {
		*l = rateLimit{}
		return
	}
	now := time.Now()
	every := max(int64(float64(rate)*grace.Seconds()/2), 4<<10)
	*l = rateLimit{rc: *http.NewResponseController(w), start: now, grace: grace, rate: rate,
		hard: now.Add(readTimeout), every: every, checkAt: every}
	l.deadline = now.Add(grace)
	if !l.deadline.Before(l.hard) {
		l.deadline = l.hard
	}
	l.armed = l.rc.SetReadDeadline(l.deadline) == nil
}

// advance records n more bytes and extends the deadline when it is near.
func (l *rateLimit) advance(n int) {
	l.n += int64(n)
	if !l.armed || l.n < l.checkAt {
		return
	}
	l.checkAt = l.n + l.every
	if time.Until(l.deadline) >= l.grace || !l.deadline.Before(l.hard) {
		return
	}
	next := l.start.Add(l.grace + time.Duration(float64(l.n)/float64(l.rate)*float64(time.Second)))
	if next.After(l.hard) {
		next = l.hard
	}
	if next.After(l.deadline) {
		l.deadline = next
		_ = l.rc.SetReadDeadline(next)
	}
}

// disarm puts the ReadTimeout bound back once the body is read, so that
// the server's background read (which cancels the request's context on a
// timeout) cannot fire while the request is being consumed.
func (l *rateLimit) disarm() {
	if l.armed {
		_ = l.rc.SetReadDeadline(l.hard)
		l.armed = false
	}
}

// Messages of the 429s, naming the setting.
const (
	msgBytesBusy = "too many request bytes in flight (receivers.otlp.max_inflight_bytes): retry later"
	msgSlotsBusy = "too many requests being processed (receivers.otlp.max_concurrent_requests): retry later"
)
