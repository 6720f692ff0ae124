package rollup

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// corpusMetrics decodes the binary corpus metric files into one batch.
func corpusMetrics(tb testing.TB) *signal.Metrics {
	tb.Helper()
	var all signal.Metrics
	for _, p := range corpustest.Files(tb, "metrics") {
		if !strings.Contains(p, ".binpb") {
			continue
		}
		var b signal.Metrics
		if err := otlp.DecodeMetrics(&b, corpustest.Read(tb, p)); err != nil {
			tb.Fatal(err)
		}
		for i := range b.Len() {
			all.CopyFrom(&b, i)
		}
	}
	return &all
}

type env struct {
	store lake.Store
	cat   *catalog.Catalog
	root  string
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	dir := tb.TempDir()
	cat, err := catalog.Open(context.Background(), filepath.Join(dir, "catalog.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cat.Close() })
	root := filepath.Join(dir, "lake")
	return &env{store: lake.NewLocalStore(root), cat: cat, root: root}
}

// write writes batches as tenant's raw metrics and catalogs the files.
func (e *env) write(tb testing.TB, tenant string, now time.Time, batches ...*signal.Metrics) {
	tb.Helper()
	var segs []catalog.Segment
	w, err := lake.NewWriter(lake.Options{Store: e.store, Now: func() time.Time { return now }},
		func(s lake.Segment) error { segs = append(segs, s.CatalogRow()); return nil })
	if err != nil {
		tb.Fatal(err)
	}
	for _, b := range batches {
		if err := w.WriteMetrics(tenant, b); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := e.cat.AddSegments(context.Background(), segs...); err != nil {
		tb.Fatal(err)
	}
}

var benchHour = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// hourOfCorpus lays the first n corpus points out over one hour, copies
// times at a step apart, as a scrape every step would.
func hourOfCorpus(tb testing.TB, n int, step time.Duration) []*signal.Metrics {
	all := corpusMetrics(tb)
	n = min(n, all.Len())
	var out []*signal.Metrics
	for k := 0; time.Duration(k)*step < time.Hour; k++ {
		b := &signal.Metrics{}
		for i := range n {
			b.CopyFrom(all, i)
			b.Time[b.Len()-1] = benchHour.Add(time.Duration(k)*step + time.Duration(i%1000)*time.Millisecond).UnixNano()
		}
		out = append(out, b)
	}
	return out
}

// BenchmarkRollup rolls up one raw hour made from 10,000 corpus points
// (gauges, sums, histograms with their real labels) scraped every 15 s:
// 2.4M points of 10,000 series, into 1m, 5m and 1h.
func BenchmarkRollup(b *testing.B) {
	e := newEnv(b)
	e.write(b, "bench", benchHour.Add(time.Hour), hourOfCorpus(b, 10000, 15*time.Second)...)
	ctx := context.Background()
	opts := Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	jobs, err := Plan(ctx, e.cat, opts)
	if err != nil || len(jobs) != 1 {
		b.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	b.ReportAllocs()
	var points int64
	cpu0 := cpuTime()
	for b.Loop() {
		res, err := Run(ctx, e.cat, e.store, jobs[0], opts)
		if err != nil {
			b.Fatal(err)
		}
		points += res.PointsRead
	}
	b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
	// The machine is shared: CPU time says what one core does unhindered.
	b.ReportMetric(float64(points)/(cpuTime()-cpu0).Seconds(), "points/cpu-s")
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRollupAggregate is BenchmarkRollup without writing the output
// files: reading the raw hour column-projected and aggregating it into
// every tier's windows.
func BenchmarkRollupAggregate(b *testing.B) {
	e := newEnv(b)
	e.write(b, "bench", benchHour.Add(time.Hour), hourOfCorpus(b, 10000, 15*time.Second)...)
	segs, err := e.cat.List(context.Background(), catalog.Filter{Table: lake.TableMetrics})
	if err != nil {
		b.Fatal(err)
	}
	tiers := []int64{int64(time.Minute), int64(5 * time.Minute), int64(time.Hour)}
	b.ReportAllocs()
	var points int64
	cpu0 := cpuTime()
	for b.Loop() {
		h := newHour(benchHour.UnixNano(), benchHour.Add(time.Hour).UnixNano())
		for _, s := range segs {
			if err := readRaw(e.store, s.Path, h, nil); err != nil {
				b.Fatal(err)
			}
		}
		var windows int
		agg := NewAggregator(tiers, func(int, *Window) { windows++ })
		h.aggregate(agg, func(int32) {})
		points += h.rows
	}
	b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(float64(points)/(cpuTime()-cpu0).Seconds(), "points/cpu-s")
}

// BenchmarkRollupWrite is the output half of BenchmarkRollup: writing
// every tier's metrics_rollup file of the same hour, aggregated once.
func BenchmarkRollupWrite(b *testing.B) {
	e := newEnv(b)
	e.write(b, "bench", benchHour.Add(time.Hour), hourOfCorpus(b, 10000, 15*time.Second)...)
	h, outs := aggregatedHour(b, e)
	meta := fileMeta{tenant: "bench", day: "2025-06-01", hour: 12, created: benchHour, sourceRows: h.rows}
	var re rowEncoder
	b.ReportAllocs()
	var points, rows int64
	cpu0 := cpuTime()
	for b.Loop() {
		for i := range outs {
			seg, err := writeTier(e.store, h, &outs[i], meta, &re)
			if err != nil {
				b.Fatal(err)
			}
			rows += seg.Rows
			if err := e.store.Remove(seg.Path); err != nil {
				b.Fatal(err)
			}
		}
		points += h.rows
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(points)/(cpuTime()-cpu0).Seconds(), "points/cpu-s")
}
