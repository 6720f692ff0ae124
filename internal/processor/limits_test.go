package processor

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// keptUsers returns the user_id label of every point the rules keep of a
// batch of n points.
func keptUsers(t *testing.T, r *Rules, s *Scratch, n, users int) []string {
	t.Helper()
	b := batch(t, n, users)
	r.ProcessMetrics(b, s)
	var u []string
	for _, l := range labelsOf(b) {
		u = append(u, l.Get("user_id"))
	}
	return u
}

// TestLimitExactAtBoundaryAndAcrossWindows: with max_series 5 the 5th new
// series of a window passes and the 6th does not; admitted series keep
// flowing; a new window admits new series again; tenants count apart.
func TestLimitExactAtBoundaryAndAcrossWindows(t *testing.T) {
	r := mustParse(t, `
metrics:
  - {name: cap, action: limit, per: metric, max_series: 5, window: 1m, match: 'req_seconds'}
`)
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	s := &Scratch{Tenant: "a", Now: t0}
	// batch(n, users): point i has user u<i%users> and code 200+i%2, so
	// series = (user, code); with users=10 and n=10, 10 series.
	got := keptUsers(t, r, s, 10, 10)
	if want := []string{"u0", "u1", "u2", "u3", "u4"}; !equal(got, want) {
		t.Fatalf("first window kept %v, want %v", got, want)
	}
	s.Now = t0.Add(59 * time.Second)
	if got := keptUsers(t, r, s, 10, 10); !equal(got, []string{"u0", "u1", "u2", "u3", "u4"}) {
		t.Fatalf("same window kept %v: admitted series must keep flowing, new ones not", got)
	}
	other := &Scratch{Tenant: "b", Now: t0}
	if got := keptUsers(t, r, other, 10, 10); len(got) != 5 {
		t.Fatalf("tenant b kept %d, want its own 5", len(got))
	}
	// The next window (aligned to the clock) starts empty: series never
	// seen before pass first (u10..u14 of 20 users, points 10..14).
	s.Now = t0.Add(time.Minute)
	b := batch(t, 20, 20)
	b2 := batch(t, 20, 20)
	// Limits count series ids: give points 0..9 the ids of series 10..19
	// (never seen) so that new series come first.
	for i := 0; i < 10; i++ {
		b.SeriesID[i], b.SeriesID[i+10] = b2.SeriesID[i+10], b2.SeriesID[i]
	}
	if _, kept := r.ProcessMetrics(b, s); kept != 5 {
		t.Fatalf("new window kept %d, want 5", kept)
	}
	// 4 batches refused 5, 5, 5 and 15 series.
	if got := counterValue(r.metrics[0].c.dropped); got != 30 {
		t.Fatalf("dropped counter %v, want 30", got)
	}
}

func TestLimitShadowReportsOnly(t *testing.T) {
	r := mustParse(t, "metrics:\n  - {name: capsh, action: limit, per: tenant, max_series: 3, shadow: true}\n")
	s := &Scratch{Tenant: "a", Now: time.Unix(0, 0)}
	if got := keptUsers(t, r, s, 10, 10); len(got) != 10 {
		t.Fatalf("shadow limit kept %d, want all 10", len(got))
	}
	if got := counterValue(r.metrics[0].c.dropped); got != 7 {
		t.Fatalf("shadow limit reported %v, want 7 it would refuse", got)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func counterValue(c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// keptSeries processes a fresh batch of n points (users users) and returns
// the kept points' labels, each as user_id/code (user_id "-" when absent).
func keptSeries(t *testing.T, r *Rules, s *Scratch, n, users int) []string {
	t.Helper()
	b := batch(t, n, users)
	r.ProcessMetrics(b, s)
	var out []string
	for _, l := range labelsOf(b) {
		u := l.Get("user_id")
		if u == "" {
			u = "-"
		}
		out = append(out, u+"/"+l.Get("code"))
	}
	return out
}

// TestLimitPerLabelExactAtBoundaryAndAcrossWindows: max_values 3 admits the
// first 3 distinct user_id values of the metric in a window, with every
// series (point) carrying them, and refuses the 4th value; a new window
// admits new values.
func TestLimitPerLabelExactAtBoundaryAndAcrossWindows(t *testing.T) {
	r := mustParse(t, `
metrics:
  - {name: users, action: limit, per: label, label: user_id, max_values: 3, window: 1m}
`)
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	s := &Scratch{Tenant: "a", Now: t0}
	// 20 points of users u0..u9: point i has user u<i%10>, code 200+i%2;
	// so u0..u2 appear twice (points 0..2 and 10..12).
	got := keptSeries(t, r, s, 20, 10)
	want := []string{"u0/200", "u1/201", "u2/200", "u0/200", "u1/201", "u2/200"}
	if !equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	if got := counterValue(r.metrics[0].c.exceeded); got != 14 {
		t.Fatalf("exceeded counter %v, want 14", got)
	}
	// Still the same window: the 3 admitted values keep flowing, no 4th.
	s.Now = t0.Add(59*time.Second + 999*time.Millisecond)
	if got := keptSeries(t, r, s, 20, 20); !equal(got, []string{"u0/200", "u1/201", "u2/200"}) {
		t.Fatalf("same window kept %v", got)
	}
	// Next window: starts empty, the first 3 values seen pass (u5..u7 come
	// first here: 8 users from u5).
	s.Now = t0.Add(time.Minute)
	b := batch(t, 8, 8)
	b2 := batch(t, 8, 8)
	for i := range 8 {
		b.SeriesID[i] = b2.SeriesID[(i+5)%8]
	}
	if _, kept := r.ProcessMetrics(b, s); kept != 3 {
		t.Fatalf("new window kept %d, want 3", kept)
	}
	// The old window's groups are freed.
	if n := len(r.metrics[0].lim.groups); n != 1 {
		t.Fatalf("%d groups after the window turned, want 1", n)
	}
}

func TestLimitExceedActions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	t.Run("strip_label", func(t *testing.T) {
		r := mustParse(t, "metrics:\n  - {name: st, action: limit, per: label, label: user_id, max_values: 2, exceed_action: strip_label}\n")
		got := keptSeries(t, r, &Scratch{Tenant: "a", Now: t0}, 6, 6)
		want := []string{"u0/200", "u1/201", "-/200", "-/201", "-/200", "-/201"}
		if !equal(got, want) {
			t.Fatalf("kept %v, want %v", got, want)
		}
		if c := counterValue(r.metrics[0].c.changed); c != 4 {
			t.Fatalf("changed counter %v, want 4", c)
		}
	})
	t.Run("sample", func(t *testing.T) {
		r := mustParse(t, "metrics:\n  - {name: sa, action: limit, per: metric, max_series: 10, exceed_action: sample, one_in: 4}\n")
		b := batch(t, 400, 400)
		orig := labelsOf(b)
		// The first 10 series pass; of the rest, those whose labels hash to
		// 0 modulo 4 (the same choice as action sample's one_in).
		var want []string
		for i, l := range orig {
			if i < 10 || mix(l.Hash())%4 == 0 {
				want = append(want, l.Get("user_id"))
			}
		}
		r.ProcessMetrics(b, &Scratch{Tenant: "a", Now: t0})
		var got []string
		for _, l := range labelsOf(b) {
			got = append(got, l.Get("user_id"))
		}
		if !equal(got, want) || len(want) < 60 || len(want) > 140 {
			t.Fatalf("kept %d series %v, want %d %v", len(got), got, len(want), want)
		}
		if c := counterValue(r.metrics[0].c.dropped); c != float64(400-len(want)) {
			t.Fatalf("dropped %v, want %d", c, 400-len(want))
		}
	})
	t.Run("report", func(t *testing.T) {
		r := mustParse(t, "metrics:\n  - {name: re, action: limit, per: tenant, max_series: 4, exceed_action: report}\n")
		if got := keptSeries(t, r, &Scratch{Tenant: "a", Now: t0}, 10, 10); len(got) != 10 {
			t.Fatalf("report kept %d, want 10", len(got))
		}
		if ex, dr := counterValue(r.metrics[0].c.exceeded), counterValue(r.metrics[0].c.dropped); ex != 6 || dr != 0 {
			t.Fatalf("exceeded %v dropped %v, want 6 and 0", ex, dr)
		}
	})
}

// TestLimitMaxGroups: the series of a group beyond max_groups count as
// over the limit.
func TestLimitMaxGroups(t *testing.T) {
	r := mustParse(t, "metrics:\n  - {name: g, action: limit, per: metric, max_series: 100, max_groups: 1}\n")
	js := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[` +
		`{"name":"a","gauge":{"dataPoints":[{"timeUnixNano":"1","asDouble":1}]}},` +
		`{"name":"b","gauge":{"dataPoints":[{"timeUnixNano":"1","asDouble":1}]}},` +
		`{"name":"a","gauge":{"dataPoints":[{"timeUnixNano":"2","asDouble":1,"attributes":[{"key":"k","value":{"stringValue":"v"}}]}]}}]}]}]}`
	var b signal.Metrics
	if err := otlp.DecodeMetricsJSON(&b, []byte(js)); err != nil {
		t.Fatal(err)
	}
	if _, kept := r.ProcessMetrics(&b, &Scratch{Now: time.Unix(1, 0)}); kept != 2 {
		t.Fatalf("kept %d, want 2 (metric a's two series; b is a second group)", kept)
	}
	if got := labelsOf(&b); got[0].Get("__name__") != "a" || got[1].Get("__name__") != "a" {
		t.Fatalf("kept %v", got)
	}
}

func TestRequireLabels(t *testing.T) {
	r := mustParse(t, `
metrics:
  - {name: need-user, action: require, labels: [user_id, code]}
  - {name: need-team, action: require, labels: [team], match: '{code="201"}'}
`)
	got := keptSeries(t, r, &Scratch{}, 6, 6)
	if want := []string{"u0/200", "u2/200", "u4/200"}; !equal(got, want) {
		t.Fatalf("kept %v, want %v (code 201 series lack team)", got, want)
	}
	if c := counterValue(r.metrics[1].c.dropped); c != 3 {
		t.Fatalf("need-team dropped %v, want 3", c)
	}
	sh := mustParse(t, "metrics:\n  - {name: rep, action: require, labels: [team], shadow: true}\n")
	if got := keptSeries(t, sh, &Scratch{}, 6, 6); len(got) != 6 {
		t.Fatalf("a shadow require kept %d, want 6", len(got))
	}
	if c := counterValue(sh.metrics[0].c.dropped); c != 6 {
		t.Fatalf("shadow require reported %v, want 6", c)
	}
}

func TestLimitConfigErrors(t *testing.T) {
	for y, want := range map[string]string{
		"{name: x, action: limit, per: label, max_values: 3}":                                    "needs label",
		"{name: x, action: limit, per: label, label: u, max_series: 3}":                          "set max_values",
		"{name: x, action: limit, per: metric, max_series: 3, exceed_action: strip_label}":       "needs label",
		"{name: x, action: limit, per: metric, max_series: 3, exceed_action: sample}":            "one_in >= 2",
		"{name: x, action: limit, per: metric, max_series: 3, exceed_action: drop}":              "want refuse",
		"{name: x, action: limit, per: metric, max_series: 3, label: u}":                         "label is for per label",
		"{name: x, action: require}":                                                             "needs labels",
		"{name: x, action: drop, labels: [a]}":                                                   "only for action require",
		"{name: x, action: drop, max_groups: 3}":                                                 "only for actions limit, aggregate",
		"{name: x, action: limit, per: metric, max_series: 3, max_groups: -1}":                   "negative",
		"{name: x, action: limit, per: label, label: __name__, max_values: 3}":                   "not a label name",
		"{name: x, action: limit, per: metric, max_series: 3, exceed_action: sample, one_in: 1}": "one_in >= 2",
		"{name: x, action: limit, per: tenant, max_series: 3, max_values: 3}":                    "max_values is for per label",
		"{name: x, action: sample, one_in: 2, exceed_action: sample}":                            "only for action limit",
	} {
		_, err := Parse([]byte("metrics:\n  - "+y+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", y, err, want)
		}
	}
}

// TestRefusedCountsWhatTheSenderIsTold: Scratch.Refused counts the points
// a limit (refuse, or sample and not sampled) or a require rule refused in
// the last call, and names the first such rule; drop rules, shadow rules,
// strip_label and report limits refuse nothing.
func TestRefusedCountsWhatTheSenderIsTold(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		rules   string
		refused int
		by      string
	}{
		{"{name: cap, action: limit, per: metric, max_series: 4}", 6, "cap"},
		{"{name: need, action: require, labels: [team]}", 10, "need"},
		{"{name: cap, action: limit, per: metric, max_series: 4, shadow: true}", 0, ""},
		{"{name: st, action: limit, per: label, label: user_id, max_values: 2, exceed_action: strip_label}", 0, ""},
		{"{name: re, action: limit, per: tenant, max_series: 4, exceed_action: report}", 0, ""},
		{"{name: dr, action: drop, match: '{user_id=\"u1\"}'}", 0, ""},
	} {
		r := mustParse(t, "metrics:\n  - {name: dr0, action: drop, match: '{user_id=\"u9\"}'}\n  - "+c.rules+"\n")
		s := &Scratch{Tenant: "a", Now: t0}
		b := batch(t, 11, 11) // u0..u10; u9 dropped before
		r.ProcessMetrics(b, s)
		if s.Refused != c.refused || s.RefusedBy != c.by {
			t.Errorf("%s: refused %d by %q, want %d by %q", c.rules, s.Refused, s.RefusedBy, c.refused, c.by)
		}
		// The next call starts from zero: its series are admitted now.
		r.ProcessMetrics(batch(t, 1, 1), s)
		if c.by == "cap" && s.Refused != 0 {
			t.Errorf("%s: second call refused %d, want 0", c.rules, s.Refused)
		}
	}
}
