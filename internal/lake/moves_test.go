package lake_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// failingMoves is a store whose Rename fails for sources that fail says,
// as S3 answering 503 to a CopyObject does.
type failingMoves struct {
	*lake.LocalStore
	fail func(src string) bool
}

func (s *failingMoves) Rename(src, dst string) error {
	if s.fail(src) {
		return errors.New("injected: 503 SlowDown")
	}
	return s.LocalStore.Rename(src, dst)
}

// TestApplyMovesKeepsInputsUntilOutputsArrive: when a swap's output
// cannot be moved into the Hive tree (S3 refusing the copy), its inputs
// stay in the tree too, so a glob over the tree still counts every row
// once instead of none; the held moves stay pending and a later
// ApplyMoves does them all, in order. A swap whose outputs did arrive
// moves its inputs out as before.
func TestApplyMovesKeepsInputsUntilOutputsArrive(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	local := lake.NewLocalStore(root)
	put := func(p string) {
		t.Helper()
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(p string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
		return err == nil
	}
	// Two partitions, each with two inputs compacted into one staged output.
	type swap struct {
		in  []catalog.Segment
		out catalog.Segment
	}
	var swaps []swap
	for h := range 2 {
		dir := catalog.PartitionDir("logs", "t", "2024-05-01", h)
		mk := func(name string) catalog.Segment {
			start := time.Date(2024, 5, 1, h, 0, 0, 0, time.UTC).UnixNano()
			return catalog.Segment{Table: "logs", Tenant: "t", Day: "2024-05-01", Hour: h,
				Path: dir + "/" + name + ".parquet", MinTime: start, MaxTime: start + 1, Rows: 10, Bytes: 100, SchemaHash: "x"}
		}
		a, b, out := mk("a"), mk("b"), mk("out")
		put(a.Path)
		put(b.Path)
		put(catalog.StagingPath(out.Path))
		if err := cat.AddSegments(ctx, a, b); err != nil {
			t.Fatal(err)
		}
		live, err := cat.List(ctx, catalog.Filter{Table: "logs", Tenant: "t", From: a.MinTime, To: a.MaxTime})
		if err != nil || len(live) != 2 {
			t.Fatalf("list: %v %v", live, err)
		}
		key := "compact/" + dir
		if ok, err := cat.TryLease(ctx, key, "me", time.Minute); err != nil || !ok {
			t.Fatalf("lease: %v %v", ok, err)
		}
		if err := cat.AddIntent(ctx, key, "me", out.Path); err != nil {
			t.Fatal(err)
		}
		if err := cat.ReplaceIntents(ctx, key, "me", []int64{live[0].ID, live[1].ID}, []catalog.Segment{out}); err != nil {
			t.Fatal(err)
		}
		swaps = append(swaps, swap{[]catalog.Segment{a, b}, out})
	}

	// S3 refuses to copy the first partition's output into place.
	broken := swaps[0].out.Path
	st := &failingMoves{local, func(src string) bool { return src == catalog.StagingPath(broken) }}
	n, err := lake.ApplyMoves(ctx, cat, st, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("ApplyMoves with a failing move: %d, %v; want the injected error", n, err)
	}
	for _, in := range swaps[0].in {
		if !exists(in.Path) {
			t.Errorf("%s left the Hive tree while the output replacing it is still staged: a glob misses its rows", in.Path)
		}
	}
	if exists(broken) || !exists(catalog.StagingPath(broken)) {
		t.Errorf("the failed output moved anyway")
	}
	// The other swap is unaffected.
	if !exists(swaps[1].out.Path) {
		t.Errorf("the second swap's output is not in place")
	}
	for _, in := range swaps[1].in {
		if exists(in.Path) || !exists(catalog.TrashPath(in.Path)) {
			t.Errorf("the second swap's input %s did not move to the trash", in.Path)
		}
	}
	if n != 3 {
		t.Errorf("ApplyMoves did %d moves, want 3 (the second swap's)", n)
	}
	pending, err := cat.Moves(ctx)
	if err != nil || len(pending) != 3 {
		t.Fatalf("pending moves: %+v, %v; want the first swap's 3", pending, err)
	}

	// S3 answers again: the held moves are done, in order.
	if n, err := lake.ApplyMoves(ctx, cat, local, nil, nil); err != nil || n != 3 {
		t.Fatalf("ApplyMoves after the fault: %d, %v", n, err)
	}
	if !exists(broken) {
		t.Errorf("output %s not in place", broken)
	}
	for _, in := range swaps[0].in {
		if exists(in.Path) || !exists(catalog.TrashPath(in.Path)) {
			t.Errorf("%s did not move to the trash", in.Path)
		}
	}
}

// TestApplyMovesWarnsOnlyForMissingLiveFiles: a swap killed before its
// moves leaves its output staged; a later compaction that replaces that
// output takes it from _staging/ into the trash, and the sweeper may
// delete it there. The first swap's pending move into place then finds
// the file neither staged nor in place, and that is no loss: no warning.
// A live segment's file missing from both places is one, and is warned of.
func TestApplyMovesWarnsOnlyForMissingLiveFiles(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	local := lake.NewLocalStore(root)
	put := func(p string) {
		t.Helper()
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := catalog.PartitionDir("logs", "t", "2024-05-01", 3)
	start := time.Date(2024, 5, 1, 3, 0, 0, 0, time.UTC).UnixNano()
	mk := func(name string) catalog.Segment {
		return catalog.Segment{Table: "logs", Tenant: "t", Day: "2024-05-01", Hour: 3,
			Path: dir + "/" + name + ".parquet", MinTime: start, MaxTime: start + 1, Rows: 10, Bytes: 100, SchemaHash: "x"}
	}
	key := "compact/" + dir
	if ok, err := cat.TryLease(ctx, key, "me", time.Minute); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	// swap replaces the live segments with out, staged, and journals its
	// moves, as a compaction killed right after its commit leaves them.
	swap := func(out catalog.Segment) {
		t.Helper()
		live, err := cat.List(ctx, catalog.Filter{Table: "logs", Tenant: "t"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, s := range live {
			ids = append(ids, s.ID)
		}
		put(catalog.StagingPath(out.Path))
		if err := cat.AddIntent(ctx, key, "me", out.Path); err != nil {
			t.Fatal(err)
		}
		if err := cat.ReplaceIntents(ctx, key, "me", ids, []catalog.Segment{out}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := mk("a"), mk("b")
	put(a.Path)
	put(b.Path)
	if err := cat.AddSegments(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	out1, out2 := mk("out1"), mk("out2")
	swap(out1) // killed before its moves
	swap(out2) // replaces out1, still staged
	// out2's run finishes its own swap: out1 goes from _staging/ to the
	// trash; then the sweeper, with no grace, deletes it there.
	lake.FinishSwap(ctx, cat, local, []catalog.Segment{out1}, []catalog.Segment{out2}, nil)
	if err := os.Remove(filepath.Join(root, filepath.FromSlash(catalog.TrashPath(out1.Path)))); err != nil {
		t.Fatal(err)
	}

	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	if _, err := lake.ApplyMoves(ctx, cat, local, nil, log); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logged.String(), "neither staged nor in place") {
		t.Errorf("warned of a replaced file the sweeper deleted:\n%s", logged.String())
	}
	if pending, err := cat.Moves(ctx); err != nil || len(pending) != 0 {
		t.Errorf("moves left: %+v, %v", pending, err)
	}

	// A live segment whose staged file is gone before its move: warned of.
	out3 := mk("out3")
	swap(out3)
	if err := os.Remove(filepath.Join(root, filepath.FromSlash(catalog.StagingPath(out3.Path)))); err != nil {
		t.Fatal(err)
	}
	logged.Reset()
	if _, err := lake.ApplyMoves(ctx, cat, local, nil, log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "neither staged nor in place") || !strings.Contains(logged.String(), out3.Path) {
		t.Errorf("no warning of live segment %s whose file is gone:\n%s", out3.Path, logged.String())
	}
}

// TestApplyMovesStopsWhileTheStoreIsDown: against a store that fails
// every move (S3 down: each failure comes after its retries), ApplyMoves
// tries three moves, not every pending one, and leaves them all pending;
// once the store answers, the next run does them all.
func TestApplyMovesStopsWhileTheStoreIsDown(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	local := lake.NewLocalStore(root)
	put := func(p string) {
		t.Helper()
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Ten partitions, each swapped (two inputs for one staged output) by
	// a run killed before its moves: 30 moves pending.
	for h := range 10 {
		dir := catalog.PartitionDir("logs", "t", "2024-05-01", h)
		start := time.Date(2024, 5, 1, h, 0, 0, 0, time.UTC).UnixNano()
		mk := func(name string) catalog.Segment {
			return catalog.Segment{Table: "logs", Tenant: "t", Day: "2024-05-01", Hour: h,
				Path: dir + "/" + name + ".parquet", MinTime: start, MaxTime: start + 1, Rows: 10, Bytes: 100, SchemaHash: "x"}
		}
		a, b, out := mk("a"), mk("b"), mk("out")
		put(a.Path)
		put(b.Path)
		put(catalog.StagingPath(out.Path))
		if err := cat.AddSegments(ctx, a, b); err != nil {
			t.Fatal(err)
		}
		live, err := cat.List(ctx, catalog.Filter{Table: "logs", Tenant: "t", From: start, To: start + 1})
		if err != nil || len(live) != 2 {
			t.Fatalf("list: %v %v", live, err)
		}
		key := "compact/" + dir
		if ok, err := cat.TryLease(ctx, key, "me", time.Minute); err != nil || !ok {
			t.Fatalf("lease: %v %v", ok, err)
		}
		if err := cat.AddIntent(ctx, key, "me", out.Path); err != nil {
			t.Fatal(err)
		}
		if err := cat.ReplaceIntents(ctx, key, "me", []int64{live[0].ID, live[1].ID}, []catalog.Segment{out}); err != nil {
			t.Fatal(err)
		}
	}
	tried := 0
	down := &failingMoves{local, func(string) bool { tried++; return true }}
	n, err := lake.ApplyMoves(ctx, cat, down, nil, nil)
	if n != 0 || err == nil || !strings.Contains(err.Error(), "left pending") {
		t.Fatalf("ApplyMoves against a dead store: %d, %v; want 0 and an error saying moves are left pending", n, err)
	}
	if tried != 3 {
		t.Errorf("ApplyMoves tried %d moves against a dead store, want 3", tried)
	}
	if pending, err := cat.Moves(ctx); err != nil || len(pending) != 30 {
		t.Fatalf("pending moves: %d, %v; want all 30", len(pending), err)
	}
	if n, err := lake.ApplyMoves(ctx, cat, local, nil, nil); err != nil || n != 30 {
		t.Fatalf("ApplyMoves once the store answers: %d, %v; want all 30", n, err)
	}
}
