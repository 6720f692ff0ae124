package catalog

import (
	"context"
	"database/sql"
	"fmt"
)

// sqliteMigrations: index i holds the statements taking version i to i+1.
// Append only; never edit a released migration.
//
// Times are INTEGER unix nanoseconds in every dialect, so no driver time
// conversion is involved. AUTOINCREMENT keeps ids from being reused after
// the sweeper deletes rows, so a stale id held by a compactor can never
// name a newer segment.
var sqliteMigrations = [][]string{
	{
		`CREATE TABLE IF NOT EXISTS segments (
			id          INTEGER PRIMARY KEY AUTOINCREMENT,
			table_name  TEXT    NOT NULL,
			tenant      TEXT    NOT NULL,
			day         TEXT    NOT NULL,
			hour        INTEGER NOT NULL,
			path        TEXT    NOT NULL,
			min_time    INTEGER NOT NULL,
			max_time    INTEGER NOT NULL,
			row_count   INTEGER NOT NULL,
			byte_size   INTEGER NOT NULL,
			level       INTEGER NOT NULL,
			schema_hash TEXT    NOT NULL,
			created_ns  INTEGER NOT NULL,
			queue_pos   INTEGER NOT NULL DEFAULT 0,
			replaced_ns INTEGER
		)`,
		`CREATE UNIQUE INDEX IF NOT EXISTS segments_path ON segments (path)`,
		`CREATE INDEX IF NOT EXISTS segments_time ON segments (table_name, tenant, min_time, max_time)`,
		`CREATE INDEX IF NOT EXISTS segments_partition ON segments (table_name, tenant, day, hour)`,
		`CREATE INDEX IF NOT EXISTS segments_replaced ON segments (replaced_ns) WHERE replaced_ns IS NOT NULL`,
		`CREATE TABLE IF NOT EXISTS segment_names (
			segment_id INTEGER NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
			kind       TEXT    NOT NULL,
			name       TEXT    NOT NULL,
			PRIMARY KEY (segment_id, kind, name)
		)`,
		`CREATE INDEX IF NOT EXISTS segment_names_name ON segment_names (kind, name, segment_id)`,
		`CREATE TABLE IF NOT EXISTS queue_positions (
			name TEXT    PRIMARY KEY,
			pos  INTEGER NOT NULL
		)`,
		`CREATE TABLE IF NOT EXISTS leases (
			lease_key  TEXT    PRIMARY KEY,
			owner      TEXT    NOT NULL,
			expires_ns INTEGER NOT NULL
		)`,
	},
	// 2: intents, the files an upkeep run is about to write (intents.go).
	{
		`CREATE TABLE IF NOT EXISTS intents (
			path       TEXT    PRIMARY KEY,
			lease_key  TEXT    NOT NULL,
			owner      TEXT    NOT NULL,
			created_ns INTEGER NOT NULL
		)`,
		`CREATE INDEX IF NOT EXISTS intents_lease ON intents (lease_key)`,
	},
	// 3: moves, the file relocations a swap committed (moves.go).
	{
		`CREATE TABLE IF NOT EXISTS moves (
			id         INTEGER PRIMARY KEY AUTOINCREMENT,
			src        TEXT    NOT NULL UNIQUE,
			dst        TEXT    NOT NULL,
			created_ns INTEGER NOT NULL
		)`,
	},
	// 4: metric_metadata, remote-write family metadata sent apart from
	// its series (metadata.go).
	{
		`CREATE TABLE IF NOT EXISTS metric_metadata (
			tenant     TEXT    NOT NULL,
			name       TEXT    NOT NULL,
			type       TEXT    NOT NULL,
			help       TEXT    NOT NULL,
			unit       TEXT    NOT NULL,
			updated_ns INTEGER NOT NULL,
			PRIMARY KEY (tenant, name)
		)`,
	},
}

// postgresMigrations mirror sqliteMigrations version for version: the same
// tables, columns and indexes, with BIGINT for every int64 column and an
// identity column for ids (sequences never hand out a value twice, so ids
// are not reused either).
var postgresMigrations = [][]string{
	{
		`CREATE TABLE IF NOT EXISTS segments (
			id          BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			table_name  TEXT    NOT NULL,
			tenant      TEXT    NOT NULL,
			day         TEXT    NOT NULL,
			hour        INTEGER NOT NULL,
			path        TEXT    NOT NULL,
			min_time    BIGINT  NOT NULL,
			max_time    BIGINT  NOT NULL,
			row_count   BIGINT  NOT NULL,
			byte_size   BIGINT  NOT NULL,
			level       INTEGER NOT NULL,
			schema_hash TEXT    NOT NULL,
			created_ns  BIGINT  NOT NULL,
			queue_pos   BIGINT  NOT NULL DEFAULT 0,
			replaced_ns BIGINT
		)`,
		`CREATE UNIQUE INDEX IF NOT EXISTS segments_path ON segments (path)`,
		`CREATE INDEX IF NOT EXISTS segments_time ON segments (table_name, tenant, min_time, max_time)`,
		`CREATE INDEX IF NOT EXISTS segments_partition ON segments (table_name, tenant, day, hour)`,
		`CREATE INDEX IF NOT EXISTS segments_replaced ON segments (replaced_ns) WHERE replaced_ns IS NOT NULL`,
		`CREATE TABLE IF NOT EXISTS segment_names (
			segment_id BIGINT NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
			kind       TEXT   NOT NULL,
			name       TEXT   NOT NULL,
			PRIMARY KEY (segment_id, kind, name)
		)`,
		`CREATE INDEX IF NOT EXISTS segment_names_name ON segment_names (kind, name, segment_id)`,
		`CREATE TABLE IF NOT EXISTS queue_positions (
			name TEXT   PRIMARY KEY,
			pos  BIGINT NOT NULL
		)`,
		`CREATE TABLE IF NOT EXISTS leases (
			lease_key  TEXT   PRIMARY KEY,
			owner      TEXT   NOT NULL,
			expires_ns BIGINT NOT NULL
		)`,
	},
	{
		`CREATE TABLE IF NOT EXISTS intents (
			path       TEXT   PRIMARY KEY,
			lease_key  TEXT   NOT NULL,
			owner      TEXT   NOT NULL,
			created_ns BIGINT NOT NULL
		)`,
		`CREATE INDEX IF NOT EXISTS intents_lease ON intents (lease_key)`,
	},
	{
		`CREATE TABLE IF NOT EXISTS moves (
			id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			src        TEXT   NOT NULL UNIQUE,
			dst        TEXT   NOT NULL,
			created_ns BIGINT NOT NULL
		)`,
	},
	{
		`CREATE TABLE IF NOT EXISTS metric_metadata (
			tenant     TEXT   NOT NULL,
			name       TEXT   NOT NULL,
			type       TEXT   NOT NULL,
			help       TEXT   NOT NULL,
			unit       TEXT   NOT NULL,
			updated_ns BIGINT NOT NULL,
			PRIMARY KEY (tenant, name)
		)`,
	},
}

// migrate brings the schema to the newest version. Concurrent Opens are
// safe: the version is re-read inside the write transaction, which holds
// the SQLite write lock or the PostgreSQL migration lock.
func (c *Catalog) migrate(ctx context.Context) error {
	want := len(c.d.migrations)
	v, err := c.schemaVersion(ctx, c.db)
	switch {
	case err == nil && v == want:
		return nil // common case: no write lock taken
	case err != nil && c.d.isNotDatabase(err):
		return fmt.Errorf("%w: %w", ErrNotDatabase, err)
	}
	// Any other error is most likely "no such table" on a new file; the
	// transaction below creates the table and surfaces real failures.
	return c.inTx(ctx, func(tx *sql.Tx) error {
		if c.d.lockMigrations != "" {
			if _, err := tx.ExecContext(ctx, c.d.lockMigrations); err != nil {
				return fmt.Errorf("lock for migration: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
			return fmt.Errorf("create schema_version: %w", err)
		}
		v, err := c.schemaVersion(ctx, tx)
		if err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if v > want {
			return fmt.Errorf("%w: catalog has version %d, binary knows %d", ErrSchemaTooNew, v, want)
		}
		for ; v < want; v++ {
			for _, stmt := range c.d.migrations[v] {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("migrate to version %d: %w", v+1, err)
				}
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM schema_version`); err != nil {
			return fmt.Errorf("set schema version: %w", err)
		}
		if _, err := tx.ExecContext(ctx, c.d.rebind(`INSERT INTO schema_version (version) VALUES (?)`), want); err != nil {
			return fmt.Errorf("set schema version: %w", err)
		}
		return nil
	})
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion returns 0 for an empty schema_version table.
func (c *Catalog) schemaVersion(ctx context.Context, q queryer) (int, error) {
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil {
		return 0, err
	}
	return int(v.Int64), nil
}
