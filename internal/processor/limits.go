package processor

import (
	"sync"
	"time"
)

// A limit rule (action limit) caps, over a window aligned to the clock,
// the distinct series of a group (per metric: each Prometheus metric name
// within a tenant; per tenant) or the distinct values of one label per
// metric (per label). The N-th new series (value) of a window passes, the
// N+1-th is over; series (values) already admitted in the window keep
// flowing. A new window starts empty. What happens to a series over the
// limit is the rule's exceed action: refuse its points, strip the label,
// keep a deterministic sample of such series, or only count.
//
// State is a set of 64-bit ids per group (series ids, or hashes of label
// values; no strings per series), in a flat open-addressing table of at
// most 16 bytes an id. It is shared by all requests and kept across
// reloads of the rules file while the rule's name and limit settings stay
// the same. When the window turns, every group starts over and the groups
// of the old window are freed; the groups of one window are bounded by
// max_groups (a series of a group beyond it counts as over the limit).

// limitSpec is what a limiter's state depends on.
type limitSpec struct {
	max, maxGroups int
	window         time.Duration
	per            uint8
	label          string
}

// limiter is one limit rule's state.
type limiter struct {
	mu     sync.Mutex
	spec   limitSpec
	cur    int64 // start of the current window, unix ns (0: no window)
	groups map[uint64]*idSet
	// lastG and lastSet are the group admitLocked found last (nil: none).
	lastG   uint64
	lastSet *idSet
}

// admit reports whether id (a series id, or a label value's hash) of group
// g may pass at now. A batch whose clock lags a window that another
// request already started counts in the new window: windows only move
// forward.
func (l *limiter) admit(g, id uint64, now int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.admitLocked(g, id, now)
}

// admitLocked is admit with l.mu held (see Scratch.hold). The set of the
// last group asked for is remembered: the points of one metric come
// together, and the map lookup is then skipped.
func (l *limiter) admitLocked(g, id uint64, now int64) bool {
	var start int64
	if w := int64(l.spec.window); w > 0 {
		start = now - now%w
	}
	if start > l.cur {
		l.cur = start
		l.lastSet = nil
		if len(l.groups) > 0 {
			l.groups = map[uint64]*idSet{} // frees the old window's sets
		}
	}
	set := l.lastSet
	if set == nil || l.lastG != g {
		set = l.groups[g]
		if set == nil {
			if len(l.groups) >= l.spec.maxGroups {
				return false
			}
			set = new(idSet)
			l.groups[g] = set
		}
		l.lastG, l.lastSet = g, set
	}
	if set.has(id) {
		return true
	}
	if set.len() >= l.spec.max {
		return false
	}
	set.add(id)
	return true
}

// limiters keeps limiter state by rule name across reloads.
type limiters struct {
	mu sync.Mutex
	m  map[string]*limiter
}

func (ls *limiters) get(name string, spec limitSpec) *limiter {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = map[string]*limiter{}
	}
	l := ls.m[name]
	if l == nil || l.spec != spec {
		l = &limiter{spec: spec, groups: map[uint64]*idSet{}}
		ls.m[name] = l
	}
	return l
}
