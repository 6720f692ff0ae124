package prom

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/storage"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/rollup"
	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
)

func rollUp(t *testing.T, l *promtest.Lake) {
	t.Helper()
	opts := rollup.Options{Tiers: []time.Duration{time.Minute, 5 * time.Minute, time.Hour}, Store: l.Store}
	jobs, err := rollup.Plan(context.Background(), l.Catalog, opts)
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %v %v", jobs, err)
	}
	for _, j := range jobs {
		if _, err := rollup.Run(context.Background(), l.Catalog, l.Store, j, opts); err != nil {
			t.Fatal(err)
		}
	}
}

func instantMatrix(q storage.Queryable, expr string, ts time.Time) (string, error) {
	qry, err := newEngine().NewInstantQuery(context.Background(), q, nil, expr, ts)
	if err != nil {
		return "", err
	}
	defer qry.Close()
	res := qry.Exec(WithStatement(context.Background(), qry.Statement()))
	if res.Err != nil {
		return "", res.Err
	}
	return res.Value.String(), nil
}

// Which queries the rollups serve, and that each gives the raw answer.
// Points are every 15 s at 7.5 s past (none on a window start), as an
// exporter's are; the hour is rolled up into 1m, 5m and 1h tiers.
func TestRollupUse(t *testing.T) {
	l := newTestLake(t)
	s := defaultSynth()
	s.Start = synthStart.Add(7500 * time.Millisecond)
	s.Vary = true
	l.Write(t, "acme", 0, s.JSON())
	rollUp(t, l)
	on, err := NewAdapter(Options{Catalog: l.Catalog, Store: l.Store, Rollups: true})
	if err != nil {
		t.Fatal(err)
	}
	qOn, qOff := on.Queryable("acme", Limits{}), adapterOf(t, l).Queryable("acme", Limits{})
	at := func(m int) time.Time { return synthStart.Add(time.Duration(m) * time.Minute) }
	for _, c := range []struct {
		expr     string
		from, to time.Time
		step     time.Duration
		tol      float64
		used     bool
	}{
		{`test_queue_depth`, at(5), at(50), time.Minute, 0, true},
		{`sum by (service_name) (test_queue_depth)`, at(5), at(55), 5 * time.Minute, 1e-9, true},
		{`max_over_time(test_queue_depth[5m])`, at(5), at(55), 5 * time.Minute, 0, true},
		{`min_over_time(test_queue_depth[10m])`, at(10), at(60), 10 * time.Minute, 0, true},
		{`avg_over_time(test_queue_depth[10m])`, at(10), at(60), 5 * time.Minute, 1e-9, true},
		{`sum_over_time(test_queue_depth[1m])`, at(1), at(59), time.Minute, 1e-9, true},
		{`last_over_time(test_queue_depth[1h])`, at(60), at(60), time.Hour, 0, true},
		{`rate(test_requests_total[5m])`, at(5), at(59), time.Minute, 1e-9, true},
		{`rate(test_requests_total[1m])`, at(1), at(59), time.Minute, 1e-9, true}, // issue 11: was empty
		{`increase(test_requests_total[3m])`, at(3), at(59), time.Minute, 1e-9, true},
		{`sum(increase(test_requests_total[10m]))`, at(10), at(60), 10 * time.Minute, 1e-9, true},
		{`increase(test_requests_total[1h])`, at(60), at(60), 0, 1e-9, true}, // instant: the 1h tier
		{`max_over_time(test_queue_depth[5m] offset 5m)`, at(10), at(60), 5 * time.Minute, 0, true},
		// Not served: functions that need every point, steps finer than
		// every tier, evaluation times off the tiers' grid, subqueries,
		// histograms, counter functions over gauges.
		{`irate(test_requests_total[5m])`, at(5), at(59), time.Minute, 0, false},
		{`count_over_time(test_queue_depth[5m])`, at(5), at(59), time.Minute, 0, false},
		{`rate(test_requests_total[5m])`, at(5), at(59), 30 * time.Second, 1e-9, false},
		{`test_queue_depth`, at(5).Add(30 * time.Second), at(50), time.Minute, 0, false},
		{`max_over_time(test_queue_depth[90s])`, at(5), at(50), 3 * time.Minute, 0, false},
		{`max_over_time(rate(test_requests_total[5m])[30m:1m])`, at(40), at(60), 5 * time.Minute, 1e-9, false},
		{`histogram_quantile(0.9, sum by (le) (rate(test_latency_seconds_bucket[5m])))`, at(10), at(50), 5 * time.Minute, 1e-9, false},
		{`rate(test_queue_depth[5m])`, at(5), at(59), time.Minute, 1e-9, false},
	} {
		before, files := on.Stats.RollupSelects.Load(), on.Stats.RollupFiles.Load()
		if c.step == 0 {
			want, err := instantMatrix(qOff, c.expr, c.to)
			if err != nil {
				t.Fatalf("%s: %v", c.expr, err)
			}
			got, err := instantMatrix(qOn, c.expr, c.to)
			if err != nil || got != want || want == "" {
				t.Fatalf("%s: with rollups %v\n%s\nraw\n%s", c.expr, err, got, want)
			}
		} else {
			want, err := runRange(qOff, c.expr, c.from, c.to, c.step)
			if err != nil {
				t.Fatalf("%s: %v", c.expr, err)
			}
			got, err := runRange(qOn, c.expr, c.from, c.to, c.step)
			if err != nil {
				t.Fatalf("%s with rollups: %v", c.expr, err)
			}
			if len(want) == 0 {
				t.Fatalf("%s: no answer", c.expr)
			}
			compareMatrices(t, c.expr, want, got, c.tol)
		}
		used := on.Stats.RollupSelects.Load() > before
		if used != c.used || used && on.Stats.RollupFiles.Load() == files {
			t.Errorf("%s step %s: rollups used %v, want %v", c.expr, c.step, used, c.used)
		}
	}

	// Without the statement (WithStatement) the adapter cannot tell a
	// subquery's evaluation times: raw points.
	before := on.Stats.RollupSelects.Load()
	qry, _ := newEngine().NewRangeQuery(context.Background(), qOn, nil, `test_queue_depth`, at(5), at(50), time.Minute)
	if res := qry.Exec(context.Background()); res.Err != nil || on.Stats.RollupSelects.Load() != before {
		t.Fatalf("a query without its statement read rollups (%v)", res.Err)
	}

	// Late data makes the hour's rollups stale: raw points again.
	late := defaultSynth()
	late.Services = []string{"late"}
	late.Start = s.Start
	l.Write(t, "acme", 0, late.JSON())
	before = on.Stats.RollupSelects.Load()
	w, err := runRange(qOff, `max_over_time(test_queue_depth[5m])`, at(5), at(55), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	g, err := runRange(qOn, `max_over_time(test_queue_depth[5m])`, at(5), at(55), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	compareMatrices(t, "stale hour", w, g, 0)
	if on.Stats.RollupSelects.Load() != before {
		t.Fatal("a stale rollup was read")
	}
}

// Points on window starts (every 15 s from the hour, as an exporter on
// whole seconds sends them) cannot be told apart from the window before
// by a rollup: those series are read again from raw points, the others
// stay on the rollup, and the answer is the raw one.
func TestRollupFallback(t *testing.T) {
	l := newTestLake(t)
	aligned := defaultSynth()
	aligned.Services = []string{"aligned"}
	l.Write(t, "acme", 0, aligned.JSON())
	jittered := defaultSynth()
	jittered.Start = synthStart.Add(7500 * time.Millisecond)
	l.Write(t, "acme", 0, jittered.JSON())
	rollUp(t, l)
	on, err := NewAdapter(Options{Catalog: l.Catalog, Store: l.Store, Rollups: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, expr := range []string{`test_queue_depth`, `max_over_time(test_queue_depth[5m])`, `rate(test_requests_total[5m])`} {
		want, err := runRange(adapterOf(t, l).Queryable("acme", Limits{}), expr, synthStart.Add(5*time.Minute), synthStart.Add(55*time.Minute), 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		sel, raw := on.Stats.RollupSelects.Load(), on.Stats.RollupSeriesRaw.Load()
		got, err := runRange(on.Queryable("acme", Limits{}), expr, synthStart.Add(5*time.Minute), synthStart.Add(55*time.Minute), 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		compareMatrices(t, expr, want, got, 0)
		// 6 series: the aligned service's 2 routes from raw points.
		if len(want) != 6 || on.Stats.RollupSelects.Load() != sel+1 || on.Stats.RollupSeriesRaw.Load() != raw+2 {
			t.Fatalf("%s: %d series, rollup selects +%d, series from raw points +%d; want 6, +1, +2", expr, len(want),
				on.Stats.RollupSelects.Load()-sel, on.Stats.RollupSeriesRaw.Load()-raw)
		}
	}
}

// tailWith is a lake.TailSource listing the catalog's raw segments plus
// extra (files under lake.TailPrefix).
type tailWith struct {
	cat   *catalog.Catalog
	extra []catalog.Segment
}

func (tw *tailWith) List(ctx context.Context, f catalog.Filter) ([]catalog.Segment, func(), error) {
	segs, err := tw.cat.List(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range tw.extra {
		if s.Tenant == f.Tenant && s.MaxTime >= f.From && s.MinTime <= f.To {
			segs = append(segs, s)
		}
	}
	return segs, func() {}, nil
}

// An hour with rows in the unflushed tail reads raw points, even when the
// row counts say its rollup is fresh: the rollup cannot hold them.
func TestRollupTailHourReadsRaw(t *testing.T) {
	l := newTestLake(t)
	s := defaultSynth()
	s.Start = synthStart.Add(7500 * time.Millisecond)
	l.Write(t, "acme", 0, s.JSON())
	rollUp(t, l)

	// A tail file: a late gauge point written to another lake, placed
	// under _tail/ in this one and listed with no rows, so that only its
	// path tells it apart.
	other := newTestLake(t)
	ts := synthStart.Add(12*time.Minute + 3*time.Second).UnixNano()
	other.Write(t, "acme", 0, []byte(fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[%s]},"scopeMetrics":[{"metrics":[`+
		`{"name":"test.queue.depth","gauge":{"dataPoints":[{"attributes":[%s],"timeUnixNano":"%d","asInt":"1000"}]}}]}]}]}`,
		attr("service.name", "cart"), attr("http.route", "/a"), ts)))
	segs, err := other.Catalog.List(context.Background(), catalog.Filter{Table: "metrics"})
	if err != nil || len(segs) != 1 {
		t.Fatal(segs, err)
	}
	seg := segs[0]
	b, err := os.ReadFile(filepath.Join(other.Root, seg.Path))
	if err != nil {
		t.Fatal(err)
	}
	seg.Path = lake.TailPrefix + "late.parquet"
	seg.Rows = 0
	if err := os.MkdirAll(filepath.Join(l.Root, lake.TailPrefix), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.Root, seg.Path), b, 0o644); err != nil {
		t.Fatal(err)
	}
	tail := &tailWith{cat: l.Catalog, extra: []catalog.Segment{seg}}
	on, err := NewAdapter(Options{Catalog: l.Catalog, Store: l.Store, Rollups: true, Tail: tail})
	if err != nil {
		t.Fatal(err)
	}
	off, err := NewAdapter(Options{Catalog: l.Catalog, Store: l.Store, Tail: tail})
	if err != nil {
		t.Fatal(err)
	}
	expr := `max_over_time(test_queue_depth{service_name="cart",http_route="/a"}[5m])`
	want, err := runRange(off.Queryable("acme", Limits{}), expr, synthStart.Add(5*time.Minute), synthStart.Add(55*time.Minute), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runRange(on.Queryable("acme", Limits{}), expr, synthStart.Add(5*time.Minute), synthStart.Add(55*time.Minute), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	compareMatrices(t, expr, want, got, 0)
	if len(want) != 1 || want[0].Floats[2].F != 1000 || on.Stats.RollupSelects.Load() != 0 {
		t.Fatalf("raw %v; rollup selects %d, want the tail's point and none", want, on.Stats.RollupSelects.Load())
	}
}
