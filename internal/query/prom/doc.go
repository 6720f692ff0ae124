// Package prom is the PromQL storage adapter over the lake: it implements
// Prometheus's storage.Queryable for one tenant's metrics table, so the real
// PromQL engine (github.com/prometheus/prometheus/promql) evaluates queries
// over the Parquet files.
//
// A Select works in four steps:
//
//  1. The catalog lists the tenant's live metrics segments overlapping the
//     hinted time range; in `sluice run`, Options.Tail adds in-memory files
//     of the records not yet committed (tail.go, docs/design/freshness.md),
//     held until the Querier is closed.
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
// A selector reads metrics_rollup instead of raw points only where a tier
// gives exactly the raw answer (rollupread.go): rollupUse picks the
// aggregate from SelectHints.Func (last, max, min, sum, avg, or a
// counter's first and last point for rate and increase) and the tiers
// whose grid holds every evaluation time, step and range, which it learns
// from the hints and the query's statement (WithStatement; subqueries read
// raw points). plan serves each hour from the coarsest such tier that is
// fresh for it, else from raw files. A series whose data its rollup
// cannot stand for (a point in a window's first millisecond, NaN or null
// values, merged lake series) is read again from raw points alone
// (scan.only); a counter whose rate extrapolation would differ gets as
// many samples per window as it had points (counterSeries); a selector matching what
// no rollup aggregate answers (errInexact) reads raw points.
//
// Delta sums and delta histograms are summed per series at read time
// (series.finish), so PromQL sees cumulative counters.
//
// Exponential histograms (OTLP, and remote-write native histograms) and
// remote-write custom-bucket histograms are native histogram samples under
// the bare name (histogram.go; docs/schema.md "Native histograms in
// PromQL"); index.go gives remote-write rows (scope prw.ScopeName)
// descriptors of their own (metricDesc.rw) because the same stored type
// means a classic histogram from OTLP. They are read from raw points only.
//
// The OTLP -> Prometheus mapping (names.go, documented in docs/query.md)
// follows the OpenTelemetry "Prometheus and OpenMetrics compatibility"
// specification through github.com/prometheus/otlptranslator with
// UnderscoreEscapingWithSuffixes, Prometheus's default. Remote-write rows
// are not mapped: their metric name and label names are the stored name
// and attribute keys verbatim (a series comes back exactly as sent), and
// the label cache keys them apart from OTLP rows of the same series_id.
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
//  4. A selector's answer with rollups equals its answer from raw points:
//     exactly for max, min, last and instant selectors, and up to
//     summation order for sums, averages, rate and increase (tested at
//     1e-9 and 1e-7 relative by TestRollupsDoNotChangeAnswers); whatever
//     rollupUse and the checks cannot vouch for reads raw points.
package prom
