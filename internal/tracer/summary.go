package tracer

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/unsafex"
)

// Latency histogram: log2 buckets of nanoseconds, each split in four, from
// 1 ns to 2^63 ns; quantiles are exact to within a quarter octave.
const (
	subBuckets = 4
	numBuckets = 64 * subBuckets
)

// LatencyHist counts durations in log-linear buckets.
type LatencyHist [numBuckets]uint32

func bucketOf(ns int64) int {
	if ns <= 1 {
		return 0
	}
	u := uint64(ns)
	e := 63 - bits.LeadingZeros64(u) // 2^e <= u
	var sub int
	if e >= 2 {
		sub = int(u>>(e-2)) & (subBuckets - 1)
	} else {
		sub = int(u<<(2-e)) & (subBuckets - 1)
	}
	return e*subBuckets + sub
}

// BucketUpper is the upper bound, in ns, of bucket i.
func BucketUpper(i int) int64 {
	e, sub := i/subBuckets, i%subBuckets
	if e >= 62 {
		return math.MaxInt64
	}
	base := float64(uint64(1) << e)
	return int64(base * (1 + float64(sub+1)/subBuckets))
}

// Add counts one duration.
func (h *LatencyHist) Add(ns int64) { h[bucketOf(ns)]++ }

// Quantile returns an upper bound of the q-quantile (0 < q <= 1), 0 when
// empty.
func (h *LatencyHist) Quantile(q float64) int64 {
	var total uint64
	for _, c := range h {
		total += uint64(c)
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range h {
		seen += uint64(c)
		if seen >= rank && c > 0 {
			return BucketUpper(i)
		}
	}
	return BucketUpper(numBuckets - 1)
}

// Agg is what a summary keeps per file, process or syscall.
type Agg struct {
	Key    string // path, "pid comm", or syscall name; control characters escaped (\n, \xNN)
	Ops    int64
	Bytes  int64
	Errors int64
	TimeNs int64 // total duration
	Hist   LatencyHist
}

func (a *Agg) add(dur, bytes int64, failed bool) {
	a.Ops++
	a.Bytes += bytes
	a.TimeNs += dur
	if failed {
		a.Errors++
	}
	a.Hist.Add(dur)
}

// SortKey orders Top's rows.
type SortKey int

// Sort keys.
const (
	ByOps SortKey = iota
	ByBytes
	ByTime
	ByP99
	ByErrors
	numSortKeys
)

var sortNames = [numSortKeys]string{"ops", "bytes", "time", "p99", "errors"}

func (k SortKey) String() string { return sortNames[k] }

// Next is the following sort key, wrapping.
func (k SortKey) Next() SortKey { return (k + 1) % numSortKeys }

// ParseSortKey parses ops, bytes, time, p99 or errors.
func ParseSortKey(s string) (SortKey, error) {
	for i, n := range sortNames {
		if n == s {
			return SortKey(i), nil
		}
	}
	return 0, fmt.Errorf("unknown sort key %q (want one of %s)", s, strings.Join(sortNames[:], ", "))
}

// maxSummaryKeys bounds each dimension; further keys count under "(other)".
const maxSummaryKeys = 8192

// dim aggregates one dimension by key.
type dim struct {
	byKey map[string]*Agg
	other Agg
}

// get returns key's aggregate; key may alias a buffer: it is copied when
// stored.
func (d *dim) get(key string) *Agg {
	if a := d.byKey[key]; a != nil {
		return a
	}
	if len(d.byKey) >= maxSummaryKeys {
		d.other.Key = "(other)"
		return &d.other
	}
	k := strings.Clone(key)
	a := &Agg{Key: displayKey(k)}
	d.byKey[k] = a
	return a
}

func (d *dim) top(by SortKey, n int, filter string) []*Agg {
	out := make([]*Agg, 0, len(d.byKey)+1)
	for _, a := range d.byKey {
		if filter == "" || strings.Contains(a.Key, filter) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *Agg) int {
		var c int
		switch by {
		case ByBytes:
			c = cmp.Compare(b.Bytes, a.Bytes)
		case ByTime:
			c = cmp.Compare(b.TimeNs, a.TimeNs)
		case ByP99:
			c = cmp.Compare(b.Hist.Quantile(0.99), a.Hist.Quantile(0.99))
		case ByErrors:
			c = cmp.Compare(b.Errors, a.Errors)
		}
		if c == 0 {
			c = cmp.Compare(b.Ops, a.Ops)
		}
		if c == 0 {
			c = strings.Compare(a.Key, b.Key)
		}
		return c
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	// Keys past maxSummaryKeys come last, whatever the order.
	if d.other.Ops > 0 && filter == "" {
		out = append(out, &d.other)
	}
	return out
}

// Summary aggregates IOEvents by file, process and syscall: ops, bytes,
// errors, total time and a latency histogram each. It is what the headless
// report and the live view show. A Summary is used by one goroutine.
type Summary struct {
	Files, Procs, Syscalls dim
	Total                  Agg
	Start                  time.Time
	keyBuf                 []byte
}

// NewSummary returns an empty Summary starting now.
func NewSummary(now time.Time) *Summary {
	s := &Summary{Start: now}
	s.Files.byKey = make(map[string]*Agg)
	s.Procs.byKey = make(map[string]*Agg)
	s.Syscalls.byKey = make(map[string]*Agg)
	return s
}

// Add aggregates every row of b.
func (s *Summary) Add(b *signal.IOEvents) {
	for i := range b.Len() {
		dur, by, failed := b.Duration[i], b.Bytes[i], b.Errno[i] != 0
		s.Total.add(dur, by, failed)
		s.Syscalls.get(b.SyscallName(i)).add(dur, by, failed)
		if p := b.String(b.Path[i]); p != "" {
			s.Files.get(p).add(dur, by, failed)
		}
		s.keyBuf = strconv.AppendUint(s.keyBuf[:0], uint64(b.PID[i]), 10)
		s.keyBuf = append(append(s.keyBuf, ' '), b.StrBytes(b.Comm[i])...)
		s.Procs.get(unsafex.String(s.keyBuf)).add(dur, by, failed)
	}
}

// TopFiles, TopProcs and TopSyscalls return up to n aggregates sorted by
// by, keeping only keys containing filter ("" keeps all).
func (s *Summary) TopFiles(by SortKey, n int, filter string) []*Agg {
	return s.Files.top(by, n, filter)
}

// TopProcs: see TopFiles.
func (s *Summary) TopProcs(by SortKey, n int, filter string) []*Agg {
	return s.Procs.top(by, n, filter)
}

// TopSyscalls: see TopFiles.
func (s *Summary) TopSyscalls(by SortKey, n int, filter string) []*Agg {
	return s.Syscalls.top(by, n, filter)
}

// FormatDuration renders ns compactly: 850ns, 12.3µs, 4.56ms, 1.20s.
func FormatDuration(ns int64) string {
	switch {
	case ns < 1000:
		return fmt.Sprintf("%dns", ns)
	case ns < 1_000_000:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	case ns < 1_000_000_000:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2fs", float64(ns)/1e9)
}

// FormatBytes renders a byte count with binary units.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// WriteTable renders aggs as a fixed-width table under title.
func WriteTable(b *strings.Builder, title string, aggs []*Agg, keyWidth int) {
	fmt.Fprintf(b, "%s\n", title)
	fmt.Fprintf(b, "  %-*s %9s %10s %9s %9s %9s %7s\n", keyWidth, "KEY", "OPS", "BYTES", "P50", "P99", "TIME", "ERRORS")
	for _, a := range aggs {
		key := a.Key
		if n := utf8.RuneCountInString(key); n > keyWidth {
			// Keep the end, where a path's file name is; cut between runes.
			for range n - keyWidth + 1 {
				_, size := utf8.DecodeRuneInString(key)
				key = key[size:]
			}
			key = "…" + key
		}
		fmt.Fprintf(b, "  %-*s %9d %10s %9s %9s %9s %7d\n", keyWidth, key, a.Ops, FormatBytes(a.Bytes),
			FormatDuration(a.Hist.Quantile(0.5)), FormatDuration(a.Hist.Quantile(0.99)), FormatDuration(a.TimeNs), a.Errors)
	}
}
