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

// keptLabels processes one gauge point per user (valued 1, 2, 4, ...; ""
// is a point without user_id) at t0+at and returns the kept points' labels.
func keptLabels(t *testing.T, r *Rules, at time.Duration, us ...string) []string {
	t.Helper()
	var pts []inPoint
	v := 1.0
	for _, u := range us {
		attrs := map[string]string{"path": "/x"}
		if u != "" {
			attrs["user_id"] = u
		}
		pts = append(pts, inPoint{attrs, at, v})
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
	t.Run("relabel before", func(t *testing.T) {
		// One rewrite carries both: owner added, user_id stripped.
		r, _ := parseWith(t, "metrics:\n"+relabel+strings.Replace(stripLimit, "%s", "", 1))
		wantKept(t, keptLabels(t, r, 0, "u0", "u1", "u2", "u3"), lU0, lU1,
			strings.Replace(lPlain, "path", `owner="u2", path`, 1), strings.Replace(lPlain, "path", `owner="u3", path`, 1))
	})
	t.Run("second limit", func(t *testing.T) {
		// u2 and u3 stripped are one series, the one of a point that
		// came without user_id: with u0 and u1, three.
		r, _ := stripRules(t, false, "  - {name: l2, action: limit, per: metric, max_series: 3}\n")
		wantKept(t, keptLabels(t, r, 0, "u0", "u1", "", "u2", "u3"),
			strings.Replace(lU0, `owner="u0", `, "", 1), strings.Replace(lU1, `owner="u1", `, "", 1), lPlain, lPlain, lPlain)
		if d := counterValue(r.metrics[1].c.dropped); d != 0 {
			t.Fatalf("second limit dropped %v, want 0", d)
		}
		// u9, new to the strip limit, is stripped: the same third series.
		wantKept(t, keptLabels(t, r, time.Second, "u0", "u1", "", "u2", "u3", "u9"),
			strings.Replace(lU0, `owner="u0", `, "", 1), strings.Replace(lU1, `owner="u1", `, "", 1), lPlain, lPlain, lPlain, lPlain)
	})
}

// TestStrippedSeriesID: strippedSeriesID is signal's series id (nothing
// stripped), and with user_id stripped the id of the point that came
// without it.
func TestStrippedSeriesID(t *testing.T) {
	b := batch(t, 20, 20)
	var s Scratch
	for i := 0; i < b.Len(); i++ {
		s.seriesLabels(b, i)
		if got := strippedSeriesID(b, i, s.set, nil); got != b.SeriesID[i] {
			t.Fatalf("point %d: id %x, signal's %x", i, got, b.SeriesID[i])
		}
	}
	with := metricBatch(t, "req", "gauge", inPoint{map[string]string{"path": "/x", "user_id": "u1", "code": "200"}, 0, 1})
	without := metricBatch(t, "req", "gauge", inPoint{map[string]string{"path": "/x", "code": "200"}, 0, 1})
	s.seriesLabels(with, 0)
	if got := strippedSeriesID(with, 0, s.set, []string{"user_id"}); got != without.SeriesID[0] || got == with.SeriesID[0] {
		t.Fatalf("stripped id %x, want %x (not %x)", got, without.SeriesID[0], with.SeriesID[0])
	}
}

// TestStripLabelConcurrent: requests racing through a strip_label limit and
// a drop on the stripped label (run with -race): exactly the points of the
// two admitted values are dropped, every other point is kept without
// user_id.
func TestStripLabelConcurrent(t *testing.T) {
	r, _ := stripRules(t, false, "  - {name: d, action: drop, match: '{user_id=~\"u.*\"}'}\n")
	const workers, rounds = 4, 20
	us := []string{"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7"}
	errs := make(chan string, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for k := 0; k < rounds; k++ {
				for _, l := range keptLabels(t, r, 0, us...) {
					if l != lPlain {
						errs <- "kept " + l
						return
					}
				}
			}
			errs <- ""
		}()
	}
	for w := 0; w < workers; w++ {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
	if d := counterValue(r.metrics[1].c.dropped); d != 2*workers*rounds {
		t.Fatalf("dropped %v, want %d", d, 2*workers*rounds)
	}
	if ch := counterValue(r.metrics[0].c.changed); ch != 6*workers*rounds {
		t.Fatalf("stripped %v, want %d", ch, 6*workers*rounds)
	}
}

// TestStripLabelNested: two strip_label limits in a row; the second counts
// and strips the series the first left, and a drop after both matches only
// the series both stripped.
func TestStripLabelNested(t *testing.T) {
	r, _ := parseWith(t, "metrics:\n"+strings.Replace(stripLimit, "%s", "", 1)+
		"  - {name: sp, action: limit, per: label, label: path, max_values: 1, window: 1m, exceed_action: strip_label}\n"+
		"  - {name: d, action: drop, match: 'req{path=\"\", user_id=\"\"}'}\n")
	for round := range 3 {
		b := metricBatch(t, "req", "gauge",
			inPoint{map[string]string{"user_id": "u0", "path": "/a"}, 0, 1},
			inPoint{map[string]string{"user_id": "u1", "path": "/b"}, 0, 2},
			inPoint{map[string]string{"user_id": "u2", "path": "/c"}, 0, 4},
			inPoint{map[string]string{"user_id": "u3", "path": "/a"}, 0, 8})
		r.ProcessMetrics(b, &Scratch{Tenant: "t", Now: t0.Add(time.Duration(round) * time.Second)})
		var got []string
		for _, l := range labelsOf(b) {
			got = append(got, l.String())
		}
		wantKept(t, got,
			`{__name__="req", job="api", path="/a", service_name="api", user_id="u0"}`,
			`{__name__="req", job="api", service_name="api", user_id="u1"}`,
			`{__name__="req", job="api", path="/a", service_name="api"}`)
	}
	if d := counterValue(r.metrics[2].c.dropped); d != 3 {
		t.Fatalf("dropped %v, want 3 (u2, both stripped, each round)", d)
	}
}

// TestStrippedSeriesShareADecision: the series a strip folds into one share
// one cached decision (one more cache entry, not one per series), but for
// a relabel before the limit, when each keeps its own.
func TestStrippedSeriesShareADecision(t *testing.T) {
	entries := func(r *Rules) int {
		n := 0
		for i := range r.cache.shards {
			n += r.cache.shards[i].n
		}
		return n
	}
	var us []string
	for i := range 500 {
		us = append(us, "u"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("y", i/26))
	}
	r, _ := stripRules(t, false, "  - {name: d, action: drop, match: '{user_id=\"ua\"}'}\n")
	if got := keptLabels(t, r, 0, us...); len(got) != 499 {
		t.Fatalf("kept %d, want 499", len(got))
	}
	if n := entries(r); n != 501 {
		t.Fatalf("%d cache entries, want 501 (500 series and the stripped one)", n)
	}
	relabel := "  - name: rl\n    action: relabel\n    relabel: [{action: replace, source_labels: [user_id], regex: '(.+)', target_label: owner}]\n"
	r, _ = parseWith(t, "metrics:\n"+relabel+strings.Replace(stripLimit, "%s", "", 1))
	keptLabels(t, r, 0, us...)
	if n := entries(r); n != 998 {
		t.Fatalf("%d cache entries, want 998 (500 series and 498 stripped ones)", n)
	}
}
