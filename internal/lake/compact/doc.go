// Package compact merges the small segments of one lake partition into
// fewer, larger, sorted ones. It owns planning (Plan: which partitions need
// it), one compaction run (Run: lease, k-way merge, atomic swap), and the
// sweeper (Sweep) that deletes the files of replaced segments, whoever
// replaced them (compaction, rollups, retention), after a grace period.
//
// # Concurrency
//
// Plan only reads the catalog. Run may be called from several goroutines or
// processes at once: it takes the catalog lease "compact/<partition dir>"
// with catalog.HoldLease and skips the job (Result.Skipped) while another
// owner holds it. The lease is renewed every LeaseTTL/3 while the merge
// runs; a run whose lease is lost is cancelled and fails with ErrLeaseLost
// before its swap. A lost lease cannot lose data: the swap
// (catalog.ReplaceIntents) checks the lease and the run's intents in its
// transaction and refuses inputs that are no longer live
// (catalog.ErrStale). Sweep may run concurrently with anything: it only
// deletes files of replaced segments past their grace period, files first,
// then their rows (a crash in between leaves rows of missing files, which
// are not live and which the next Sweep removes), and the files of intents
// under leases it can take itself.
//
// # Invariants
//
//  1. Readers of the catalog see either the old set or the new set of a
//     partition, never both and never neither, whatever point a crash
//     hits: the new files are written under their final names but stay
//     invisible (uncatalogued) until catalog.ReplaceIntents swaps them for
//     the inputs in one transaction.
//  2. Run never deletes an input file. Inputs stay on disk, marked replaced,
//     until the sweeper removes them after a grace period, so a reader that
//     listed them before the swap can finish.
//  3. Every output file has an intent in the catalog before it is created
//     (lake.IntentStore), under the partition's lease; the swap deletes the
//     intents of the files it adds. When Run fails before or at the swap,
//     it removes the files it wrote, then their intents. A crash instead
//     leaves files and intents behind: the next Run that takes the
//     partition's lease deletes them first thing, and Sweep deletes those
//     whose lease no one holds (it takes the lease itself), then the
//     intents (lake.CleanIntents). Neither touches them while another owner
//     holds the lease. So once a killed run's lease has expired, one more
//     compaction or sweep leaves on disk only catalogued files: a glob over
//     the lake reads the live rows, plus replaced ones until their grace
//     period ends.
//  4. Output holds exactly the input rows: Run checks the rows written
//     against the rows read and against the inputs' catalog row counts and
//     refuses to commit on a mismatch.
//  5. Memory does not grow with input size: one row group per input plus
//     the writer's buffer, bounded by Options.MaxBufferedBytes.
//  6. Output is sorted by the table's sort key (docs/schema.md); rows are
//     merged from the inputs in that order and ties keep input order
//     (inputs in segment id order, i.e. arrival order).
//  7. Rows keep their partition: the output writer's clock is pinned to the
//     last nanosecond of the job's hour, so a row whose partition time had
//     been replaced by the ingest clock (no valid own time) stays in the
//     hour. Output file ids therefore carry that time, not the wall clock;
//     the catalog's Created is the wall clock. (A row whose own time was
//     rejected as too far in the future at ingest, by less than one hour
//     more than MaxFutureSkew, may be accepted now and move to its own
//     hour; it is then catalogued there, in the same Replace, so it is
//     never lost or duplicated.)
//  8. Output level is one more than the highest input level.
package compact
