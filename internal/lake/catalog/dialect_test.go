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

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// TestMain stops the PostgreSQL server pgtest may have started.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// target is a fresh, empty catalog database of one dialect: an SQLite file
// in a temporary directory, or a new schema on the test PostgreSQL server.
type target struct {
	dialect string
	dsn     string
}

// open opens a handle on the target, closed at cleanup. Call it again for
// a second handle, as a second process would have.
func (tg target) open(t *testing.T) *Catalog {
	t.Helper()
	c, err := Open(context.Background(), tg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// forEachDialect runs fn as a subtest per dialect, each with its own
// database. The PostgreSQL subtest is skipped (or fails under
// SLUICE_REQUIRE_ALL) when no server can be had.
func forEachDialect(t *testing.T, fn func(t *testing.T, tg target)) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, target{"sqlite", "sqlite:" + filepath.Join(t.TempDir(), "catalog.db")})
	})
	t.Run("postgres", func(t *testing.T) {
		fn(t, target{"postgres", pgtest.Schema(t, pgtest.DSN(t))})
	})
}

// setClock fakes the catalog's clock, leases included.
func setClock(c *Catalog, now func() time.Time) {
	c.now = now
	c.leaseNow = ""
}

func TestRebindDollar(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT 1":                    "SELECT 1",
		"a = ? AND b IN (?, ?)":       "a = $1 AND b IN ($2, $3)",
		"? ? ? ? ? ? ? ? ? ? ?":       "$1 $2 $3 $4 $5 $6 $7 $8 $9 $10 $11",
		"INSERT INTO t VALUES (?, ?)": "INSERT INTO t VALUES ($1, $2)",
	} {
		if got := rebindDollar(in); got != want {
			t.Errorf("rebindDollar(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://u@h/db?password=secret":             "postgres://u@h/db?password=xxxxx",
		"postgresql://h/db":                             "postgresql://h/db",
	} {
		if got := redactDSN(in); got != want {
			t.Errorf("redactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPostgresOpenErrors needs no server: the DSN is checked before any
// connection, and connection errors must not reveal the password.
func TestPostgresOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, "postgres://u:secret@127.0.0.1:notaport/db"); err == nil ||
		!errors.Is(err, ErrUnsupportedDSN) || strings.Contains(err.Error(), "secret") {
		t.Errorf("bad port: got %v, want ErrUnsupportedDSN without the password", err)
	}
	if _, err := Open(ctx, "pgx:host=x"); !errors.Is(err, ErrUnsupportedDSN) {
		t.Errorf("pgx: prefix: got %v, want ErrUnsupportedDSN", err)
	}
	// Port 1 on loopback: nothing listens, the connection is refused at once.
	_, err := Open(ctx, "postgres://u:secret@127.0.0.1:1/db?sslmode=disable&connect_timeout=5")
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "xxxxx") {
		t.Errorf("refused: got %v, want an error naming the redacted DSN", err)
	}
}

func TestMigrationsMatch(t *testing.T) {
	if len(postgresMigrations) != len(sqliteMigrations) {
		t.Fatalf("%d PostgreSQL migrations, %d SQLite: schema versions must mean the same in both",
			len(postgresMigrations), len(sqliteMigrations))
	}
	for v := range sqliteMigrations {
		if len(postgresMigrations[v]) != len(sqliteMigrations[v]) {
			t.Errorf("version %d: %d PostgreSQL statements, %d SQLite", v+1, len(postgresMigrations[v]), len(sqliteMigrations[v]))
		}
	}
}

// TestConcurrentOpen opens a new database from several handles at once:
// the migration must run once, and no Open may fail.
func TestConcurrentOpen(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				c, err := Open(context.Background(), tg.dsn)
				if err != nil {
					t.Error(err)
					return
				}
				c.Close()
			})
		}
		waittest.Wait(t, &wg, "the concurrent Opens")
		c := tg.open(t)
		var n int
		if err := c.db.QueryRow(`SELECT COUNT(*) FROM schema_version`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%d schema_version rows, %v", n, err)
		}
	})
}

// TestConcurrentReplaceOneWins races compactions that picked the same
// input from two handles: exactly one commits, the others see ErrStale
// and add nothing.
func TestConcurrentReplaceOneWins(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		cs := []*Catalog{tg.open(t), tg.open(t)}
		in := []Segment{seg("logs", "a", 3, "1", 0, 10), seg("logs", "a", 3, "2", 10, 20), seg("logs", "a", 3, "3", 20, 30)}
		if err := cs[0].AddSegments(ctx, in...); err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, s := range mustList(t, cs[0], Filter{}) {
			ids = append(ids, s.ID)
		}
		const racers = 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range racers {
			// Overlapping inputs in different orders, to provoke lock-order
			// deadlocks if rows were locked as given.
			remove := slices.Clone(ids)
			if i%2 == 1 {
				slices.Reverse(remove)
			}
			out := seg("logs", "a", 3, fmt.Sprintf("c%d", i), 0, 30)
			wg.Go(func() {
				err := cs[i%2].Replace(ctx, remove, []Segment{out})
				switch {
				case err == nil:
					mu.Lock()
					won++
					mu.Unlock()
				case !errors.Is(err, ErrStale):
					t.Errorf("racer %d: got %v, want ErrStale", i, err)
				}
			})
		}
		waittest.Wait(t, &wg, "the concurrent Replaces")
		if won != 1 {
			t.Fatalf("%d Replaces committed, want 1", won)
		}
		if live := mustList(t, cs[1], Filter{}); len(live) != 1 || live[0].Level != 0 || !strings.HasPrefix(live[0].Path, PartitionDir("logs", "a", "2024-05-01", 3)+"/c") {
			t.Fatalf("live after race: %v", paths(live))
		}
		if all := mustList(t, cs[1], Filter{IncludeReplaced: true}); len(all) != 4 {
			t.Fatalf("%d rows after race, want 3 replaced + 1 live", len(all))
		}
	})
}

// TestConcurrentQueueCommitOneWins replays one batch from several handles:
// one commit wins, the rest fail with ErrQueueRegress and add no segment.
func TestConcurrentQueueCommitOneWins(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		cs := []*Catalog{tg.open(t), tg.open(t)}
		const racers = 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range racers {
			s := seg("logs", "a", 3, fmt.Sprintf("r%d", i), 0, 1)
			wg.Go(func() {
				err := cs[i%2].AddSegmentsWithQueue(ctx, QueueCommit{"q", 42}, s)
				switch {
				case err == nil:
					mu.Lock()
					won++
					mu.Unlock()
				case !errors.Is(err, ErrQueueRegress):
					t.Errorf("racer %d: got %v, want ErrQueueRegress", i, err)
				}
			})
		}
		waittest.Wait(t, &wg, "the concurrent queue commits")
		if won != 1 {
			t.Fatalf("%d commits won, want 1", won)
		}
		if n := len(mustList(t, cs[0], Filter{})); n != 1 {
			t.Fatalf("%d segments, want 1", n)
		}
		if pos, err := cs[1].QueuePosition(ctx, "q"); err != nil || pos != 42 {
			t.Fatalf("position %d, %v", pos, err)
		}
	})
}

// TestLeaseRealClock uses the catalog's own clock (the server's, for
// PostgreSQL) for expiry.
func TestLeaseRealClock(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c1, c2 := tg.open(t), tg.open(t)
		try := func(c *Catalog, owner string, ttl time.Duration, want bool) {
			t.Helper()
			ok, err := c.TryLease(ctx, "k", owner, ttl)
			if err != nil || ok != want {
				t.Fatalf("TryLease(%s) = %v, %v; want %v", owner, ok, err, want)
			}
		}
		try(c1, "p1", time.Hour, true)
		try(c2, "p2", time.Hour, false)
		// Renew with a short TTL: long enough that the next call comes
		// before it ends even on a loaded machine (50 ms flaked on
		// PostgreSQL under load), short enough to wait out.
		const short = 1500 * time.Millisecond
		try(c1, "p1", short, true)
		try(c2, "p2", time.Hour, false)
		time.Sleep(short + 200*time.Millisecond)
		try(c2, "p2", time.Hour, true)
		try(c1, "p1", time.Hour, false)
	})
}

func TestIsRetryable(t *testing.T) {
	for code, want := range map[string]bool{
		pgSerializationFailure: true, pgDeadlockDetected: true, pgLockNotAvailable: true,
		pgUniqueViolation: false, "42P01": false,
	} {
		err := fmt.Errorf("catalog: add: %w", &pgconn.PgError{Code: code})
		if got := IsRetryable(err); got != want {
			t.Errorf("SQLSTATE %s: IsRetryable = %v, want %v", code, got, want)
		}
	}
	if IsRetryable(nil) || IsRetryable(errors.New("x")) {
		t.Error("nil or plain error classified retryable")
	}
}
