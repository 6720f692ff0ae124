package catalog

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func intentPathsOf(t *testing.T, c *Catalog) []string {
	t.Helper()
	ins, err := c.Intents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range ins {
		out = append(out, in.Owner+" "+in.Path)
	}
	return out
}

// TestIntents walks the life of intents: recorded only under the lease,
// turned into segments by ReplaceIntents, claimed by the next holder of
// the lease so their writer can no longer commit them.
func TestIntents(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c1, c2 := tg.open(t), tg.open(t)
		now := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
		setClock(c1, func() time.Time { return now })
		setClock(c2, func() time.Time { return now })
		key := "compact/" + PartitionDir("logs", "a", "2024-05-01", 3)
		in := []Segment{seg("logs", "a", 3, "in1", 0, 10), seg("logs", "a", 3, "in2", 10, 20)}
		if err := c1.AddSegments(ctx, in...); err != nil {
			t.Fatal(err)
		}
		ids := func() []int64 {
			var out []int64
			for _, s := range mustList(t, c1, Filter{}) {
				out = append(out, s.ID)
			}
			return out
		}
		inIDs := ids()
		out1, out2 := seg("logs", "a", 3, "out1", 0, 20), seg("logs", "a", 3, "out2", 0, 20)

		if err := c1.AddIntent(ctx, key, "p1", out1.Path); !errors.Is(err, ErrLeaseNotHeld) {
			t.Fatalf("intent without the lease: %v", err)
		}
		if ok, err := c1.TryLease(ctx, key, "p1", time.Minute); err != nil || !ok {
			t.Fatalf("lease: %v %v", ok, err)
		}
		if err := c1.AddIntent(ctx, key, "p1", "logs/not-a-partition.parquet"); !errors.Is(err, ErrInvalidSegment) {
			t.Fatalf("intent outside the layout: %v", err)
		}
		for _, p := range []string{out1.Path, out2.Path} {
			if err := c1.AddIntent(ctx, key, "p1", p); err != nil {
				t.Fatal(err)
			}
		}
		if err := c1.AddIntent(ctx, key, "p1", out1.Path); !errors.Is(err, ErrDuplicatePath) {
			t.Fatalf("second intent of one path: %v", err)
		}
		ins, err := c2.Intents(ctx)
		if err != nil || len(ins) != 2 || ins[0].LeaseKey != key || ins[0].Owner != "p1" ||
			ins[0].Table != "logs" || ins[0].Tenant != "a" || !ins[0].Created.Equal(now) {
			t.Fatalf("intents %+v, %v", ins, err)
		}

		// A segment without an intent of its owner is refused, and so is
		// everything else of that swap.
		stray := seg("logs", "a", 3, "stray", 0, 20)
		if err := c1.ReplaceIntents(ctx, key, "p1", inIDs, []Segment{out1, stray}); !errors.Is(err, ErrNoIntent) {
			t.Fatalf("replace with an unannounced output: %v", err)
		}
		if err := c1.ReplaceIntents(ctx, key, "p2", inIDs, nil); !errors.Is(err, ErrLeaseNotHeld) {
			t.Fatalf("replace by a non-holder: %v", err)
		}
		if got := len(mustList(t, c1, Filter{})); got != 2 || len(intentPathsOf(t, c1)) != 2 {
			t.Fatalf("refused swaps changed the catalog: %d live, intents %v", got, intentPathsOf(t, c1))
		}

		// Lease expired and taken by p2: p1 can neither record nor commit,
		// p2 claims p1's intents.
		now = now.Add(time.Minute)
		if ok, err := c2.TryLease(ctx, key, "p2", time.Minute); err != nil || !ok {
			t.Fatalf("p2 lease: %v %v", ok, err)
		}
		if err := c1.AddIntent(ctx, key, "p1", seg("logs", "a", 3, "late", 0, 1).Path); !errors.Is(err, ErrLeaseNotHeld) {
			t.Fatalf("intent after the lease was lost: %v", err)
		}
		if _, err := c1.ClaimIntents(ctx, key, "p1"); !errors.Is(err, ErrLeaseNotHeld) {
			t.Fatalf("claim without the lease: %v", err)
		}
		claimed, err := c2.ClaimIntents(ctx, key, "p2")
		if err != nil || len(claimed) != 2 || claimed[0].Owner != "p1" || claimed[0].Path != out1.Path {
			t.Fatalf("claim: %+v, %v", claimed, err)
		}
		if again, err := c2.ClaimIntents(ctx, key, "p2"); err != nil || len(again) != 0 {
			t.Fatalf("claim of one's own intents: %+v, %v", again, err)
		}
		// Even if p1 got the lease back (p2 let it go), its outputs are
		// being deleted: it must not commit them.
		now = now.Add(time.Minute)
		if ok, err := c1.TryLease(ctx, key, "p1", time.Minute); err != nil || !ok {
			t.Fatalf("p1 lease again: %v %v", ok, err)
		}
		if err := c1.ReplaceIntents(ctx, key, "p1", inIDs, []Segment{out1, out2}); !errors.Is(err, ErrNoIntent) {
			t.Fatalf("replace of claimed intents: %v", err)
		}
		if n, err := c2.DeleteIntents(ctx, "p1", []string{out1.Path}); err != nil || n != 0 {
			t.Fatalf("delete of intents another owner claimed: %d, %v", n, err)
		}
		if n, err := c2.DeleteIntents(ctx, "p2", []string{out1.Path, out2.Path}); err != nil || n != 2 {
			t.Fatalf("delete intents: %d, %v", n, err)
		}
		if got := intentPathsOf(t, c1); len(got) != 0 {
			t.Fatalf("intents left: %v", got)
		}

		// The happy path: the swap turns the intents into segments.
		out3 := seg("logs", "a", 3, "out3", 0, 20)
		if err := c1.AddIntent(ctx, key, "p1", out3.Path); err != nil {
			t.Fatal(err)
		}
		if err := c1.ReplaceIntents(ctx, key, "p1", inIDs, []Segment{out3}); err != nil {
			t.Fatal(err)
		}
		if got := paths(mustList(t, c2, Filter{})); !slices.Equal(got, []string{out3.Path}) {
			t.Fatalf("live after the swap: %v", got)
		}
		if got := intentPathsOf(t, c2); len(got) != 0 {
			t.Fatalf("intents left after the swap: %v", got)
		}

		// An expired lease no other owner has taken is still its owner's,
		// as TryLease would renew it.
		now = now.Add(time.Hour)
		if err := c1.AddIntent(ctx, key, "p1", seg("logs", "a", 3, "out4", 0, 20).Path); err != nil {
			t.Fatalf("intent under an expired, untaken lease: %v", err)
		}
	})
}

// TestHoldLease: a held lease outlives its TTL many times over while
// nobody else can take it; taken away behind its holder's back, it is
// reported lost through the context, Renew and Release.
func TestHoldLease(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c1, c2 := tg.open(t), tg.open(t)
		const ttl = 500 * time.Millisecond
		key := "rollup/" + PartitionDir("metrics", "a", "2024-05-01", 3)
		l, ok, err := c1.HoldLease(ctx, key, "holder", ttl, nil)
		if err != nil || !ok {
			t.Fatalf("hold: %v %v", ok, err)
		}
		if l2, ok, err := c2.HoldLease(ctx, key, "other", ttl, nil); err != nil || ok || l2 != nil {
			t.Fatalf("second holder: %v %v %v", l2, ok, err)
		}
		deadline := time.Now().Add(4 * ttl)
		for time.Now().Before(deadline) {
			if ok, err := c2.TryLease(ctx, key, "intruder", ttl); err != nil || ok {
				t.Fatalf("intruder took a held lease: %v %v", ok, err)
			}
			time.Sleep(ttl / 5)
		}
		if err := l.Context().Err(); err != nil || l.Lost() != nil {
			t.Fatalf("held lease: context %v, lost %v", err, l.Lost())
		}
		if err := l.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		if l.Context().Err() == nil || l.Lost() != nil {
			t.Fatalf("after release: context %v, lost %v", l.Context().Err(), l.Lost())
		}
		if err := l.Release(); err != nil {
			t.Fatalf("second release: %v", err)
		}

		// Stolen: the renewal finds another owner and cancels the work.
		l, ok, err = c1.HoldLease(ctx, key, "victim", ttl, nil)
		if err != nil || !ok {
			t.Fatalf("hold: %v %v", ok, err)
		}
		if err := c2.ReleaseLease(ctx, key, "victim"); err != nil {
			t.Fatal(err)
		}
		if ok, err := c2.TryLease(ctx, key, "thief", time.Minute); err != nil || !ok {
			t.Fatalf("thief: %v %v", ok, err)
		}
		select {
		case <-l.Context().Done():
		case <-time.After(5 * ttl):
			t.Fatal("a stolen lease's context was not cancelled")
		}
		if err := l.Lost(); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("lost: %v", err)
		}
		if err := l.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("renew of a lost lease: %v", err)
		}
		sentinel := errors.New("work lease lost")
		if err := l.WrapLost(context.Canceled, sentinel); !errors.Is(err, sentinel) || !errors.Is(err, ErrLeaseLost) || !errors.Is(err, context.Canceled) {
			t.Fatalf("WrapLost of the cancelled work: %v", err)
		}
		if err := l.Release(); !errors.Is(err, ErrLeaseNotHeld) {
			t.Fatalf("release of a lost lease: %v", err)
		}

		// WrapLost leaves other errors of a held lease alone.
		l, ok, err = c1.HoldLease(ctx, "other-key", "holder", time.Minute, nil)
		if err != nil || !ok {
			t.Fatalf("hold: %v %v", ok, err)
		}
		defer l.Release()
		plain := errors.New("disk full")
		if err := l.WrapLost(plain, sentinel); err != plain {
			t.Fatalf("WrapLost(plain) = %v", err)
		}
		if err := l.WrapLost(ErrNoIntent, sentinel); !errors.Is(err, sentinel) {
			t.Fatalf("WrapLost(ErrNoIntent) = %v", err)
		}
	})
}

// TestMigrateAddsIntents: a catalog of schema version 1 (before intents)
// upgrades in place and keeps its segments.
func TestMigrateAddsIntents(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c := tg.open(t)
		if err := c.AddSegments(ctx, seg("logs", "a", 3, "1", 0, 1)); err != nil {
			t.Fatal(err)
		}
		// Back to version 1, as an older sluice left it.
		for _, stmt := range []string{`DROP TABLE intents`, `UPDATE schema_version SET version = 1`} {
			if _, err := c.db.ExecContext(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
		c = tg.open(t)
		var v int
		if err := c.db.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != len(c.d.migrations) {
			t.Fatalf("schema version %d, %v", v, err)
		}
		if n := len(mustList(t, c, Filter{})); n != 1 {
			t.Fatalf("%d segments after the upgrade", n)
		}
		key := "compact/" + PartitionDir("logs", "a", "2024-05-01", 3)
		if ok, err := c.TryLease(ctx, key, "p", time.Minute); err != nil || !ok {
			t.Fatalf("lease: %v %v", ok, err)
		}
		if err := c.AddIntent(ctx, key, "p", seg("logs", "a", 3, "2", 0, 1).Path); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRebuildLeavesOutIntents: a file with an intent is an unfinished
// run's output, not data; Rebuild must not catalogue it.
func TestRebuildLeavesOutIntents(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		root := t.TempDir()
		c := tg.open(t)
		done := "logs/tenant=a/dt=2024-05-01/hour=03/0001.parquet"
		pending := "logs/tenant=a/dt=2024-05-01/hour=03/0002.parquet"
		for _, rel := range []string{done, pending} {
			writeParquet(t, root, rel, logRows(hour3, 1, 2), footer("logs", "a", 0, 0, 0))
		}
		key := "compact/" + PartitionDir("logs", "a", "2024-05-01", 3)
		if ok, err := c.TryLease(ctx, key, "p", time.Minute); err != nil || !ok {
			t.Fatalf("lease: %v %v", ok, err)
		}
		if err := c.AddIntent(ctx, key, "p", pending); err != nil {
			t.Fatal(err)
		}
		st, err := Rebuild(ctx, c, root, nil)
		if err != nil || st.Files != 2 || st.Segments != 1 || st.Intended != 1 {
			t.Fatalf("rebuild: %+v, %v", st, err)
		}
		if got := paths(mustList(t, c, Filter{})); !slices.Equal(got, []string{done}) {
			t.Fatalf("catalogued %v", got)
		}
		if got := intentPathsOf(t, c); !slices.Equal(got, []string{"p " + pending}) {
			t.Fatalf("intents after rebuild: %v", got)
		}
	})
}
