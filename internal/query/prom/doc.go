// Package prom is the PromQL storage adapter over the lake: it implements
// Prometheus's storage.Queryable for one tenant's metrics table, so the real
// PromQL engine (github.com/prometheus/prometheus/promql) evaluates queries
// over the Parquet files.
//
// A Select works in four steps:
//
//  1. The catalog lists the tenant's live metrics segments overlapping the
//     hinted time range.
//  2. Each file's index (fileIndex: the runs of rows of each OTLP metric in
//     each row group, with the row group's timestamp statistics) says which
//     row groups and row ranges hold metrics whose Prometheus names match
//     the __name__ matchers. Indexes are built once per file and cached:
//     files are immutable.
//  3. Only the needed columns of those row ranges are read, page by page,
//     into typed slices (series_id, timestamp, value; count, sum, bounds and
//     buckets for histograms), seeking with the offset index.
//  4. Label sets are read once per series (series_id) from the label
//     columns and cached; the remaining matchers filter series.
//
// Range queries may read gauges and sums from metrics_rollup instead of
// raw points (Options.Rollups; plan and freshTier in querier.go): per hour,
// the coarsest tier no wider than the step whose rollup was computed from
// the hour's current raw rows.
//
// The OTLP -> Prometheus mapping (names.go, documented in docs/query.md)
// follows the OpenTelemetry "Prometheus and OpenMetrics compatibility"
// specification through github.com/prometheus/otlptranslator with
// UnderscoreEscapingWithSuffixes, Prometheus's default.
//
// # Concurrency
//
// An Adapter is safe for concurrent use; its caches are guarded by
// mutexes. A Querier serves one query and is not used concurrently (the
// engine selects sequentially); its limits count over all its Selects.
//
// # Invariants
//
//  1. A query reads only segments whose catalog tenant is its tenant; the
//     tenant is re-checked on every listed segment, and cached label sets
//     are keyed by tenant.
//  2. Series returned by Select are sorted by labels, their samples by time
//     with at most one sample per millisecond (the last read wins).
//  3. Limits (series, samples, bytes) stop a query with an error wrapping
//     ErrLimit before the limit is exceeded by more than one row range.
package prom
