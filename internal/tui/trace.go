package tui

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluice-dev/sluice/internal/tracer"
)

// Pane is the table the trace view shows.
type Pane int

// Panes, in the order tab cycles through them.
const (
	PaneFiles Pane = iota
	PaneProcs
	PaneSyscalls
	numPanes
)

var paneNames = [numPanes]string{"files", "processes", "syscalls"}

func (p Pane) String() string { return paneNames[p] }

// RefreshEvery is how often the view takes a new snapshot of its feed.
const RefreshEvery = 500 * time.Millisecond

type tickMsg time.Time

// TraceModel is the live view of sluice trace: top files, processes or
// syscalls by a sort key, a latency histogram of one syscall, a streaming
// tail that can be paused, and the lost and filtered counters always in
// the header. Keys: tab pane, s sort, / filter (enter applies, esc
// cancels), up/down select, p pause the tail, q quit.
//
// State changes only in Update, and View renders only the model's state,
// so a model built with a fixed Snapshot renders the same every time.
type TraceModel struct {
	feed   *Feed
	now    func() time.Time
	Width  int
	Height int

	Pane    Pane
	Sort    tracer.SortKey
	Filter  string // applied filter
	Editing bool   // the filter line has the keyboard
	Draft   string // the filter being typed
	Paused  bool   // the tail is frozen
	Cursor  int    // selected row of the table
	Snap    Snapshot
	Tail    []TailRow // what the tail shows (kept while paused)
	Title   string
}

// NewTraceModel returns a view over feed; title describes the trace.
func NewTraceModel(feed *Feed, title string) *TraceModel {
	return &TraceModel{feed: feed, now: time.Now, Width: 120, Height: 40, Title: title}
}

// Init starts the refresh ticks.
func (m *TraceModel) Init() tea.Cmd { return tick() }

func tick() tea.Cmd {
	return tea.Tick(RefreshEvery, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// Refresh takes a new snapshot of the feed.
func (m *TraceModel) Refresh() {
	if m.feed == nil {
		return
	}
	m.Snap = m.feed.snapshot(m.now(), m.Sort, m.tableRows(), m.Filter)
	if !m.Paused {
		m.Tail = m.Snap.Tail
	}
	m.clampCursor()
}

// Update handles keys, window sizes and ticks.
func (m *TraceModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tickMsg:
		m.Refresh()
		return m, tick()
	case tea.WindowSizeMsg:
		m.Width, m.Height = msg.Width, msg.Height
		return m, nil
	case tea.KeyPressMsg:
		return m, m.key(msg)
	}
	return m, nil
}

func (m *TraceModel) key(k tea.KeyPressMsg) tea.Cmd {
	if m.Editing {
		switch k.String() {
		case "enter":
			m.Filter, m.Editing, m.Cursor = m.Draft, false, 0
			m.Refresh()
		case "esc":
			m.Editing, m.Draft = false, m.Filter
		case "backspace":
			if r := []rune(m.Draft); len(r) > 0 {
				m.Draft = string(r[:len(r)-1])
			}
		case "ctrl+c":
			return tea.Quit
		default:
			if k.Text != "" {
				m.Draft += k.Text
			}
		}
		return nil
	}
	switch k.String() {
	case "q", "ctrl+c":
		return tea.Quit
	case "tab":
		m.Pane, m.Cursor = (m.Pane+1)%numPanes, 0
	case "shift+tab":
		m.Pane, m.Cursor = (m.Pane+numPanes-1)%numPanes, 0
	case "s":
		m.Sort = m.Sort.Next()
		m.Refresh()
	case "/":
		m.Editing, m.Draft = true, m.Filter
	case "p", "space":
		m.Paused = !m.Paused
		if !m.Paused {
			m.Tail = m.Snap.Tail
		}
	case "up", "k":
		if m.Cursor > 0 {
			m.Cursor--
		}
	case "down", "j":
		m.Cursor++
		m.clampCursor()
	}
	return nil
}

func (m *TraceModel) rows() []tracer.Agg {
	switch m.Pane {
	case PaneProcs:
		return m.Snap.Procs
	case PaneSyscalls:
		var out []tracer.Agg
		for _, a := range m.Snap.Syscalls {
			if m.Filter == "" || strings.Contains(a.Key, m.Filter) {
				out = append(out, a)
			}
		}
		return out
	}
	return m.Snap.Files
}

func (m *TraceModel) clampCursor() {
	n := len(m.rows())
	if n > m.tableRows() {
		n = m.tableRows()
	}
	if m.Cursor >= n {
		m.Cursor = max(0, n-1)
	}
}

// layout splits the terminal's height: header 3 lines, the table (its
// header and rows), the histogram, the tail (its header and rows), help 1
// line. A short terminal drops the histogram, then the tail, so that the
// header with the lost counter always stays on screen.
func (m *TraceModel) layout() (table, tail int, hist bool) {
	h := m.Height
	if h <= 0 {
		h = 40 // size not known yet
	}
	rest := h - 6 // header, table header, tail header, help
	switch {
	case rest >= 3+histRows+3:
		table = max(3, rest/2-histRows)
		return table, max(3, rest-table-histRows-2), true
	case rest >= 6:
		return rest / 2, rest - rest/2, false
	}
	return max(0, h-5), 0, false // no tail: header, table header, help
}

func (m *TraceModel) tableRows() int { t, _, _ := m.layout(); return t }

const histRows = 8

var (
	styleTitle  = lipgloss.NewStyle().Bold(true)
	styleHeader = lipgloss.NewStyle().Bold(true).Reverse(true)
	styleSel    = lipgloss.NewStyle().Reverse(true)
	styleBad    = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("9"))
	styleGood   = lipgloss.NewStyle().Foreground(lipgloss.Color("10"))
	styleFaint  = lipgloss.NewStyle().Faint(true)
)

// View renders the model.
func (m *TraceModel) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	v.WindowTitle = "sluice trace"
	return v
}

// Render is the view's text.
func (m *TraceModel) Render() string {
	var b strings.Builder
	s := &m.Snap
	rate := float64(s.Calls) / max(s.Elapsed.Seconds(), 1e-9)
	fmt.Fprintf(&b, "%s  %s\n", styleTitle.Render("sluice trace"), Printable(m.Title))
	lost := styleGood.Render(fmt.Sprintf("lost %d", s.Lost))
	if s.Lost > 0 {
		lost = styleBad.Render(fmt.Sprintf("LOST %d", s.Lost))
	}
	state := ""
	switch {
	case s.Err != nil:
		state = styleBad.Render("  stopped: " + Printable(s.Err.Error()))
	case s.Done:
		state = "  stopped"
	}
	// The lost count first: on a narrow terminal the line is cut at the right.
	fmt.Fprintf(&b, "%s  %s calls (%.0f/s)  %s  filtered %d  %s%s\n",
		lost, fmtCount(s.Calls), rate, tracer.FormatBytes(s.Bytes), s.Filtered, s.Elapsed.Truncate(time.Second), state)
	filter := m.Filter
	if m.Editing {
		filter = m.Draft + "█"
	}
	tail := "live"
	if m.Paused {
		tail = styleBad.Render("PAUSED")
	}
	fmt.Fprintf(&b, "view: %s  sort: %s  filter: %q  tail: %s\n", m.Pane, m.Sort, filter, tail)

	keyW := max(16, m.Width-66)
	fmt.Fprintln(&b, styleHeader.Render(fmt.Sprintf("%-*s %9s %10s %9s %9s %9s %7s", keyW, strings.ToUpper(m.Pane.String()), "OPS", "BYTES", "P50", "P99", "TIME", "ERRORS")))
	rows := m.rows()
	for i := range m.tableRows() {
		if i >= len(rows) {
			b.WriteByte('\n')
			continue
		}
		a := &rows[i]
		line := fmt.Sprintf("%-*s %9d %10s %9s %9s %9s %7d", keyW, clip(a.Key, keyW), a.Ops, tracer.FormatBytes(a.Bytes),
			tracer.FormatDuration(a.Hist.Quantile(0.5)), tracer.FormatDuration(a.Hist.Quantile(0.99)), tracer.FormatDuration(a.TimeNs), a.Errors)
		if i == m.Cursor {
			line = styleSel.Render(line)
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	if _, tail, hist := m.layout(); hist {
		m.renderHist(&b)
		m.renderTail(&b, tail)
	} else if tail > 0 {
		m.renderTail(&b, tail)
	}
	help := "tab view · s sort · / filter · ↑↓ select · p pause tail · q quit"
	if m.Editing {
		help = "type a filter (substring of path, process or syscall) · enter apply · esc cancel"
	}
	b.WriteString(styleFaint.Render(help))
	return fitScreen(b.String(), m.Width, m.Height)
}

// fitScreen cuts text to the terminal: at most height lines (the first
// ones, where the header is) and each line at most width cells, escape
// sequences kept whole. A line wider than the terminal would wrap and
// push the screen up; the renderer only clips what it is given.
func fitScreen(text string, width, height int) string {
	lines := strings.Split(text, "\n")
	if height > 0 && len(lines) > height {
		lines = lines[:height]
	}
	if width > 0 {
		for i, l := range lines {
			if ansi.StringWidth(l) > width {
				lines[i] = ansi.Truncate(l, width, "…")
			}
		}
	}
	return strings.Join(lines, "\n")
}

// histSyscall is the syscall whose histogram is shown: the selected row
// in the syscalls view, else the busiest syscall.
func (m *TraceModel) histSyscall() *tracer.Agg {
	if m.Pane == PaneSyscalls {
		if rows := m.rows(); m.Cursor < len(rows) {
			return &rows[m.Cursor]
		}
	}
	if len(m.Snap.Syscalls) > 0 {
		return &m.Snap.Syscalls[0]
	}
	return nil
}

// renderHist draws the latency histogram of one syscall by octave.
func (m *TraceModel) renderHist(b *strings.Builder) {
	a := m.histSyscall()
	if a == nil {
		fmt.Fprintln(b, styleHeader.Render("LATENCY"))
		for range histRows - 1 {
			b.WriteByte('\n')
		}
		return
	}
	fmt.Fprintln(b, styleHeader.Render(fmt.Sprintf("LATENCY of %s: p50 %s  p99 %s  max ≤ %s", a.Key,
		tracer.FormatDuration(a.Hist.Quantile(0.5)), tracer.FormatDuration(a.Hist.Quantile(0.99)), tracer.FormatDuration(a.Hist.Quantile(1)))))
	// Octaves (4 buckets each), then merged in pairs until they fit.
	type bar struct {
		upper int64
		n     uint64
	}
	var bars []bar
	first, last := -1, -1
	for i, c := range a.Hist {
		if c > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first >= 0 {
		width := 4
		for (last/width-first/width+1) > histRows-1 && width < len(a.Hist) {
			width *= 2
		}
		for g := first / width; g <= last/width; g++ {
			var n uint64
			for i := g * width; i < (g+1)*width && i < len(a.Hist); i++ {
				n += uint64(a.Hist[i])
			}
			bars = append(bars, bar{tracer.BucketUpper(min((g+1)*width, len(a.Hist)) - 1), n})
		}
	}
	var peak uint64
	for _, br := range bars {
		peak = max(peak, br.n)
	}
	barW := max(10, m.Width-30)
	for i := range histRows - 1 {
		if i >= len(bars) {
			b.WriteByte('\n')
			continue
		}
		br := bars[i]
		n := int(float64(barW) * float64(br.n) / float64(max(peak, 1)))
		if br.n > 0 && n == 0 {
			n = 1
		}
		fmt.Fprintf(b, "≤%9s %s %d\n", tracer.FormatDuration(br.upper), strings.Repeat("█", n), br.n)
	}
}

func (m *TraceModel) renderTail(b *strings.Builder, n int) {
	fmt.Fprintln(b, styleHeader.Render(fmt.Sprintf("%-12s %-7s %-15s %-12s %9s %8s  %s", "TIME", "PID", "COMM", "SYSCALL", "DURATION", "RET", "PATH")))
	rows := m.Tail
	if len(rows) > n {
		rows = rows[len(rows)-n:]
	}
	pathW := max(10, m.Width-80)
	for i := range n {
		if i >= len(rows) {
			b.WriteByte('\n')
			continue
		}
		r := rows[i]
		fmt.Fprintf(b, "%-12s %-7d %-15s %-12s %9s %8d  %s\n", r.Time.Format("15:04:05.000"), r.PID, clip(r.Comm, 15), r.Syscall,
			tracer.FormatDuration(r.Duration), r.Ret, clip(r.Path, pathW))
	}
}

// clip keeps the last w runes of s (made printable), the first replaced by
// "…" when s is longer: whole runes, so a UTF-8 name is never cut inside a
// character, and fmt's widths count runes too.
func clip(s string, w int) string {
	s = Printable(s)
	n := utf8.RuneCountInString(s)
	if n <= w {
		return s
	}
	if w <= 0 {
		return ""
	}
	i := 0
	for range n - w + 1 {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return "…" + s[i:]
}

func fmtCount(n int64) string {
	switch {
	case n >= 10_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
