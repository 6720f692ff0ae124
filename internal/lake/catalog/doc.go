// Package catalog owns the lake catalog: the SQL database listing every
// Parquet segment of the lake (table, tenant, hour partition, path, time
// range, rows, bytes, level, schema hash, names for pruning), the queue
// positions the lake covers, and leases that coordinate upkeep between
// processes. It also rebuilds the catalog from the files alone.
//
// SQLite (modernc.org/sqlite, pure Go) is the embedded backend. Everything
// that differs between SQL backends lives in dialect.go; the SQL is written
// so that a PostgreSQL dialect needs only its own migrations, placeholder
// rebinding and error classification.
//
// # Concurrency
//
// A *Catalog is safe for concurrent use. Several handles, in one or several
// processes, may share one SQLite file: it runs in WAL mode (readers never
// block the writer) with a busy timeout, and every write transaction takes
// the write lock at BEGIN, so writers queue instead of failing. The file
// must be on a local filesystem; WAL does not work over network mounts.
// Use leases (TryLease) to keep two processes off the same partition;
// Replace additionally refuses stale input, so a lost lease cannot lose data.
// Rebuild is an offline repair: stop writers and upkeep while it runs.
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
package catalog
