package rollup

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/compact"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// corpusLake writes the corpus metrics as three segments per hour.
func corpusLake(t *testing.T) *env {
	e := newEnv(t)
	all := corpusMetrics(t)
	var parts [3]signal.Metrics
	for i := range all.Len() {
		parts[i%3].CopyFrom(all, i)
	}
	for i := range parts {
		e.write(t, "acme", time.Now(), &parts[i])
	}
	return e
}

func liveSegs(t *testing.T, cat *catalog.Catalog, table string) []catalog.Segment {
	t.Helper()
	segs, err := cat.List(context.Background(), catalog.Filter{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// rolledPoints sums the points column of every live rollup file of one
// tier, which must equal the raw points rolled up (each counted once).
func rolledPoints(t *testing.T, e *env, level int) (points int64, windows int64) {
	t.Helper()
	for _, s := range liveSegs(t, e.cat, Table) {
		if s.Level != level {
			continue
		}
		h := newHour(0, 1)
		r, err := e.store.Open(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := openParquet(r, s.Path)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := pf.Lookup(MetaTier); v != TierName(TierOfLevel(level)) {
			t.Fatalf("%s: footer tier %q, level %d", s.Path, v, level)
		}
		for _, rg := range pf.RowGroups() {
			leaf, _ := pf.Schema().Lookup("points")
			vals, err := h.cr.read(rg, leaf.ColumnIndex)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				points += int64(v.Uint64())
			}
			windows += rg.NumRows()
		}
		r.Close()
	}
	return points, windows
}

func rawRows(t *testing.T, e *env) (n int64) {
	for _, s := range liveSegs(t, e.cat, lake.TableMetrics) {
		n += s.Rows
	}
	return n
}

func runAll(t *testing.T, e *env, cat *catalog.Catalog, opts Options) (done, skipped int) {
	t.Helper()
	jobs, err := Plan(context.Background(), cat, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		res, err := Run(context.Background(), cat, e.store, j, opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Skipped {
			skipped++
		} else {
			done++
		}
	}
	return done, skipped
}

func TestRunSkipsLeasedHour(t *testing.T) {
	e := corpusLake(t)
	ctx := context.Background()
	jobs, err := Plan(ctx, e.cat, Options{Store: e.store})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	j := jobs[0]
	if ok, err := e.cat.TryLease(ctx, j.LeaseKey(), "someone-else", time.Minute); !ok || err != nil {
		t.Fatalf("lease: %v %v", ok, err)
	}
	res, err := Run(ctx, e.cat, e.store, j, Options{Logger: quiet})
	if err != nil || !res.Skipped {
		t.Fatalf("run on a leased hour: %+v, %v", res, err)
	}
	if n := len(liveSegs(t, e.cat, Table)); n != 0 {
		t.Fatalf("%d rollup segments written under another owner's lease", n)
	}
	if err := e.cat.ReleaseLease(ctx, j.LeaseKey(), "someone-else"); err != nil {
		t.Fatal(err)
	}
	if res, err := Run(ctx, e.cat, e.store, j, Options{Logger: quiet}); err != nil || res.Skipped || len(res.Outputs) != 3 {
		t.Fatalf("run after release: %+v, %v", res, err)
	}
}

// TestConcurrentRuns: two processes' worth of runners (own catalog
// handles, own owners) roll up the same lake at once; every hour is
// rolled up exactly once and the points add up.
func TestConcurrentRuns(t *testing.T) {
	e := corpusLake(t)
	dsn := filepath.Join(filepath.Dir(e.root), "catalog.db")
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cat, err := catalog.Open(context.Background(), dsn)
			if err != nil {
				t.Error(err)
				return
			}
			defer cat.Close()
			done, _ := runAll(t, e, cat, Options{Logger: quiet, Owner: "runner-" + string(rune('a'+i))})
			mu.Lock()
			total += done
			mu.Unlock()
		}()
	}
	waittest.Wait(t, &wg, "the concurrent rollup runs")
	hours := map[string]bool{}
	for _, s := range liveSegs(t, e.cat, lake.TableMetrics) {
		hours[catalog.PartitionDir("", s.Tenant, s.Day, s.Hour)] = true
	}
	ups := liveSegs(t, e.cat, Table)
	if len(ups) != 3*len(hours) {
		t.Fatalf("%d live rollup segments for %d hours (%d runs done), want 3 per hour", len(ups), len(hours), total)
	}
	raw := rawRows(t, e)
	for _, lvl := range []int{60, 300, 3600} {
		if p, _ := rolledPoints(t, e, lvl); p != raw {
			t.Fatalf("level %d: %d points rolled up, %d raw rows", lvl, p, raw)
		}
	}
	if done, _ := runAll(t, e, e.cat, Options{Logger: quiet, Store: e.store}); done != 0 {
		t.Fatalf("second pass rolled up %d hours", done)
	}
}

// TestLateDataCompactionRetention: new raw rows recompute an hour
// (replacing its rollups); compaction of the raw files (same rows, new
// segments) does not; retention removing the raw hour keeps the rollups.
func TestLateDataCompactionRetention(t *testing.T) {
	e := newEnv(t)
	batches := hourOfCorpus(t, 500, 5*time.Minute)
	e.write(t, "acme", benchHour.Add(time.Hour), batches[:6]...)
	ctx := context.Background()
	opts := Options{Logger: quiet, Store: e.store}
	if done, _ := runAll(t, e, e.cat, opts); done != 1 {
		t.Fatalf("first pass rolled up %d hours", done)
	}
	first := liveSegs(t, e.cat, Table)

	e.write(t, "acme", benchHour.Add(time.Hour), batches[6:]...) // late data
	jobs, err := Plan(ctx, e.cat, opts)
	if err != nil || len(jobs) != 1 || jobs[0].Reason != "late data" {
		t.Fatalf("plan after late data: %+v, %v", jobs, err)
	}
	if done, _ := runAll(t, e, e.cat, opts); done != 1 {
		t.Fatal("late data not rolled up")
	}
	second := liveSegs(t, e.cat, Table)
	if len(second) != 3 || second[0].ID == first[0].ID {
		t.Fatalf("rollups not replaced: before %v, after %v", first, second)
	}
	// Lineage: each new rollup file names the rollups it replaced, so a
	// catalog rebuild counts them once.
	for _, seg := range second {
		r, err := lake.OpenSegment(e.store, seg.Path)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(r, r.Size())
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := pf.Lookup(catalog.MetaReplaces); v != catalog.Lineage(first) {
			t.Fatalf("%s: %s = %q, want %q", seg.Path, catalog.MetaReplaces, v, catalog.Lineage(first))
		}
		r.Close()
	}
	for _, lvl := range []int{60, 300, 3600} {
		if p, _ := rolledPoints(t, e, lvl); p != rawRows(t, e) {
			t.Fatalf("level %d: %d points, %d raw rows", lvl, p, rawRows(t, e))
		}
	}

	// Compaction: same rows in new segments; no recompute.
	cjobs, err := compact.Plan(ctx, e.cat, compact.Options{Table: lake.TableMetrics})
	if err != nil || len(cjobs) != 1 {
		t.Fatalf("compaction plan: %d, %v", len(cjobs), err)
	}
	if _, err := compact.Run(ctx, e.cat, e.store, cjobs[0], compact.Options{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	if jobs, err := Plan(ctx, e.cat, opts); err != nil || len(jobs) != 0 {
		t.Fatalf("plan after compaction: %+v, %v", jobs, err)
	}
	// Without a store Plan cannot read the footer and recomputes: safe.
	if jobs, err := Plan(ctx, e.cat, Options{}); err != nil || len(jobs) != 1 {
		t.Fatalf("plan without a store after compaction: %+v, %v", jobs, err)
	}

	// Retention: the raw hour goes, its rollups stay.
	var ids []int64
	for _, s := range liveSegs(t, e.cat, lake.TableMetrics) {
		ids = append(ids, s.ID)
	}
	if err := e.cat.Replace(ctx, ids, nil); err != nil {
		t.Fatal(err)
	}
	if jobs, err := Plan(ctx, e.cat, opts); err != nil || len(jobs) != 0 {
		t.Fatalf("plan after retention: %+v, %v", jobs, err)
	}
	if n := len(liveSegs(t, e.cat, Table)); n != 3 {
		t.Fatalf("%d rollup segments after retention, want 3", n)
	}
}

func TestPlanTiersChanged(t *testing.T) {
	e := newEnv(t)
	e.write(t, "acme", benchHour.Add(time.Hour), hourOfCorpus(t, 200, 10*time.Minute)...)
	opts := Options{Logger: quiet, Store: e.store}
	runAll(t, e, e.cat, opts)
	opts.Tiers = []time.Duration{time.Minute, 10 * time.Minute}
	jobs, err := Plan(context.Background(), e.cat, opts)
	if err != nil || len(jobs) != 1 || jobs[0].Reason != "tiers changed" {
		t.Fatalf("plan with new tiers: %+v, %v", jobs, err)
	}
	runAll(t, e, e.cat, opts)
	segs := liveSegs(t, e.cat, Table)
	if len(segs) != 2 || segs[0].Level+segs[1].Level != 60+600 {
		t.Fatalf("segments after retiering: %+v", segs)
	}
	if _, err := Plan(context.Background(), e.cat, Options{Tiers: []time.Duration{2 * time.Hour}}); err == nil {
		t.Fatal("tier above 1h accepted")
	}
}
