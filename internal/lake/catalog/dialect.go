package catalog

import (
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is everything that differs between SQL backends. All SQL in this
// package is written with "?" placeholders and ON CONFLICT upserts, which
// SQLite and PostgreSQL both accept; rebind turns "?" into "$n" where needed.
//
// Locking: write transactions must take the write lock at BEGIN (SQLite:
// "_txlock=immediate" in the DSN) so a transaction that reads and then
// writes never fails with SQLITE_BUSY_SNAPSHOT, which busy_timeout cannot
// retry. Correctness never depends on that lock alone: Replace, queue
// commits and leases use conditional UPDATE/upsert statements and check the
// affected row count, which is also race-free under PostgreSQL READ COMMITTED.
//
// A PostgreSQL dialect needs: its own migrations (BIGINT, not INTEGER, for
// every int64 column; BIGINT GENERATED ALWAYS AS IDENTITY for ids), rebind
// to "$n", error classification by SQLSTATE (23505 unique, 40001/55P03
// retryable), and the server clock for leases if hosts' clocks may drift.
type dialect struct {
	name       string
	driverName string
	// migrations[i] moves the schema from version i to i+1. Statements are
	// idempotent (IF NOT EXISTS) so a half-applied migration can be re-run.
	migrations [][]string
	// dataSource turns the user's DSN remainder into the driver's DSN.
	dataSource func(target string) (string, error)
	// rebind rewrites "?" placeholders; identity for SQLite.
	rebind           func(query string) string
	isUnique         func(error) bool // unique/primary key violation
	isNotDatabase    func(error) bool // the file is not a database of this kind
	isRetryableError func(error) bool // lock contention outlasting the busy timeout
}

var sqliteDialect = &dialect{
	name:       "sqlite",
	driverName: "sqlite",
	migrations: sqliteMigrations,
	dataSource: sqliteDataSource,
	rebind:     func(q string) string { return q },
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

// sqliteDataSource builds the modernc DSN. synchronous=FULL because a queue
// position commit must survive power loss: the queue is truncated once the
// catalog says a batch is in the lake.
func sqliteDataSource(path string) (string, error) {
	switch {
	case path == "":
		return "", fmt.Errorf("%w: empty SQLite path", ErrUnsupportedDSN)
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		// In-memory databases are per connection, and URI names would let
		// the caller override the pragmas below.
		return "", fmt.Errorf("%w: %q: use a plain file path", ErrUnsupportedDSN, path)
	case strings.ContainsRune(path, '?'):
		// The driver splits its DSN at the first '?'.
		return "", fmt.Errorf("%w: %q: path must not contain '?'", ErrUnsupportedDSN, path)
	}
	return fmt.Sprintf("%s?_busy_timeout=%d&_journal_mode=WAL&_synchronous=FULL&_foreign_keys=1&_txlock=immediate",
		path, busyTimeoutMillis), nil
}

func sqliteCode(err error) (int, bool) {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code(), true
	}
	return 0, false
}

// dialectFor picks the backend from the DSN and returns the remainder.
func dialectFor(dsn string) (*dialect, string, error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite://"):
		return sqliteDialect, strings.TrimPrefix(dsn, "sqlite://"), nil
	case strings.HasPrefix(dsn, "sqlite:"):
		return sqliteDialect, strings.TrimPrefix(dsn, "sqlite:"), nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"), strings.HasPrefix(dsn, "pgx:"):
		return nil, "", fmt.Errorf("%w: PostgreSQL is not built in yet", ErrUnsupportedDSN)
	default:
		return sqliteDialect, dsn, nil
	}
}
