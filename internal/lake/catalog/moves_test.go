package catalog

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestReplaceJournalsMoves: a swap journals, in its transaction, the moves
// of its files: the added ones from their staging paths into place
// (ReplaceIntents only), then the replaced ones into the trash; a failed
// swap journals nothing; DeleteMoves forgets them.
func TestReplaceJournalsMoves(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c := tg.open(t)
		a, b := seg("logs", "t", 3, "a", 0, 1), seg("logs", "t", 3, "b", 2, 3)
		if err := c.AddSegments(ctx, a, b); err != nil {
			t.Fatal(err)
		}
		live := mustList(t, c, Filter{})
		key := "compact/" + PartitionDir("logs", "t", "2024-05-01", 3)
		if ok, err := c.TryLease(ctx, key, "me", time.Minute); err != nil || !ok {
			t.Fatalf("lease: %v %v", ok, err)
		}
		out := seg("logs", "t", 3, "out", 0, 3)
		if err := c.AddIntent(ctx, key, "me", out.Path); err != nil {
			t.Fatal(err)
		}
		// Stale input: nothing journaled.
		if err := c.ReplaceIntents(ctx, key, "me", []int64{live[0].ID, 999}, []Segment{out}); !errors.Is(err, ErrStale) {
			t.Fatalf("stale replace: %v", err)
		}
		if ms, err := c.Moves(ctx); err != nil || len(ms) != 0 {
			t.Fatalf("moves after a failed swap: %v %v", ms, err)
		}
		if err := c.ReplaceIntents(ctx, key, "me", []int64{live[0].ID, live[1].ID}, []Segment{out}); err != nil {
			t.Fatal(err)
		}
		ms, err := c.Moves(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := [][2]string{
			{StagingPath(out.Path), out.Path},
			{a.Path, TrashPath(a.Path)},
			{b.Path, TrashPath(b.Path)},
		}
		if len(ms) != len(want) {
			t.Fatalf("moves %+v, want %v", ms, want)
		}
		for i, m := range ms {
			if m.Src != want[i][0] || m.Dst != want[i][1] || (i > 0 && m.ID <= ms[i-1].ID) {
				t.Fatalf("move %d: %+v, want %v", i, m, want[i])
			}
		}
		// Retention's Replace(ids, nil): the dropped file goes to the trash.
		cur := mustList(t, c, Filter{})
		if err := c.Replace(ctx, []int64{cur[0].ID}, nil); err != nil {
			t.Fatal(err)
		}
		ms2, _ := c.Moves(ctx)
		if last := ms2[len(ms2)-1]; len(ms2) != 4 || last.Src != out.Path || last.Dst != TrashPath(out.Path) {
			t.Fatalf("retention moves: %+v", ms2)
		}
		if n, err := c.DeleteMoves(ctx, []int64{ms[0].ID, ms[1].ID, ms[0].ID}); err != nil || n != 2 {
			t.Fatalf("DeleteMoves: %d %v", n, err)
		}
		if ms3, _ := c.Moves(ctx); len(ms3) != 2 || ms3[0].ID != ms[2].ID {
			t.Fatalf("after DeleteMoves: %+v", ms3)
		}
	})
}

func TestLocations(t *testing.T) {
	p := PartitionDir("logs", "t", "2024-05-01", 3) + "/x.parquet"
	l := Locations(p)
	if l[0] != "_staging/"+p || l[1] != p || l[2] != "_trash/"+p {
		t.Fatalf("Locations: %v", l)
	}
	if IsOutsideTree(p) || !IsOutsideTree(l[0]) || !IsOutsideTree(l[2]) {
		t.Fatal("IsOutsideTree")
	}
	if _, err := parsePath(l[0]); err == nil {
		t.Fatal("a staging path must not parse as a segment path")
	}
}
