package compact

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// globbed returns the sorted rows of every file of table on disk, live,
// replaced or uncatalogued: what read_parquet('<table>/**/*.parquet') sees.
func globbed(t *testing.T, e *lakeEnv, table string) []string {
	t.Helper()
	var all []string
	if err := e.store.Walk(table+"/", func(p string, _ int64) error {
		all = append(all, fileRows(t, e.store, p)...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	return all
}

func intents(t *testing.T, cat *catalog.Catalog) []catalog.Intent {
	t.Helper()
	ins, err := cat.Intents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

func noIntents(t *testing.T, cat *catalog.Catalog) {
	t.Helper()
	if ins := intents(t, cat); len(ins) != 0 {
		t.Fatalf("intents left behind: %+v", ins)
	}
}

func fileExists(e *lakeEnv, p string) bool {
	_, err := os.Stat(filepath.Join(e.root, filepath.FromSlash(p)))
	return !errors.Is(err, fs.ErrNotExist)
}

// killedRun leaves what a compaction of job killed between writing an
// output and its swap leaves: under owner's lease of ttl, an intent and
// its file, a copy of the job's first input, staged outside the Hive tree.
// It returns the file's (staged) path.
func killedRun(t *testing.T, e *lakeEnv, job Job, owner string, ttl time.Duration) string {
	t.Helper()
	ctx := context.Background()
	if ok, err := e.cat.TryLease(ctx, job.LeaseKey(), owner, ttl); err != nil || !ok {
		t.Fatalf("lease for %s: %v %v", owner, ok, err)
	}
	out := lake.NewIntentStore(ctx, e.store, e.cat, job.LeaseKey(), owner)
	p := job.Dir() + "/killed-" + owner + ".parquet"
	r, err := e.store.Open(job.Inputs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := out.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, io.NewSectionReader(r, 0, r.Size())); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return catalog.StagingPath(p)
}

// TestCompactCleansKilledRun: the outputs a killed compaction left behind
// are deleted by the next Run on the partition and by Sweep, never while
// another owner holds the partition's lease; then a glob over the lake
// reads exactly the rows the catalog lists.
func TestCompactCleansKilledRun(t *testing.T) {
	e := newEnv(t)
	ingestLogs(t, e)
	ingestTraces(t, e)
	ctx := context.Background()
	jobs, err := Plan(ctx, e.cat, Options{})
	if err != nil || len(jobs) < 2 {
		t.Fatalf("plan: %d jobs, %v; want 2", len(jobs), err)
	}
	j1, j2 := jobs[0], jobs[len(jobs)-1]
	if j1.Table == j2.Table {
		t.Fatalf("want jobs of two tables, got %s and %s", j1.Dir(), j2.Dir())
	}
	before1, before2 := globbed(t, e, j1.Table), globbed(t, e, j2.Table)
	const ttl = 300 * time.Millisecond

	p1 := killedRun(t, e, j1, "killed1", time.Minute)
	// Staged: a glob never reads it.
	if got := globbed(t, e, j1.Table); !fileExists(e, p1) || !slices.Equal(got, before1) {
		t.Fatalf("a glob reads %d rows with the killed run's output staged (%v), want the %d ingested", len(got), fileExists(e, p1), len(before1))
	}
	// Its lease has not expired: the killed run might still be alive.
	if res, err := Run(ctx, e.cat, e.store, j1, Options{Logger: quiet}); err != nil || !res.Skipped {
		t.Fatalf("run under the killed run's lease: %+v, %v", res, err)
	}
	sr, err := Sweep(ctx, e.cat, e.store, SweepOptions{Grace: -1, Logger: quiet})
	if err != nil || sr.Uncommitted != 0 || sr.UncommittedLeased != 1 || !fileExists(e, p1) {
		t.Fatalf("sweep under the killed run's lease: %+v, %v", sr, err)
	}
	// Expired (as if: released), but held by someone else now: still
	// left alone.
	if err := e.cat.ReleaseLease(ctx, j1.LeaseKey(), "killed1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.cat.TryLease(ctx, j1.LeaseKey(), "other", time.Minute); err != nil || !ok {
		t.Fatalf("other's lease: %v %v", ok, err)
	}
	sr, err = Sweep(ctx, e.cat, e.store, SweepOptions{Grace: -1, Logger: quiet})
	if err != nil || sr.Uncommitted != 0 || sr.UncommittedLeased != 1 || !fileExists(e, p1) || len(intents(t, e.cat)) != 1 {
		t.Fatalf("sweep under another owner's lease: %+v, %v", sr, err)
	}
	if err := e.cat.ReleaseLease(ctx, j1.LeaseKey(), "other"); err != nil {
		t.Fatal(err)
	}
	// The next run on the partition deletes the file, then compacts.
	res, err := Run(ctx, e.cat, e.store, j1, Options{Logger: quiet})
	if err != nil || res.Skipped {
		t.Fatalf("run after the killed run's lease expired: %+v, %v", res, err)
	}
	if fileExists(e, p1) {
		t.Fatalf("the killed run's output %s is still there", p1)
	}
	noIntents(t, e.cat)

	// The sweeper does the same for a partition no run comes back to,
	// and only within its table filter.
	p2 := killedRun(t, e, j2, "killed2", ttl)
	time.Sleep(ttl + 50*time.Millisecond)
	sr, err = Sweep(ctx, e.cat, e.store, SweepOptions{Grace: -1, Table: j1.Table, Logger: quiet})
	if err != nil || sr.Uncommitted != 0 || !fileExists(e, p2) {
		t.Fatalf("sweep of another table: %+v, %v", sr, err)
	}
	sr, err = Sweep(ctx, e.cat, e.store, SweepOptions{Grace: -1, DryRun: true, Logger: quiet})
	if err != nil || sr.Uncommitted != 1 || !fileExists(e, p2) {
		t.Fatalf("dry run: %+v, %v", sr, err)
	}
	sr, err = Sweep(ctx, e.cat, e.store, SweepOptions{Grace: -1, Logger: quiet})
	if err != nil || sr.Uncommitted != 1 || sr.UncommittedLeased != 0 || fileExists(e, p2) {
		t.Fatalf("sweep after the killed run's lease expired: %+v, %v", sr, err)
	}
	noIntents(t, e.cat)
	// Replaced inputs swept too: a glob reads exactly the live rows, which
	// are the rows ingested.
	for _, c := range []struct {
		table  string
		before []string
	}{{j1.Table, before1}, {j2.Table, before2}} {
		if got := globbed(t, e, c.table); !slices.Equal(got, c.before) {
			t.Fatalf("%s: a glob reads %d rows, want the %d ingested", c.table, len(got), len(c.before))
		}
		if got := visible(t, e.cat, e.store, c.table); !slices.Equal(got, c.before) {
			t.Fatalf("%s: %d live rows, want the %d ingested", c.table, len(got), len(c.before))
		}
	}
	// The lease the sweeper took is free again.
	if ok, err := e.cat.TryLease(ctx, j2.LeaseKey(), "after", time.Minute); err != nil || !ok {
		t.Fatalf("lease after the sweep: %v %v", ok, err)
	}
}

// TestCompactStalledRunCannotCommit: a run that lost its lease while
// stalled before its swap, while the next holder deleted its outputs and
// compacted the partition, fails with ErrLeaseLost and commits nothing.
func TestCompactStalledRunCannotCommit(t *testing.T) {
	e := newEnv(t)
	ingestLogs(t, e)
	ctx := context.Background()
	before := visible(t, e.cat, e.store, lake.TableLogs)
	jobs, err := Plan(ctx, e.cat, Options{})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	j := jobs[0]
	var next Result
	_, err = Run(ctx, e.cat, e.store, j, Options{Owner: "stalled", Logger: quiet,
		BeforeReplace: func(ctx context.Context, j Job) error {
			if n := len(intents(t, e.cat)); n == 0 {
				t.Error("no intents for the outputs of a run about to swap")
			}
			// Its lease gone (as if expired), the next run takes over.
			if err := e.cat.ReleaseLease(ctx, j.LeaseKey(), "stalled"); err != nil {
				return err
			}
			var err error
			next, err = Run(ctx, e.cat, e.store, j, Options{Owner: "next", Logger: quiet})
			if err != nil || next.Skipped {
				t.Errorf("next run: %+v, %v", next, err)
			}
			return nil
		}})
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, catalog.ErrLeaseNotHeld) {
		t.Fatalf("stalled run: %v, want ErrLeaseLost", err)
	}
	noIntents(t, e.cat)
	var want []string
	for _, s := range next.Outputs {
		want = append(want, s.Path)
	}
	var got []string
	for _, s := range live(t, e, j) {
		got = append(got, s.Path)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("live after both runs: %v, want the next run's outputs %v", got, want)
	}
	if got := visible(t, e.cat, e.store, lake.TableLogs); !slices.Equal(got, before) {
		t.Fatal("visible rows changed")
	}
	// No file of the stalled run is left: only inputs and the next run's outputs.
	files := map[string]bool{}
	for _, s := range append(j.Inputs, next.Outputs...) {
		files[s.Path] = true
	}
	for _, p := range lakeFiles(t, e) {
		if path.Dir(p) == j.Dir() && !files[p] || strings.HasPrefix(p, catalog.StagingDir+"/") {
			t.Fatalf("stray file %s", p)
		}
	}
}
