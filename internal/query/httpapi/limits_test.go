package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"

	"github.com/sluice-dev/sluice/internal/query/prom"
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
	l := newLimiter(2, 1, 100, 150)
	ctx := context.Background()
	a, err := l.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The third waits in the queue; the fourth is refused at once.
	got := make(chan error, 1)
	go func() {
		c, err := l.acquire(ctx)
		if err == nil {
			c.release()
		}
		got <- err
	}()
	for l.waiting.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	if _, err := l.acquire(ctx); !errors.Is(err, errQueueFull) || !strings.Contains(err.Error(), "query.max_queued") {
		t.Fatalf("full queue: %v", err)
	}
	a.release()
	if err := <-got; err != nil {
		t.Fatalf("queued query: %v", err)
	}
	// A wait that outlives its deadline fails with the deadline.
	c, _ := l.acquire(ctx)
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.acquire(tctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "query.max_concurrency") {
		t.Fatalf("timed-out wait: %v", err)
	}
	// Budgets: per query, then over all queries.
	if err := b.charge(60); err != nil {
		t.Fatal(err)
	}
	if err := b.charge(50); !errors.Is(err, prom.ErrLimit) || !strings.Contains(err.Error(), "query.max_query_bytes") {
		t.Fatalf("per-query budget: %v", err)
	}
	if err := c.charge(45); !errors.Is(err, prom.ErrLimit) || !strings.Contains(err.Error(), "query.max_total_bytes") {
		t.Fatalf("total budget: %v", err)
	}
	b.release()
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
	slot, err := h.limits.acquire(context.Background())
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
	slot, _ = h.limits.acquire(context.Background())
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
	// Other queries hold most of the total.
	base3, h3 := serverWith(t, func(c *Config) { c.MaxQueryBytes = 1 << 20; c.MaxTotalBytes = 1 << 20 })
	other, _ := h3.limits.acquire(context.Background())
	other.charge(1<<20 - 100)
	code, r = get(t, base3, "acme", "/api/v1/query_range", rangeQ)
	if code != 422 || r.ErrorType != "cost_limit" || !strings.Contains(r.Error, "query.max_total_bytes") {
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
