package httpapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/query/prom"
)

// Defaults of the admission and memory limits (query.max_queued,
// query.max_query_length, query.max_query_depth); the concurrency and the
// byte budgets are derived from the machine (see resolveLimits).
const (
	DefaultMaxQueued      = 64
	DefaultMaxQueryLength = 64 << 10
	DefaultMaxQueryDepth  = 256
	// engineSampleBytes is what the engine holds per sample it keeps: a
	// 16-byte point, with room for the slices it grows by doubling.
	engineSampleBytes = 32
)

// machineMemory is the memory the process may use: GOMEMLIMIT when set,
// else the cgroup (v2 or v1) limit, else physical memory; 0 if unknown.
func machineMemory() int64 {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return l
	}
	var mem int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				mem = kb << 10
			}
		}
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (mem == 0 || n < mem) {
				mem = n
			}
		}
	}
	return mem
}

// DerivedConcurrency is query.max_concurrency when 0: GOMAXPROCS, at
// least 2, so that one slow query never blocks every other.
func DerivedConcurrency() int { return max(2, runtime.GOMAXPROCS(0)) }

// DerivedTotalBytes is query.max_total_bytes when 0: a quarter of
// machineMemory, or 1 GiB when that is unknown.
func DerivedTotalBytes() int64 {
	if m := machineMemory(); m > 0 {
		return m / 4
	}
	return 1 << 30
}

// limiter admits queries: at most max concurrent, at most maxQueued
// waiting, and a memory budget in bytes per query and over all queries.
// A running query reserves its whole budget (maxQuery) from maxTotal
// when admitted, so the queries running at once are at most
// maxTotal / maxQuery as well as at most the concurrency: what running
// queries are allowed to hold, the engine's working set included, never
// passes maxTotal. Charges then come from the query's own reservation.
type limiter struct {
	slots       chan struct{} // one per running query: min(concurrency, maxTotal/maxQuery); sent to under mu only
	concurrency int
	mu          sync.Mutex
	waiters     []*waiter      // in arrival order
	runningOf   map[string]int // running queries by tenant
	waitingOf   map[string]int // waiters by tenant
	waiting     atomic.Int64   // len(waiters), read without mu
	maxQueued   int64
	held        atomic.Int64 // bytes reserved by running queries (maxQuery each)
	maxQuery    int64
	maxTotal    int64

	refused  *prometheus.CounterVec
	inflight prometheus.Gauge
	queued   prometheus.Gauge
	heldG    prometheus.GaugeFunc
}

func newLimiter(concurrency, maxQueued int, maxQuery, maxTotal int64) *limiter {
	maxQuery = max(1, min(maxQuery, maxTotal))
	running := int64(concurrency)
	if n := maxTotal / maxQuery; n < running {
		running = max(n, 1)
	}
	l := &limiter{slots: make(chan struct{}, running), concurrency: concurrency, runningOf: map[string]int{}, waitingOf: map[string]int{}, maxQueued: int64(maxQueued), maxQuery: maxQuery, maxTotal: maxTotal,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_query_refused_total",
			Help: "Queries refused by a query limit, by the setting that refused them (e.g. max_queued, max_query_bytes)."}, []string{"limit"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_query_running",
			Help: "Queries running, each holding a slot (query.max_concurrency) and a reservation of query.max_query_bytes from query.max_total_bytes."}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_query_queued",
			Help: "Queries waiting for a slot (at most query.max_queued)."}),
	}
	l.heldG = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_query_memory_bytes",
		Help: "Bytes of query.max_total_bytes reserved by running queries (query.max_query_bytes each)."}, func() float64 { return float64(l.held.Load()) })
	for _, s := range []string{"max_queued", "max_query_bytes", "max_total_bytes", "max_samples", "max_query_length", "max_query_depth"} {
		l.refused.WithLabelValues(s)
	}
	return l
}

func (l *limiter) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.refused, l.inflight, l.queued, l.heldG}
}

// runningLimit says what bounds the queries running at once, naming the
// setting: the concurrency, or the total budget when it holds fewer
// reservations of max_query_bytes.
func (l *limiter) runningLimit() string {
	if cap(l.slots) < l.concurrency {
		return fmt.Sprintf("%d queries running, as many as query.max_total_bytes %s holds at query.max_query_bytes %s each",
			cap(l.slots), byteString(l.maxTotal), byteString(l.maxQuery))
	}
	return fmt.Sprintf("%d queries running (query.max_concurrency)", cap(l.slots))
}

// errQueueFull answers 429: the client may retry.
var errQueueFull = errors.New("too many queries")

// waiter is one query waiting for a slot. dispatchLocked or a fuller
// queue's eviction decides it once: err nil (granted, the slot taken for
// it) or errQueueFull (evicted), then closes ready.
type waiter struct {
	tenant string
	ready  chan struct{}
	err    error
}

// acquire waits for a slot and the query's reservation until ctx ends. A
// full wait queue is refused at once, so waiting requests (and their
// memory) stay bounded.
//
// Admission is fair between tenants: a freed slot goes to the waiting
// tenant with the fewest queries running (the longest waiting of its
// queries first), and a full queue makes room for a tenant with fewer
// waiting queries by refusing the newest waiter of the tenant with the
// most. One tenant flooding the API thus holds back its own queries,
// not another tenant's; alone, a tenant has every slot and the whole
// queue.
func (l *limiter) acquire(ctx context.Context, tenant string) (*budget, error) {
	l.mu.Lock()
	if len(l.waiters) == 0 && l.takeLocked(tenant) {
		l.mu.Unlock()
		return l.granted(tenant), nil
	}
	if len(l.waiters) >= int(l.maxQueued) && !l.evictLocked(tenant) {
		l.mu.Unlock()
		l.refused.WithLabelValues("max_queued").Inc()
		return nil, l.queueFull()
	}
	w := &waiter{tenant: tenant, ready: make(chan struct{})}
	l.waiters = append(l.waiters, w)
	l.waitingOf[tenant]++
	l.waiting.Add(1)
	l.queued.Inc()
	l.dispatchLocked()
	l.mu.Unlock()
	select {
	case <-w.ready:
	case <-ctx.Done():
		l.mu.Lock()
		select {
		case <-w.ready: // decided meanwhile
		default:
			l.removeLocked(w)
			l.mu.Unlock()
			return nil, fmt.Errorf("waiting for a query slot (%s): %w", l.runningLimit(), ctx.Err())
		}
		l.mu.Unlock()
		if w.err == nil {
			// Granted as the wait ended: the slot goes back at once.
			l.granted(tenant).release()
			return nil, fmt.Errorf("waiting for a query slot (%s): %w", l.runningLimit(), ctx.Err())
		}
	}
	if w.err != nil {
		l.refused.WithLabelValues("max_queued").Inc()
		return nil, w.err
	}
	return l.granted(tenant), nil
}

func (l *limiter) queueFull() error {
	return &apiError{"too_many_requests", fmt.Errorf("%w: %s and %d waiting (query.max_queued); retry later",
		errQueueFull, l.runningLimit(), l.maxQueued)}
}

// granted reserves the query's budget for a slot taken for tenant.
func (l *limiter) granted(tenant string) *budget {
	l.held.Add(l.maxQuery)
	l.inflight.Inc()
	return &budget{l: l, tenant: tenant}
}

// takeLocked takes a free slot for tenant, if there is one. Every slot
// is taken under l.mu, and every release dispatches under it after
// freeing its slot, so no waiter is left waiting beside a free slot.
func (l *limiter) takeLocked(tenant string) bool {
	select {
	case l.slots <- struct{}{}:
		l.runningOf[tenant]++
		return true
	default:
		return false
	}
}

// dispatchLocked gives free slots to waiters: each to the tenant with
// the fewest running queries, its longest waiting query first.
func (l *limiter) dispatchLocked() {
	for len(l.waiters) > 0 {
		best := 0
		for i, w := range l.waiters {
			if l.runningOf[w.tenant] < l.runningOf[l.waiters[best].tenant] {
				best = i
			}
		}
		w := l.waiters[best]
		if !l.takeLocked(w.tenant) {
			return
		}
		l.removeLocked(w)
		close(w.ready)
	}
}

// evictLocked makes room in a full queue for tenant: it refuses the
// newest waiter of the tenant with the most waiting, if that is more
// than tenant's own plus one.
func (l *limiter) evictLocked(tenant string) bool {
	victim := -1
	for i := len(l.waiters) - 1; i >= 0; i-- {
		t := l.waiters[i].tenant
		if l.waitingOf[t] > l.waitingOf[tenant]+1 && (victim < 0 || l.waitingOf[t] > l.waitingOf[l.waiters[victim].tenant]) {
			victim = i
		}
	}
	if victim < 0 {
		return false
	}
	w := l.waiters[victim]
	l.removeLocked(w)
	w.err = l.queueFull()
	close(w.ready)
	return true
}

// removeLocked takes w out of the queue.
func (l *limiter) removeLocked(w *waiter) {
	if i := slices.Index(l.waiters, w); i >= 0 {
		l.waiters = slices.Delete(l.waiters, i, i+1)
	}
	if l.waitingOf[w.tenant]--; l.waitingOf[w.tenant] <= 0 {
		delete(l.waitingOf, w.tenant)
	}
	l.waiting.Add(-1)
	l.queued.Dec()
}

// budget is one query's reservation of the memory budget. Charges come
// from the query's own goroutine (the engine, then the encoder), but
// atomics keep it safe should a querier ever select concurrently.
type budget struct {
	l        *limiter
	tenant   string
	used     atomic.Int64
	released atomic.Bool
}

// charge adds n bytes to the query's reservation; past it, it returns a
// cost_limit error naming query.max_query_bytes. The total is not charged
// again: acquire reserved the whole of max_query_bytes from it.
func (b *budget) charge(n int64) error {
	if n <= 0 {
		return nil
	}
	if used := b.used.Add(n); used > b.l.maxQuery {
		b.l.refused.WithLabelValues("max_query_bytes").Inc()
		return fmt.Errorf("%w: the query needs more than %s of memory (query.max_query_bytes); narrow the time range, raise the step or add label matchers",
			prom.ErrLimit, byteString(b.l.maxQuery))
	}
	return nil
}

// release returns the slot and the reservation; only the first call
// counts.
func (b *budget) release() {
	if b.released.Swap(true) {
		return
	}
	b.used.Store(0)
	l := b.l
	l.held.Add(-l.maxQuery)
	l.inflight.Dec()
	l.mu.Lock()
	<-l.slots
	if l.runningOf[b.tenant]--; l.runningOf[b.tenant] <= 0 {
		delete(l.runningOf, b.tenant)
	}
	l.dispatchLocked()
	l.mu.Unlock()
}

func byteString(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m {
			return fmt.Sprintf("%.4g%s", float64(n)/float64(u.m), u.s)
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// queryDepth bounds the depth of a PromQL expression's tree without
// parsing it: the deepest nesting of (), [] and {} plus the number of
// binary operators (+ - * / % ^, comparisons, and, or, unless, atan2)
// outside label matchers, ranges and string literals. Parsing and
// planning cost grows with depth times length (4,000 chained additions
// take 2.5 s, 32,000 take minutes), so the bound must hold before the
// parser sees the text. Unary minus and exponents count too: an
// overestimate, never an underestimate.
func queryDepth(q string) int {
	depth, deepest, ops := 0, 0, 0
	inner := 0 // depth of {} and [] where operators are not binary
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		if quote != 0 {
			switch {
			case c == '\\' && quote != '`':
				i++
			case c == quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '"', '\'', '`':
			quote = c
		case '(', '[', '{':
			depth++
			deepest = max(deepest, depth)
			if c != '(' {
				inner++
			}
		case ')', ']', '}':
			depth--
			if c != ')' && inner > 0 {
				inner--
			}
		case '+', '-', '*', '/', '%', '^', '<', '>':
			if inner == 0 {
				ops++
			}
		case '=', '!':
			if inner == 0 && i+1 < len(q) && q[i+1] == '=' {
				ops++
				i++
			}
		default:
			if inner == 0 && isWordStart(q, i) {
				for _, kw := range [...]string{"and", "or", "unless", "atan2"} {
					if strings.HasPrefix(q[i:], kw) && !isWordByte(q, i+len(kw)) {
						ops++
						break
					}
				}
			}
		}
	}
	return deepest + ops
}

func isWordByte(q string, i int) bool {
	if i >= len(q) {
		return false
	}
	c := q[i]
	return c == '_' || c == ':' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isWordStart(q string, i int) bool { return isWordByte(q, i) && (i == 0 || !isWordByte(q, i-1)) }
