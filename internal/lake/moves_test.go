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

// movesLake is a local lake and its SQLite catalog, for ApplyMoves' tests.
type movesLake struct {
	t     *testing.T
	ctx   context.Context
	root  string
	cat   *catalog.Catalog
	local *lake.LocalStore
}

func newMovesLake(t *testing.T) *movesLake {
	ctx := context.Background()
	root := t.TempDir()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return &movesLake{t: t, ctx: ctx, root: root, cat: cat, local: lake.NewLocalStore(root)}
}

// put writes a file at p.
func (l *movesLake) put(p string) {
	l.t.Helper()
	full := filepath.Join(l.root, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
		l.t.Fatal(err)
	}
}

func (l *movesLake) exists(p string) bool {
	_, err := os.Stat(filepath.Join(l.root, filepath.FromSlash(p)))
	return err == nil
}

// segment is a segment named name in hour h of 2024-05-01.
func (l *movesLake) segment(h int, name string) catalog.Segment {
	start := time.Date(2024, 5, 1, h, 0, 0, 0, time.UTC).UnixNano()
	return catalog.Segment{Table: "logs", Tenant: "t", Day: "2024-05-01", Hour: h,
		Path:    catalog.PartitionDir("logs", "t", "2024-05-01", h) + "/" + name + ".parquet",
		MinTime: start, MaxTime: start + 1, Rows: 10, Bytes: 100, SchemaHash: "x"}
}

// add writes and catalogues the segments named names in hour h.
func (l *movesLake) add(h int, names ...string) []catalog.Segment {
	l.t.Helper()
	var segs []catalog.Segment
	for _, n := range names {
		s := l.segment(h, n)
		l.put(s.Path)
		segs = append(segs, s)
	}
	if err := l.cat.AddSegments(l.ctx, segs...); err != nil {
		l.t.Fatal(err)
	}
	return segs
}

// swap replaces hour h's live segments with out, staged, and journals the
// moves, as a compaction killed right after its catalog commit leaves them.
func (l *movesLake) swap(h int, out catalog.Segment) {
	l.t.Helper()
	s := l.segment(h, "")
	live, err := l.cat.List(l.ctx, catalog.Filter{Table: "logs", Tenant: "t", From: s.MinTime, To: s.MaxTime})
	if err != nil {
		l.t.Fatal(err)
	}
	var ids []int64
	for _, s := range live {
		ids = append(ids, s.ID)
	}
	l.put(catalog.StagingPath(out.Path))
	key := "compact/" + catalog.PartitionDir("logs", "t", "2024-05-01", h)
	if ok, err := l.cat.TryLease(l.ctx, key, "me", time.Minute); err != nil || !ok {
		l.t.Fatalf("lease: %v %v", ok, err)
	}
	if err := l.cat.AddIntent(l.ctx, key, "me", out.Path); err != nil {
		l.t.Fatal(err)
	}
	if err := l.cat.ReplaceIntents(l.ctx, key, "me", ids, []catalog.Segment{out}); err != nil {
		l.t.Fatal(err)
	}
}

// TestApplyMovesKeepsInputsUntilOutputsArrive: when a swap's output
// cannot be moved into the Hive tree (S3 refusing the copy), its inputs
// stay in the tree too, so a glob over the tree still counts every row
// once instead of none; the held moves stay pending and a later
// ApplyMoves does them all, in order. A swap whose outputs did arrive
// moves its inputs out as before.
func TestApplyMovesKeepsInputsUntilOutputsArrive(t *testing.T) {
	l := newMovesLake(t)
	ctx, cat, local, exists := l.ctx, l.cat, l.local, l.exists
	// Two partitions, each with two inputs compacted into one staged output.
	type swap struct {
		in  []catalog.Segment
		out catalog.Segment
	}
	var swaps []swap
	for h := range 2 {
		in, out := l.add(h, "a", "b"), l.segment(h, "out")
		l.swap(h, out)
		swaps = append(swaps, swap{in, out})
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
	l := newMovesLake(t)
	l.add(3, "a", "b")
	out1, out2 := l.segment(3, "out1"), l.segment(3, "out2")
	l.swap(3, out1) // killed before its moves
	l.swap(3, out2) // replaces out1, still staged
	// out2's run finishes its own swap: out1 goes from _staging/ to the
	// trash; then the sweeper, with no grace, deletes it there.
	lake.FinishSwap(l.ctx, l.cat, l.local, []catalog.Segment{out1}, []catalog.Segment{out2}, nil)
	if err := os.Remove(filepath.Join(l.root, filepath.FromSlash(catalog.TrashPath(out1.Path)))); err != nil {
		t.Fatal(err)
	}

	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	if _, err := lake.ApplyMoves(l.ctx, l.cat, l.local, nil, log); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logged.String(), "neither staged nor in place") {
		t.Errorf("warned of a replaced file the sweeper deleted:\n%s", logged.String())
	}
	if pending, err := l.cat.Moves(l.ctx); err != nil || len(pending) != 0 {
		t.Errorf("moves left: %+v, %v", pending, err)
	}

	// A live segment whose staged file is gone before its move: warned of.
	out3 := l.segment(3, "out3")
	l.swap(3, out3)
	if err := os.Remove(filepath.Join(l.root, filepath.FromSlash(catalog.StagingPath(out3.Path)))); err != nil {
		t.Fatal(err)
	}
	logged.Reset()
	if _, err := lake.ApplyMoves(l.ctx, l.cat, l.local, nil, log); err != nil {
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
	l := newMovesLake(t)
	// Ten partitions, each swapped (two inputs for one staged output) by
	// a run killed before its moves: 30 moves pending.
	for h := range 10 {
		l.add(h, "a", "b")
		l.swap(h, l.segment(h, "out"))
	}
	tried := 0
	down := &failingMoves{l.local, func(string) bool { tried++; return true }}
	n, err := lake.ApplyMoves(l.ctx, l.cat, down, nil, nil)
	if n != 0 || err == nil || !strings.Contains(err.Error(), "left pending") {
		t.Fatalf("ApplyMoves against a dead store: %d, %v; want 0 and an error saying moves are left pending", n, err)
	}
	if tried != 3 {
		t.Errorf("ApplyMoves tried %d moves against a dead store, want 3", tried)
	}
	if pending, err := l.cat.Moves(l.ctx); err != nil || len(pending) != 30 {
		t.Fatalf("pending moves: %d, %v; want all 30", len(pending), err)
	}
	if n, err := lake.ApplyMoves(l.ctx, l.cat, l.local, nil, nil); err != nil || n != 30 {
		t.Fatalf("ApplyMoves once the store answers: %d, %v; want all 30", n, err)
	}
}
