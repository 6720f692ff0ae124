package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"

	"github.com/sluice-dev/sluice/internal/query/prom"
	"github.com/sluice-dev/sluice/internal/waittest"
)

func TestQueryDepth(t *testing.T) {
	for q, want := range map[string]int{
		`up`:                                 0,
		`sum(rate(x{a="(((",b=~"[[["}[5m]))`: 3,
		`a + b - c`:                          2,
		`a and b or c unless d`:              3,
		`x{a!="1", b="2"} != 3`:              2,
		`rate(x[5m:1m] offset -1m)`:          3, // the offset's minus counts: an overestimate
		`"\")((("`:                           0,
		"`(((`":                              0,
		`android_requests`:                   0,
		strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300): 300,
		strings.Repeat("1+", 300) + "1":                           300,
	} {
		if got := queryDepth(q); got != want {
			t.Errorf("queryDepth(%.40q) = %d, want %d", q, got, want)
		}
	}
}

func TestLimiterQueue(t *testing.T) {
	l := newLimiter(2, 1, 100, 200)
	ctx := context.Background()
	a, err := l.acquire(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.acquire(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	// The third waits in the queue; the fourth is refused at once.
	got := make(chan error, 1)
	go func() {
		c, err := l.acquire(ctx, "acme")
		if err == nil {
			c.release()
		}
		got <- err
	}()
	for l.waiting.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	if _, err := l.acquire(ctx, "acme"); !errors.Is(err, errQueueFull) || !strings.Contains(err.Error(), "query.max_queued") {
		t.Fatalf("full queue: %v", err)
	}
	a.release()
	if err := waittest.Recv(t, got, "the queued query's acquire"); err != nil {
		t.Fatalf("queued query: %v", err)
	}
	// A wait that outlives its deadline fails with the deadline.
	c, _ := l.acquire(ctx, "acme")
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.acquire(tctx, "acme"); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "query.max_concurrency") {
		t.Fatalf("timed-out wait: %v", err)
	}
	// Each running query has reserved its whole budget from the total.
	if n := l.held.Load(); n != 200 {
		t.Fatalf("reserved %d bytes by two running queries, want 200", n)
	}
	// Charges come from the query's own reservation, not from the total
	// again: each may use all of its 100.
	if err := b.charge(60); err != nil {
		t.Fatal(err)
	}
	if err := c.charge(100); err != nil {
		t.Fatalf("a query within its own reservation: %v", err)
	}
	if err := b.charge(50); !errors.Is(err, prom.ErrLimit) || !strings.Contains(err.Error(), "query.max_query_bytes") {
		t.Fatalf("per-query budget: %v", err)
	}
	b.release()
	b.release() // a second release returns nothing twice
	c.release()
	if l.held.Load() != 0 || len(l.slots) != 0 || l.waiting.Load() != 0 {
		t.Fatalf("after release: held %d, slots %d, waiting %d", l.held.Load(), len(l.slots), l.waiting.Load())
	}
}

// Abusive expressions are refused before parsing, fast, naming the limit.
func TestQueryLengthAndDepth(t *testing.T) {
	base, _ := serverWith(t, func(*Config) {})
	for _, c := range []struct {
		name, q, want string
	}{
		{"200 KB of nested parentheses", strings.Repeat("(", 100_000) + "1" + strings.Repeat(")", 100_000), "query.max_query_length"},
		{"deep parentheses", strings.Repeat("(", 1000) + "1" + strings.Repeat(")", 1000), "query.max_query_depth"},
		{"chained additions", strings.Repeat("1+", 4000) + "1", "query.max_query_depth"},
	} {
		st := time.Now()
		for _, send := range []func(*testing.T, string, string, string, url.Values) (int, apiResp){get, post} {
			code, r := send(t, base, "acme", "/api/v1/query", vals("query", c.q))
			if code != 422 || r.ErrorType != "cost_limit" || !strings.Contains(r.Error, c.want) {
				t.Errorf("%s: %d %s %q, want 422 cost_limit naming %s", c.name, code, r.ErrorType, r.Error, c.want)
			}
		}
		if d := time.Since(st); d > 2*time.Second {
			t.Errorf("%s: refused after %v", c.name, d)
		}
	}
	code, r := get(t, base, "acme", "/api/v1/series", vals("match[]", strings.Repeat("{", 300)+"up"))
	if code != 422 || !strings.Contains(r.Error, "query.max_query_depth") {
		t.Errorf("deep match[]: %d %q", code, r.Error)
	}
	// A normal query still answers.
	if code, r := get(t, base, "acme", "/api/v1/query", vals("query", strings.Repeat("(", 50)+"1+1"+strings.Repeat(")", 50))); code != 200 {
		t.Errorf("50 parentheses: %d %q", code, r.Error)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	base, h := serverWith(t, func(c *Config) { c.MaxConcurrency = 1; c.MaxQueued = 1 })
	// Hold the only slot, as a long query would.
	slot, err := h.limits.acquire(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	q := vals("query", "sum(test_queue_depth)", "time", endTime(), "timeout", "3s")
	var wg sync.WaitGroup
	var queuedCode int
	wg.Add(1)
	go func() {
		defer wg.Done()
		queuedCode, _ = get(t, base, "acme", "/api/v1/query", q)
	}()
	for h.limits.waiting.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	code, r := get(t, base, "acme", "/api/v1/query", q)
	if code != 429 || r.ErrorType != "too_many_requests" || !strings.Contains(r.Error, "query.max_queued") {
		t.Errorf("full queue: %d %s %q, want 429", code, r.ErrorType, r.Error)
	}
	// The label endpoints share the slots.
	if code, _ := get(t, base, "acme", "/api/v1/labels", vals()); code != 429 {
		t.Errorf("labels with a full queue: %d", code)
	}
	slot.release()
	wg.Wait()
	if queuedCode != 200 {
		t.Errorf("queued query: %d", queuedCode)
	}
	// Waiting counts against the timeout parameter.
	slot, _ = h.limits.acquire(context.Background(), "acme")
	st := time.Now()
	code, r = get(t, base, "acme", "/api/v1/query", vals("query", "1", "timeout", "200ms"))
	slot.release()
	if code != 503 || r.ErrorType != "timeout" || time.Since(st) > 2*time.Second {
		t.Errorf("queued past timeout: %d %s %q after %v", code, r.ErrorType, r.Error, time.Since(st))
	}
}

func TestMemoryBudget(t *testing.T) {
	rangeQ := vals("query", "test_requests_total", "start", fmt.Sprint(start.Unix()), "end", endTime(), "step", "15s")
	// Samples loaded: acme has 240 points per series.
	base, h := serverWith(t, func(c *Config) { c.MaxQueryBytes = 2000; c.MaxTotalBytes = 1 << 30 })
	code, r := get(t, base, "acme", "/api/v1/query_range", rangeQ)
	if code != 422 || r.ErrorType != "cost_limit" || !strings.Contains(r.Error, "query.max_query_bytes") {
		t.Errorf("per-query budget: %d %s %q", code, r.ErrorType, r.Error)
	}
	// The engine's sample limit comes from the byte budget.
	base2, _ := serverWith(t, func(c *Config) { c.MaxQueryBytes = 64 * engineSampleBytes; c.MaxTotalBytes = 1 << 30 })
	code, r = get(t, base2, "acme", "/api/v1/query_range", vals("query", "vector(1)", "start", "0", "end", "1000", "step", "1"))
	if code != 422 || r.ErrorType != "cost_limit" || !strings.Contains(r.Error, "query.max_query_bytes") {
		t.Errorf("engine samples: %d %s %q", code, r.ErrorType, r.Error)
	}
	// Another query holds the whole total: this one waits for it, within
	// its timeout, rather than running past the total.
	base3, h3 := serverWith(t, func(c *Config) { c.MaxQueryBytes = 1 << 20; c.MaxTotalBytes = 1 << 20; c.MaxConcurrency = 4 })
	other, _ := h3.limits.acquire(context.Background(), "acme")
	code, r = get(t, base3, "acme", "/api/v1/query_range", withTimeout(rangeQ, "200ms"))
	if code != 503 || r.ErrorType != "timeout" || !strings.Contains(r.Error, "query.max_total_bytes") {
		t.Errorf("total budget: %d %s %q", code, r.ErrorType, r.Error)
	}
	other.release()
	if code, r := get(t, base3, "acme", "/api/v1/query_range", rangeQ); code != 200 {
		t.Errorf("after release: %d %q", code, r.Error)
	}
	for _, hh := range []*Handler{h, h3} {
		if n := hh.limits.held.Load(); n != 0 || len(hh.limits.slots) != 0 {
			t.Errorf("budget not returned: %d bytes, %d slots", n, len(hh.limits.slots))
		}
	}
}

// Encoding stops at the deadline; serve then aborts the connection.
func TestWriteResultStopsAtDeadline(t *testing.T) {
	m := make(promql.Matrix, 1000)
	for i := range m {
		m[i] = promql.Series{Metric: labels.FromStrings("i", fmt.Sprint(i)), Floats: make([]promql.FPoint, 1000)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	if err := writeResult(ctx, w, &promResult{value: m}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled encode: %v", err)
	}
	if w.Body.Len() > 2*encodeBuffer {
		t.Fatalf("wrote %d bytes after the deadline", w.Body.Len())
	}
}

func withTimeout(v url.Values, d string) url.Values {
	c := url.Values{}
	for k, vs := range v {
		c[k] = vs
	}
	c.Set("timeout", d)
	return c
}

// query.max_total_bytes is a hard ceiling: with room for two reservations
// of query.max_query_bytes, a third heavy query never runs while two do
// (whatever query.max_concurrency allows); it waits in the queue or, with
// no queue, is refused with 429 naming the setting. The reservation comes
// back on every path: success, cost_limit error, timeout in the queue or
// while running, and a client that goes away.
func TestTotalBytesIsACeiling(t *testing.T) {
	const perQuery = 1 << 20
	rangeQ := vals("query", "test_requests_total", "start", fmt.Sprint(start.Unix()), "end", endTime(), "step", "15s")
	for _, queued := range []int{-1, 4} {
		base, h := serverWith(t, func(c *Config) {
			c.MaxQueryBytes, c.MaxTotalBytes, c.MaxConcurrency, c.MaxQueued = perQuery, 2*perQuery, 8, queued
		})
		l := h.limits
		if cap(l.slots) != 2 {
			t.Fatalf("queries running at once: %d, want 2 (max_total_bytes / max_query_bytes)", cap(l.slots))
		}
		// Two heavy queries run (each holds its reservation, as one the
		// engine is still evaluating does).
		a, err := l.acquire(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		b, err := l.acquire(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if n := l.held.Load(); n != 2*perQuery {
			t.Fatalf("reserved %d, want %d", n, 2*perQuery)
		}
		if queued < 0 {
			code, r := get(t, base, "acme", "/api/v1/query_range", rangeQ)
			if code != 429 || r.ErrorType != "too_many_requests" || !strings.Contains(r.Error, "query.max_total_bytes") {
				t.Errorf("third query, no queue: %d %s %q, want 429 naming query.max_total_bytes", code, r.ErrorType, r.Error)
			}
		} else {
			// The third waits; it never runs while both hold the total.
			done := make(chan int, 1)
			go func() { code, _ := get(t, base, "acme", "/api/v1/query_range", rangeQ); done <- code }()
			for l.waiting.Load() != 1 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)
			select {
			case code := <-done:
				t.Fatalf("third query ran past query.max_total_bytes: %d", code)
			default:
			}
			if n := l.held.Load(); n != 2*perQuery {
				t.Fatalf("reserved %d while the third waits, want %d", n, 2*perQuery)
			}
			// A client that goes away while queued leaves nothing behind.
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query_range?"+rangeQ.Encode(), nil)
			req.Header.Set("X-Scope-OrgID", "acme")
			gone := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				gone <- err
			}()
			for l.waiting.Load() != 2 {
				time.Sleep(time.Millisecond)
			}
			cancel()
			waittest.Recv(t, gone, "the cancelled query's request")
			for l.waiting.Load() != 1 {
				time.Sleep(time.Millisecond)
			}
			// A queued query past its timeout: 503 naming the setting.
			code, r := get(t, base, "acme", "/api/v1/query_range", withTimeout(rangeQ, "100ms"))
			if code != 503 || r.ErrorType != "timeout" || !strings.Contains(r.Error, "query.max_total_bytes") {
				t.Errorf("queued past timeout: %d %s %q", code, r.ErrorType, r.Error)
			}
			// One finishes: the third runs and answers.
			a.release()
			if code := <-done; code != 200 {
				t.Errorf("third query after a release: %d", code)
			}
			a, _ = l.acquire(context.Background(), "acme")
		}
		a.release()
		b.release()
		// Every other path returns the reservation.
		for _, c := range []struct {
			name string
			q    url.Values
			code int
			typ  string
		}{
			{"answer", rangeQ, 200, ""},
			{"cost_limit", vals("query", "sum_over_time(vector(1)[10h:1s])", "start", "0", "end", "10000", "step", "1"), 422, "cost_limit"},
			{"execution error", vals("query", `label_replace(up, "x", "$1", "y", "(")`, "start", "0", "end", "100", "step", "1"), 422, "execution"},
			{"timeout while running", withTimeout(vals("query", "sum_over_time(vector(1)[1h:1s])", "start", "0", "end", "10000", "step", "10"), "5ms"), 503, "timeout"},
		} {
			if code, r := get(t, base, "acme", "/api/v1/query_range", c.q); code != c.code || r.ErrorType != c.typ {
				t.Errorf("%s: %d %s %q, want %d %s", c.name, code, r.ErrorType, r.Error, c.code, c.typ)
			}
		}
		// A client that goes away while its query runs. The query takes
		// about 0.2 s alone; on a loaded machine the poll below can miss
		// it running, so a query seen only after it ended is tried again.
		var cancel context.CancelFunc
		var gone chan error
		for attempt := 1; ; attempt++ {
			var ctx context.Context
			ctx, cancel = context.WithCancel(context.Background())
			slow := vals("query", "sum_over_time(vector(1)[1h:1s])", "start", "0", "end", "10000", "step", "1")
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query_range?"+slow.Encode(), nil)
			req.Header.Set("X-Scope-OrgID", "acme")
			gone = make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				gone <- err
			}()
			seen := false
			for ended := false; !seen && !ended; {
				select {
				case err := <-gone:
					if attempt == 5 {
						t.Fatalf("slow query ended before its client went away, 5 times: %v", err)
					}
					ended = true
				default:
					seen = len(l.slots) == 1
					time.Sleep(time.Millisecond)
				}
			}
			if seen {
				break
			}
			cancel()
		}
		cancel()
		waittest.Recv(t, gone, "the cancelled query's request")
		deadline := time.Now().Add(5 * time.Second)
		for l.held.Load() != 0 || len(l.slots) != 0 || l.waiting.Load() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("queued %d: after every path %d bytes reserved, %d slots, %d waiting", queued, l.held.Load(), len(l.slots), l.waiting.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// One tenant flooding the API holds back its own queries, not another
// tenant's: a freed slot goes to the tenant with the fewest running, and
// a full queue refuses the flooding tenant's newest waiter to make room.
// Before, tenant B got 429 at once and then waited behind all of A's.
func TestLimiterFairBetweenTenants(t *testing.T) {
	l := newLimiter(2, 4, 100, 1000)
	ctx := context.Background()
	a1, _ := l.acquire(ctx, "a")
	a2, _ := l.acquire(ctx, "a")
	type got struct {
		name string
		b    *budget
		err  error
	}
	order := make(chan got, 8)
	wait := func(name, tenant string) {
		go func() {
			b, err := l.acquire(ctx, tenant)
			order <- got{name, b, err}
		}()
	}
	queued := func(n int64) {
		for l.waiting.Load() != n {
			time.Sleep(time.Millisecond)
		}
	}
	for i, name := range []string{"a3", "a4", "a5", "a6"} {
		wait(name, "a")
		queued(int64(i + 1))
	}
	// The queue is full of a's: b takes the place of a's newest.
	wait("b1", "b")
	if g := <-order; g.name != "a6" || !errors.Is(g.err, errQueueFull) {
		t.Fatalf("full queue, b arrives: %s %v, want a6 refused", g.name, g.err)
	}
	queued(4)
	// A slot frees: b, running nothing, goes before a's older waiters.
	a1.release()
	g := <-order
	if g.name != "b1" || g.err != nil {
		t.Fatalf("first freed slot went to %s (%v), want b1", g.name, g.err)
	}
	// a alone refuses no one of its own: a full queue of one tenant
	// refuses the newcomer.
	wait("a7", "a")
	queued(4)
	if _, err := l.acquire(ctx, "a"); !errors.Is(err, errQueueFull) {
		t.Fatalf("a's fifth waiter: %v", err)
	}
	// Then a's waiters run in arrival order as slots free, one a slot.
	var names []string
	free := []*budget{g.b, a2}
	for range 4 {
		free[0].release()
		free = free[1:]
		g := <-order
		if g.err != nil {
			t.Fatalf("%s: %v", g.name, g.err)
		}
		names = append(names, g.name)
		free = append(free, g.b)
	}
	for _, b := range free {
		b.release()
	}
	if !slices.Equal(names, []string{"a3", "a4", "a5", "a7"}) {
		t.Errorf("a's waiters ran in order %v", names)
	}
	if l.held.Load() != 0 || len(l.slots) != 0 || l.waiting.Load() != 0 || len(l.runningOf) != 0 || len(l.waitingOf) != 0 {
		t.Fatalf("after all: held %d, slots %d, waiting %d, running %v, waiting %v", l.held.Load(), len(l.slots), l.waiting.Load(), l.runningOf, l.waitingOf)
	}
}
