package sending

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/sluice-dev/sluice/internal/waittest"
)

// post sends one request with the real HTTP client and maps the answer.
func post(url string) func(context.Context) Outcome {
	return func(ctx context.Context) Outcome {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return Outcome{Err: err}
		}
		resp.Body.Close()
		return Outcome{Status: resp.StatusCode, RetryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	}
}

func TestDoRemoteWriteRule(t *testing.T) {
	var calls atomic.Int64
	codes := []int{503, 429, 500, 204}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1) - 1
		if int(n) < len(codes) {
			w.WriteHeader(codes[n])
			return
		}
		w.WriteHeader(400)
	}))
	defer srv.Close()
	e := NewEndpoint("a", Policy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, BreakerFailures: 10})
	if err := e.Do(waittest.Context(t), post(srv.URL)); err != nil {
		t.Fatalf("503, 429, 500 then 204 must end sent: %v", err)
	}
	if calls.Load() != 4 || e.Stats.Retried.Load() != 3 || e.Stats.Sent.Load() != 1 {
		t.Fatalf("calls %d retried %d sent %d", calls.Load(), e.Stats.Retried.Load(), e.Stats.Sent.Load())
	}
	err := e.Do(waittest.Context(t), post(srv.URL))
	if !errors.Is(err, ErrRejected) || calls.Load() != 5 || e.Stats.Dropped.Load() != 1 {
		t.Fatalf("400 must be dropped after one attempt: err %v calls %d", err, calls.Load())
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	var first atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(0, time.Now().UnixNano()) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
			return
		}
		w.WriteHeader(200)
	}))
	defer srv.Close()
	e := NewEndpoint("a", Policy{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	start := time.Now()
	if err := e.Do(waittest.Context(t), post(srv.URL)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("retried after %v, Retry-After asked 1s", d)
	}
	now := time.Now()
	if d := ParseRetryAfter(now.Add(90*time.Second).UTC().Format(http.TimeFormat), now); d < 88*time.Second || d > 91*time.Second {
		t.Fatalf("HTTP-date Retry-After parsed as %v", d)
	}
}

func TestBackoffExponentialWithJitter(t *testing.T) {
	e := NewEndpoint("a", Policy{InitialBackoff: 10 * time.Millisecond, MaxBackoff: time.Second})
	for attempt, floor := range []time.Duration{10, 20, 40, 80, 160, 320, 500, 500, 500} {
		floor *= time.Millisecond
		ceil := min(2*floor, time.Second)
		var maxSeen, minSeen time.Duration = 0, time.Hour
		for range 2000 {
			d := e.Backoff(attempt, 0)
			maxSeen, minSeen = max(maxSeen, d), min(minSeen, d)
		}
		// Jitter over the whole range [floor, ceil): never below the
		// floor (the first retry waits the initial backoff at least),
		// never past the cap.
		if minSeen < floor || maxSeen >= ceil || maxSeen < floor+(ceil-floor)*8/10 || minSeen > floor+(ceil-floor)/5 {
			t.Fatalf("attempt %d: delays in [%v, %v], want jitter over [%v, %v)", attempt, minSeen, maxSeen, floor, ceil)
		}
	}
	// A Retry-After longer than the backoff wins, up to MaxRetryAfter.
	if d := e.Backoff(0, 3*time.Second); d != 3*time.Second {
		t.Fatalf("Retry-After 3s: waited %v", d)
	}
	if d := e.Backoff(0, time.Hour); d != 5*time.Minute {
		t.Fatalf("Retry-After 1h: waited %v, want the 5m cap", d)
	}
	// InitialBackoff above MaxBackoff: the cap.
	if d := NewEndpoint("b", Policy{InitialBackoff: time.Minute, MaxBackoff: time.Second}).Backoff(0, 0); d < time.Second/2 || d > time.Second {
		t.Fatalf("initial above max: %v", d)
	}
}

// A dead endpoint opens the breaker (no requests while open), a probe after
// the cooldown finds it back and closes it.
func TestBreakerOpensAndCloses(t *testing.T) {
	var down atomic.Bool
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if down.Load() {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(200)
	}))
	defer srv.Close()
	down.Store(true)
	// The three failing calls get 2 s (a loaded machine took more than
	// the 100 ms this once allowed); the cooldown outlasts that, so no
	// half-open probe can add a fourth call before Do gives up.
	e := NewEndpoint("a", Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, BreakerFailures: 3, BreakerCooldown: 4 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err := e.Do(ctx, post(srv.URL))
	cancel()
	if err == nil || e.Breaker.State() != Open || calls.Load() != 3 {
		t.Fatalf("after 3 failures: err %v state %v calls %d", err, e.Breaker.State(), calls.Load())
	}
	down.Store(false)
	start := time.Now()
	if err := e.Do(waittest.Context(t), post(srv.URL)); err != nil {
		t.Fatal(err)
	}
	if e.Breaker.State() != Closed || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("state %v after %v", e.Breaker.State(), time.Since(start))
	}
	// Half-open probe failing re-opens at once.
	b := NewBreaker(1, time.Millisecond)
	b.Failure()
	time.Sleep(2 * time.Millisecond)
	if _, ok, probe := b.allow(time.Now()); !ok || !probe || b.State() != HalfOpen {
		t.Fatal("no probe after the cooldown")
	}
	if _, ok, _ := b.allow(time.Now()); ok {
		t.Fatal("two probes at once in half-open")
	}
	b.Failure()
	if b.State() != Open || b.Opened() != 2 {
		t.Fatalf("failed probe: %v opened %d", b.State(), b.Opened())
	}
}

func TestConcurrencyPerEndpoint(t *testing.T) {
	var inflight, peak atomic.Int64
	e := NewEndpoint("a", Policy{Concurrency: 2})
	done := make(chan struct{})
	for range 8 {
		go func() {
			e.Do(waittest.Context(t), func(context.Context) Outcome {
				n := inflight.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(10 * time.Millisecond)
				inflight.Add(-1)
				return Outcome{Status: 200}
			})
			done <- struct{}{}
		}()
	}
	for range 8 {
		waittest.Recv(t, done, "the 8 concurrent Do calls")
	}
	if peak.Load() != 2 {
		t.Fatalf("peak in flight %d, limit 2", peak.Load())
	}
}

// Adding a fourth endpoint moves about a quarter of the series, all of
// them onto the new endpoint; shares stay near 1/N.
func TestRingMovesOneOverN(t *testing.T) {
	three := NewRing([]string{"a:1", "b:2", "c:3"})
	four := NewRing([]string{"a:1", "b:2", "c:3", "d:4"})
	const n = 100000
	moved := 0
	share := make([]int, 4)
	for i := range n {
		h := xxhash.Sum64String(fmt.Sprintf(`{__name__="m",instance="i%d"}`, i))
		a, b := three.Pick(h), four.Pick(h)
		share[b]++
		if a != b {
			moved++
			if b != 3 {
				t.Fatalf("series moved between old endpoints %d -> %d", a, b)
			}
		}
	}
	frac := float64(moved) / n
	if frac < 0.20 || frac > 0.30 {
		t.Fatalf("adding a 4th endpoint moved %.3f of series, want about 0.25", frac)
	}
	for i, s := range share {
		if f := float64(s) / n; f < 0.20 || f > 0.30 {
			t.Fatalf("endpoint %d owns %.3f of series", i, f)
		}
	}
	t.Logf("moved %.4f; shares %v", frac, share)
}

// logLines is a slog handler's output, for the tests of what an endpoint
// logs.
type logLines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) lines(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), substr)
}

// TestRefusalsAndBreakerLogged: a permanent refusal is logged with the
// endpoint, the status and the backend's answer, the first at once and
// the ones right after it not per request; the breaker's opening and
// closing get one line each, not one per failed attempt.
func TestRefusalsAndBreakerLogged(t *testing.T) {
	var out logLines
	log := slog.New(slog.NewTextHandler(&out, nil))
	var code atomic.Int64
	code.Store(401)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(code.Load()))
		fmt.Fprint(w, "token expired")
	}))
	defer srv.Close()
	send := func(ctx context.Context) Outcome {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		return Send(http.DefaultClient, req)
	}
	e := NewEndpoint(srv.URL, Policy{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond,
		BreakerFailures: 3, BreakerCooldown: time.Millisecond, Logger: log})
	for range 5 {
		if err := e.Do(waittest.Context(t), send); !errors.Is(err, ErrRejected) {
			t.Fatalf("401: %v", err)
		}
	}
	if n := out.lines("refused data for good"); n != 1 {
		t.Fatalf("5 refusals within %v logged %d lines, want 1:\n%s", RefusalLogEvery, n, out.b.String())
	}
	for _, want := range []string{"status=401", "token expired", "endpoint=" + srv.URL} {
		if out.lines(want) != 1 {
			t.Errorf("the refusal's line lacks %q:\n%s", want, out.b.String())
		}
	}
	// Down (503) for 10 attempts: the breaker opens once from closed and
	// re-opens after failed probes; one line. Then up: one line.
	code.Store(503)
	var attempts atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.Do(ctx, func(ctx context.Context) Outcome {
			if attempts.Add(1) == 10 {
				code.Store(200)
			}
			return send(ctx)
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("503 x9 then 200: %v", err)
		}
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("Do did not end after the endpoint came back")
	}
	cancel()
	if n := out.lines("circuit breaker open"); n != 1 {
		t.Errorf("the breaker's opening logged %d lines, want 1:\n%s", n, out.b.String())
	}
	if n := out.lines("circuit breaker closed"); n != 1 {
		t.Errorf("the breaker's closing logged %d lines, want 1:\n%s", n, out.b.String())
	}
}

// PostRedirect: an exporter's client follows 307 and 308 with the same
// POST and body; 301, 302 and 303 (which Go's client would follow with a
// GET and no body) come back as the answer, not OK and not retryable.
func TestPostRedirect(t *testing.T) {
	var got atomic.Value
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := new(bytes.Buffer)
		b.ReadFrom(r.Body)
		got.Store(r.Method + " " + b.String())
		w.WriteHeader(200)
	}))
	defer target.Close()
	hc := &http.Client{CheckRedirect: PostRedirect}
	for _, code := range []int{301, 302, 303, 307, 308} {
		got.Store("")
		from := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, code)
		}))
		req, _ := http.NewRequest(http.MethodPost, from.URL, strings.NewReader("samples"))
		o := Send(hc, req)
		from.Close()
		follow := code == 307 || code == 308
		if follow && (!o.OK() || got.Load() != "POST samples") || !follow && (o.Status != code || o.OK() || o.Retryable() || got.Load() != "") {
			t.Errorf("%d: answer %d, target got %q", code, o.Status, got.Load())
		}
	}
}

// A 413 is a permanent refusal for Do (dropped and counted), and for
// DoSplit an ErrTooLarge after one attempt, neither retried nor counted as
// dropped (the caller splits); DropTooLarge counts and logs the part it
// cannot split, naming it.
func TestDoSplitTooLarge(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "request over the limit", http.StatusRequestEntityTooLarge)
	}))
	defer srv.Close()
	var log bytes.Buffer
	e := NewEndpoint("a", Policy{InitialBackoff: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	err := e.DoSplit(waittest.Context(t), post(srv.URL))
	if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrRejected) || calls.Load() != 1 || e.Stats.Dropped.Load() != 0 || e.Stats.Retried.Load() != 0 {
		t.Fatalf("DoSplit: err %v, calls %d, dropped %d, retried %d; want ErrTooLarge after 1 call, nothing dropped", err, calls.Load(), e.Stats.Dropped.Load(), e.Stats.Retried.Load())
	}
	e.DropTooLarge(err, `up{job="x"}`)
	if e.Stats.Dropped.Load() != 1 || !strings.Contains(log.String(), `up{job=\"x\"}`) {
		t.Fatalf("DropTooLarge: dropped %d, log %q", e.Stats.Dropped.Load(), log.String())
	}
	err = e.Do(waittest.Context(t), post(srv.URL))
	if !errors.Is(err, ErrRejected) || errors.Is(err, ErrTooLarge) || calls.Load() != 2 || e.Stats.Dropped.Load() != 2 {
		t.Fatalf("Do: err %v, calls %d, dropped %d; want a refusal after 1 call, dropped", err, calls.Load(), e.Stats.Dropped.Load())
	}
}

// A half-open probe whose caller gives up (its context ends while the
// probe waits for a slot or is being sent) hands the probe back: the next
// caller probes and closes the breaker. It used to stay half-open with a
// probe nobody would report, and every later Do waited for ever.
func TestBreakerProbeAbandonedByCancel(t *testing.T) {
	for _, where := range []string{"during the attempt", "waiting for a slot"} {
		t.Run(where, func(t *testing.T) {
			e := NewEndpoint("a", Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, BreakerFailures: 1, BreakerCooldown: time.Millisecond, Concurrency: 1})
			e.Breaker.Failure() // open
			time.Sleep(2 * time.Millisecond)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			switch where {
			case "during the attempt":
				err := e.Do(ctx, func(context.Context) Outcome {
					cancel() // the caller gives up while the probe is out
					return Outcome{Err: context.Canceled}
				})
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Do: %v", err)
				}
			case "waiting for a slot":
				e.sem <- struct{}{} // every slot taken
				go func() { time.Sleep(20 * time.Millisecond); cancel() }()
				if err := e.Do(ctx, func(context.Context) Outcome { return Outcome{Status: 200} }); !errors.Is(err, context.Canceled) {
					t.Fatalf("Do: %v", err)
				}
				<-e.sem
			}
			done := make(chan error, 1)
			go func() {
				done <- e.Do(waittest.Context(t), func(context.Context) Outcome { return Outcome{Status: 200} })
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("Do still waiting 5 s after an abandoned probe; breaker %v", e.Breaker.State())
			}
			if e.Breaker.State() != Closed {
				t.Fatalf("breaker %v after a successful probe", e.Breaker.State())
			}
		})
	}
}
