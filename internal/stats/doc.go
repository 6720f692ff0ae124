// Package stats keeps live statistics of the metric series sluice stores,
// per tenant and per metric name as PromQL names it (internal/promname
// owns the mapping): active series, samples/s, bytes/s and, per label,
// distinct values, bytes and series per label=value pair. The query API
// serves them as Prometheus's /api/v1/status/tsdb (so Grafana's
// cardinality views work) and, with the rest of the process's counters,
// as /api/v1/status/sluice, which `sluice top` shows (docs/stats.md).
//
// The pipeline's consumer calls Observe with each metrics batch after the
// processing rules ran and the queue accepted it, so the statistics count
// exactly what is stored and forwarded. A remote-write request queued
// without a batch (package prw's Scanner) is counted by ObserveSeries from
// its samples' names, label-set keys and times, exactly as Observe counts
// the decoded batch (TestObserveSeriesMatchesObserve): the same table, so a
// series counts once whichever path carried it. A remote-write series is
// keyed by prw.LabelsKey, not by its series id, on both paths: the scan
// hashes a series' label bytes once instead of computing the lake's id
// (a hash per label value and a mix per label); Observe writes the labels
// of a decoded remote-write point out and hashes them (rwKey), once per
// series while rwKeySlots remembers it.
//
// # Windows
//
// Time is cut into windows of Config.Window aligned to the clock (arrival
// time, not the points' own). A series is active while it had a point in
// the current or the previous window, so an active series stays counted
// between one and two windows after its last point. Samples/s and bytes/s
// are the samples and bytes of those two windows divided by the time they
// cover (since start-up, when that is shorter).
//
// # Invariants
//
//  1. Exact, in bounded memory: a series is one 8-byte word (48 bits of a
//     64-bit hash of tenant, series id (remote write: label-set key), unit
//     and type, and its window; see seriesKey) and a 4-byte bucket count aside, no strings kept per
//     series. Counts are exact up to Config.MaxSeries active series (a
//     48-bit collision is the only error); past it new series are not
//     tracked and sluice_stats_series_overflow_total counts their points.
//     Likewise MaxMetrics (tenant, metric name) entries and MaxLabelPairs
//     (tenant, label, value) entries, each with its overflow counter; with
//     an overflow counter above zero the affected numbers are lower bounds.
//  2. Labels of a series are computed once per series per window (when it
//     first shows up in the window), never per point. Each label pair
//     keeps one count per window generation: a series seen in both windows
//     moves from the previous generation to the current one, so the sum of
//     the two is the number of active series with the pair, and a window
//     roll-over drops the oldest generation as a whole.
//  3. A histogram series counts as Prometheus counts it: one _bucket series
//     per bucket (le), _sum and _count; a summary one series per quantile,
//     _sum and _count; an exponential histogram _sum and _count. The
//     bucket or quantile count is the one of the series' first point in a
//     window.
//  4. Per point, Observe does a slot lookup and a few additions, with no
//     allocation and no map lookup (descriptors are resolved once per
//     batch); so does ObserveSeries (names resolved once per request;
//     TestObserveSeriesAllocatesNothingForKnownSeries).
//
// # Concurrency
//
// A *Stats is safe for concurrent use: one mutex, taken once per batch
// and per read. A window roll-over (at most once per window) rebuilds the
// series table under it, O(active series).
package stats
