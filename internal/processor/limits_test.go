package processor

import (
	dto "github.com/prometheus/client_model/go"
	"testing"
	"time"
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
