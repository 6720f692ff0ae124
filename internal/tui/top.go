package tui

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/sluice-dev/sluice/internal/stats"
)

// TopTab is the section `sluice top` shows.
type TopTab int

// Tabs, in the order tab cycles through them.
const (
	TabOverview TopTab = iota
	TabMetrics
	TabExporters
	TabRules
	numTopTabs
)

var topTabNames = [numTopTabs]string{"overview", "metrics", "exporters", "rules"}

func (t TopTab) String() string { return topTabNames[t] }

// MetricSort orders the metrics tab.
type MetricSort int

// Sort keys of the metrics tab, in the order s cycles through them.
const (
	SortSeries MetricSort = iota
	SortSamples
	SortBytes
	SortName
	numMetricSorts
)

var metricSortNames = [numMetricSorts]string{"series", "samples/s", "bytes/s", "name"}

func (s MetricSort) String() string { return metricSortNames[s] }

// FetchFunc reads one status document (GET /api/v1/status/sluice).
type FetchFunc func(ctx context.Context) (*stats.Status, error)

type statusMsg struct {
	st  *stats.Status
	err error
}

type topTickMsg struct{}

// TopModel is the live view of `sluice top`: a running sluice's status
// document (package stats), polled every Interval. Rates of counters are
// the differences between the last two documents over their time; the
// metrics' rates are the server's (over its stats window). Keys: tab and
// shift+tab section, s sort (metrics), ↑↓ select, r refresh now, q quit.
//
// State changes only in Update; View renders only the model's state, so a
// model given fixed documents renders the same every time.
type TopModel struct {
	fetch    FetchFunc
	Interval time.Duration
	URL      string
	Width    int
	Height   int

	Tab    TopTab
	Sort   MetricSort
	Cursor int
	Cur    *stats.Status // the newest document
	Prev   *stats.Status // the one before, for rates
	Err    error         // the last fetch's error, nil after a success
	plain  bool          // no styles (--once)
}

// NewTopModel returns a view polling fetch every interval; url names the
// process in the title.
func NewTopModel(fetch FetchFunc, url string, interval time.Duration) *TopModel {
	return &TopModel{fetch: fetch, URL: url, Interval: interval, Width: 120, Height: 40}
}

// Init fetches the first document.
func (m *TopModel) Init() tea.Cmd { return m.fetchCmd() }

func (m *TopModel) fetchCmd() tea.Cmd {
	f := m.fetch
	if f == nil {
		return nil
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), max(m.Interval, 5*time.Second))
		defer cancel()
		st, err := f(ctx)
		return statusMsg{st, err}
	}
}

func (m *TopModel) tick() tea.Cmd {
	return tea.Tick(m.Interval, func(time.Time) tea.Msg { return topTickMsg{} })
}

// Observe records a fetched document (or the error of a failed fetch).
func (m *TopModel) Observe(st *stats.Status, err error) {
	m.Err = err
	if err == nil && st != nil {
		cleanStatus(st)
		m.Prev, m.Cur = m.Cur, st
	}
	m.clampCursor()
}

// Update handles documents, keys, window sizes and ticks.
func (m *TopModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case statusMsg:
		m.Observe(msg.st, msg.err)
		return m, m.tick()
	case topTickMsg:
		return m, m.fetchCmd()
	case tea.WindowSizeMsg:
		m.Width, m.Height = msg.Width, msg.Height
		return m, nil
	case tea.KeyPressMsg:
		return m, m.key(msg)
	}
	return m, nil
}

func (m *TopModel) key(k tea.KeyPressMsg) tea.Cmd {
	switch k.String() {
	case "q", "ctrl+c", "esc":
		return tea.Quit
	case "tab", "right", "l":
		m.Tab, m.Cursor = (m.Tab+1)%numTopTabs, 0
	case "shift+tab", "left", "h":
		m.Tab, m.Cursor = (m.Tab+numTopTabs-1)%numTopTabs, 0
	case "1", "2", "3", "4":
		m.Tab, m.Cursor = TopTab(k.String()[0]-'1'), 0
	case "s":
		m.Sort = (m.Sort + 1) % numMetricSorts
	case "up", "k":
		if m.Cursor > 0 {
			m.Cursor--
		}
	case "down", "j":
		m.Cursor++
		m.clampCursor()
	case "r":
		return m.fetchCmd()
	}
	return nil
}

func (m *TopModel) clampCursor() {
	m.Cursor = max(0, min(m.Cursor, m.rowCount()-1))
}

func (m *TopModel) rowCount() int {
	if m.Cur == nil {
		return 0
	}
	switch m.Tab {
	case TabMetrics:
		return len(m.metrics())
	case TabExporters:
		return len(m.Cur.Exporters)
	case TabRules:
		return len(m.Cur.Rules)
	}
	return 0
}

// View renders the model.
func (m *TopModel) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	v.WindowTitle = "sluice top"
	return v
}

func (m *TopModel) st(s lipgloss.Style, text string) string {
	if m.plain {
		return text
	}
	return s.Render(text)
}

// rate is the per-second difference of a counter between the last two
// documents; ok is false before there are two.
func (m *TopModel) rate(cur, prev uint64) (float64, bool) {
	if m.Prev == nil || m.Cur == nil || m.Cur.Time <= m.Prev.Time || cur < prev {
		return 0, false
	}
	return float64(cur-prev) / (m.Cur.Time - m.Prev.Time), true
}

func fmtRate(r float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmtFloat(r)
}

func fmtFloat(v float64) string {
	switch {
	case v >= 10e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 10e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v >= 100 || v == 0:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func fmtBytes(v float64) string {
	switch {
	case v >= 1<<30:
		return fmt.Sprintf("%.1fGiB", v/(1<<30))
	case v >= 1<<20:
		return fmt.Sprintf("%.1fMiB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1fKiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0fB", v)
}

// Render is the view's text: the header, the current tab and the keys.
func (m *TopModel) Render() string {
	var b strings.Builder
	m.renderHeader(&b)
	tabs := make([]string, numTopTabs)
	for i := range numTopTabs {
		tabs[i] = fmt.Sprintf("%d %s", i+1, i)
		if i == m.Tab {
			tabs[i] = m.st(styleSel, " "+tabs[i]+" ")
		}
	}
	fmt.Fprintf(&b, "%s   sort: %s\n", strings.Join(tabs, "  "), m.Sort)
	if m.Cur != nil {
		switch m.Tab {
		case TabOverview:
			m.renderOverview(&b)
		case TabMetrics:
			m.renderMetrics(&b, max(3, m.Height-8))
		case TabExporters:
			m.renderExporters(&b)
		case TabRules:
			m.renderRules(&b)
		}
	}
	b.WriteString(m.st(styleFaint, "tab/1-4 section · s sort · ↑↓ select · r refresh · q quit"))
	return b.String()
}

// RenderAll is every section without styles, for `sluice top --once`.
func (m *TopModel) RenderAll() string {
	m.plain = true
	defer func() { m.plain = false }()
	var b strings.Builder
	m.renderHeader(&b)
	if m.Cur == nil {
		return b.String()
	}
	b.WriteString("\n")
	m.renderOverview(&b)
	b.WriteString("\n")
	m.renderMetrics(&b, 1<<30)
	b.WriteString("\n")
	m.renderExporters(&b)
	b.WriteString("\n")
	m.renderRules(&b)
	return b.String()
}

func (m *TopModel) renderHeader(b *strings.Builder) {
	fmt.Fprintf(b, "%s  %s  every %s\n", m.st(styleTitle, "sluice top"), Printable(m.URL), m.Interval)
	switch {
	case m.Err != nil:
		fmt.Fprintln(b, m.st(styleBad, "fetch failed: "+Printable(m.Err.Error())))
	case m.Cur == nil:
		fmt.Fprintln(b, "waiting for the first status…")
	default:
		c := m.Cur
		q := c.Queue
		lag := m.st(styleGood, "lake lag "+fmtBytes(float64(q.LakeLagBytes)))
		if q.LakeLagBytes > 64<<20 {
			lag = m.st(styleBad, "LAKE LAG "+fmtBytes(float64(q.LakeLagBytes)))
		}
		at := time.Unix(0, int64(c.Time*1e9)).UTC().Format("15:04:05")
		fmt.Fprintf(b, "%s  queue %s in %d records, %d segments  %s  disk free %s\n", at,
			fmtBytes(float64(q.Bytes)), q.Records, q.Segments, lag, fmtBytes(float64(q.FreeDiskBytes)))
	}
}

func (m *TopModel) header(b *strings.Builder, format string, a ...any) {
	fmt.Fprintln(b, m.st(styleHeader, fmt.Sprintf(format, a...)))
}

func (m *TopModel) renderOverview(b *strings.Builder) {
	c := m.Cur
	var prev map[[3]string]stats.ReceiverRow
	if m.Prev != nil {
		prev = map[[3]string]stats.ReceiverRow{}
		for _, r := range m.Prev.Receivers {
			prev[[3]string{r.Receiver, r.Signal, r.Tenant}] = r
		}
	}
	m.header(b, "%-24s %-8s %-16s %10s %10s %10s", "RECEIVER", "SIGNAL", "TENANT", "REQ/S", "REQUESTS", "FAILED")
	for _, r := range c.Receivers {
		var total, ok uint64
		for k, v := range r.Requests {
			total += v
			if k == "accepted" || k == "ok" || strings.HasPrefix(k, "2") {
				ok += v
			}
		}
		var pt uint64
		for _, v := range prev[[3]string{r.Receiver, r.Signal, r.Tenant}].Requests {
			pt += v
		}
		fmt.Fprintf(b, "%-24s %-8s %-16s %10s %10d %10d\n", clip(r.Receiver, 24), r.Signal, clip(r.Tenant, 16),
			fmtRate(m.rate(total, pt)), total, total-ok)
	}
	var prevT map[[2]string]stats.TenantRow
	if m.Prev != nil {
		prevT = map[[2]string]stats.TenantRow{}
		for _, r := range m.Prev.Tenants {
			prevT[[2]string{r.Tenant, r.Signal}] = r
		}
	}
	m.header(b, "%-16s %-8s %10s %10s %12s %10s %10s", "TENANT", "SIGNAL", "RECORDS/S", "BYTES/S", "ACCEPTED", "REJECTED", "INVALID")
	for _, r := range c.Tenants {
		p := prevT[[2]string{r.Tenant, r.Signal}]
		rr, ok := m.rate(r.Accepted, p.Accepted)
		br, bok := m.rate(r.QueuedBytes, p.QueuedBytes)
		bs := "-"
		if bok {
			bs = fmtBytes(br)
		}
		fmt.Fprintf(b, "%-16s %-8s %10s %10s %12d %10d %10d\n", clip(r.Tenant, 16), r.Signal, fmtRate(rr, ok), bs, r.Accepted, r.Rejected, r.Invalid)
	}
	l := c.Lake
	last := "never"
	if l.LastCheckpoint > 0 {
		last = fmt.Sprintf("%.0fs ago", max(0, c.Time-l.LastCheckpoint))
	}
	var total uint64
	for _, n := range l.Checkpoints {
		total += n
	}
	reasons := make([]string, 0, len(l.Checkpoints))
	for _, k := range slices.Sorted(maps.Keys(l.Checkpoints)) {
		reasons = append(reasons, fmt.Sprintf("%s %d", k, l.Checkpoints[k]))
	}
	m.header(b, "%-*s", max(40, min(m.Width, 100)), "LAKE")
	fails := fmt.Sprintf("failures %d", l.CheckpointFailures)
	if l.CheckpointFailures > 0 {
		fails = m.st(styleBad, strings.ToUpper(fails))
	}
	fmt.Fprintf(b, "checkpoints %d (%s), last %s, %s; %d segments, %s, buffered %s\n", total, strings.Join(reasons, ", "),
		last, fails, l.Segments, fmtBytes(float64(l.SegmentBytes)), fmtBytes(float64(l.BufferedBytes)))
	if s := c.Stats; s != nil {
		m.header(b, "%-16s %10s %12s %10s", "TENANT (STATS)", "SERIES", "SAMPLES/S", "BYTES/S")
		for _, t := range s.Tenants {
			fmt.Fprintf(b, "%-16s %10d %12s %10s\n", clip(t.Tenant, 16), t.Series, fmtFloat(t.SamplesPerSec), fmtBytes(t.BytesPerSec))
		}
		if s.OverflowSeries+s.OverflowMetrics+s.OverflowLabelPairs > 0 {
			fmt.Fprintln(b, m.st(styleBad, fmt.Sprintf("stats limits reached (series %d, metrics %d, label pairs %d): counts are lower bounds",
				s.OverflowSeries, s.OverflowMetrics, s.OverflowLabelPairs)))
		}
	}
}

// metrics are the statistics' metrics in the chosen order.
func (m *TopModel) metrics() []stats.MetricSummary {
	if m.Cur == nil || m.Cur.Stats == nil {
		return nil
	}
	ms := slices.Clone(m.Cur.Stats.Metrics)
	byName := func(a, b stats.MetricSummary) int {
		return cmp.Or(strings.Compare(a.Metric, b.Metric), strings.Compare(a.Tenant, b.Tenant))
	}
	slices.SortStableFunc(ms, func(a, b stats.MetricSummary) int {
		switch m.Sort {
		case SortSamples:
			return cmp.Or(cmp.Compare(b.SamplesPerSec, a.SamplesPerSec), byName(a, b))
		case SortBytes:
			return cmp.Or(cmp.Compare(b.BytesPerSec, a.BytesPerSec), byName(a, b))
		case SortName:
			return byName(a, b)
		}
		return cmp.Or(cmp.Compare(b.Series, a.Series), byName(a, b))
	})
	return ms
}

func (m *TopModel) renderMetrics(b *strings.Builder, rows int) {
	if m.Cur.Stats == nil {
		fmt.Fprintln(b, "statistics are off (stats.enabled: false)")
		return
	}
	w := max(20, m.Width-72)
	m.header(b, "%-*s %-16s %10s %12s %10s %12s %7s", w, "METRIC", "TENANT", "SERIES", "SAMPLES/S", "BYTES/S", "SAMPLES", "KEPT")
	for i, r := range m.metrics() {
		if i >= rows {
			break
		}
		// KEPT: stored samples per sample before the rules, while rules
		// are loaded.
		kept := "-"
		if r.Before > 0 {
			kept = fmt.Sprintf("%.0f%%", 100*float64(r.Samples)/float64(r.Before))
		}
		line := fmt.Sprintf("%-*s %-16s %10d %12s %10s %12d %7s", w, clip(r.Metric, w), clip(r.Tenant, 16), r.Series,
			fmtFloat(r.SamplesPerSec), fmtBytes(r.BytesPerSec), r.Samples, kept)
		if i == m.Cursor && m.Tab == TabMetrics && !m.plain {
			line = styleSel.Render(line)
		}
		fmt.Fprintln(b, line)
	}
	if ls := m.Cur.Stats.Labels; len(ls) > 0 {
		m.header(b, "%-*s %-16s %-24s %10s %12s", w, "METRIC (LABELS BY DISTINCT VALUES)", "TENANT", "LABEL", "VALUES", "SERIES")
		for i, l := range ls {
			if i >= max(3, rows/3) {
				break
			}
			fmt.Fprintf(b, "%-*s %-16s %-24s %10d %12d\n", w, clip(l.Metric, w), clip(l.Tenant, 16), clip(l.Label, 24), l.Values, l.Series)
		}
	}
}

func (m *TopModel) renderExporters(b *strings.Builder) {
	var prev map[string]stats.ExporterRow
	if m.Prev != nil {
		prev = map[string]stats.ExporterRow{}
		for _, e := range m.Prev.Exporters {
			prev[e.Exporter] = e
		}
	}
	m.header(b, "%-28s %10s %12s %10s %9s  %s", "EXPORTER", "SENT/S", "SENT", "LAG", "LAG AGE", "ENDPOINTS (BREAKER)")
	if len(m.Cur.Exporters) == 0 {
		fmt.Fprintln(b, "no exporters")
	}
	for i, e := range m.Cur.Exporters {
		var eps []string
		for _, ep := range e.Endpoints {
			s := fmt.Sprintf("%s (%s, %d failed)", ep.Endpoint, ep.Breaker, ep.Failed)
			if ep.Breaker != "closed" {
				s = m.st(styleBad, s)
			}
			eps = append(eps, s)
		}
		line := fmt.Sprintf("%-28s %10s %12d %10s %8.0fs  %s", clip(e.Exporter, 28), fmtRate(m.rate(e.SentRecords, prev[e.Exporter].SentRecords)),
			e.SentRecords, fmtBytes(float64(e.LagBytes)), e.LagSeconds, strings.Join(eps, ", "))
		if i == m.Cursor && m.Tab == TabExporters && !m.plain {
			line = styleSel.Render(line)
		}
		fmt.Fprintln(b, line)
	}
}

// rules are the processing rules by effect: most dropped, then changed,
// then matched points first.
func (m *TopModel) rules() []stats.RuleRow {
	rs := slices.Clone(m.Cur.Rules)
	slices.SortStableFunc(rs, func(a, b stats.RuleRow) int {
		return cmp.Or(cmp.Compare(b.Effects["dropped"], a.Effects["dropped"]), cmp.Compare(b.Effects["changed"], a.Effects["changed"]),
			cmp.Compare(b.Effects["matched"], a.Effects["matched"]), strings.Compare(a.Rule, b.Rule))
	})
	return rs
}

func (m *TopModel) renderRules(b *strings.Builder) {
	effects := map[string]bool{}
	for _, r := range m.Cur.Rules {
		for k := range r.Effects {
			effects[k] = true
		}
	}
	cols := slices.Sorted(maps.Keys(effects))
	hdr := fmt.Sprintf("%-28s", "RULE")
	for _, c := range cols {
		hdr += fmt.Sprintf(" %12s", strings.ToUpper(c))
	}
	hdr += fmt.Sprintf(" %10s %10s", "DROPPED/S", "CHANGED/S")
	m.header(b, "%s", hdr)
	prev := m.prevRules()
	if len(m.Cur.Rules) == 0 {
		fmt.Fprintln(b, "no processing rules")
	}
	rs := m.rules()
	for i, r := range rs {
		line := fmt.Sprintf("%-28s", clip(r.Rule, 28))
		for _, c := range cols {
			line += fmt.Sprintf(" %12d", r.Effects[c])
		}
		p, seen := prev[r.Rule]
		line += fmt.Sprintf(" %10s %10s", m.rateIf(seen, r.Effects["dropped"], p.Effects["dropped"]),
			m.rateIf(seen, r.Effects["changed"], p.Effects["changed"]))
		if i == m.Cursor && m.Tab == TabRules && !m.plain {
			line = styleSel.Render(line)
		}
		fmt.Fprintln(b, line)
	}
	// The selected rule's top metrics (--once: every rule's).
	for i, r := range rs {
		if (m.plain || i == m.Cursor) && len(r.Metrics) > 0 {
			b.WriteString("\n")
			m.renderRuleMetrics(b, r, prev[r.Rule])
		}
	}
}

// renderRuleMetrics lists the (tenant, metric) rule r dropped or changed
// most points of, as the server ranked them.
func (m *TopModel) renderRuleMetrics(b *strings.Builder, r, prev stats.RuleRow) {
	m.header(b, "%-40s %-16s %12s %12s %12s %10s %10s", clip("METRICS OF "+r.Rule, 40), "TENANT", "DROPPED", "CHANGED", "OVER LIMIT", "DROPPED/S", "CHANGED/S")
	type key struct{ tenant, metric string }
	before := map[key]stats.RuleMetric{}
	for _, e := range prev.Metrics {
		before[key{e.Tenant, e.Metric}] = e
	}
	for _, e := range r.Metrics {
		// A (tenant, metric) not in the previous document's top list has
		// no rate: its count then is not known.
		p, seen := before[key{e.Tenant, e.Metric}]
		fmt.Fprintf(b, "  %-38s %-16s %12d %12d %12d %10s %10s\n", clip(e.Metric, 38), clip(e.Tenant, 16), e.Dropped, e.Changed, e.Exceeded,
			m.rateIf(seen, e.Dropped, p.Dropped), m.rateIf(seen, e.Changed, p.Changed))
	}
}

// prevRules is the previous document's rules by name (nil before two).
func (m *TopModel) prevRules() map[string]stats.RuleRow {
	if m.Prev == nil {
		return nil
	}
	out := make(map[string]stats.RuleRow, len(m.Prev.Rules))
	for _, r := range m.Prev.Rules {
		out[r.Rule] = r
	}
	return out
}

// rateIf is fmtRate of the counter's rate when the previous document had
// it (seen), "-" otherwise.
func (m *TopModel) rateIf(seen bool, cur, prev uint64) string {
	if !seen {
		return "-"
	}
	return fmtRate(m.rate(cur, prev))
}
