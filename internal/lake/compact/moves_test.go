package compact

import (
	"context"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// TestGlobExactAfterSwap: right after compaction, with the replaced files
// still inside their grace period, a glob over the Hive tree reads exactly
// the ingested rows (the replaced files are in the trash, the outputs in
// place, nothing staged), and a reader that listed the catalog before the
// swap still reads every row of the files it listed.
func TestGlobExactAfterSwap(t *testing.T) {
	e := newEnv(t)
	ingestLogs(t, e)
	ingestTraces(t, e)
	ctx := context.Background()
	tables := []string{lake.TableLogs, lake.TableTraces}
	before := map[string][]string{}
	listed := map[string][]catalog.Segment{}
	for _, table := range tables {
		before[table] = globbed(t, e, table)
		segs, err := e.cat.List(ctx, catalog.Filter{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		listed[table] = segs
	}
	if n := runAll(t, e.cat, e.store, Options{Logger: quiet}); n == 0 {
		t.Fatal("nothing compacted")
	}
	for _, table := range tables {
		if got := globbed(t, e, table); !slices.Equal(got, before[table]) {
			t.Fatalf("%s: a glob right after compaction reads %d rows, want the %d ingested", table, len(got), len(before[table]))
		}
		var old []string
		for _, s := range listed[table] {
			old = append(old, fileRows(t, e.store, s.Path)...)
		}
		slices.Sort(old)
		if !slices.Equal(old, before[table]) {
			t.Fatalf("%s: a reader of the catalog listed before the swap reads %d rows, want %d", table, len(old), len(before[table]))
		}
	}
	if moves, err := e.cat.Moves(ctx); err != nil || len(moves) != 0 {
		t.Fatalf("moves left after the runs: %v, %v", moves, err)
	}
	for _, p := range lakeFiles(t, e) {
		if len(p) > len(catalog.StagingDir) && p[:len(catalog.StagingDir)+1] == catalog.StagingDir+"/" {
			t.Fatalf("staged file left: %s", p)
		}
	}
}
