package tui

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/tracer"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// feedWith returns a feed holding a fixed set of calls.
func feedWith(t *testing.T) *Feed {
	t.Helper()
	b := &signal.IOEvents{SyscallNames: []string{"", "read", "write", "fsync"}}
	add := func(sc uint16, pid uint32, comm, path string, dur, bytes int64, n int) {
		for range n {
			b.Append(&signal.IOEvent{Time: t0.UnixNano(), Duration: dur, PID: pid, TID: pid, Comm: b.AppendString(comm),
				Syscall: sc, FD: 3, Ret: bytes, Bytes: bytes, Path: b.AppendString(path)})
		}
	}
	add(1, 10, "db", "/data/big.db", 2000, 4096, 50)       // 50 reads, 200 KiB
	add(2, 11, "logger", "/var/log/app.log", 500, 100, 80) // 80 writes
	add(3, 10, "db", "/data/big.db", 5_000_000, 0, 3)      // 3 slow fsyncs
	f := NewFeed(t0)
	f.Add(b, 7, 12)
	return f
}

func newModel(t *testing.T) *TraceModel {
	m := NewTraceModel(feedWith(t), "all processes")
	m.now = func() time.Time { return t0.Add(10 * time.Second) }
	m.Width, m.Height = 120, 40
	m.Refresh()
	return m
}

func press(m *TraceModel, keys ...string) {
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "tab":
			msg = tea.KeyPressMsg{Code: tea.KeyTab}
		case "enter":
			msg = tea.KeyPressMsg{Code: tea.KeyEnter}
		case "esc":
			msg = tea.KeyPressMsg{Code: tea.KeyEscape}
		case "backspace":
			msg = tea.KeyPressMsg{Code: tea.KeyBackspace}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		default:
			msg = tea.KeyPressMsg{Code: rune(k[0]), Text: k}
		}
		m.Update(msg)
	}
}

func plain(m *TraceModel) string { return ansi.Strip(m.Render()) }

func TestTraceViewRendersFixedState(t *testing.T) {
	m := newModel(t)
	out := plain(m)
	for _, want := range []string{
		"133 calls", "LOST 7", "filtered 12", "view: files", "sort: ops",
		"/var/log/app.log", "/data/big.db", "LATENCY of write", "PATH",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %q:\n%s", want, out)
		}
	}
	// Files by ops: app.log (80) above big.db (53).
	if strings.Index(out, "/var/log/app.log") > strings.Index(out, "/data/big.db   ") {
		t.Errorf("files not sorted by ops:\n%s", out)
	}
	if lines := strings.Count(out, "\n") + 1; lines > m.Height {
		t.Errorf("%d lines for a %d-line terminal", lines, m.Height)
	}
	if got := plain(m); got != out {
		t.Error("rendering the same state twice differs")
	}
}

func TestTraceViewKeys(t *testing.T) {
	m := newModel(t)
	press(m, "s") // sort by bytes: big.db (200 KiB) first
	if m.Sort != tracer.ByBytes || m.Snap.Files[0].Key != "/data/big.db" {
		t.Fatalf("sort %s, first file %q", m.Sort, m.Snap.Files[0].Key)
	}
	press(m, "s", "s") // p99: the fsyncs' file
	if m.Sort != tracer.ByP99 || m.Snap.Files[0].Key != "/data/big.db" {
		t.Fatalf("sort %s, first file %q", m.Sort, m.Snap.Files[0].Key)
	}
	press(m, "tab")
	if m.Pane != PaneProcs || !strings.Contains(plain(m), "11 logger") {
		t.Fatalf("tab: pane %s", m.Pane)
	}
	press(m, "tab", "down") // syscalls, second row: its histogram is shown
	if m.Pane != PaneSyscalls || m.Cursor != 1 {
		t.Fatalf("pane %s cursor %d", m.Pane, m.Cursor)
	}
	sel := m.rows()[1].Key
	if !strings.Contains(plain(m), "LATENCY of "+sel) {
		t.Errorf("histogram not of the selected syscall %s:\n%s", sel, plain(m))
	}

	// The filter is edited live and applies on enter.
	press(m, "tab", "/", "a", "p", "p", "x", "backspace")
	if !m.Editing || m.Draft != "app" || m.Filter != "" {
		t.Fatalf("editing %v draft %q filter %q", m.Editing, m.Draft, m.Filter)
	}
	if !strings.Contains(plain(m), `filter: "app█"`) {
		t.Errorf("draft not shown:\n%s", plain(m))
	}
	press(m, "enter")
	if m.Editing || m.Filter != "app" || len(m.Snap.Files) != 1 || m.Snap.Files[0].Key != "/var/log/app.log" {
		t.Fatalf("filter %q files %+v", m.Filter, m.Snap.Files)
	}
	for _, r := range m.Tail {
		if r.Path != "/var/log/app.log" {
			t.Fatalf("tail row %+v passes filter app", r)
		}
	}
	press(m, "/", "z", "esc")
	if m.Filter != "app" || m.Editing {
		t.Fatalf("esc changed the filter to %q", m.Filter)
	}

	// Pause freezes the tail while new calls arrive.
	press(m, "p")
	frozen := len(m.Tail)
	b := &signal.IOEvents{SyscallNames: []string{"", "read"}}
	b.Append(&signal.IOEvent{Time: t0.UnixNano(), Syscall: 1, Path: b.AppendString("/var/log/app.log"), Comm: b.AppendString("logger")})
	m.feed.Add(b, 9, 12)
	m.Refresh()
	if !m.Paused || len(m.Tail) != frozen || !strings.Contains(plain(m), "PAUSED") {
		t.Fatalf("paused %v tail %d (was %d)", m.Paused, len(m.Tail), frozen)
	}
	if !strings.Contains(plain(m), "LOST 9") {
		t.Error("lost counter not updated while paused")
	}
	press(m, "p")
	if m.Paused || len(m.Tail) != frozen+1 {
		t.Fatalf("unpaused tail %d, want %d", len(m.Tail), frozen+1)
	}

	if _, cmd := m.Update(tea.KeyPressMsg{Code: 'q', Text: "q"}); cmd == nil {
		t.Fatal("q does not quit")
	}
}

func TestFeedTailBounded(t *testing.T) {
	f := NewFeed(t0)
	b := &signal.IOEvents{SyscallNames: []string{"", "read"}}
	for i := range 3 * TailLen {
		b.Append(&signal.IOEvent{Time: int64(i), Syscall: 1})
	}
	f.Add(b, 0, 0)
	s := f.snapshot(t0, tracer.ByOps, 10, "")
	if len(s.Tail) != TailLen || s.Tail[TailLen-1].Time.UnixNano() != int64(3*TailLen-1) || s.Calls != int64(3*TailLen) {
		t.Fatalf("tail %d rows, calls %d", len(s.Tail), s.Calls)
	}
}

// TestTraceViewFitsTerminal renders the view at terminal sizes from large
// to tiny, with hostile names (escape sequences, a newline, bytes that are
// not UTF-8, wide characters) in paths, command names, the title and an
// error: every line fits the width, the lines fit the height, the header
// with the lost counter stays on screen, and nothing but SGR styling
// reaches the terminal.
func TestTraceViewFitsTerminal(t *testing.T) {
	const evil = "/tmp/\x1b]0;pwned\x07\x1b[2J\x9b31m\r\n\x00\xff寬寬寬寬寬寬寬寬寬寬寬寬寬寬寬寬寬寬寬寬寬寬"
	f := feedWith(t)
	b := &signal.IOEvents{SyscallNames: []string{"", "read"}}
	for range 5 {
		b.Append(&signal.IOEvent{Time: t0.UnixNano(), Duration: 100, PID: 66, TID: 66, Comm: b.AppendString("ev\x1b[2Jil\n"),
			Syscall: 1, Ret: 1, Bytes: 1, Path: b.AppendString(evil)})
	}
	f.Add(b, 7, 12)
	for _, size := range [][2]int{{200, 60}, {120, 40}, {80, 24}, {60, 16}, {40, 12}, {30, 8}, {20, 5}, {12, 3}, {5, 1}} {
		m := NewTraceModel(f, "comm "+evil)
		m.now = func() time.Time { return t0.Add(10 * time.Second) }
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		m.Refresh()
		outs := []string{m.Render()}
		press(m, "tab")
		outs = append(outs, m.Render())
		press(m, "tab", "/", "\x1b[2J")
		outs = append(outs, m.Render())
		m.Snap.Err = errors.New("write " + evil + ": no space left on device")
		outs = append(outs, m.Render())
		for i, out := range outs {
			lines := strings.Split(out, "\n")
			if len(lines) > size[1] {
				t.Errorf("%v render %d: %d lines", size, i, len(lines))
			}
			for j, l := range lines {
				if w := ansi.StringWidth(l); w > size[0] {
					t.Errorf("%v render %d line %d: %d cells wide: %q", size, i, j, w, ansi.Strip(l))
				}
			}
			if size[1] >= 2 && !strings.Contains(ansi.Strip(lines[1]), "LOST 7") {
				t.Errorf("%v render %d: the second line lacks the lost counter: %q", size, i, ansi.Strip(lines[1]))
			}
			plain := ansi.Strip(out)
			for _, bad := range []string{"\x1b", "\x07", "\x9b", "\r", "\x00"} {
				if strings.Contains(plain, bad) {
					t.Fatalf("%v render %d sends %q to the terminal:\n%q", size, i, bad, out)
				}
			}
			if !utf8.ValidString(out) {
				t.Fatalf("%v render %d is not valid UTF-8", size, i)
			}
		}
	}
}
