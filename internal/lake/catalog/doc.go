// Package catalog owns the lake catalog: the SQL database listing every
// Parquet segment of the lake (table, tenant, hour partition, path, time
// range, rows, bytes, level, schema hash, names for pruning), the queue
// positions the lake covers, leases that coordinate upkeep between
// processes (TryLease, and HoldLease to keep one while working), and
// intents: the files an upkeep run is about to write before it swaps them
// in (AddIntent, ReplaceIntents, ClaimIntents). It also rebuilds the
// catalog from the files alone.
//
// Two SQL backends, chosen by the DSN given to Open:
//
//   - SQLite (modernc.org/sqlite, pure Go), the embedded default:
//     "sqlite:<path>" or a bare path.
//   - PostgreSQL (pgx through database/sql), for several sluice processes,
//     on several hosts, sharing one catalog: "postgres://..." or
//     "postgresql://...". The database must exist; the tables are created
//     in the first schema of its search_path.
//
// Everything that differs between them lives in dialect.go: migrations
// (the same schema, version for version, with PostgreSQL's types), "?" to
// "$n" placeholder rebinding, transaction options and locks, error
// classification, and the clock used for leases. All other SQL is shared.
//
// # Concurrency
//
// A *Catalog is safe for concurrent use, and several handles, in one or
// several processes, may share one database.
//
// SQLite runs in WAL mode (readers never block the writer) with a busy
// timeout, and every write transaction takes the write lock at BEGIN, so
// writers queue instead of failing. The file must be on a local
// filesystem; WAL does not work over network mounts.
//
// PostgreSQL write transactions run at READ COMMITTED; List reads one
// REPEATABLE READ snapshot. Every check-then-write is a single conditional
// statement whose affected row count is checked (queue commits, Replace,
// leases), and PostgreSQL re-checks such a condition on the committed row
// after waiting for a concurrent writer, so of two racing writers exactly
// one wins and the other gets ErrQueueRegress, ErrStale or a refused
// lease. Replace locks its inputs in id order, so racing compactions wait
// rather than deadlock. Deadlocks and serialization failures that do occur
// are retried inside the catalog a few times; IsRetryable reports those
// that persist. Migrations take an advisory lock, so concurrent Opens of a
// new database are safe. Lease expiry uses the server's clock, so hosts
// with drifting clocks agree.
//
// Use leases (TryLease) to keep two processes off the same partition;
// Replace additionally refuses stale input, so a lost lease cannot lose data.
// HoldLease takes a lease and renews it every ttl/3 from a goroutine of its
// own until Lease.Release; once a renewal is refused (another owner has it)
// or keeps failing until the lease is about to expire, Lease.Context is
// cancelled with a cause wrapping ErrLeaseLost. Work under the lease runs
// in that context and calls Lease.Renew just before committing. A Lease's
// Context, Lost, Key and WrapLost may be used from any goroutine; Renew and
// Release belong to the holder, and Release must be called (it stops the
// goroutine). AddIntent, ClaimIntents and ReplaceIntents check the lease
// inside their transaction, taking the lease row's lock on PostgreSQL, so a
// taker of the expired lease waits for them rather than slipping between
// the check and the write.
// Rebuild is an offline repair: stop writers and upkeep while it runs
// (on PostgreSQL it locks the segment tables, so stragglers wait).
//
// # Invariants
//
//  1. A row exists only for a file already in place: writers rename the
//     file into the lake before AddSegments, and nothing deletes a file
//     before its row is marked replaced and a grace period has passed.
//  2. Files are immutable; a segment row changes only once, from live to
//     replaced (Replace), and is deleted only after that (DeleteReplaced).
//  3. A segment's path is <table>/tenant=<t>/dt=<day>/hour=<HH>/<id>.parquet
//     matching its Table, Tenant, Day and Hour, and its [MinTime, MaxTime]
//     lies within that hour (UTC). AddSegments, Replace and Rebuild all
//     check this, so any row the catalog accepts survives a Rebuild.
//  4. Paths are unique across live and replaced rows.
//  5. Segments and the queue position they cover commit in one transaction
//     (AddSegmentsWithQueue); a queue's position only moves forward, so a
//     replayed batch is rejected instead of written twice.
//  6. Replace is all or nothing: every removed id must be live.
//  7. Segment ids are never reused.
//  8. All times are stored as int64 unix nanoseconds (UTC).
//  9. An upkeep run (compaction, rollup) records an intent for each file
//     before creating it, under the lease it holds (AddIntent refuses
//     otherwise). So every lake file is catalogued (a segment), announced
//     (an intent), or an orphan of ingestion; the start-up orphan sweep
//     leaves announced files alone.
//  10. An intent ends in one of two ways, each after its file's fate is
//     settled: ReplaceIntents turns it into a segment in the same
//     transaction that adds the segment, and only while its writer still
//     holds the lease and still owns the intent; or its file is deleted,
//     then the intent (by its failed writer, or by the next holder of the
//     lease after ClaimIntents). Claiming makes the next holder the owner,
//     so a writer that lost its lease can never catalogue a file that is
//     being deleted, however late it wakes up. A crash between deleting the
//     file and the intent leaves an intent of a missing file, which the
//     next cleaning forgets.
//  11. Intents of a lease are cleaned only by a holder of that lease, never
//     while another owner holds it: a run in progress keeps its files.
package catalog
