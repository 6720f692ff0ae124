package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// Redraw intervals: a terminal line is cheap to overwrite, a log line is not.
const (
	ttyInterval   = 100 * time.Millisecond
	plainInterval = 5 * time.Second
	barWidth      = 24
)

// Bar reports files, bytes and rows processed against known totals.
type Bar struct {
	w          io.Writer
	label      string
	totalFiles int64
	totalBytes int64
	tty        bool
	interval   time.Duration
	now        func() time.Time // replaced in tests

	files atomic.Int64
	bytes atomic.Int64
	rows  atomic.Int64

	mu       sync.Mutex // guards the fields below and writes to w
	start    time.Time
	lastDraw time.Time
	drawn    bool // a tty line is on screen and must be cleared
	done     bool
}

// New returns a Bar writing to w. totalFiles and totalBytes may be 0 when
// unknown (no bar and no ETA then). A nil w gives a nil, no-op Bar.
func New(w io.Writer, label string, totalFiles, totalBytes int64) *Bar {
	if w == nil {
		return nil
	}
	b := &Bar{w: w, label: label, totalFiles: totalFiles, totalBytes: totalBytes, now: time.Now}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b.tty = true
	}
	b.interval = plainInterval
	if b.tty {
		b.interval = ttyInterval
	}
	b.start = b.now()
	b.lastDraw = b.start
	return b
}

// Add records progress. It is safe for concurrent use and cheap enough to
// call once per row group.
func (b *Bar) Add(files, bytes, rows int64) {
	if b == nil {
		return
	}
	b.files.Add(files)
	b.bytes.Add(bytes)
	b.rows.Add(rows)
	if !b.mu.TryLock() {
		return // someone else is drawing; this update shows next time
	}
	defer b.mu.Unlock()
	if b.done {
		return
	}
	now := b.now()
	if now.Sub(b.lastDraw) < b.interval {
		return
	}
	b.lastDraw = now
	b.draw(now)
}

// Totals returns the counters so far.
func (b *Bar) Totals() (files, bytes, rows int64) {
	if b == nil {
		return 0, 0, 0
	}
	return b.files.Load(), b.bytes.Load(), b.rows.Load()
}

// Done clears the live line (on a terminal) and writes the summary, e.g.
// "compact: 12 files, 340 MB, 1.2M rows in 3.1s (390K rows/s)". Calls after
// the first are no-ops.
func (b *Bar) Done() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	elapsed := b.now().Sub(b.start)
	rows := b.rows.Load()
	prefix := ""
	if b.drawn {
		prefix = "\r\x1b[K"
	}
	fmt.Fprintf(b.w, "%s%s: %d files, %s, %s rows in %s (%s rows/s)\n",
		prefix, b.label, b.files.Load(), FormatBytes(b.bytes.Load()), FormatCount(rows),
		formatDuration(elapsed), FormatCount(int64(rate(rows, elapsed))))
}

func (b *Bar) draw(now time.Time) {
	files, bytes, rows := b.files.Load(), b.bytes.Load(), b.rows.Load()
	elapsed := now.Sub(b.start)
	var sb strings.Builder
	if b.tty {
		sb.WriteString("\r")
	}
	sb.WriteString(b.label)
	frac, known := b.fraction(files, bytes)
	if b.tty {
		sb.WriteString(" [")
		n := 0
		if known {
			n = int(frac * barWidth)
		}
		sb.WriteString(strings.Repeat("=", n))
		sb.WriteString(strings.Repeat(" ", barWidth-n))
		sb.WriteString("] ")
	} else {
		sb.WriteString(": ")
	}
	if b.totalFiles > 0 {
		fmt.Fprintf(&sb, "%d/%d files", files, b.totalFiles)
	} else {
		fmt.Fprintf(&sb, "%d files", files)
	}
	if b.totalBytes > 0 {
		fmt.Fprintf(&sb, ", %s/%s", FormatBytes(bytes), FormatBytes(b.totalBytes))
	} else {
		fmt.Fprintf(&sb, ", %s", FormatBytes(bytes))
	}
	fmt.Fprintf(&sb, ", %s rows, %s rows/s", FormatCount(rows), FormatCount(int64(rate(rows, elapsed))))
	if known && frac > 0 && frac < 1 {
		eta := time.Duration(float64(elapsed) * (1 - frac) / frac)
		fmt.Fprintf(&sb, ", ETA %s", formatDuration(eta))
	}
	if b.tty {
		sb.WriteString("\x1b[K")
		b.drawn = true
	} else {
		sb.WriteString("\n")
	}
	io.WriteString(b.w, sb.String())
}

// fraction prefers bytes (work is proportional to bytes), then files.
func (b *Bar) fraction(files, bytes int64) (float64, bool) {
	var f float64
	switch {
	case b.totalBytes > 0:
		f = float64(bytes) / float64(b.totalBytes)
	case b.totalFiles > 0:
		f = float64(files) / float64(b.totalFiles)
	default:
		return 0, false
	}
	return min(max(f, 0), 1), true
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// FormatBytes renders n in decimal units: "340 MB", "1.5 GB", "512 B".
func FormatBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return trimFloat(v) + " " + string("kMGTP"[i]) + "B"
}

// FormatCount renders n compactly: "950", "390K", "1.2M", "3.4G".
func FormatCount(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d", n)
	}
	v, i := float64(n), -1
	for v >= 1000 && i < 3 {
		v /= 1000
		i++
	}
	return trimFloat(v) + string("KMGT"[i])
}

// trimFloat keeps one decimal below 10 and none above: "1.2", "12", "340".
func trimFloat(v float64) string {
	if v < 9.95 {
		s := fmt.Sprintf("%.1f", v)
		return strings.TrimSuffix(s, ".0")
	}
	return fmt.Sprintf("%.0f", v)
}

func formatDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}
