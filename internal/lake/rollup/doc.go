// Package rollup computes the metrics_rollup table from raw metrics: per
// series and UTC-aligned window of each tier (default 1m, 5m, 1h), the
// count, sum, min, max, first and last value, a reset-aware increase for
// counters, summed or latest histogram buckets and a DDSketch. It owns the
// tier rules (ParseTiers, ValidateTiers), the window math (Aggregator,
// Combine), the metrics_rollup file format (docs/schema.md is the
// contract) and planning (Plan) and running (Run) one hour's rollup, in the
// shape of package compact so the upkeep scheduler drives both alike.
//
// # Unit of work
//
// One tenant's raw metrics hour. Run reads the hour's live raw segments
// column-projected (only the columns a rollup needs, row group by row
// group), keeps the hour's points in flat arrays (about 21 bytes per
// point plus histogram payloads), aggregates each series in time order
// into the finest tier and folds every closed window into the next tier,
// so 5m comes from 1m and 1h from 5m in one pass. Label columns are read
// once per series, from its first row. The union of the hour's label
// columns is capped like a raw file's (Options.MaxAttributeColumns,
// capLabels): a series' labels past the cap go into its overflow labels.
//
// Each tier's windows are kept column by column (tierOut) and written
// with the lake's column-chunk encoder (internal/lake/pqenc): rows are sorted
// by series, so a series' descriptor and label columns are runs, and a
// run costs one level run and one dictionary-index run whatever its
// length, where parquet-go's row writer hashed every value of every row.
// The files are what parquet-go writes for the same schema and options
// (encode_rows_test.go compares the two value by value); a schema with a column
// type the encoder does not know falls back to parquet-go's writer.
//
// # Concurrency
//
// Plan only reads the catalog (and, with Options.Store, rollup footers).
// Run takes the catalog lease "rollup/<raw partition dir>" (the key
// retention also takes) for the hour with catalog.HoldLease, which renews
// it every LeaseTTL/3 while the hour is read, aggregated and written; a
// run finding it held elsewhere returns Result.Skipped, and one whose
// lease is lost stops and fails with ErrLeaseLost before its swap. Upkeep
// never takes a lock the ingest path takes: raw files are immutable and
// read as listed; the only shared resource is the catalog, written (the
// intents aside) once per hour with catalog.ReplaceIntents.
// An Aggregator, a tierOut and a rowEncoder are used by one goroutine.
//
// # Invariants
//
//  1. A window of tier d starts at a multiple of d ns since the epoch
//     (UTC-aligned, since every tier divides 1h); a point exactly on a
//     boundary belongs to the window starting there.
//  2. Every raw point with a timestamp inside its partition hour is in
//     exactly one window per tier; points without one (null, or a far
//     future time whose partition is the ingest time) are counted in
//     Result.Untimed and not rolled up.
//  3. A coarser tier equals the same aggregation over the raw points
//     (Combine is exact up to floating-point summation order).
//  4. Each hour has at most one live rollup segment per tier. Run swaps
//     the new files for all live rollups of the hour in one
//     catalog.ReplaceIntents: a recompute replaces, never duplicates. On
//     error the catalog is unchanged and the new files are removed.
//  5. Each rollup file records the live raw rows it was computed from
//     (footer sluice.rollup.source_rows). Plan recomputes an hour when
//     raw segments were added after its rollup and the hour's live raw
//     rows differ from that number: late data does, compaction (same
//     rows, new segments) does not. Hours without raw rows (retention)
//     are never recomputed, so their rollups stay.
//  6. Each output file has an intent in the catalog before it is created
//     (lake.IntentStore), under the hour's lease, as in package compact
//     (its invariant 3): the files a killed run leaves are deleted by the
//     next Run of the hour, first thing under the lease, or by
//     compact.Sweep once no one holds the lease.
package rollup
