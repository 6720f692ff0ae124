package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/store"
	_ "github.com/duckdb/duckdb-go/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// synBase is the first hour of the synthetic metrics.
var synBase = time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)

// synMetrics builds metrics over [from, from+d) with known shapes: gauges
// with NaN and points exactly on (and 1 ns before) window boundaries, a
// counter with resets, a delta sum, delta histograms whose bounds change
// within some windows, and a cumulative histogram with a reset. offset
// shifts every timestamp (late data uses a few seconds).
func synMetrics(from time.Time, d, offset time.Duration) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "synthetic")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("rollup-e2e")
	ts := func(t time.Time) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t.Add(offset)) }
	start := pcommon.NewTimestampFromTime(from.Add(-time.Hour))

	g := sm.Metrics().AppendEmpty()
	g.SetName("syn.gauge")
	g.SetUnit("1")
	gp := g.SetEmptyGauge().DataPoints()
	for _, host := range []string{"a", "b", "c"} {
		add := func(t time.Time, v float64) {
			p := gp.AppendEmpty()
			p.Attributes().PutStr("host", host)
			p.SetTimestamp(ts(t))
			p.SetDoubleValue(v)
		}
		for i := 0; time.Duration(i)*7*time.Second < d; i++ {
			v := 10*math.Sin(float64(i)/10) + float64(len(host))*0.37
			if i%101 == 0 {
				v = math.NaN()
			}
			add(from.Add(time.Duration(i)*7*time.Second), v)
		}
		for k := 0; time.Duration(k)*time.Minute < d; k += 4 {
			b := from.Add(time.Duration(k) * time.Minute)
			add(b, float64(k)+0.5) // exactly on the boundary: opens the window
			if k > 0 {
				add(b.Add(-time.Nanosecond), -float64(k)) // last nanosecond of the window before
			}
		}
	}

	c := sm.Metrics().AppendEmpty()
	c.SetName("syn.counter")
	cs := c.SetEmptySum()
	cs.SetIsMonotonic(true)
	cs.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, job := range []string{"x", "y"} {
		v := 0.0
		st := start
		for i := 0; time.Duration(i)*10*time.Second < d; i++ {
			v += 1.5 * float64(i%4)
			if i%137 == 136 {
				v = 0.5 // reset
				st = ts(from.Add(time.Duration(i) * 10 * time.Second))
			}
			p := cs.DataPoints().AppendEmpty()
			p.Attributes().PutStr("job", job)
			p.SetStartTimestamp(st)
			p.SetTimestamp(ts(from.Add(time.Duration(i) * 10 * time.Second)))
			p.SetDoubleValue(v)
		}
	}

	ds := sm.Metrics().AppendEmpty()
	ds.SetName("syn.delta")
	dsum := ds.SetEmptySum()
	dsum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dsum.SetIsMonotonic(true)
	for i := 0; time.Duration(i)*15*time.Second < d; i++ {
		p := dsum.DataPoints().AppendEmpty()
		p.SetTimestamp(ts(from.Add(time.Duration(i) * 15 * time.Second)))
		p.SetIntValue(int64(i % 9))
	}

	h := sm.Metrics().AppendEmpty()
	h.SetName("syn.hist.delta")
	h.SetUnit("ms")
	hd := h.SetEmptyHistogram()
	hd.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	for _, route := range []string{"/a", "/b"} {
		for i := 0; time.Duration(i)*20*time.Second < d; i++ {
			p := hd.DataPoints().AppendEmpty()
			p.Attributes().PutStr("route", route)
			p.SetTimestamp(ts(from.Add(time.Duration(i) * 20 * time.Second)))
			bounds, counts := []float64{1, 5, 10}, []uint64{uint64(i % 3), 2, uint64(i % 5), 1}
			if route == "/b" && (i/7)%3 == 0 {
				bounds, counts = []float64{1, 2, 5, 10}, []uint64{1, uint64(i % 4), 0, 3, 1}
			}
			var n uint64
			for _, x := range counts {
				n += x
			}
			p.ExplicitBounds().FromRaw(bounds)
			p.BucketCounts().FromRaw(counts)
			p.SetCount(n)
			p.SetSum(float64(n) * 3.25)
			p.SetMin(0.5)
			p.SetMax(12 + float64(i%7))
		}
	}

	ch := sm.Metrics().AppendEmpty()
	ch.SetName("syn.hist.cum")
	chd := ch.SetEmptyHistogram()
	chd.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	var counts [3]uint64
	for i := 0; time.Duration(i)*30*time.Second < d; i++ {
		if i == 100 {
			counts = [3]uint64{} // reset
		}
		counts[i%3] += uint64(1 + i%4)
		p := chd.DataPoints().AppendEmpty()
		p.SetStartTimestamp(start)
		p.SetTimestamp(ts(from.Add(time.Duration(i) * 30 * time.Second)))
		p.ExplicitBounds().FromRaw([]float64{10, 100})
		p.BucketCounts().FromRaw(counts[:])
		p.SetCount(counts[0] + counts[1] + counts[2])
		p.SetSum(float64(p.Count()) * 7)
	}
	return md
}

func writeOTLP(t *testing.T, path string, md pmetric.Metrics) {
	t.Helper()
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func rollupCrosscheck(t *testing.T, lake string) string {
	t.Helper()
	root, _ := corpustest.ModuleRoot()
	cmd := exec.Command(python(t), filepath.Join(root, "tests", "crosscheck", "rollup_check.py"), "--lake", lake)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rollup_check failed: %v\n%s", err, out)
	}
	return string(out)
}

// liveFiles lists the live segment files of table as a DuckDB list literal.
func liveFiles(t *testing.T, lake, table string) string {
	t.Helper()
	cat, err := catalog.Open(context.Background(), filepath.Join(lake, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	segs, err := cat.List(context.Background(), catalog.Filter{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	var q []string
	for _, s := range segs {
		q = append(q, "'"+filepath.Join(lake, s.Path)+"'")
	}
	if len(q) == 0 {
		t.Fatalf("no live %s segments", table)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// checkQuantiles compares the quantiles of every gauge window's sketch
// (decoded with sketches-go) with DuckDB's quantile_disc over the raw
// values: they must agree within the sketch's 1% relative accuracy.
// quantile_disc(q) is the order statistic of index ceil(n*q)-1, while a
// DDSketch at q returns index floor(q*(n-1)); the sketch is asked for the
// same order statistic (q' with q'*(n-1) == k exactly), so the comparison
// is the accuracy guarantee itself.
func checkQuantiles(t *testing.T, lake string) int {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	qs := []float64{0.5, 0.9, 0.99}
	checked := 0
	for _, tier := range []struct {
		name string
		ns   int64
	}{{"1m", 60e9}, {"5m", 300e9}, {"1h", 3600e9}} {
		q := fmt.Sprintf(`
		WITH raw AS (
			SELECT tenant, series_id, epoch_ns(timestamp) AS t, coalesce(CAST(value_int AS DOUBLE), value) AS v
			FROM read_parquet(%s, hive_partitioning = true, union_by_name = true)
			WHERE metric_type = 'gauge' AND timestamp IS NOT NULL
			  AND epoch_ns(timestamp) // 3600000000000 = epoch_ns(CAST(CAST(dt AS DATE) AS TIMESTAMP)) // 3600000000000 + CAST(hour AS BIGINT)),
		want AS (
			SELECT tenant, series_id, t - t %% %d AS w, quantile_disc(v, 0.5) AS q50, quantile_disc(v, 0.9) AS q90,
			       quantile_disc(v, 0.99) AS q99, count(*) AS n
			FROM raw WHERE v IS NOT NULL AND isfinite(v) GROUP BY ALL),
		got AS (
			SELECT tenant, series_id, epoch_ns(window_start) AS w, sketch
			FROM read_parquet(%s, hive_partitioning = true, union_by_name = true)
			WHERE tier = '%s' AND metric_type = 'gauge')
		SELECT want.series_id, want.w, q50, q90, q99, n, got.sketch
		FROM want LEFT JOIN got USING (tenant, series_id, w)`,
			liveFiles(t, lake, "metrics"), tier.ns, liveFiles(t, lake, "metrics_rollup"), tier.name)
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var sid uint64
			var w, n int64
			var want [3]float64
			var sk []byte
			if err := rows.Scan(&sid, &w, &want[0], &want[1], &want[2], &n, &sk); err != nil {
				t.Fatal(err)
			}
			if sk == nil {
				t.Fatalf("%s: series %d window %d (%d finite values) has no sketch", tier.name, sid, w, n)
			}
			s, err := ddsketch.DecodeDDSketch(sk, store.DefaultProvider, nil)
			if err != nil {
				t.Fatalf("%s: series %d window %d: decode sketch: %v", tier.name, sid, w, err)
			}
			if int64(s.GetCount()) != n {
				t.Errorf("%s: series %d window %d: sketch count %v, DuckDB %d", tier.name, sid, w, s.GetCount(), n)
			}
			for i, qq := range qs {
				k := max(math.Ceil(float64(n)*qq)-1, 0)
				q2 := 0.0
				if n > 1 {
					q2 = k / float64(n-1)
					for range 4 {
						switch r := q2 * float64(n-1); {
						case r < k:
							q2 = math.Nextafter(q2, 2)
						case r > k:
							q2 = math.Nextafter(q2, -1)
						}
					}
				}
				got, err := s.GetValueAtQuantile(q2)
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(got-want[i]) > 0.01*math.Abs(want[i])+1e-9 {
					t.Errorf("%s: series %d window %d: q%v = %v from the sketch, DuckDB quantile_disc %v (n=%d)", tier.name, sid, w, qq, got, want[i], n)
				}
			}
			checked++
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return checked
}

var rolledRE = regexp.MustCompile(`rolled up (\d+) hours`)

func rollupRun(t *testing.T, args ...string) result {
	t.Helper()
	r := run(t, append([]string{"rollup"}, args...)...)
	if r.code != 0 {
		t.Fatalf("rollup %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

func TestRollup(t *testing.T) {
	lake := t.TempDir()
	in := t.TempDir()
	corpus := filepath.Join(corpustest.Dir(t), "otlp", "metrics")
	if r := run(t, "ingest", "--lake", lake, "--progress", "never", corpus); r.code != 0 {
		t.Fatalf("ingest corpus: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	writeOTLP(t, filepath.Join(in, "syn.binpb"), synMetrics(synBase, 3*time.Hour, 0))
	if r := run(t, "ingest", "--lake", lake, "--tenant", "acme", "--progress", "never", filepath.Join(in, "syn.binpb")); r.code != 0 {
		t.Fatalf("ingest synthetic: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	dry := rollupRun(t, "--lake", lake, "--dry-run")
	if !strings.Contains(dry.stdout, "would roll up") || !strings.Contains(dry.stdout, "plan: 8 hours") {
		t.Fatalf("dry run:\n%s", dry.stdout)
	}
	if ls := run(t, "lake", "ls", "--lake", lake); strings.Contains(ls.stdout, "metrics_rollup") {
		t.Fatalf("dry run wrote rollups:\n%s", ls.stdout)
	}

	r := rollupRun(t, "--lake", lake, "--tiers", "1m,5m,1h")
	if m := rolledRE.FindStringSubmatch(r.stdout); m == nil || m[1] != "8" {
		t.Fatalf("first rollup:\n%s", r.stdout)
	}
	t.Log(rollupCrosscheck(t, lake))
	t.Logf("%d gauge windows: sketch quantiles within 1%% of DuckDB", checkQuantiles(t, lake))
	if r := rollupRun(t, "--lake", lake); !strings.Contains(r.stdout, "rolled up 0 hours") {
		t.Fatalf("nothing changed, yet:\n%s", r.stdout)
	}

	// Late data into an hour already rolled up: only that hour is
	// recomputed, its rollups replaced (the checker reads live files and
	// fails on duplicate windows).
	lateHour := synBase.Add(time.Hour)
	writeOTLP(t, filepath.Join(in, "late.binpb"), synMetrics(lateHour, 20*time.Minute, 3*time.Second))
	if r := run(t, "ingest", "--lake", lake, "--tenant", "acme", "--progress", "never", filepath.Join(in, "late.binpb")); r.code != 0 {
		t.Fatalf("ingest late data: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = rollupRun(t, "--lake", lake)
	if m := rolledRE.FindStringSubmatch(r.stdout); m == nil || m[1] != "1" || !strings.Contains(r.stdout, "late data") ||
		!strings.Contains(r.stdout, lateHour.Format("dt=2006-01-02/hour=15")) {
		t.Fatalf("rollup after late data:\n%s", r.stdout)
	}
	t.Log(rollupCrosscheck(t, lake))
	checkQuantiles(t, lake)
	// The replaced rollups left the Hive tree at the swap: a raw glob
	// reads exactly the live rollup rows, at once, not those of the
	// replaced files as well.
	liveRollup, replacedRollup := catalogRows(t, lake, "metrics_rollup")
	if g := globRows(t, lake, "metrics_rollup")["metrics_rollup"]; replacedRollup == 0 || g != liveRollup {
		t.Fatalf("right after the rollup a glob reads %d metrics_rollup rows, want the %d live (%d replaced)", g, liveRollup, replacedRollup)
	}

	// The catalog can be rebuilt from the files: levels (tiers), times
	// and row counts come back from the footers.
	before := run(t, "lake", "ls", "--lake", lake)
	if !strings.Contains(before.stdout, "metrics_rollup") {
		t.Fatalf("lake ls lacks metrics_rollup:\n%s", before.stdout)
	}
	if r := run(t, "lake", "rebuild-catalog", "--lake", lake); r.code != 0 {
		t.Fatalf("rebuild-catalog: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := run(t, "lake", "ls", "--lake", lake); after.stdout != before.stdout {
		t.Errorf("lake ls after rebuild differs:\nbefore:\n%s\nafter:\n%s", before.stdout, after.stdout)
	}

	if r := run(t, "rollup", "--lake", lake, "--tiers", "1m,7m"); r.code != 2 || !strings.Contains(r.stderr, "does not divide 1h") {
		t.Fatalf("bad tiers: exit %d\n%s", r.code, r.stderr)
	}
}

// catalogRows sums the rows of table's live and of its replaced segments.
func catalogRows(t *testing.T, lake, table string) (live, replaced int64) {
	t.Helper()
	cat, err := catalog.Open(context.Background(), filepath.Join(lake, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	segs, err := cat.List(context.Background(), catalog.Filter{Table: table, IncludeReplaced: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		if s.ReplacedAt.IsZero() {
			live += s.Rows
		} else {
			replaced += s.Rows
		}
	}
	return live, replaced
}
