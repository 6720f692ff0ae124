package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Segment is one immutable Parquet file of the lake.
type Segment struct {
	ID         int64
	Table      string
	Tenant     string
	Day        string // YYYY-MM-DD (UTC)
	Hour       int    // 0..23 (UTC)
	Path       string // relative to the lake root, slash-separated; see PartitionDir
	MinTime    int64  // unix ns, inclusive
	MaxTime    int64  // unix ns, inclusive
	Rows       int64
	Bytes      int64
	Level      int // 0 raw, higher for compacted output and rollup tiers
	SchemaHash string
	Created    time.Time // zero on insert means now
	QueuePos   int64     // queue position this segment covers, 0 if none
	// Names for pruning. Empty means unknown, not "none": such a segment
	// matches every Service/MetricName filter.
	Services    []string
	MetricNames []string
	// ReplacedAt is set by Replace; zero while the segment is live.
	// Ignored on insert.
	ReplacedAt time.Time
}

// Filter selects segments for List. Zero values match everything.
type Filter struct {
	Table  string
	Tenant string
	// From and To select segments whose [MinTime, MaxTime] overlaps
	// [From, To], both inclusive; 0 leaves that end open.
	From, To        int64
	IncludeReplaced bool
	Level           *int
	// Service and MetricName prune segments whose recorded names do not
	// contain the value; segments with no recorded names of that kind stay.
	Service    string
	MetricName string
}

// PartitionSummary aggregates the live segments of one hour partition.
type PartitionSummary struct {
	Table, Tenant, Day string
	Hour               int
	Segments           int
	Rows, Bytes        int64
	MinTime, MaxTime   int64
}

// QueueCommit records that everything up to Pos of queue Name is in the
// lake. Positions of one queue only move forward.
type QueueCommit struct {
	Name string
	Pos  int64
}

// Catalog is a handle on the catalog database. It is safe for concurrent
// use, and several handles (processes) may share one SQLite file or one
// PostgreSQL database.
type Catalog struct {
	db  *sql.DB
	d   *dialect
	now func() time.Time // replaced in tests
	// leaseNow is the SQL expression for "now" in lease expiry: the
	// server's clock where the dialect has one, else "" for c.now().
	// Tests that fake c.now clear it.
	leaseNow string
}

// Open opens the catalog named by dsn and migrates the schema as needed:
// "sqlite:<path>" or a bare path (an SQLite file, created if missing), or
// "postgres://user:pass@host:port/db?sslmode=..." ("postgresql://" too; the
// database must exist, the tables are created in its search_path schema).
func Open(ctx context.Context, dsn string) (*Catalog, error) {
	d, target, err := dialectFor(dsn)
	if err != nil {
		return nil, err
	}
	name := d.display(target)
	db, err := d.open(target)
	if err != nil {
		return nil, err
	}
	c := &Catalog{db: db, d: d, now: time.Now, leaseNow: d.serverNow}
	if err := ping(ctx, db, d); err != nil {
		db.Close()
		if d.isNotDatabase(err) {
			return nil, fmt.Errorf("catalog: open %q: %w: %w", name, ErrNotDatabase, err)
		}
		return nil, fmt.Errorf("catalog: open %q: %w", name, err)
	}
	if err := c.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("catalog: open %q: %w", name, err)
	}
	return c, nil
}

// ping connects db, waiting out contention its busy timeout does not: the
// first connection to a new SQLite file switches it to WAL, and a
// connection of another handle doing the same at that moment gets
// SQLITE_BUSY at once, without the busy handler (seen as one Open in
// about a hundred failing when several open a new catalog together). It
// retries for as long as the busy timeout would have waited.
func ping(ctx context.Context, db *sql.DB, d *dialect) error {
	deadline := time.Now().Add(busyTimeoutMillis * time.Millisecond)
	for attempt := 1; ; attempt++ {
		err := db.PingContext(ctx)
		if err == nil || !d.isRetryableError(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(min(attempt, 20)) * 5 * time.Millisecond):
		}
	}
}

// Close releases the database handle. Leases held by this handle stay
// until they expire or are released.
func (c *Catalog) Close() error {
	if err := c.db.Close(); err != nil {
		return fmt.Errorf("catalog: close: %w", err)
	}
	return nil
}

// IsRetryable reports whether err is contention that the operation lost:
// SQLite lock contention outlasting the busy timeout, or a PostgreSQL
// serialization failure, deadlock or lock timeout that persisted through
// the catalog's own retries. The operation had no effect and may be retried.
func IsRetryable(err error) bool {
	return err != nil && (sqliteDialect.isRetryableError(err) || postgresDialect.isRetryableError(err))
}

// inTx runs fn in a write transaction and commits if fn returns nil. A
// transaction that failed with a retryable error is re-run, up to the
// dialect's txAttempts, so fn must not keep state across calls.
func (c *Catalog) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = c.tryTx(ctx, fn)
		if err == nil || attempt >= c.d.txAttempts || !c.d.isRetryableError(err) {
			return err
		}
		// Back off a little, growing, so the winner can commit.
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
		}
	}
}

func (c *Catalog) tryTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			return errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// inReadTx runs fn in a read-only transaction so multi-query reads see one
// snapshot without taking the write lock.
func (c *Catalog) inReadTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := c.db.BeginTx(ctx, c.d.readTx)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only; nothing to undo
	return fn(tx)
}
