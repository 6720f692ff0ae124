package compact

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// refusingStaged is a store whose Rename fails for files coming out of
// the staging area, as S3 answering 503 to every CopyObject of them does.
type refusingStaged struct{ *lake.LocalStore }

func (s refusingStaged) Rename(src, dst string) error {
	if catalog.IsOutsideTree(src) {
		return errors.New("injected: 503 SlowDown")
	}
	return s.LocalStore.Rename(src, dst)
}

// TestSweepKeepsInputsOfStagedOutputs: a swap committed, but its output
// could not be moved into the Hive tree. The sweep, even with no grace,
// leaves the inputs in place (a glob over the tree keeps counting their
// rows) until a sweep has moved the output in; then it deletes them.
func TestSweepKeepsInputsOfStagedOutputs(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	local := lake.NewLocalStore(root)
	file := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	put := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(file(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file(p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(p string) bool { _, err := os.Stat(file(p)); return err == nil }
	dir := catalog.PartitionDir("logs", "t", "2024-05-01", 3)
	start := time.Date(2024, 5, 1, 3, 0, 0, 0, time.UTC).UnixNano()
	mk := func(name string) catalog.Segment {
		return catalog.Segment{Table: "logs", Tenant: "t", Day: "2024-05-01", Hour: 3, Path: dir + "/" + name + ".parquet",
			MinTime: start, MaxTime: start + 1, Rows: 10, Bytes: 100, SchemaHash: "x"}
	}
	a, b, out := mk("a"), mk("b"), mk("out")
	put(a.Path)
	put(b.Path)
	put(catalog.StagingPath(out.Path))
	if err := cat.AddSegments(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	live, err := cat.List(ctx, catalog.Filter{})
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
	if err := cat.ReleaseLease(ctx, key, "me"); err != nil {
		t.Fatal(err)
	}

	res, err := Sweep(ctx, cat, refusingStaged{local}, SweepOptions{Grace: -1})
	if err == nil {
		t.Fatalf("sweep with the output's move failing: no error (%+v)", res)
	}
	for _, p := range []string{a.Path, b.Path} {
		if !exists(p) {
			t.Errorf("the sweep deleted %s while the output replacing it is still staged: a glob misses its rows", p)
		}
	}
	if res.Held != 2 || res.Files != 0 {
		t.Errorf("sweep result %+v: want 2 held, 0 files deleted", res)
	}

	res, err = Sweep(ctx, cat, local, SweepOptions{Grace: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !exists(out.Path) || exists(a.Path) || exists(b.Path) || exists(catalog.TrashPath(a.Path)) {
		t.Errorf("after a working sweep (%+v): output in place %v, inputs in place %v %v", res, exists(out.Path), exists(a.Path), exists(b.Path))
	}
	if all, _ := cat.List(ctx, catalog.Filter{IncludeReplaced: true}); len(all) != 1 {
		t.Errorf("catalog after the sweeps: %+v; want the output only", all)
	}
}
