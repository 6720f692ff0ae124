package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/waittest"
)

var hour3 = time.Date(2024, 5, 1, 3, 0, 0, 0, time.UTC)

// seg builds a valid segment in hour h of 2024-05-01 covering minutes
// [from, to] of that hour.
func seg(table, tenant string, h int, name string, from, to int) Segment {
	start := time.Date(2024, 5, 1, h, 0, 0, 0, time.UTC)
	return Segment{
		Table: table, Tenant: tenant, Day: "2024-05-01", Hour: h,
		Path:    PartitionDir(table, tenant, "2024-05-01", h) + "/" + name + ".parquet",
		MinTime: start.Add(time.Duration(from) * time.Minute).UnixNano(),
		MaxTime: start.Add(time.Duration(to) * time.Minute).UnixNano(),
		Rows:    100, Bytes: 1000, SchemaHash: "abc",
		Created: time.Date(2024, 5, 1, 5, 0, 0, 0, time.UTC),
	}
}

func paths(segs []Segment) []string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = s.Path
	}
	return out
}

func mustList(t *testing.T, c *Catalog, f Filter) []Segment {
	t.Helper()
	segs, err := c.List(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

func TestAddListSummary(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c := tg.open(t)

		a := seg("logs", "a", 3, "1", 0, 10)
		a.Services = []string{"web", "api", "web"}
		b := seg("logs", "a", 3, "2", 20, 30)
		b.Level = 1
		b.Services = []string{"db"}
		d := seg("logs", "b", 4, "3", 0, 59)
		m := seg("metrics", "a", 3, "4", 0, 59)
		m.MetricNames = []string{"cpu", "mem"}
		m2 := seg("metrics", "a", 3, "5", 0, 59) // names unknown
		if err := c.AddSegments(ctx, m2, d, b, a, m); err != nil {
			t.Fatal(err)
		}

		all := mustList(t, c, Filter{})
		want := []string{a.Path, b.Path, d.Path, m.Path, m2.Path}
		if got := paths(all); !slices.Equal(got, want) {
			t.Fatalf("List order:\n got %v\nwant %v", got, want)
		}
		got := all[0]
		if got.ID == 0 || got.Table != "logs" || got.Tenant != "a" || got.Day != "2024-05-01" || got.Hour != 3 ||
			got.MinTime != a.MinTime || got.MaxTime != a.MaxTime || got.Rows != 100 || got.Bytes != 1000 ||
			got.SchemaHash != "abc" || !got.Created.Equal(a.Created) || !got.ReplacedAt.IsZero() ||
			!slices.Equal(got.Services, []string{"api", "web"}) || got.MetricNames != nil {
			t.Fatalf("round trip: %+v", got)
		}

		lvl1 := 1
		min25 := hour3.Add(25 * time.Minute).UnixNano()
		for _, tc := range []struct {
			name string
			f    Filter
			want []string
		}{
			{"table", Filter{Table: "metrics"}, []string{m.Path, m2.Path}},
			{"tenant", Filter{Tenant: "b"}, []string{d.Path}},
			{"level", Filter{Level: &lvl1}, []string{b.Path}},
			{"from inclusive", Filter{Table: "logs", From: a.MaxTime}, []string{a.Path, b.Path, d.Path}},
			{"from after a", Filter{Table: "logs", From: a.MaxTime + 1}, []string{b.Path, d.Path}},
			{"to inclusive", Filter{Table: "logs", To: b.MinTime}, []string{a.Path, b.Path}},
			{"to before b", Filter{Table: "logs", To: b.MinTime - 1}, []string{a.Path}},
			{"window inside b", Filter{Table: "logs", From: min25, To: min25}, []string{b.Path}},
			{"service", Filter{Table: "logs", Service: "api"}, []string{a.Path, d.Path}}, // d: names unknown
			{"metric", Filter{MetricName: "cpu"}, []string{a.Path, b.Path, d.Path, m.Path, m2.Path}},
			{"metric miss", Filter{Table: "metrics", MetricName: "disk"}, []string{m2.Path}},
		} {
			if got := paths(mustList(t, c, tc.f)); !slices.Equal(got, tc.want) {
				t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
			}
		}

		sum, err := c.Summary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantSum := []PartitionSummary{
			{"logs", "a", "2024-05-01", 3, 2, 200, 2000, a.MinTime, b.MaxTime},
			{"logs", "b", "2024-05-01", 4, 1, 100, 1000, d.MinTime, d.MaxTime},
			{"metrics", "a", "2024-05-01", 3, 2, 200, 2000, m.MinTime, m.MaxTime},
		}
		if !slices.Equal(sum, wantSum) {
			t.Fatalf("Summary:\n got %+v\nwant %+v", sum, wantSum)
		}
	})
}

func TestAddSegmentsRejectsInvalid(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c := tg.open(t)
		good := seg("logs", "a", 3, "ok", 0, 1)
		outside := seg("logs", "a", 3, "late", 0, 60) // max time in hour 4
		wrongDir := seg("logs", "a", 3, "x", 0, 1)
		wrongDir.Path = PartitionDir("logs", "b", "2024-05-01", 3) + "/x.parquet"
		badTenant := seg("logs", "a", 3, "y", 0, 1)
		badTenant.Tenant, badTenant.Path = "a/b", "logs/tenant=a/b/dt=2024-05-01/hour=03/y.parquet"
		unclean := seg("logs", "a", 3, "z", 0, 1)
		unclean.Path = "logs/tenant=a/dt=2024-05-01/hour=03/../hour=03/z.parquet"
		for _, bad := range []Segment{outside, wrongDir, badTenant, unclean, {Table: "Logs"}} {
			if err := c.AddSegments(ctx, good, bad); !errors.Is(err, ErrInvalidSegment) {
				t.Errorf("%q: got %v, want ErrInvalidSegment", bad.Path, err)
			}
		}
		if n := len(mustList(t, c, Filter{})); n != 0 {
			t.Fatalf("%d rows after rejected adds", n)
		}
	})
}

func TestAddSegmentsAtomic(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c := tg.open(t)
		old := seg("logs", "a", 3, "old", 0, 1)
		if err := c.AddSegments(ctx, old); err != nil {
			t.Fatal(err)
		}
		err := c.AddSegments(ctx, seg("logs", "a", 3, "new", 0, 1), old)
		if !errors.Is(err, ErrDuplicatePath) || !strings.Contains(err.Error(), old.Path) {
			t.Fatalf("got %v, want ErrDuplicatePath naming %q", err, old.Path)
		}
		if got := paths(mustList(t, c, Filter{})); !slices.Equal(got, []string{old.Path}) {
			t.Fatalf("after failed add: %v", got)
		}
	})
}

func TestQueueCommitSameTransaction(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c := tg.open(t)
		q := "wal-0"
		if pos, err := c.QueuePosition(ctx, q); err != nil || pos != 0 {
			t.Fatalf("fresh position: %d, %v", pos, err)
		}
		s1 := seg("logs", "a", 3, "1", 0, 1)
		if err := c.AddSegmentsWithQueue(ctx, QueueCommit{q, 10}, s1); err != nil {
			t.Fatal(err)
		}
		if pos, _ := c.QueuePosition(ctx, q); pos != 10 {
			t.Fatalf("position %d, want 10", pos)
		}
		if got := mustList(t, c, Filter{}); got[0].QueuePos != 10 {
			t.Fatalf("segment QueuePos %d, want 10 (filled from the commit)", got[0].QueuePos)
		}

		// A failing insert (duplicate path after a good one) leaves both the
		// segments and the position untouched.
		s2 := seg("logs", "a", 3, "2", 0, 1)
		if err := c.AddSegmentsWithQueue(ctx, QueueCommit{q, 20}, s2, s1); !errors.Is(err, ErrDuplicatePath) {
			t.Fatalf("got %v, want ErrDuplicatePath", err)
		}
		if pos, _ := c.QueuePosition(ctx, q); pos != 10 {
			t.Fatalf("position moved to %d by a failed transaction", pos)
		}
		if n := len(mustList(t, c, Filter{})); n != 1 {
			t.Fatalf("%d segments after failed transaction, want 1", n)
		}

		// A replayed batch (position not forward) is rejected, segments too.
		for _, pos := range []int64{10, 5} {
			if err := c.AddSegmentsWithQueue(ctx, QueueCommit{q, pos}, s2); !errors.Is(err, ErrQueueRegress) {
				t.Fatalf("pos %d: got %v, want ErrQueueRegress", pos, err)
			}
		}
		if n := len(mustList(t, c, Filter{})); n != 1 {
			t.Fatalf("%d segments after regress, want 1", n)
		}
		if err := c.AddSegmentsWithQueue(ctx, QueueCommit{q, 20}, s2); err != nil {
			t.Fatal(err)
		}
		if pos, _ := c.QueuePosition(ctx, q); pos != 20 {
			t.Fatalf("position %d, want 20", pos)
		}
		if pos, _ := c.QueuePosition(ctx, "other"); pos != 0 {
			t.Fatalf("unrelated queue at %d", pos)
		}
	})
}

func TestReplace(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c := tg.open(t)
		setClock(c, func() time.Time { return time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC) })
		in := []Segment{seg("logs", "a", 3, "1", 0, 10), seg("logs", "a", 3, "2", 10, 20), seg("logs", "a", 3, "3", 20, 30)}
		if err := c.AddSegments(ctx, in...); err != nil {
			t.Fatal(err)
		}
		live := mustList(t, c, Filter{})
		ids := []int64{live[0].ID, live[1].ID}
		out := seg("logs", "a", 3, "c1", 0, 20)
		out.Level, out.Rows = 1, 200

		// Adding a path that exists fails the whole swap.
		if err := c.Replace(ctx, ids, []Segment{out, in[2]}); !errors.Is(err, ErrDuplicatePath) {
			t.Fatalf("got %v, want ErrDuplicatePath", err)
		}
		if n := len(mustList(t, c, Filter{})); n != 3 {
			t.Fatalf("failed Replace changed live set: %d live", n)
		}

		if err := c.Replace(ctx, ids, []Segment{out}); err != nil {
			t.Fatal(err)
		}
		if got := paths(mustList(t, c, Filter{})); !slices.Equal(got, []string{in[2].Path, out.Path}) {
			t.Fatalf("live after Replace: %v", got)
		}
		withOld := mustList(t, c, Filter{IncludeReplaced: true})
		if len(withOld) != 4 || !withOld[0].ReplacedAt.Equal(c.now()) || !withOld[1].ReplacedAt.Equal(c.now()) {
			t.Fatalf("replaced rows: %+v", withOld)
		}
		sum, _ := c.Summary(ctx)
		if len(sum) != 1 || sum[0].Segments != 2 || sum[0].Rows != 300 {
			t.Fatalf("Summary counts replaced rows: %+v", sum)
		}

		// Stale input: one already replaced, one live; nothing changes.
		out2 := seg("logs", "a", 3, "c2", 0, 30)
		for _, stale := range [][]int64{{idOf(t, c, in[2].Path), ids[0]}, {999}} {
			err := c.Replace(ctx, stale, []Segment{out2})
			if !errors.Is(err, ErrStale) {
				t.Fatalf("remove %v: got %v, want ErrStale", stale, err)
			}
		}
		if got := paths(mustList(t, c, Filter{})); !slices.Equal(got, []string{in[2].Path, out.Path}) {
			t.Fatalf("stale Replace changed live set: %v", got)
		}

		// The sweeper forgets replaced rows only.
		n, err := c.DeleteReplaced(ctx, []int64{ids[0], ids[1], idOf(t, c, in[2].Path)})
		if err != nil || n != 2 {
			t.Fatalf("DeleteReplaced: %d, %v", n, err)
		}
		if n := len(mustList(t, c, Filter{IncludeReplaced: true})); n != 2 {
			t.Fatalf("%d rows after sweep, want 2", n)
		}
	})
}

func idOf(t *testing.T, c *Catalog, path string) int64 {
	for _, s := range mustList(t, c, Filter{IncludeReplaced: true}) {
		if s.Path == path {
			return s.ID
		}
	}
	t.Fatalf("no segment %q", path)
	return 0
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	junk := make([]byte, 8192)
	for i := range junk {
		junk[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(garbage, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, garbage)
	if !errors.Is(err, ErrNotDatabase) || !strings.Contains(err.Error(), garbage) {
		t.Fatalf("garbage file: got %v, want ErrNotDatabase naming the file", err)
	}
	if _, err := Open(ctx, dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("directory: got %v", err)
	}
	for _, dsn := range []string{":memory:", "sqlite:", "a?b", "pgx:host=x"} {
		if _, err := Open(ctx, dsn); !errors.Is(err, ErrUnsupportedDSN) {
			t.Errorf("%q: got %v, want ErrUnsupportedDSN", dsn, err)
		}
	}
}

func TestReopenAndSchemaVersion(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c := tg.open(t)
		if err := c.AddSegments(ctx, seg("logs", "a", 3, "1", 0, 1)); err != nil {
			t.Fatal(err)
		}
		c.Close()
		for range 2 { // migrations are idempotent
			c2, err := Open(ctx, tg.dsn)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(mustList(t, c2, Filter{})); n != 1 {
				t.Fatalf("%d segments after reopen", n)
			}
			var v int
			if err := c2.db.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != len(c2.d.migrations) {
				t.Fatalf("schema version %d, %v", v, err)
			}
			switch tg.dialect {
			case "sqlite":
				var mode string
				if err := c2.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
					t.Fatalf("journal mode %q, %v", mode, err)
				}
			case "postgres":
				// The test server runs with synchronous_commit=off; the
				// catalog's sessions must not.
				var sync string
				if err := c2.db.QueryRow(`SHOW synchronous_commit`).Scan(&sync); err != nil || sync != "on" {
					t.Fatalf("synchronous_commit %q, %v", sync, err)
				}
			}
			c2.Close()
		}
		c3, err := Open(ctx, tg.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c3.db.Exec(`UPDATE schema_version SET version = 99`); err != nil {
			t.Fatal(err)
		}
		c3.Close()
		if _, err := Open(ctx, tg.dsn); !errors.Is(err, ErrSchemaTooNew) {
			t.Fatalf("got %v, want ErrSchemaTooNew", err)
		}
	})
}

// TestTwoHandlesConcurrentWrites opens the database twice, as two processes
// would, and writes from both without lock errors.
func TestTwoHandlesConcurrentWrites(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c1 := tg.open(t)
		c2 := tg.open(t)

		const writers, batches = 8, 20
		var wg sync.WaitGroup
		errs := make(chan error, writers*batches*2)
		for w := range writers {
			c := c1
			if w%2 == 1 {
				c = c2
			}
			wg.Go(func() {
				q := fmt.Sprintf("queue-%d", w)
				for b := range batches {
					s := seg("logs", fmt.Sprintf("t%d", w), b%24, fmt.Sprintf("w%d-b%d", w, b), 0, 1)
					if err := c.AddSegmentsWithQueue(ctx, QueueCommit{q, int64(b + 1)}, s); err != nil {
						errs <- err
					}
					if _, err := c.List(ctx, Filter{Tenant: fmt.Sprintf("t%d", (w+1)%writers)}); err != nil {
						errs <- err
					}
				}
			})
		}
		waittest.Wait(t, &wg, "the writers on both handles")
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := len(mustList(t, c2, Filter{})); n != writers*batches {
			t.Fatalf("%d segments, want %d", n, writers*batches)
		}
		for w := range writers {
			if pos, _ := c1.QueuePosition(ctx, fmt.Sprintf("queue-%d", w)); pos != batches {
				t.Errorf("queue-%d at %d, want %d", w, pos, batches)
			}
		}
	})
}

func TestLeases(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c1 := tg.open(t)
		c2 := tg.open(t)
		now := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
		setClock(c1, func() time.Time { return now })
		setClock(c2, func() time.Time { return now })
		key := "compact/" + PartitionDir("logs", "a", "2024-05-01", 3)

		try := func(c *Catalog, owner string, want bool) {
			t.Helper()
			ok, err := c.TryLease(ctx, key, owner, time.Minute)
			if err != nil || ok != want {
				t.Fatalf("TryLease(%s) = %v, %v; want %v", owner, ok, err, want)
			}
		}
		try(c1, "p1", true)
		try(c2, "p2", false)
		try(c1, "p1", true) // renew
		if err := c2.ReleaseLease(ctx, key, "p2"); !errors.Is(err, ErrLeaseNotHeld) {
			t.Fatalf("release by non-holder: %v", err)
		}
		try(c2, "p2", false)

		now = now.Add(time.Minute) // p1's lease expires
		try(c2, "p2", true)
		try(c1, "p1", false)
		if err := c1.ReleaseLease(ctx, key, "p1"); !errors.Is(err, ErrLeaseNotHeld) {
			t.Fatalf("release of a lost lease: %v", err)
		}
		if err := c2.ReleaseLease(ctx, key, "p2"); err != nil {
			t.Fatal(err)
		}
		try(c1, "p1", true)
		if _, err := c1.TryLease(ctx, key, "p1", 0); err == nil {
			t.Fatal("zero ttl accepted")
		}

		// Racing for a fresh key from both handles: exactly one winner.
		var wg sync.WaitGroup
		var mu sync.Mutex
		winners := 0
		for i := range 16 {
			c := []*Catalog{c1, c2}[i%2]
			wg.Go(func() {
				ok, err := c.TryLease(ctx, "race", fmt.Sprintf("owner-%d", i), time.Minute)
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					winners++
					mu.Unlock()
				}
			})
		}
		waittest.Wait(t, &wg, "the concurrent lease takers")
		if winners != 1 {
			t.Fatalf("%d lease winners, want 1", winners)
		}
	})
}

const pinnedHash = "0d9007f717eaa605" // xxhash64("a BYTE_ARRAY\nb INT64\n")

func TestSchemaHash(t *testing.T) {
	a := SchemaHash([]string{"timestamp", "body", "resource.service_name"})
	b := SchemaHash([]string{"resource.service_name", "timestamp", "body"})
	if a != b || len(a) != 16 {
		t.Fatalf("order-dependent or malformed: %q %q", a, b)
	}
	if c := SchemaHash([]string{"timestamp", "body"}); c == a {
		t.Fatal("different schemas hash equal")
	}
	// Pinned: the lake writer records this value in every row; changing the
	// function silently splits schema groups between old and new rows.
	if got := SchemaHash([]string{"b INT64", "a BYTE_ARRAY"}); got != pinnedHash {
		t.Fatalf("SchemaHash changed: %s, pinned %s", got, pinnedHash)
	}
}
