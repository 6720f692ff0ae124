package processor

import (
	"strings"
	"testing"
	"time"
)

// stripLimit is a strip_label limit on user_id admitting 2 values a minute.
const stripLimit = "  - {name: st, action: limit, per: label, label: user_id, max_values: 2, window: 1m, exceed_action: strip_label%s}\n"

func stripRules(t *testing.T, shadow bool, after string) (*Rules, *Metrics) {
	t.Helper()
	sh := ""
	if shadow {
		sh = ", shadow: true"
	}
	return parseWith(t, "metrics:\n"+strings.Replace(stripLimit, "%s", sh, 1)+after)
}

// keptLabels processes one gauge point per user (valued 1, 2, 4, ...) at
// t0+at and returns the kept points' labels.
func keptLabels(t *testing.T, r *Rules, at time.Duration, us ...string) []string {
	t.Helper()
	var pts []inPoint
	v := 1.0
	for _, u := range us {
		pts = append(pts, inPoint{map[string]string{"user_id": u, "path": "/x"}, at, v})
		v *= 2
	}
	b := metricBatch(t, "req", "gauge", pts...)
	r.ProcessMetrics(b, &Scratch{Tenant: "t", Now: t0.Add(at)})
	var out []string
	for _, l := range labelsOf(b) {
		out = append(out, l.String())
	}
	return out
}

func wantKept(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("kept:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const (
	lU0     = `{__name__="req", job="api", owner="u0", path="/x", service_name="api", user_id="u0"}`
	lU1     = `{__name__="req", job="api", owner="u1", path="/x", service_name="api", user_id="u1"}`
	lPlain  = `{__name__="req", job="api", path="/x", service_name="api"}`
	lU2Orig = `{__name__="req", job="api", path="/x", service_name="api", user_id="u2"}`
	lU3Orig = `{__name__="req", job="api", path="/x", service_name="api", user_id="u3"}`
)

// TestStripLabelActsAtItsPosition: the rules after a strip_label limit see
// the series without the label once the limit strips it, and with it
// before; a shadow limit reports and strips nothing.
func TestStripLabelActsAtItsPosition(t *testing.T) {
	t.Run("drop", func(t *testing.T) {
		r, _ := stripRules(t, false, "  - {name: d, action: drop, match: '{user_id=~\"u.*\"}'}\n")
		// u0 and u1 are admitted and dropped; u2 and u3 lose user_id,
		// so the drop no longer matches them.
		wantKept(t, keptLabels(t, r, 0, "u0", "u1", "u2", "u3"), lPlain, lPlain)
		if d, ch := counterValue(r.metrics[1].c.dropped), counterValue(r.metrics[0].c.changed); d != 2 || ch != 2 {
			t.Fatalf("drop dropped %v, limit changed %v; want 2 and 2", d, ch)
		}
		// Cached decisions: the same again in the same window.
		wantKept(t, keptLabels(t, r, time.Second, "u0", "u1", "u2", "u3"), lPlain, lPlain)
		// A new window: u2 and u3 come first and are admitted (dropped);
		// u0 and u1, cached as dropped, are now stripped and kept.
		wantKept(t, keptLabels(t, r, time.Minute, "u2", "u3", "u0", "u1"), lPlain, lPlain)
		if d := counterValue(r.metrics[1].c.dropped); d != 6 {
			t.Fatalf("drop dropped %v, want 6", d)
		}
	})
	t.Run("drop/shadow", func(t *testing.T) {
		r, _ := stripRules(t, true, "  - {name: d, action: drop, match: '{user_id=~\"u.*\"}'}\n")
		wantKept(t, keptLabels(t, r, 0, "u0", "u1", "u2", "u3"))
		if ex, ch := counterValue(r.metrics[0].c.exceeded), counterValue(r.metrics[0].c.changed); ex != 2 || ch != 2 {
			t.Fatalf("shadow limit exceeded %v changed %v, want 2 and 2 (reported)", ex, ch)
		}
		if d := counterValue(r.metrics[1].c.dropped); d != 4 {
			t.Fatalf("drop dropped %v, want 4 (nothing stripped)", d)
		}
	})
	relabel := "  - name: rl\n    action: relabel\n    relabel: [{action: replace, source_labels: [user_id], regex: '(.+)', target_label: owner}]\n"
	t.Run("relabel", func(t *testing.T) {
		r, _ := stripRules(t, false, relabel)
		// The relabel copies user_id to owner only where it is left.
		wantKept(t, keptLabels(t, r, 0, "u0", "u1", "u2", "u3"), lU0, lU1, lPlain, lPlain)
		wantKept(t, keptLabels(t, r, time.Second, "u0", "u1", "u2", "u3"), lU0, lU1, lPlain, lPlain)
		if ch := counterValue(r.metrics[1].c.changed); ch != 4 {
			t.Fatalf("relabel changed %v, want 4", ch)
		}
	})
	t.Run("relabel/shadow", func(t *testing.T) {
		r, _ := stripRules(t, true, relabel)
		got := keptLabels(t, r, 0, "u0", "u1", "u2", "u3")
		wantKept(t, got, lU0, lU1, strings.Replace(lU2Orig, "path", `owner="u2", path`, 1), strings.Replace(lU3Orig, "path", `owner="u3", path`, 1))
	})
	agg := "  - {name: ag, action: aggregate, match: req, interval: 1m, flush_delay: 0s, by: [user_id], outputs: [sum]}\n"
	t.Run("aggregate", func(t *testing.T) {
		r, m := stripRules(t, false, agg)
		wantKept(t, keptLabels(t, r, 0, "u0", "u1", "u2", "u3"))
		// The stripped u2 (4) and u3 (8) fold into the group without user_id.
		wantLines(t, flushed(t, m, time.Minute),
			`t {__name__="req:1m_by_user_id_sum", user_id="u0"} @60s = 1`,
			`t {__name__="req:1m_by_user_id_sum", user_id="u1"} @60s = 2`,
			`t {__name__="req:1m_by_user_id_sum"} @60s = 12`)
	})
	t.Run("aggregate/shadow", func(t *testing.T) {
		r, m := stripRules(t, true, agg)
		keptLabels(t, r, 0, "u0", "u1", "u2", "u3")
		wantLines(t, flushed(t, m, time.Minute),
			`t {__name__="req:1m_by_user_id_sum", user_id="u0"} @60s = 1`,
			`t {__name__="req:1m_by_user_id_sum", user_id="u1"} @60s = 2`,
			`t {__name__="req:1m_by_user_id_sum", user_id="u2"} @60s = 4`,
			`t {__name__="req:1m_by_user_id_sum", user_id="u3"} @60s = 8`)
	})
	t.Run("second limit", func(t *testing.T) {
		// u2 and u3 stripped are one series: with u0 and u1, three.
		r, _ := stripRules(t, false, "  - {name: l2, action: limit, per: metric, max_series: 3}\n")
		wantKept(t, keptLabels(t, r, 0, "u0", "u1", "u2", "u3"),
			strings.Replace(lU0, `owner="u0", `, "", 1), strings.Replace(lU1, `owner="u1", `, "", 1), lPlain, lPlain)
		if d := counterValue(r.metrics[1].c.dropped); d != 0 {
			t.Fatalf("second limit dropped %v, want 0", d)
		}
	})
}
