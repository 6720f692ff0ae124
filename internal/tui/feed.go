package tui

import (
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/tracer"
)

// TailLen is how many recent calls the streaming tail keeps.
const TailLen = 200

// TailRow is one call in the streaming tail.
type TailRow struct {
	Time     time.Time
	PID, TID uint32
	Comm     string
	Syscall  string
	Path     string
	Duration int64
	Ret      int64
	Bytes    int64
}

// Feed is where the tracer's goroutine leaves what the view shows: a
// summary since the start, the last TailLen calls, and the counters. The
// view takes a Snapshot of it on every tick. Safe for concurrent use.
type Feed struct {
	mu       sync.Mutex
	sum      *tracer.Summary
	tail     [TailLen]TailRow
	tailN    int // rows written, ever
	lost     uint64
	filtered int64
	done     bool
	err      error
}

// NewFeed returns an empty feed starting now.
func NewFeed(now time.Time) *Feed { return &Feed{sum: tracer.NewSummary(now)} }

// Add aggregates b and keeps its last rows for the tail; b may be reused
// once Add returns. Only the last TailLen rows of a batch are copied, so
// the tail costs the same however fast calls come.
func (f *Feed) Add(b *signal.IOEvents, lost uint64, filtered int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sum.Add(b)
	f.lost, f.filtered = lost, filtered
	for i := max(0, b.Len()-TailLen); i < b.Len(); i++ {
		f.tail[f.tailN%TailLen] = TailRow{
			Time: time.Unix(0, b.Time[i]), PID: b.PID[i], TID: b.TID[i],
			Comm: string(b.StrBytes(b.Comm[i])), Syscall: b.SyscallName(i), Path: string(b.StrBytes(b.Path[i])),
			Duration: b.Duration[i], Ret: b.Ret[i], Bytes: b.Bytes[i],
		}
		f.tailN++
	}
}

// SetLost updates the lost-record count between batches.
func (f *Feed) SetLost(lost uint64) {
	f.mu.Lock()
	f.lost = lost
	f.mu.Unlock()
}

// Finish marks the trace as ended, with its error if any.
func (f *Feed) Finish(err error) {
	f.mu.Lock()
	f.done, f.err = true, err
	f.mu.Unlock()
}

// Snapshot is a copy of what the view shows, taken at one instant.
type Snapshot struct {
	Taken    time.Time
	Elapsed  time.Duration
	Calls    int64
	Bytes    int64
	Lost     uint64
	Filtered int64
	Files    []tracer.Agg
	Procs    []tracer.Agg
	Syscalls []tracer.Agg
	Tail     []TailRow // oldest first
	Done     bool
	Err      error
}

// snapshot copies the top n of each dimension by key, keeping keys that
// contain filter, and the tail rows matching filter.
func (f *Feed) snapshot(now time.Time, by tracer.SortKey, n int, filter string) Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Snapshot{
		Taken: now, Elapsed: now.Sub(f.sum.Start), Calls: f.sum.Total.Ops, Bytes: f.sum.Total.Bytes,
		Lost: f.lost, Filtered: f.filtered, Done: f.done, Err: f.err,
	}
	copyAggs := func(aggs []*tracer.Agg) []tracer.Agg {
		out := make([]tracer.Agg, len(aggs))
		for i, a := range aggs {
			out[i] = *a
		}
		return out
	}
	s.Files = copyAggs(f.sum.TopFiles(by, n, filter))
	s.Procs = copyAggs(f.sum.TopProcs(by, n, filter))
	// Every syscall, so the histogram can show any of them.
	s.Syscalls = copyAggs(f.sum.TopSyscalls(by, 0, ""))
	start := max(0, f.tailN-TailLen)
	for i := start; i < f.tailN; i++ {
		r := f.tail[i%TailLen]
		if filter == "" || strings.Contains(r.Path, filter) || strings.Contains(r.Comm, filter) || strings.Contains(r.Syscall, filter) {
			s.Tail = append(s.Tail, r)
		}
	}
	return s
}
