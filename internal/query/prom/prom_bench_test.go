package prom

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/rollup"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
	"github.com/sluice-dev/sluice/internal/signal"
)

// benchCopyShift separates the copies of the corpus in time: the corpus
// metrics span about 34 hours of December 2025 (plus a few older points).
const benchCopyShift = 48 * time.Hour

// benchLake is a lake built once per process for the benchmarks.
type benchLake struct {
	once sync.Once
	l    *promtest.Lake
	rows int64
	err  error
}

var (
	corpusBench, synthBench benchLake
	benchDirs               []string
	benchStart              = time.Unix(1766181890, 0) // the corpus's flamethrower data
	synthBenchStart         = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// benchCopies is how many times the corpus metrics (112,934 points) are
// written: SLUICE_BENCH_COPIES, default 90 (about 10.2M rows).
func benchCopies() int {
	if v, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_COPIES")); err == nil && v > 0 {
		return v
	}
	return 90
}

// build writes batches copies times, each copy shifted by shift from the
// one before, into a new lake. It is not timed.
func (bl *benchLake) build(b *testing.B, batches func() ([]*signal.Metrics, error), copies int, shift time.Duration) *promtest.Lake {
	b.Helper()
	bl.once.Do(func() {
		ms, err := batches()
		if err != nil {
			bl.err = err
			return
		}
		dir, err := os.MkdirTemp("", "sluice-prom-bench-")
		if err != nil {
			bl.err = err
			return
		}
		benchDirs = append(benchDirs, dir)
		cat, err := catalog.Open(context.Background(), "sqlite:"+filepath.Join(dir, "catalog.db"))
		if err != nil {
			bl.err = err
			return
		}
		l := &promtest.Lake{Root: dir, Catalog: cat, Store: lake.NewLocalStore(dir)}
		w, err := lake.NewWriter(lake.Options{Root: dir, Store: l.Store, MaxFutureSkew: 1 << 62}, func(seg lake.Segment) error {
			bl.rows += seg.Rows
			return cat.AddSegments(context.Background(), seg.CatalogRow())
		})
		if err != nil {
			bl.err = err
			return
		}
		for c := 0; c < copies; c++ {
			for _, m := range ms {
				if c > 0 {
					for i := range m.Time {
						m.Time[i] += int64(shift)
						if m.StartTime[i] != 0 {
							m.StartTime[i] += int64(shift)
						}
					}
				}
				if err := w.WriteMetrics("default", m); err != nil {
					bl.err = err
					return
				}
			}
			if err := w.Flush(); err != nil {
				bl.err = err
				return
			}
		}
		if bl.err = w.Close(); bl.err == nil {
			bl.l = l
		}
	})
	if bl.err != nil {
		b.Fatalf("build benchmark lake: %v", bl.err)
	}
	return bl.l
}

// corpusLake holds the corpus metrics benchCopies() times, 48 h apart.
func corpusLake(b *testing.B) *promtest.Lake {
	return corpusBench.build(b, func() ([]*signal.Metrics, error) {
		var out []*signal.Metrics
		for _, f := range corpustest.Files(b, "metrics") {
			raw := corpustest.Read(b, f)
			if zr, err := gzip.NewReader(bytes.NewReader(raw)); err == nil {
				if raw, err = io.ReadAll(zr); err != nil {
					return nil, err
				}
			}
			m := new(signal.Metrics)
			if err := otlp.DecodeMetrics(m, raw); err != nil {
				return nil, err
			}
			out = append(out, m)
		}
		return out, nil
	}, benchCopies(), benchCopyShift)
}

// synthLake holds the synthetic workload of the tests scaled up: 10
// services x 10 routes, a counter, a 6-bucket histogram and a gauge
// scraped every 15 s, for 140 hours: 10.08M rows, series of 33,600 points,
// the shape of a Prometheus-style deployment.
func synthLake(b *testing.B) *promtest.Lake {
	return synthBench.build(b, func() ([]*signal.Metrics, error) {
		var svcs, routes []string
		for i := 0; i < 10; i++ {
			svcs = append(svcs, "svc-"+strconv.Itoa(i))
			routes = append(routes, "/r"+strconv.Itoa(i))
		}
		s := promtest.Synth{Start: synthBenchStart, Interval: 15 * time.Second, Points: 240, Services: svcs, Routes: routes,
			CounterStep: 3, Bounds: []float64{0.05, 0.1, 0.25, 0.5, 1}, HistStep: []int{3, 5, 4, 2, 1, 1}}
		m := new(signal.Metrics)
		if err := otlp.DecodeMetricsJSON(m, s.JSON()); err != nil {
			return nil, err
		}
		return []*signal.Metrics{m}, nil
	}, 140, time.Hour)
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range benchDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// BenchmarkScan measures rows scanned per second for a metric range query
// with pruning. "synth": one gauge over 24 h of the 140 h synthetic lake
// (catalog pruning skips the other hours, file indexes the other metrics'
// rows). "corpus": one corpus metric over 12 of the 90 copies; its series
// have one or two points per copy, so per-series work dominates. "warm"
// reuses the adapter (cached file indexes and series labels, as a running
// server does), "cold" starts every query with empty caches.
func BenchmarkScan(b *testing.B) {
	for _, lk := range []struct {
		name   string
		lake   func(*testing.B) *promtest.Lake
		metric string
		from   time.Time
		span   time.Duration
	}{
		{"synth", synthLake, "test_queue_depth", synthBenchStart.Add(50 * time.Hour), 24 * time.Hour},
		{"corpus", corpusLake, "api_gateway_movie_play_starts_total", benchStart, 12 * benchCopyShift},
	} {
		for _, mode := range []string{"warm", "cold"} {
			b.Run(lk.name+"/"+mode, func(b *testing.B) {
				l := lk.lake(b)
				ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", lk.metric)}
				mint, maxt := lk.from.UnixMilli(), lk.from.Add(lk.span).UnixMilli()
				a := adapterOf(b, l)
				run := func() {
					q := &Querier{a: a, tenant: "default", mint: mint, maxt: maxt}
					ss := q.Select(context.Background(), true, &storage.SelectHints{Start: mint, End: maxt}, ms...)
					n := 0
					for ss.Next() {
						n++
					}
					if ss.Err() != nil || n == 0 {
						b.Fatalf("select: %d series, err %v", n, ss.Err())
					}
				}
				run()
				a.Stats.Rows.Store(0)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if mode == "cold" {
						b.StopTimer()
						a.idx = newIndexCache(10000)
						a.labels = &labelCache{max: 1_000_000, m: map[labelKey]labels.Labels{}}
						b.StartTimer()
					}
					run()
				}
				b.StopTimer()
				rows := a.Stats.Rows.Load()
				b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
				b.ReportMetric(float64(rows)/float64(b.N), "rows/op")
			})
		}
	}
}

// BenchmarkPromQL measures the latency of typical PromQL queries through
// the real engine: over the synthetic lake (10.08M rows; range queries over
// 6 h at a 60 s step, instant queries at one time) and over the corpus lake
// (about 10.2M rows) at the time of its last scrape.
func BenchmarkPromQL(b *testing.B) {
	eng := newEngine()
	for _, lk := range []struct {
		name  string
		lake  func(*testing.B) *promtest.Lake
		end   time.Time
		cases [][3]string // name, expr, "range" or ""
	}{
		{"synth", synthLake, synthBenchStart.Add(100 * time.Hour), [][3]string{
			{"selector_instant", `test_queue_depth{service_name="svc-3"}`, ""},
			{"sum_by_rate_6h", `sum by (service_name) (rate(test_requests_total[5m]))`, "range"},
			{"increase_1h_instant", `sum(increase(test_requests_total[1h]))`, ""},
			{"avg_over_time_6h", `avg by (http_route) (avg_over_time(test_queue_depth[10m]))`, "range"},
			{"histogram_quantile_6h", `histogram_quantile(0.9, sum by (le) (rate(test_latency_seconds_bucket[5m])))`, "range"},
		}},
		{"corpus", corpusLake, time.Unix(1766304540, 0), [][3]string{
			{"selector_instant", `flamethrower_gauge_0`, ""},
			{"sum_by_instant", `sum by (service_name) (api_gateway_movie_play_starts_total)`, ""},
			{"count_by_name_instant", `count by (__name__) ({__name__=~"flamethrower_.*"})`, ""},
		}},
	} {
		for _, c := range lk.cases {
			b.Run(lk.name+"/"+c[0], func(b *testing.B) {
				l := lk.lake(b)
				q := adapterOf(b, l).Queryable("default", Limits{})
				exec := func() {
					var qry promql.Query
					var err error
					if c[2] == "range" {
						qry, err = eng.NewRangeQuery(context.Background(), q, nil, c[1], lk.end.Add(-6*time.Hour), lk.end, time.Minute)
					} else {
						qry, err = eng.NewInstantQuery(context.Background(), q, nil, c[1], lk.end)
					}
					if err != nil {
						b.Fatal(err)
					}
					res := qry.Exec(context.Background())
					if res.Err != nil {
						b.Fatal(res.Err)
					}
					if empty(res.Value) {
						b.Fatalf("%s: empty result", c[1])
					}
					qry.Close()
				}
				exec() // warm the caches, as a running server's are
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					exec()
				}
			})
		}
	}
}

func empty(v parser.Value) bool {
	switch v := v.(type) {
	case promql.Vector:
		return len(v) == 0
	case promql.Matrix:
		return len(v) == 0
	}
	return false
}

// BenchmarkRollupDashboard runs dashboard range queries over a day of
// generated counters and gauges (100 series, jittered points every 5-60 s),
// rolled up into 1m/5m/1h, with raw points only and with rollups. Both
// give the same answer (TestRollupsDoNotChangeAnswers); rows/op is what
// each reads from the lake.
func BenchmarkRollupDashboard(b *testing.B) {
	l := newTestLake(b)
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	propLake(b, rand.New(rand.NewPCG(1, 2)), l, start, 24, 50)
	opts := rollup.Options{Tiers: rollup.DefaultTiers, Store: l.Store}
	jobs, err := rollup.Plan(context.Background(), l.Catalog, opts)
	if err != nil {
		b.Fatal(err)
	}
	for _, j := range jobs {
		if _, err := rollup.Run(context.Background(), l.Catalog, l.Store, j, opts); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, expr string
		step       time.Duration
	}{
		{"rate_5m_step_5m", `sum by (service_name) (rate(ctr_total[5m]))`, 5 * time.Minute},
		{"increase_1h_step_1h", `sum(increase(ctr_total[1h]))`, time.Hour},
		{"max_over_time_1h_step_1h", `max_over_time(gauge[1h])`, time.Hour},
		{"gauge_step_5m", `sum(gauge)`, 5 * time.Minute},
	} {
		for _, on := range []bool{false, true} {
			name := c.name + "/raw"
			if on {
				name = c.name + "/rollups"
			}
			b.Run(name, func(b *testing.B) {
				a, err := NewAdapter(Options{Catalog: l.Catalog, Store: l.Store, Rollups: on})
				if err != nil {
					b.Fatal(err)
				}
				q := a.Queryable("acme", Limits{})
				for b.Loop() {
					m, err := runRange(q, c.expr, start.Add(time.Hour), start.Add(24*time.Hour), c.step)
					if err != nil || len(m) == 0 {
						b.Fatalf("%v %v", m, err)
					}
				}
				b.ReportMetric(float64(a.Stats.Rows.Load())/float64(b.N), "rows/op")
				b.ReportMetric(float64(a.Stats.Bytes.Load())/float64(b.N), "bytes/op")
				b.ReportMetric(float64(a.Stats.RollupSelects.Load())/float64(b.N), "rollup-selects/op")
			})
		}
	}
}
