package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is advanced by hand so that rate and interval logic is exact.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestBar(w *bytes.Buffer, tty bool, files, bytes int64) (*Bar, *fakeClock) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b := New(w, "compact", files, bytes)
	b.now = clk.now
	b.start = clk.now()
	b.lastDraw = b.start
	if tty {
		b.tty = true
		b.interval = ttyInterval
	}
	return b, clk
}

func TestSummaryLine(t *testing.T) {
	var buf bytes.Buffer
	b, clk := newTestBar(&buf, false, 12, 340_000_000)
	b.Add(12, 340_000_000, 1_209_000)
	clk.advance(3100 * time.Millisecond)
	b.Done()
	b.Done() // second call must not write again
	want := "compact: 12 files, 340 MB, 1.2M rows in 3.1s (390K rows/s)\n"
	if got := buf.String(); got != want {
		t.Fatalf("summary:\n got %q\nwant %q", got, want)
	}
}

func TestPlainThrottledToFiveSeconds(t *testing.T) {
	var buf bytes.Buffer
	b, clk := newTestBar(&buf, false, 4, 4000)
	b.Add(1, 1000, 100) // t=0: too early
	clk.advance(4 * time.Second)
	b.Add(1, 1000, 100) // t=4s: still too early
	if buf.Len() != 0 {
		t.Fatalf("wrote before 5s: %q", buf.String())
	}
	clk.advance(time.Second)
	b.Add(0, 0, 0) // t=5s: draws
	clk.advance(time.Second)
	b.Add(1, 1000, 100) // t=6s: throttled again
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("want 1 line, got %d: %q", len(lines), buf.String())
	}
	want := "compact: 2/4 files, 2 kB/4 kB, 200 rows, 40 rows/s, ETA 5.0s"
	if lines[0] != want {
		t.Fatalf("plain line:\n got %q\nwant %q", lines[0], want)
	}
	if strings.ContainsAny(buf.String(), "\r\x1b") {
		t.Fatalf("plain output has terminal control characters: %q", buf.String())
	}
}

func TestTerminalRedrawsOneLine(t *testing.T) {
	var buf bytes.Buffer
	b, clk := newTestBar(&buf, true, 10, 0)
	for i := 0; i < 50; i++ { // 50 adds over 1 s: at most 10 redraws
		clk.advance(20 * time.Millisecond)
		b.Add(0, 0, 10)
	}
	if n := strings.Count(buf.String(), "\r"); n < 5 || n > 10 {
		t.Fatalf("want 5..10 redraws in 1s, got %d", n)
	}
	if strings.Contains(buf.String(), "\n") {
		t.Fatalf("terminal progress must not scroll: %q", buf.String())
	}
	buf.Reset()
	clk.advance(100 * time.Millisecond)
	b.Add(5, 0, 0)
	want := "\rcompact [============            ] 5/10 files, 0 B, 500 rows, 454 rows/s, ETA 1.1s\x1b[K"
	if buf.String() != want {
		t.Fatalf("tty line:\n got %q\nwant %q", buf.String(), want)
	}
	buf.Reset()
	b.Done()
	if !strings.HasPrefix(buf.String(), "\r\x1b[Kcompact: 5 files,") || !strings.HasSuffix(buf.String(), "\n") {
		t.Fatalf("tty summary must clear the live line: %q", buf.String())
	}
}

func TestNilSafe(t *testing.T) {
	b := New(nil, "x", 1, 1)
	b.Add(1, 1, 1)
	b.Done()
	if f, by, r := b.Totals(); f != 0 || by != 0 || r != 0 {
		t.Fatal("nil bar has totals")
	}
	var nb *Bar
	nb.Add(1, 1, 1)
	nb.Done()
}

func TestConcurrentAdd(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "compact", 0, 0)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				b.Add(1, 10, 100)
			}
		}()
	}
	wg.Wait()
	b.Done()
	if f, by, r := b.Totals(); f != 8000 || by != 80000 || r != 800000 {
		t.Fatalf("totals = %d %d %d", f, by, r)
	}
	if !strings.Contains(buf.String(), "compact: 8000 files, 80 kB, 800K rows in") {
		t.Fatalf("summary: %q", buf.String())
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{FormatBytes(0), "0 B"}, {FormatBytes(999), "999 B"}, {FormatBytes(1500), "1.5 kB"},
		{FormatBytes(340_000_000), "340 MB"}, {FormatBytes(1_000_000_000), "1 GB"},
		{FormatCount(950), "950"}, {FormatCount(390_000), "390K"}, {FormatCount(1_234_567), "1.2M"},
		{FormatCount(12_000_000), "12M"}, {formatDuration(3100 * time.Millisecond), "3.1s"},
		{formatDuration(125 * time.Second), "2m05s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q want %q", c.got, c.want)
		}
	}
}
