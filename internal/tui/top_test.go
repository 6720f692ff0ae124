package tui

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluice-dev/sluice/internal/stats"
)

// statusAt is a fixed status document at unix time sec whose counters
// grew by k per second since time 0.
func statusAt(sec float64, k uint64) *stats.Status {
	n := uint64(sec) * k
	return &stats.Status{
		Time: sec,
		Receivers: []stats.ReceiverRow{
			{Receiver: "otlp/http", Signal: "metrics", Tenant: "acme", Requests: map[string]uint64{"accepted": n, "rejected_invalid": 2}},
		},
		Tenants: []stats.TenantRow{{Tenant: "acme", Signal: "metrics", Received: 10 * n, Accepted: 10 * n, QueuedBytes: 1000 * n}},
		Queue:   stats.QueueStatus{Bytes: 3 << 20, Records: 12, Segments: 1, LakeLagBytes: 2048, FreeDiskBytes: 10 << 30},
		Exporters: []stats.ExporterRow{{Exporter: "otlp/backup", SentRecords: n, LagBytes: 100, LagSeconds: 2,
			Endpoints: []stats.EndpointState{{Endpoint: "http://b:4318", Breaker: "open", Failed: 7}}}},
		Lake: stats.LakeStatus{Checkpoints: map[string]uint64{"interval": 4, "shutdown": 0}, LastCheckpoint: sec - 3, Segments: 4, SegmentBytes: 1 << 20},
		Rules: []stats.RuleRow{
			{Rule: "keep-all", Effects: map[string]uint64{"matched": 900, "dropped": 0, "changed": 0}},
			{Rule: "drop-debug", Effects: map[string]uint64{"matched": 50, "dropped": 50, "changed": 0},
				Metrics: []stats.RuleMetric{{Tenant: "acme", Metric: "debug_events_total", Dropped: 45}, {Tenant: "globex", Metric: "debug_events_total", Dropped: 5}}},
		},
		Stats: &stats.Summary{WindowSeconds: 300, TrackedSeries: 7, MaxSeries: 1000000,
			Tenants: []stats.TenantSummary{{Tenant: "acme", Series: 7, SamplesPerSec: 12.5, BytesPerSec: 2048}},
			Metrics: []stats.MetricSummary{
				{Tenant: "acme", Metric: "http_requests_total", Series: 5, SamplesPerSec: 2, BytesPerSec: 100, Samples: 10, Before: 25},
				{Tenant: "acme", Metric: "cpu_seconds", Series: 2, SamplesPerSec: 10.5, BytesPerSec: 1948, Samples: 50},
			},
			Labels: []stats.LabelSummary{{Tenant: "acme", Metric: "http_requests_total", Label: "user_id", Values: 5, Series: 5}},
		},
	}
}

func topModel(t *testing.T) *TopModel {
	t.Helper()
	m := NewTopModel(nil, "http://127.0.0.1:9090", 2*time.Second)
	m.Width, m.Height = 120, 30
	m.Observe(statusAt(1000, 3), nil)
	m.Observe(statusAt(1010, 3), nil)
	return m
}

func topPress(m *TopModel, keys ...string) tea.Cmd {
	var cmd tea.Cmd
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "tab":
			msg = tea.KeyPressMsg{Code: tea.KeyTab}
		case "shift+tab":
			msg = tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		case "up":
			msg = tea.KeyPressMsg{Code: tea.KeyUp}
		default:
			msg = tea.KeyPressMsg{Code: rune(k[0]), Text: k}
		}
		_, cmd = m.Update(msg)
	}
	return cmd
}

func TestTopRenderOverview(t *testing.T) {
	m := topModel(t)
	out := ansi.Strip(m.Render())
	for _, want := range []string{
		"sluice top  http://127.0.0.1:9090  every 2s",
		"queue 3.0MiB in 12 records, 1 segments  lake lag 2.0KiB",
		// 30 accepted requests in 10 s; 2 invalid ones.
		"otlp/http                metrics  acme                    3.0       3032          2",
		// 300 records and 30000 bytes in 10 s.
		"acme             metrics        30.0     2.9KiB        30300          0          0",
		"checkpoints 4 (interval 4, shutdown 0), last 3s ago, failures 0; 4 segments, 1.0MiB",
		"acme                      7         12.5     2.0KiB",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("overview lacks %q:\n%s", want, out)
		}
	}
	if out != ansi.Strip(m.Render()) {
		t.Error("rendering the same state twice differs")
	}
}

func TestTopKeys(t *testing.T) {
	m := topModel(t)
	topPress(m, "tab")
	if m.Tab != TabMetrics {
		t.Fatalf("tab: %v", m.Tab)
	}
	out := ansi.Strip(m.Render())
	if i, j := strings.Index(out, "http_requests_total"), strings.Index(out, "cpu_seconds"); i < 0 || j < i {
		t.Errorf("by series, http_requests_total (5) comes first:\n%s", out)
	}
	if !strings.Contains(out, "http_requests_total") || !strings.Contains(out, "10     40%") || !strings.Contains(out, "50       -") {
		t.Errorf("metrics tab lacks the kept share (10 of 25 samples; none without rules):\n%s", out)
	}
	if !strings.Contains(out, "acme             user_id") {
		t.Errorf("metrics tab lacks the label with the most values:\n%s", out)
	}
	topPress(m, "s")
	if m.Sort != SortSamples {
		t.Fatalf("sort %v", m.Sort)
	}
	out = ansi.Strip(m.Render())
	if i, j := strings.Index(out, "http_requests_total"), strings.Index(out, "cpu_seconds"); j < 0 || i < j || !strings.Contains(out, "sort: samples/s") {
		t.Errorf("by samples/s, cpu_seconds (10.5/s) comes first:\n%s", out)
	}
	topPress(m, "down", "down", "down")
	if m.Cursor != 1 {
		t.Errorf("cursor %d, want 1 (two rows)", m.Cursor)
	}
	topPress(m, "up")
	if m.Cursor != 0 {
		t.Errorf("cursor %d after up", m.Cursor)
	}
	topPress(m, "tab")
	out = ansi.Strip(m.Render())
	if m.Tab != TabExporters || !strings.Contains(out, "http://b:4318 (open, 7 failed)") || !strings.Contains(out, "otlp/backup") {
		t.Errorf("exporters tab %v:\n%s", m.Tab, out)
	}
	topPress(m, "tab")
	out = ansi.Strip(m.Render())
	// Rules by effect: the one that dropped comes first.
	if i, j := strings.Index(out, "drop-debug"), strings.Index(out, "keep-all"); m.Tab != TabRules || i < 0 || j < i {
		t.Errorf("rules tab:\n%s", out)
	}
	// The selected rule (drop-debug, first) shows its top metrics; the
	// next one (keep-all) has none.
	for _, want := range []string{"METRICS OF drop-debug", "TENANT", "  debug_events_total                     acme                       45            0",
		"  debug_events_total                     globex                      5            0"} {
		if !strings.Contains(out, want) {
			t.Errorf("rules tab lacks %q:\n%s", want, out)
		}
	}
	topPress(m, "down")
	if out = ansi.Strip(m.Render()); m.Cursor != 1 || strings.Contains(out, "METRICS OF") {
		t.Errorf("cursor %d on keep-all, which changed nothing:\n%s", m.Cursor, out)
	}
	if all := m.RenderAll(); !strings.Contains(all, "METRICS OF drop-debug") || !strings.Contains(all, "globex") {
		t.Errorf("--once lacks drop-debug's metrics:\n%s", all)
	}
	topPress(m, "tab")
	if m.Tab != TabOverview {
		t.Errorf("tab wraps to %v", m.Tab)
	}
	topPress(m, "shift+tab")
	if m.Tab != TabRules {
		t.Errorf("shift+tab: %v", m.Tab)
	}
	topPress(m, "2")
	if m.Tab != TabMetrics {
		t.Errorf("2: %v", m.Tab)
	}
	if cmd := topPress(m, "q"); cmd == nil {
		t.Error("q does not quit")
	} else if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Error("q's command is not quit")
	}
}

// The rules tab shows what each rule and each of its top metrics dropped
// and changed per second between the last two documents.
func TestTopRuleRates(t *testing.T) {
	doc := func(sec float64, dropped, changed, metricDropped uint64) *stats.Status {
		st := statusAt(sec, 1)
		st.Rules = []stats.RuleRow{{Rule: "strict/no-debug", Effects: map[string]uint64{"matched": dropped + changed, "dropped": dropped, "changed": changed},
			Metrics: []stats.RuleMetric{{Tenant: "acme", Metric: "debug_total", Dropped: metricDropped}}}}
		return st
	}
	m := NewTopModel(nil, "http://x", time.Second)
	m.Width, m.Height = 140, 30
	m.Tab = TabRules
	m.Observe(doc(1000, 100, 10, 80), nil)
	if out := ansi.Strip(m.Render()); !strings.Contains(out, "strict/no-debug                        10          100          110          -          -") {
		t.Errorf("one document: no rates yet:\n%s", out)
	}
	m.Observe(doc(1010, 600, 30, 480), nil)
	out := ansi.Strip(m.Render())
	for _, want := range []string{
		"strict/no-debug                        30          600          630       50.0        2.0", // (600-100)/10 s, (30-10)/10 s
		"  debug_total                            acme                      480            0            0       40.0          0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rules tab lacks %q:\n%s", want, out)
		}
	}
}

// Before two documents there are no rates; a failed fetch keeps the last
// document and shows the error.
func TestTopFirstDocumentAndErrors(t *testing.T) {
	m := NewTopModel(nil, "http://x", time.Second)
	if out := m.RenderAll(); !strings.Contains(out, "waiting for the first status") {
		t.Errorf("empty model:\n%s", out)
	}
	m.Observe(statusAt(1000, 3), nil)
	out := m.RenderAll()
	if !strings.Contains(out, "otlp/http                metrics  acme                      -") {
		t.Errorf("one document shows a rate:\n%s", out)
	}
	m.Observe(nil, errors.New("connection refused"))
	out = m.RenderAll()
	if !strings.Contains(out, "fetch failed: connection refused") || !strings.Contains(out, "http_requests_total") {
		t.Errorf("after a failed fetch:\n%s", out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("RenderAll has escape codes:\n%q", out)
	}
}

// The model polls: a document schedules a tick, a tick fetches.
func TestTopPolls(t *testing.T) {
	n := 0
	m := NewTopModel(func(context.Context) (*stats.Status, error) {
		n++
		return statusAt(float64(1000+n), 1), nil
	}, "http://x", time.Millisecond)
	msg := m.Init()()
	_, cmd := m.Update(msg)
	if m.Cur == nil || cmd == nil {
		t.Fatal("first document not taken or no tick scheduled")
	}
	_, cmd = m.Update(topTickMsg{})
	m.Update(cmd())
	if n != 2 || m.Prev == nil || m.Cur.Time != 1002 {
		t.Errorf("after a tick: %d fetches, cur %v", n, m.Cur.Time)
	}
}
