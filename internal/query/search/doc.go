// Package search serves the logs and traces search API over the lake:
//
//	GET /api/v1/logs/search      log records, newest first, JSON lines
//	GET /api/v1/traces/search    spans, newest first, JSON lines
//	GET /api/v1/traces/<id>      every span of one trace as OTLP JSON
//
// NewHandler returns one http.Handler serving the three paths; mount it
// under /api/v1/logs/ and /api/v1/traces/ (FromConfig gives its Options
// from the sluice config). docs/query.md documents every parameter.
//
// A search lists the tenant's segments from the catalog (pruned by time
// and service; in `sluice run` Options.Tail adds in-memory files of the
// records not yet committed, held until the request ends: tail.go), walks hour partitions newest first, skips row groups by
// their column statistics, reads only the filter columns of the rest,
// keeps the best limit+1 matches in a bounded heap, and only then reads
// the other columns of the rows it returns.
//
// # Invariants
//
//  1. Every query is scoped to exactly one tenant: the tenant is part of
//     the catalog filter and is checked against each segment, so a query
//     never opens another tenant's file.
//  2. Results are in one total order: time descending, then file path
//     ascending, then row ascending. A cursor is the last position
//     returned, so paging neither skips nor repeats a record as long as
//     the files do not change between pages (compaction replacing files
//     may shift records that share the cursor's timestamp).
//  3. Memory is bounded by the limit (the heap) and by one row group of
//     filter columns; rows scanned and compressed bytes read are bounded
//     by Limits, and passing a bound fails the query with 422 before any
//     result is written.
//  4. Every error is reported before the first byte of the body, with its
//     HTTP status; bad parameters (unknown names included) get 400.
//
// # Concurrency
//
// A Handler is safe for concurrent use; each request has its own scan
// state. Open lake files (parsed footers) and per-file trace_id indexes
// are shared between requests: files are immutable, parquet-go's lazily
// read indexes are atomic, and the caches are mutex-guarded.
package search
