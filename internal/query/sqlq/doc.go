// Package sqlq runs SQL over one tenant's part of the lake with an embedded
// DuckDB (github.com/duckdb/duckdb-go, cgo, statically linked; no extension
// is ever downloaded). It owns the read-only SQL session behind `sluice sql`:
// the views, the sandbox around user SQL, resource limits, and the rendering
// of results as an aligned table, CSV, JSON or JSON lines.
//
// Open lists the tenant's live segments of each table from the catalog
// (pruned by an optional time range) and creates one view per table —
// logs, metrics, metrics_rollup, traces — over exactly those files, with
// read_parquet(union_by_name, hive_partitioning) and fixed Hive column types
// (tenant VARCHAR, dt DATE, hour INTEGER). A table without files gets an
// empty view carrying its fixed columns, so queries over it return no rows
// instead of failing. With Options.Store (an S3 lake) the selected files
// are first copied, in their Hive layout, into the session's private
// directory, bounded by Options.MaxFetchBytes: DuckDB could read S3 only
// through its httpfs extension, which is not linked in.
//
// # Concurrency
//
// An Engine holds one DuckDB connection and is not safe for concurrent
// use: run one Query at a time and close its Rows before the next. DuckDB
// itself parallelises a query over Options.Threads threads. Several
// Engines (processes) may read the same lake while `sluice run` writes it;
// sqlq never takes the lake lock and never writes the lake or the catalog.
//
// # Invariants
//
//  1. Tenant isolation: the views reference only files the catalog lists
//     for Options.Tenant, and before any user SQL runs DuckDB's file access
//     is restricted to exactly those files (allowed_paths), then disabled
//     (enable_external_access=false) and the configuration locked
//     (lock_configuration=true), so user SQL can neither read another file
//     (read_parquet of another tenant's path, globs, read_csv, ATTACH, COPY)
//     nor lift those settings.
//  2. Extensions are never installed or auto-loaded: only what is linked in
//     (parquet, json, icu, core functions) is available.
//  3. Every query runs under the caller's context: cancelling it (a
//     timeout) interrupts DuckDB. Memory is capped by Options.MemoryLimit;
//     a query over it fails with DuckDB's out-of-memory error instead of
//     taking the machine. Spilled data and fetched files go to a private
//     temporary directory that Close removes.
//  4. Query returns at most maxRows rows and says when it cut more: SELECT
//     statements are wrapped in a LIMIT so DuckDB never materialises more
//     than maxRows+1 rows; other statements (PRAGMA, EXPLAIN, several
//     statements) run as written and are cut while reading.
//  5. The views read files as they were when Open listed them: Open hard
//     links them into the private directory (an S3 lake's are copied
//     there), so a swap that moves a replaced file out of the Hive tree,
//     or the sweeper deleting it, does not disturb the session. Where the
//     private directory is on another filesystem than a local lake, the
//     views name the files where Open found them (lake.OpenSegment's
//     order) instead; a query that reads one after a swap moved it fails
//     with a missing file and succeeds when run again.
package sqlq
