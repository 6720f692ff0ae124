package catalog

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is everything that differs between SQL backends. All SQL in this
// package is written with "?" placeholders and ON CONFLICT upserts, which
// SQLite and PostgreSQL both accept; rebind turns "?" into "$n" where needed.
//
// Locking: SQLite write transactions take the write lock at BEGIN
// ("_txlock=immediate" in the DSN) so a transaction that reads and then
// writes never fails with SQLITE_BUSY_SNAPSHOT, which busy_timeout cannot
// retry. PostgreSQL write transactions run at READ COMMITTED. Correctness
// never depends on either: Replace, queue commits and leases use
// conditional UPDATE/upsert statements and check the affected row count.
// Under READ COMMITTED such a statement waits for a concurrent writer of
// the same row and re-checks its condition on the committed row, so of two
// racing Replaces or queue commits exactly one wins. Deadlocks (40P01) and
// serialization failures (40001) roll the transaction back; inTx re-runs
// it a few times (txAttempts) before reporting a retryable error.
type dialect struct {
	name string
	// migrations[i] moves the schema from version i to i+1. Statements are
	// idempotent (IF NOT EXISTS) so a half-applied migration can be re-run.
	migrations [][]string
	// open validates the DSN remainder and returns a handle; nothing is
	// connected yet.
	open func(target string) (*sql.DB, error)
	// display names the target in errors; it must not reveal a password.
	display func(target string) string
	// rebind rewrites "?" placeholders; identity for SQLite.
	rebind func(query string) string
	// readTx are the options of multi-statement reads (List), which must
	// see one snapshot.
	readTx *sql.TxOptions
	// lockMigrations, if set, is run first in the migration transaction so
	// concurrent Opens of a new database do not race on CREATE TABLE.
	lockMigrations string
	// lockRebuild, if set, is run first in Rebuild's transaction so writers
	// that were not stopped wait instead of interleaving.
	lockRebuild string
	// serverNow, if set, is an SQL expression for the server's clock in unix
	// ns, used for lease expiry so hosts with drifting clocks agree.
	serverNow string
	// txAttempts bounds how often inTx runs a transaction that failed with
	// a retryable error; 1 means no retry.
	txAttempts       int
	isUnique         func(error) bool // unique/primary key violation
	isNotDatabase    func(error) bool // the file is not a database of this kind
	isRetryableError func(error) bool // contention; the transaction had no effect
}

var sqliteDialect = &dialect{
	name:       "sqlite",
	migrations: sqliteMigrations,
	open:       sqliteOpen,
	display:    func(path string) string { return path },
	rebind:     func(q string) string { return q },
	readTx:     &sql.TxOptions{ReadOnly: true},
	txAttempts: 1, // busy_timeout already waited; the caller decides
	isUnique: func(err error) bool {
		c, ok := sqliteCode(err)
		return ok && (c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
	},
	isNotDatabase: func(err error) bool {
		c, ok := sqliteCode(err)
		return ok && c&0xff == sqlite3.SQLITE_NOTADB
	},
	isRetryableError: func(err error) bool {
		c, ok := sqliteCode(err)
		return ok && (c&0xff == sqlite3.SQLITE_BUSY || c&0xff == sqlite3.SQLITE_LOCKED)
	},
}

// busyTimeoutMillis bounds how long a writer waits for another process's
// write transaction. Catalog transactions are short, so seconds is plenty.
const busyTimeoutMillis = 10000

// sqliteOpen opens the modernc driver. synchronous=FULL because a queue
// position commit must survive power loss: the queue is truncated once the
// catalog says a batch is in the lake.
func sqliteOpen(path string) (*sql.DB, error) {
	switch {
	case path == "":
		return nil, fmt.Errorf("%w: empty SQLite path", ErrUnsupportedDSN)
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		// In-memory databases are per connection, and URI names would let
		// the caller override the pragmas below.
		return nil, fmt.Errorf("%w: %q: use a plain file path", ErrUnsupportedDSN, path)
	case strings.ContainsRune(path, '?'):
		// The driver splits its DSN at the first '?'.
		return nil, fmt.Errorf("%w: %q: path must not contain '?'", ErrUnsupportedDSN, path)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("catalog: open %q: is a directory", path)
	}
	return sql.Open("sqlite", fmt.Sprintf("%s?_busy_timeout=%d&_journal_mode=WAL&_synchronous=FULL&_foreign_keys=1&_txlock=immediate",
		path, busyTimeoutMillis))
}

func sqliteCode(err error) (int, bool) {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code(), true
	}
	return 0, false
}

// PostgreSQL error codes (SQLSTATE) the catalog tells apart.
const (
	pgUniqueViolation      = "23505"
	pgSerializationFailure = "40001"
	pgDeadlockDetected     = "40P01"
	pgLockNotAvailable     = "55P03"
)

var postgresDialect = &dialect{
	name:       "postgres",
	migrations: postgresMigrations,
	open:       postgresOpen,
	display:    redactDSN,
	rebind:     rebindDollar,
	// Read-only REPEATABLE READ gives List one snapshot and never fails
	// with a serialization error.
	readTx: &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
	// Keyed by schema, so catalogs in different schemas of one database
	// do not wait for each other.
	lockMigrations: `SELECT pg_advisory_xact_lock(hashtext('sluice.catalog.migrate.' || current_schema()))`,
	lockRebuild:    `LOCK TABLE segments, segment_names IN SHARE ROW EXCLUSIVE MODE`,
	serverNow:      `CAST(EXTRACT(EPOCH FROM statement_timestamp()) * 1000000000 AS BIGINT)`,
	txAttempts:     5,
	isUnique:       func(err error) bool { return pgCode(err) == pgUniqueViolation },
	isNotDatabase:  func(error) bool { return false },
	isRetryableError: func(err error) bool {
		switch pgCode(err) {
		case pgSerializationFailure, pgDeadlockDetected, pgLockNotAvailable:
			return true
		}
		return false
	},
}

// postgresOpen parses the DSN up front so a typo fails at Open, not at the
// first query. Only URL DSNs are accepted: keyword/value strings could not
// be told apart from SQLite paths.
func postgresOpen(dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: PostgreSQL DSN %s: %w", ErrUnsupportedDSN, redactDSN(dsn), err)
	}
	// The queue is truncated once the catalog says a batch is in the lake,
	// so a commit must be durable when it returns, whatever the server's
	// default; a DSN may still say otherwise explicitly.
	if _, set := cfg.RuntimeParams["synchronous_commit"]; !set {
		cfg.RuntimeParams["synchronous_commit"] = "on"
	}
	db := stdlib.OpenDB(*cfg)
	// Several sluice processes share one server; keep a few warm
	// connections each, not the database/sql default of unlimited.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(4)
	return db, nil
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// rebindDollar turns "?" into "$1", "$2", ... The package's SQL has no "?"
// inside string literals, so no quoting rules are needed.
func rebindDollar(q string) string {
	if !strings.ContainsRune(q, '?') {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// redactDSN hides the password, in the user info or a query parameter.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "<unparsable PostgreSQL DSN>"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// dialectFor picks the backend from the DSN and returns what its open
// takes: the path for SQLite, the whole URL for PostgreSQL.
func dialectFor(dsn string) (*dialect, string, error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite://"):
		return sqliteDialect, strings.TrimPrefix(dsn, "sqlite://"), nil
	case strings.HasPrefix(dsn, "sqlite:"):
		return sqliteDialect, strings.TrimPrefix(dsn, "sqlite:"), nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return postgresDialect, dsn, nil
	case strings.HasPrefix(dsn, "pgx:"):
		return nil, "", fmt.Errorf("%w: pgx: prefix: write PostgreSQL DSNs as postgres://user:pass@host:port/db", ErrUnsupportedDSN)
	default:
		return sqliteDialect, dsn, nil
	}
}
