package pipeline

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/compact"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// A start-up orphan sweep must not delete the written but not yet
// catalogued outputs of a compaction or rollup running in another process
// (upkeep does not take the lake lock), and must still sweep other
// partitions.
func TestSweepOrphansSparesRunningCompaction(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	store := lake.NewLocalStore(root)
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()

	// Three small segments in one partition, from real corpus logs.
	var b signal.Logs
	var pb []byte
	for _, p := range corpustest.Files(t, "logs") {
		if strings.HasSuffix(p, ".binpb") {
			pb = corpustest.Read(t, p)
			break
		}
	}
	if pb == nil {
		t.Fatal("no uncompressed logs file in the corpus")
	}
	if err := otlp.DecodeLogs(&b, pb); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 6, 1, 12, 30, 0, 0, time.UTC)
	for range 3 {
		var segs []catalog.Segment
		w, err := lake.NewWriter(lake.Options{Store: store, Now: func() time.Time { return now }},
			func(s lake.Segment) error { segs = append(segs, s.CatalogRow()); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteLogs("acme", &b); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := cat.AddSegments(ctx, segs...); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := compact.Plan(ctx, cat, compact.Options{})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	job := jobs[0]
	// An orphan of a crashed ingest in another partition: must go.
	const stray = "logs/tenant=other/dt=2025-01-02/hour=03/stray.parquet"
	sw, err := store.Create(stray)
	if err != nil {
		t.Fatal(err)
	}
	sw.Write([]byte("x"))
	if err := sw.Commit(); err != nil {
		t.Fatal(err)
	}

	paused, resume := make(chan struct{}), make(chan struct{})
	type runResult struct {
		res compact.Result
		err error
	}
	done := make(chan runResult)
	go func() {
		res, err := compact.Run(ctx, cat, store, job, compact.Options{
			BeforeReplace: func(context.Context, compact.Job) error {
				close(paused)
				<-resume
				return nil
			},
		})
		done <- runResult{res, err}
	}()
	waittest.Recv(t, paused, "the compaction to reach its replace")
	// A rollup in flight: its output, announced by an intent under the
	// rollup lease, lies in a metrics_rollup partition whose compaction
	// lease is free.
	const rollupOut = "metrics_rollup/tenant=acme/dt=2025-06-01/hour=12/tier.parquet"
	rollupKey := "rollup/metrics/tenant=acme/dt=2025-06-01/hour=12"
	if ok, err := cat.TryLease(ctx, rollupKey, "rollup", time.Minute); err != nil || !ok {
		t.Fatalf("rollup lease: %v %v", ok, err)
	}
	rw, err := lake.NewIntentStore(ctx, store, cat, rollupKey, "rollup").Create(rollupOut)
	if err != nil {
		t.Fatal(err)
	}
	rw.Write([]byte("x"))
	if err := rw.Commit(); err != nil {
		t.Fatal(err)
	}
	// Upkeep runs stage their outputs outside the Hive tree until the swap.
	var outputs []string
	if err := store.Walk(catalog.StagingPath(job.Dir()), func(p string, _ int64) error {
		outputs = append(outputs, p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(outputs) == 0 {
		t.Fatal("the paused compaction wrote no output files")
	}

	res, err := sweepOrphans(ctx, cat, store, 10, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 1 {
		t.Fatalf("sweep %+v; want the stray removed", res)
	}
	for _, p := range append(outputs, catalog.StagingPath(rollupOut)) {
		if _, err := store.Open(p); err != nil {
			t.Fatalf("sweep removed the compaction output %q: %v", p, err)
		}
	}
	close(resume)
	r := waittest.Recv(t, done, "the compaction once resumed")
	if r.err != nil || r.res.Skipped || len(r.res.Outputs) != len(outputs) {
		t.Fatalf("compaction after the sweep: %+v, %v", r.res, r.err)
	}
	live, err := cat.List(ctx, catalog.Filter{Table: job.Table, Tenant: job.Tenant})
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for _, s := range live {
		if _, err := store.Open(s.Path); err != nil {
			t.Fatalf("live segment %q has no file: %v", s.Path, err)
		}
		rows += s.Rows
	}
	if want := int64(3 * b.Len()); rows != want {
		t.Fatalf("live rows %d, want %d", rows, want)
	}
	// The sweep released the leases it took: another owner can take them.
	if ok, err := cat.TryLease(ctx, compact.LeaseKeyForDir("logs/tenant=other/dt=2025-01-02/hour=03"), "x", time.Minute); err != nil || !ok {
		t.Fatalf("orphan sweep kept its lease: %v %v", ok, err)
	}
}
