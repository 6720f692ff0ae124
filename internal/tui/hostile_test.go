package tui

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/stats"
)

// TestTopHostileStrings: metric names, tenants, labels, rules, exporters
// and error messages come from senders and from the remote process. Any
// control character in them (a terminal escape that would retitle the
// window, clear the screen or hide text) is shown escaped, never sent to
// the terminal; long UTF-8 names are clipped whole runes at a time; a tiny
// terminal renders without a panic.
func TestTopHostileStrings(t *testing.T) {
	const evil = "m\x1b]0;pwned\x07\x1b[2J\x9b31m\r\x00\xff"
	long := strings.Repeat("ü", 80)
	st := statusAt(1000, 3)
	st.Stats.Metrics = append(st.Stats.Metrics, stats.MetricSummary{Tenant: evil, Metric: evil, Series: 9},
		stats.MetricSummary{Tenant: long, Metric: long, Series: 8})
	st.Stats.Labels = append(st.Stats.Labels, stats.LabelSummary{Tenant: evil, Metric: evil, Label: evil, Values: 9})
	st.Stats.Tenants = append(st.Stats.Tenants, stats.TenantSummary{Tenant: evil})
	st.Rules = append(st.Rules, stats.RuleRow{Rule: evil, Effects: map[string]uint64{"dropped": 5},
		Metrics: []stats.RuleMetric{{Tenant: evil, Metric: evil, Dropped: 5}}})
	st.Exporters = append(st.Exporters, stats.ExporterRow{Exporter: evil, Endpoints: []stats.EndpointState{{Endpoint: evil, Breaker: evil}}})
	st.Receivers = append(st.Receivers, stats.ReceiverRow{Receiver: evil, Signal: evil, Tenant: evil})
	st.Tenants = append(st.Tenants, stats.TenantRow{Tenant: evil, Signal: evil})
	st.Lake.Checkpoints[evil] = 1
	for _, size := range [][2]int{{120, 40}, {10, 3}, {0, 0}} {
		m := NewTopModel(nil, "http://h:9090/"+evil, 0)
		m.Width, m.Height = size[0], size[1]
		m.Observe(st, nil)
		outs := []string{m.RenderAll()}
		for range numTopTabs {
			outs = append(outs, m.Render())
			topPress(m, "tab")
		}
		m.Observe(nil, errors.New("GET x: 502 Bad Gateway: "+evil))
		outs = append(outs, m.RenderAll())
		for i, out := range outs {
			for _, bad := range []string{"\x1b]", "\x1b[2J", "\x07", "\x9b", "\r", "\x00"} {
				if strings.Contains(out, bad) {
					t.Fatalf("%v: rendering %d sends %q to the terminal:\n%q", size, i, bad, out)
				}
			}
			if !utf8.ValidString(out) {
				t.Fatalf("%v: rendering %d is not valid UTF-8", size, i)
			}
		}
		if !strings.Contains(outs[0], `m\x1b]0;pwned\x07`) {
			t.Fatalf("%v: the evil name is not shown escaped:\n%s", size, outs[0])
		}
	}
	if got := clip(long, 5); got != "…üüüü" {
		t.Errorf("clip by runes: %q", got)
	}
	if got := clip("abc", 0); got != "" {
		t.Errorf("clip to 0: %q", got)
	}
}
