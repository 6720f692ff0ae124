package processor

import (
	"sync"
	"time"
)

// A limit rule (action limit) caps the distinct series of a group over a
// window aligned to the clock: per metric (each Prometheus metric name
// matched is a group), per tenant, or per value of a label's presence
// (per label: the series of one metric carrying that label). The N-th new
// series of a window passes, the N+1-th does not; series already admitted
// in the window keep flowing. A new window starts empty.
//
// State is a set of 64-bit series ids per group (no strings per series),
// shared by all requests and kept across reloads of the rules file (by
// rule name).

// limiter is one limit rule's state.
type limiter struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	groups map[uint64]*limitGroup
}

type limitGroup struct {
	start  int64 // window start, unix ns
	series idSet
}

// admit reports whether series id of group g may pass at now.
func (l *limiter) admit(g, id uint64, now int64) bool {
	start := now
	if l.window > 0 {
		start = now - now%int64(l.window)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	gr := l.groups[g]
	if gr == nil {
		gr = &limitGroup{start: start}
		l.groups[g] = gr
	} else if gr.start != start {
		gr.start = start
		gr.series.reset()
	}
	if gr.series.has(id) {
		return true
	}
	if gr.series.len() >= l.max {
		return false
	}
	gr.series.add(id)
	return true
}

// limiters keeps limiter state by rule name across reloads.
type limiters struct {
	mu sync.Mutex
	m  map[string]*limiter
}

func (ls *limiters) get(name string, max int, window time.Duration) *limiter {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = map[string]*limiter{}
	}
	l := ls.m[name]
	if l == nil || l.max != max || l.window != window {
		l = &limiter{max: max, window: window, groups: map[uint64]*limitGroup{}}
		ls.m[name] = l
	}
	return l
}
