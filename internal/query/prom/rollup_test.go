package prom

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake/rollup"
)

// Range queries read gauges and counters from the coarsest fresh rollup
// tier that fits the step (each window's last value at its time), and
// everything else, and instant queries, from raw points.
func TestRollupTiers(t *testing.T) {
	l := newTestLake(t)
	s := defaultSynth()
	l.Write(t, "acme", 0, s.JSON())
	opts := rollup.Options{Tiers: []time.Duration{time.Minute, 5 * time.Minute, time.Hour}, Store: l.Store}
	jobs, err := rollup.Plan(context.Background(), l.Catalog, opts)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("plan: %v %v", jobs, err)
	}
	if _, err := rollup.Run(context.Background(), l.Catalog, l.Store, jobs[0], opts); err != nil {
		t.Fatal(err)
	}
	a, err := NewAdapter(Options{Catalog: l.Catalog, Store: l.Store, Rollups: true})
	if err != nil {
		t.Fatal(err)
	}
	q := a.Queryable("acme", Limits{})
	expr := `test_queue_depth{service_name="cart",http_route="/a"}`
	for _, c := range []struct {
		step time.Duration
		// The gauge of point i (every 15 s) is i. At an evaluation time
		// t on the tier's grid the newest window whose last point is at or
		// before t is [t-tier, t): its last point is t-15s, value i-1.
		perStep float64
	}{{time.Minute, 4}, {5 * time.Minute, 20}, {10 * time.Minute, 40}} {
		before := a.Stats.RollupFiles.Load()
		qry, err := newEngine().NewRangeQuery(context.Background(), q, nil, expr, s.Start.Add(c.step), s.Start.Add(50*time.Minute), c.step)
		if err != nil {
			t.Fatal(err)
		}
		m, err := qry.Exec(context.Background()).Matrix()
		if err != nil || len(m) != 1 {
			t.Fatalf("step %s: %v %v", c.step, m, err)
		}
		for k, p := range m[0].Floats {
			if want := float64(k+1)*c.perStep - 1; p.F != want {
				t.Fatalf("step %s point %d at %d: %v, want %v (last value of the window before)", c.step, k, p.T, p.F, want)
			}
		}
		if a.Stats.RollupFiles.Load() == before {
			t.Fatalf("step %s: no rollup file read", c.step)
		}
	}
	// Histograms still come from raw points in the same range query.
	qry, err := newEngine().NewRangeQuery(context.Background(), q, nil,
		`histogram_quantile(0.9, sum by (le) (rate(test_latency_seconds_bucket[5m])))`, s.Start.Add(10*time.Minute), s.Start.Add(50*time.Minute), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m, err := qry.Exec(context.Background()).Matrix()
	if err != nil || len(m) != 1 || len(m[0].Floats) != 9 || !near(m[0].Floats[0].F, 0.8) {
		t.Fatalf("histogram over a rolled-up hour: %v %v", m, err)
	}
	// A step finer than every tier, and instant queries, read raw points.
	before := a.Stats.RollupFiles.Load()
	qry, _ = newEngine().NewRangeQuery(context.Background(), q, nil, expr, s.Start.Add(time.Minute), s.Start.Add(2*time.Minute), 30*time.Second)
	m, err = qry.Exec(context.Background()).Matrix()
	if err != nil || len(m) != 1 || m[0].Floats[0].F != 4 {
		t.Fatalf("30s step: %v %v", m, err)
	}
	if v := instant(t, q, expr, s.Start.Add(10*time.Minute)); len(v) != 1 || v[0].F != 40 {
		t.Fatalf("instant: %v", v)
	}
	if a.Stats.RollupFiles.Load() != before {
		t.Fatal("a 30s step or an instant query read a rollup")
	}

	// Late data makes the hour's rollups stale: raw points again.
	late := defaultSynth()
	late.Services = []string{"late"}
	l.Write(t, "acme", 0, late.JSON())
	before = a.Stats.RollupFiles.Load()
	qry, _ = newEngine().NewRangeQuery(context.Background(), q, nil, expr, s.Start.Add(5*time.Minute), s.Start.Add(10*time.Minute), 5*time.Minute)
	m, err = qry.Exec(context.Background()).Matrix()
	if err != nil || len(m) != 1 || m[0].Floats[0].F != 20 {
		t.Fatalf("stale rollup: %v %v (want raw value 20)", m, err)
	}
	if a.Stats.RollupFiles.Load() != before {
		t.Fatal("a stale rollup was read")
	}
}
