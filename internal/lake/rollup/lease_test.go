package rollup

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/compact"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// rollupFiles lists every file of the metrics_rollup table on disk.
func rollupFiles(t *testing.T, e *env) []string {
	t.Helper()
	var out []string
	if err := e.store.Walk(Table+"/", func(p string, _ int64) error { out = append(out, p); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func intentsOf(t *testing.T, cat *catalog.Catalog) []catalog.Intent {
	t.Helper()
	ins, err := cat.Intents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

// nothingCommitted checks that a failed run left no rollup behind: no
// segment, no file, no intent.
func nothingCommitted(t *testing.T, e *env) {
	t.Helper()
	if n := len(liveSegs(t, e.cat, Table)); n != 0 {
		t.Fatalf("%d rollup segments committed", n)
	}
	if got := rollupFiles(t, e); len(got) != 0 {
		t.Fatalf("files left behind: %v", got)
	}
	if ins := intentsOf(t, e.cat); len(ins) != 0 {
		t.Fatalf("intents left behind: %+v", ins)
	}
}

// TestRunRenewsLease: a rollup that takes longer than its lease's TTL
// keeps the lease (nobody else can take the hour meanwhile) and commits.
func TestRunRenewsLease(t *testing.T) {
	e := corpusLake(t)
	ctx := context.Background()
	jobs, err := Plan(ctx, e.cat, Options{Store: e.store})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	j := jobs[0]
	// Renewed every ttl/3: a loaded machine has delayed a renewal by over a
	// second (a 1.5 s lease was lost at load 16), so the lease outlives a
	// renewal late by up to 2.6 s.
	const ttl = 4 * time.Second
	var stolen atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(ttl / 2):
			}
			if ok, err := e.cat.TryLease(ctx, j.LeaseKey(), "intruder", ttl); err == nil && ok {
				stolen.Store(true)
				_ = e.cat.ReleaseLease(ctx, j.LeaseKey(), "intruder")
			}
		}
	})
	var once sync.Once
	start := time.Now()
	res, err := Run(ctx, e.cat, e.store, j, Options{LeaseTTL: ttl, Logger: quiet,
		// A slow step: the read stalls for several TTLs.
		Progress: func(_, _, _ int64) { once.Do(func() { time.Sleep(3 * ttl) }) },
	})
	close(stop)
	waittest.Wait(t, &wg, "the rollup run")
	if err != nil || res.Skipped || len(res.Outputs) != 3 {
		t.Fatalf("slow run: %+v, %v", res, err)
	}
	if took := time.Since(start); took < 2*ttl {
		t.Fatalf("the run took %v, not several TTLs", took)
	}
	if stolen.Load() {
		t.Fatal("another owner took the lease during a renewed run")
	}
	if ins := intentsOf(t, e.cat); len(ins) != 0 {
		t.Fatalf("intents left after the swap: %+v", ins)
	}
}

// TestRunLeaseLost: a rollup whose lease is taken away mid-run fails with
// ErrLeaseLost and commits nothing, wherever the loss is noticed.
func TestRunLeaseLost(t *testing.T) {
	for _, at := range []string{"read", "before replace"} {
		t.Run(at, func(t *testing.T) {
			e := corpusLake(t)
			ctx := context.Background()
			jobs, err := Plan(ctx, e.cat, Options{Store: e.store})
			if err != nil || len(jobs) == 0 {
				t.Fatalf("plan: %d jobs, %v", len(jobs), err)
			}
			j := jobs[0]
			steal := func() {
				_ = e.cat.ReleaseLease(ctx, j.LeaseKey(), "victim")
				if ok, err := e.cat.TryLease(ctx, j.LeaseKey(), "thief", time.Hour); err != nil || !ok {
					t.Errorf("thief: %v %v", ok, err)
				}
			}
			var once sync.Once
			opts := Options{Owner: "victim", LeaseTTL: time.Minute, Logger: quiet}
			switch at {
			case "read":
				opts.Progress = func(_, _, _ int64) { once.Do(steal) }
			case "before replace":
				opts.BeforeReplace = func(context.Context, Job) error { steal(); return nil }
			}
			_, err = Run(ctx, e.cat, e.store, j, opts)
			if !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("run that lost its lease: %v, want ErrLeaseLost", err)
			}
			nothingCommitted(t, e)
		})
	}
}

// TestRunFailureRemovesOutputs: a run failing at its swap removes its
// files and their intents.
func TestRunFailureRemovesOutputs(t *testing.T) {
	e := corpusLake(t)
	ctx := context.Background()
	jobs, err := Plan(ctx, e.cat, Options{Store: e.store})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	injected := errors.New("injected")
	_, err = Run(ctx, e.cat, e.store, jobs[0], Options{Logger: quiet,
		BeforeReplace: func(context.Context, Job) error {
			if n := len(intentsOf(t, e.cat)); n != 3 {
				t.Errorf("%d intents before the swap, want one per tier", n)
			}
			return injected
		}})
	if !errors.Is(err, injected) {
		t.Fatalf("run: %v", err)
	}
	nothingCommitted(t, e)
}

// killedRollup leaves what a rollup of job killed between writing a tier
// and its swap leaves: under owner's lease of ttl, an intent and its file,
// staged outside the Hive tree. It returns the file's (staged) path.
func killedRollup(t *testing.T, e *env, job Job, owner string, ttl time.Duration) string {
	t.Helper()
	ctx := context.Background()
	if ok, err := e.cat.TryLease(ctx, job.LeaseKey(), owner, ttl); err != nil || !ok {
		t.Fatalf("lease for %s: %v %v", owner, ok, err)
	}
	out := lake.NewIntentStore(ctx, e.store, e.cat, job.LeaseKey(), owner)
	p := catalog.PartitionDir(Table, job.Tenant, job.Day, job.Hour) + "/killed-" + owner + ".parquet"
	w, err := out.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("PAR1 half a rollup")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(rollupFiles(t, e), p) {
		t.Fatalf("a killed rollup's output %s is in the Hive tree", p)
	}
	return catalog.StagingPath(p)
}

// TestRunCleansKilledRollup: a killed rollup's output is deleted by the
// next run of its hour and by the sweeper, never while another owner
// holds the hour's lease.
func TestRunCleansKilledRollup(t *testing.T) {
	e := corpusLake(t)
	ctx := context.Background()
	jobs, err := Plan(ctx, e.cat, Options{Store: e.store})
	if err != nil || len(jobs) < 2 {
		t.Fatalf("plan: %d jobs, %v; want 2", len(jobs), err)
	}
	p1 := killedRollup(t, e, jobs[0], "killed1", time.Minute)
	p2 := killedRollup(t, e, jobs[1], "killed2", time.Minute)
	has := func(p string) bool {
		r, err := e.store.Open(p)
		if err == nil {
			r.Close()
		}
		return err == nil
	}
	if res, err := Run(ctx, e.cat, e.store, jobs[0], Options{Logger: quiet}); err != nil || !res.Skipped {
		t.Fatalf("run under the killed run's lease: %+v, %v", res, err)
	}
	sr, err := compact.Sweep(ctx, e.cat, e.store, compact.SweepOptions{Grace: -1, Logger: quiet})
	if err != nil || sr.Uncommitted != 0 || sr.UncommittedLeased != 2 || !has(p1) || !has(p2) {
		t.Fatalf("sweep under the killed runs' leases: %+v, %v", sr, err)
	}
	// The killed runs' leases expire (as if: released).
	for i, owner := range []string{"killed1", "killed2"} {
		if err := e.cat.ReleaseLease(ctx, jobs[i].LeaseKey(), owner); err != nil {
			t.Fatal(err)
		}
	}

	res, err := Run(ctx, e.cat, e.store, jobs[0], Options{Logger: quiet})
	if err != nil || res.Skipped || len(res.Outputs) != 3 || has(p1) {
		t.Fatalf("run after the killed run's lease expired: %+v, %v (killed output there: %v)", res, err, has(p1))
	}
	// The second hour, now held by another owner, is left alone by the
	// sweeper until that owner lets go.
	if ok, err := e.cat.TryLease(ctx, jobs[1].LeaseKey(), "other", time.Minute); err != nil || !ok {
		t.Fatalf("other's lease: %v %v", ok, err)
	}
	sr, err = compact.Sweep(ctx, e.cat, e.store, compact.SweepOptions{Grace: -1, Logger: quiet})
	if err != nil || sr.Uncommitted != 0 || sr.UncommittedLeased != 1 || !has(p2) {
		t.Fatalf("sweep under another owner's lease: %+v, %v", sr, err)
	}
	if err := e.cat.ReleaseLease(ctx, jobs[1].LeaseKey(), "other"); err != nil {
		t.Fatal(err)
	}
	sr, err = compact.Sweep(ctx, e.cat, e.store, compact.SweepOptions{Grace: -1, Logger: quiet})
	if err != nil || sr.Uncommitted != 1 || has(p2) {
		t.Fatalf("sweep after the lease was released: %+v, %v", sr, err)
	}
	if ins := intentsOf(t, e.cat); len(ins) != 0 {
		t.Fatalf("intents left: %+v", ins)
	}
	// What is on disk is exactly what the catalog lists.
	var want []string
	for _, s := range liveSegs(t, e.cat, Table) {
		want = append(want, s.Path)
	}
	if got := rollupFiles(t, e); len(got) != len(want) {
		t.Fatalf("rollup files on disk %v, catalogued %v", got, want)
	}
}
