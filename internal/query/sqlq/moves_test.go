package sqlq

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/compact"
)

// TestSessionOutlivesSwapAndSweep: a session reads the files it listed at
// Open even after compaction moved them out of the Hive tree and the
// sweeper deleted them: they were hard-linked into its directory.
func TestSessionOutlivesSwapAndSweep(t *testing.T) {
	l := newTestLake(t)
	logs := corpustest.Files(t, "logs")
	l.ingest(t, "default", logs...)
	l.ingest(t, "default", logs...) // two files per partition: something to compact
	e := l.open(t, Options{TempDir: t.TempDir()})
	want := l.counts["default"].Logs // both ingests
	if got := count(t, e, "SELECT count(*) FROM logs"); got != int64(want) || want == 0 {
		t.Fatalf("before: %d logs, want %d", got, want)
	}
	ctx := context.Background()
	store := lake.NewLocalStore(l.root)
	jobs, err := compact.Plan(ctx, l.cat, compact.Options{})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	for _, j := range jobs {
		if _, err := compact.Run(ctx, l.cat, store, j, compact.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	sr, err := compact.Sweep(ctx, l.cat, store, compact.SweepOptions{Grace: -1})
	if err != nil || sr.Files == 0 {
		t.Fatalf("sweep: %+v, %v", sr, err)
	}
	if got := count(t, e, "SELECT count(*) FROM logs"); got != int64(want) {
		t.Fatalf("after compaction and sweep: the session reads %d logs, want %d", got, want)
	}
}
