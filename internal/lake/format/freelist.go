package format

import "sync"

// FreeList keeps up to Max idle items (scratch, buffers, decoders)
// between uses: a plain free list, not a sync.Pool, which drops its items
// at every GC, and with them buffers and zstd decoders that are costly to
// make again. Safe for concurrent use; the zero value keeps nothing.
type FreeList[T any] struct {
	mu  sync.Mutex
	all []T
	Max int
}

// Get takes an idle item; ok is false when there is none.
func (l *FreeList[T]) Get() (x T, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.all); n > 0 {
		x, l.all = l.all[n-1], l.all[:n-1]
		return x, true
	}
	return x, false
}

// Put keeps x for a later Get, unless Max items are idle already: then it
// returns false and x is the caller's to release.
func (l *FreeList[T]) Put(x T) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.all) >= l.Max {
		return false
	}
	l.all = append(l.all, x)
	return true
}
