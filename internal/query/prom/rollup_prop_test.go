package prom

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/sluice-dev/sluice/internal/lake/rollup"
	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
)

// propLake writes generated counters (with resets) and gauges to a real
// lake: hours 0..hours-1 from start. Most series have points at a random
// millisecond phase with a few microseconds of jitter, as exporters send
// them; the metrics "al_*" have points exactly on second boundaries, so
// every minute's first point sits on a window start and their rollups
// cannot stand for them. Series differ in interval (5 s to 60 s) and some
// have gaps.
func propLake(t testing.TB, r *rand.Rand, l *promtest.Lake, start time.Time, hours int, seriesPer int) {
	t.Helper()
	type ser struct {
		name     string
		counter  bool
		interval time.Duration
		phase    time.Duration
		svc, rt  string
	}
	var ss []ser
	for _, m := range []struct {
		name    string
		counter bool
		aligned bool
	}{{"ctr", true, false}, {"gauge", false, false}, {"al.ctr", true, true}, {"al.gauge", false, true}} {
		n := seriesPer
		if m.aligned {
			n = 2
		}
		for i := 0; i < n; i++ {
			iv := []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, 60 * time.Second, 7 * time.Second}[r.IntN(6)]
			ph := time.Duration(1+r.IntN(int(iv/time.Millisecond)-1)) * time.Millisecond
			if m.aligned {
				ph = 0
			}
			ss = append(ss, ser{m.name, m.counter, iv, ph, []string{"a", "b"}[i%2], fmt.Sprintf("/r%d", i)})
		}
	}
	// One request per hour, so hours can be written (and rolled up) apart.
	for h := 0; h < hours; h++ {
		var b strings.Builder
		b.WriteString(`{"resourceMetrics":[`)
		for si, s := range ss {
			if si > 0 {
				b.WriteString(",")
			}
			var pts []string
			hs := start.Add(time.Duration(h) * time.Hour)
			v := 0.0
			gap := r.IntN(4) == 0 // a gap of 3-20 minutes in this hour
			gapAt, gapLen := time.Duration(r.IntN(50))*time.Minute, time.Duration(3+r.IntN(17))*time.Minute
			for ts := hs.Add(s.phase); ts.Before(hs.Add(time.Hour)); ts = ts.Add(s.interval) {
				off := ts.Sub(hs)
				if gap && off >= gapAt && off < gapAt+gapLen {
					continue
				}
				if s.phase != 0 {
					ts = ts.Add(time.Duration(r.IntN(1000)) * time.Microsecond)
				}
				if s.counter {
					// Counters start where the last hour ended (the stream is
					// re-seeded per hour, so count from the hour's start).
					v = counterAt(float64(1+si%3), ts, start)
				} else {
					v = math.Round(r.Float64()*10000) / 100
				}
				pts = append(pts, fmt.Sprintf(`{"attributes":[%s],"startTimeUnixNano":"%d","timeUnixNano":"%d","asDouble":%g}`,
					promtest.Attr("http.route", s.rt), start.UnixNano(), ts.UnixNano(), v))
			}
			typ := `"gauge":{"dataPoints":[%s]}`
			if s.counter {
				typ = `"sum":{"aggregationTemporality":2,"isMonotonic":true,"dataPoints":[%s]}`
			}
			fmt.Fprintf(&b, `{"resource":{"attributes":[%s]},"scopeMetrics":[{"metrics":[{"name":%q,`+typ+`}]}]}`,
				promtest.Attr("service.name", s.svc), s.name, strings.Join(pts, ","))
		}
		b.WriteString(`]}`)
		l.Write(t, "acme", 0, []byte(b.String()))
	}
}

// counterAt is a counter's value at ts (scaled per series): it grows by a
// pseudo-random amount each second from start and resets to zero at a
// pseudo-random second of every half hour after the first. It depends on ts
// only, so a series' points agree across hours.
func counterAt(scale float64, ts, start time.Time) float64 {
	sec := int64(ts.Sub(start) / time.Second)
	counterOnce.Do(func() {
		counterCum = make([]float64, 24*3600+1)
		for i := 1; i < len(counterCum); i++ {
			counterCum[i] = counterCum[i-1] + float64(hash64(uint64(i))%7)
		}
	})
	last := int64(0)
	for blk := sec / 1800; blk >= sec/1800-1 && blk > 0; blk-- {
		if at := blk*1800 + int64(hash64(uint64(blk))%1800); at <= sec {
			last = at
			break
		}
	}
	return scale * (counterCum[sec] - counterCum[last])
}

var (
	counterOnce sync.Once
	counterCum  []float64
)

func hash64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

func runRange(q storage.Queryable, expr string, start, end time.Time, step time.Duration) (promql.Matrix, error) {
	qry, err := newEngine().NewRangeQuery(context.Background(), q, nil, expr, start, end, step)
	if err != nil {
		return nil, err
	}
	defer qry.Close() // returns the result's points to the engine's pools: copy them
	res := qry.Exec(WithStatement(context.Background(), qry.Statement()))
	if res.Err != nil {
		return nil, res.Err
	}
	m, err := res.Matrix()
	out := make(promql.Matrix, len(m))
	for i, s := range m {
		out[i] = promql.Series{Metric: s.Metric, Floats: slices.Clone(s.Floats)}
	}
	return out, err
}

// Rollups never change an answer: random range queries over generated
// counters (with resets) and gauges give the same series and points with
// rollups on as with raw points only: exact for max, min, count and last
// values, within 1e-9 relative for sums and averages, and within 1e-7 for
// rate and increase (the issue allows 1%; the adapter reproduces the
// engine's extrapolation, so only summation order differs). Some hours are rolled up, one hour's rollup is stale
// (late data) and one is not rolled up yet, so plans mix tiers and raw
// hours. The test also reports how many selectors the rollups served.
func TestRollupsDoNotChangeAnswers(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SLUICE_PROP_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	l := newTestLake(t)
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	const hours = 4
	propLake(t, r, l, start, hours-1, 6)
	opts := rollup.Options{Tiers: rollup.DefaultTiers, Store: l.Store}
	jobs, err := rollup.Plan(context.Background(), l.Catalog, opts)
	if err != nil || len(jobs) != hours-1 {
		t.Fatalf("plan: %v %v", jobs, err)
	}
	for _, j := range jobs {
		if _, err := rollup.Run(context.Background(), l.Catalog, l.Store, j, opts); err != nil {
			t.Fatal(err)
		}
	}
	// The last hour is not rolled up; hour 1 gets late data, so its
	// rollups are stale.
	propLake(t, r, l, start.Add(time.Duration(hours-1)*time.Hour), 1, 6)
	ts := start.Add(time.Hour + 20*time.Minute + 1234*time.Millisecond).UnixNano()
	l.Write(t, "acme", 0, []byte(fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[%s]},"scopeMetrics":[{"metrics":[`+
		`{"name":"gauge","gauge":{"dataPoints":[{"attributes":[%s],"timeUnixNano":"%d","asDouble":42}]}}]}]}]}`,
		promtest.Attr("service.name", "late"), promtest.Attr("http.route", "/late"), ts)))

	on, err := NewAdapter(Options{Catalog: l.Catalog, Store: l.Store, Rollups: true})
	if err != nil {
		t.Fatal(err)
	}
	off := adapterOf(t, l)
	qOn, qOff := on.Queryable("acme", Limits{}), off.Queryable("acme", Limits{})

	type fn struct {
		tmpl string
		tol  float64 // relative; 0: exact
	}
	fns := []fn{
		{"max_over_time(%s[%s])", 0}, {"min_over_time(%s[%s])", 0}, {"count_over_time(%s[%s])", 0},
		{"last_over_time(%s[%s])", 0}, {"present_over_time(%s[%s])", 0},
		{"sum_over_time(%s[%s])", 1e-9}, {"avg_over_time(%s[%s])", 1e-9},
		{"rate(%s[%s])", 1e-7}, {"increase(%s[%s])", 1e-7}, {"sum by (service_name) (rate(%s[%s]))", 1e-7},
		{"irate(%s[%s])", 0}, {"changes(%s[%s])", 0}, {"resets(%s[%s])", 0}, {"stddev_over_time(%s[%s])", 1e-9},
		{"%s", 0}, {"sum(%s)", 1e-9}, {"max by (http_route) (%s)", 0}, {"timestamp(%s)", 0},
		{"max_over_time(%s[%s] offset 5m)", 0}, {"rate(%s[%s] offset 1h)", 1e-7},
		{"max_over_time(rate(%s[5m])[30m:1m])", 0.01}, {"%s - %s offset 1m", 1e-9},
	}
	sels := []string{"ctr_total", "gauge", `gauge{service_name="a"}`, `ctr_total{http_route=~"/r[0-2]"}`,
		"al_ctr_total", "al_gauge", `{__name__=~"gauge|al_gauge"}`}
	ranges := []string{"1m", "2m", "5m", "10m", "15m", "1h", "90s", "30s", "3m"}
	steps := []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, time.Hour, 30 * time.Second, 15 * time.Second, 90 * time.Second}

	const n = 400
	var served, empty int
	for i := 0; i < n; i++ {
		f := fns[r.IntN(len(fns))]
		sel := sels[r.IntN(len(sels))]
		if strings.Contains(f.tmpl, "rate") || strings.Contains(f.tmpl, "increase") || strings.Contains(f.tmpl, "resets") {
			sel = []string{"ctr_total", `ctr_total{http_route=~"/r[0-2]"}`, "al_ctr_total", "gauge"}[r.IntN(4)]
		}
		rng := ranges[r.IntN(len(ranges))]
		var expr string
		switch strings.Count(f.tmpl, "%s") {
		case 1:
			expr = fmt.Sprintf(f.tmpl, sel)
		case 2:
			if strings.Contains(f.tmpl, "[%s]") {
				expr = fmt.Sprintf(f.tmpl, sel, rng)
			} else {
				expr = fmt.Sprintf(f.tmpl, sel, sel)
			}
		}
		step := steps[r.IntN(len(steps))]
		// Start on the step's grid (as Grafana aligns), on a minute, or anywhere.
		span := time.Duration(hours) * time.Hour
		from := start.Add(time.Duration(r.Int64N(int64(span))))
		switch r.IntN(4) {
		case 0, 1:
			from = from.Truncate(step)
		case 2:
			from = from.Truncate(time.Minute)
		}
		to := from.Add(time.Duration(1+r.IntN(int(3*time.Hour/step))) * step)
		if to.Sub(from)/step > 2000 {
			to = from.Add(2000 * step)
		}
		before := on.Stats.RollupSelects.Load()
		want, errRaw := runRange(qOff, expr, from, to, step)
		got, err := runRange(qOn, expr, from, to, step)
		if errRaw != nil || err != nil {
			// e.g. two metrics' series left with one label set
			if errRaw == nil || err == nil || errRaw.Error() != err.Error() {
				t.Fatalf("%s: error %v with rollups, %v raw", expr, err, errRaw)
			}
			continue
		}
		used := on.Stats.RollupSelects.Load() > before
		if used {
			served++
		}
		if len(want) == 0 {
			empty++
		}
		desc := fmt.Sprintf("%s from %s to %s step %s (rollups used: %v)", expr, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano), step, used)
		compareMatrices(t, desc, want, got, f.tol)
	}
	share := float64(served) / n
	t.Logf("%d of %d random range queries (%.0f%%) read rollups for some hours; %d had empty answers; selectors served %d, fell back %d",
		served, n, 100*share, empty, on.Stats.RollupSelects.Load(), on.Stats.RollupFallbacks.Load())
	// The mix is deliberately broad: a quarter of the starts are off any
	// grid, a third of the selectors have points on window starts, and
	// irate, changes, resets, count_over_time, stddev_over_time, subqueries,
	// 15s/30s/90s steps and 30s/90s ranges always read raw points.
	// TestRollupUse lists which dashboard queries the rollups serve.
	if share < 0.05 {
		t.Fatalf("only %.0f%% of the queries used the rollups: the fallback is too eager", 100*share)
	}
}

func compareMatrices(t *testing.T, desc string, want, got promql.Matrix, tol float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d series with rollups, %d raw", desc, len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if !labels.Equal(w.Metric, g.Metric) {
			t.Fatalf("%s: series %d is %s with rollups, %s raw", desc, i, g.Metric, w.Metric)
		}
		if len(w.Floats) != len(g.Floats) {
			t.Fatalf("%s: %s has %d points with rollups, %d raw", desc, w.Metric, len(g.Floats), len(w.Floats))
		}
		for k := range w.Floats {
			a, b := g.Floats[k], w.Floats[k]
			if a.T != b.T {
				t.Fatalf("%s: %s point %d at %d with rollups, %d raw", desc, w.Metric, k, a.T, b.T)
			}
			ok := a.F == b.F || math.IsNaN(a.F) && math.IsNaN(b.F) ||
				tol > 0 && math.Abs(a.F-b.F) <= tol*math.Max(math.Abs(b.F), 1e-300)
			if !ok {
				t.Fatalf("%s: %s at %d = %v with rollups, %v raw", desc, w.Metric, a.T, a.F, b.F)
			}
		}
	}
}
