// Package compact merges the small segments of one lake partition into
// fewer, larger, sorted ones. It owns planning (Plan: which partitions need
// it), one compaction run (Run: lease, k-way merge, atomic swap), and the
// sweeper (Sweep) that deletes the files of replaced segments, whoever
// replaced them (compaction, rollups, retention), after a grace period.
//
// # How
//
// merge merges by columns (colmerge.go): the sort-key columns of the
// inputs' current row groups decide the order of rows as runs of one
// input's consecutive rows (found by galloping, not row by row), and each
// output column is then built from those runs by copying level and value
// bytes, dictionary indexes translated, between decoded chunks
// (internal/lake/pqenc), never materialising a row. Where a run covers
// whole pages of an input chunk that the output column writes the same
// way (PLAIN or DELTA_LENGTH_BYTE_ARRAY, same codec; RLE_DICTIONARY
// where the output chunk's dictionary can take the input's, the indexes
// checked), those pages are copied as they are, CRC-checked, with their
// statistics from the input's column index, or for byte arrays it cuts,
// from the exact bounds the page's header carries
// (pqenc.Column.CopyRowsPages). A dictionary page whose input dictionary
// orders its values otherwise has its indexes decoded as runs and mapped
// into the output's dictionary, its levels kept as they are (remapped,
// not decoded row by row). Runs of one or two rows (interleaved inputs)
// are copied by one call each (pqenc.Column.CopyFew). The lake writer
// starts a page in every column where a service of lake.PageCutRows rows
// or more starts and ends (logs, spans), so a flush's rows of one service
// are whole pages; the output is cut the same way (blockCuts), and an
// output row group, once half full, ends before a run that would cross
// its end rather than cut the run's pages in two. Inputs whose columns
// pqenc cannot write, or whose columns of one name differ, fall back to
// the row merge (merge.go: decoded batches through a lake.Writer); the
// tests hold the two to the same output.
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
//     hits: the new files are written at their staging paths
//     (catalog.StagingPath, outside the Hive tree) and stay invisible
//     (uncatalogued) until catalog.ReplaceIntents swaps them for the
//     inputs in one transaction, which also journals the file moves.
//  2. Run never deletes an input file. Right after the swap it moves the
//     outputs into place and the inputs to catalog.TrashPath
//     (lake.FinishSwap), so a glob over the Hive tree reads the new set;
//     inputs stay in the trash, marked replaced, until the sweeper removes
//     them after a grace period, and a reader that listed them before the
//     swap finds them there (lake.OpenSegment). Moves a crash or a failed
//     rename leaves pending are done by the next Sweep.
//  3. Every output file has an intent in the catalog before it is created
//     (lake.IntentStore), under the partition's lease; the swap deletes the
//     intents of the files it adds. When Run fails before or at the swap,
//     it removes the files it wrote, then their intents. A crash instead
//     leaves files and intents behind: the next Run that takes the
//     partition's lease deletes them first thing, and Sweep deletes those
//     whose lease no one holds (it takes the lease itself), then the
//     intents (lake.CleanIntents). Neither touches them while another owner
//     holds the lease. Staged, they are never in the Hive tree, so a glob
//     over the lake reads exactly the live rows even right after a kill.
//  4. Output holds exactly the input rows: Run checks the rows written
//     against the rows read and against the inputs' catalog row counts and
//     refuses to commit on a mismatch.
//  5. Memory does not grow with input size: per input, its current row
//     group's compressed bytes, its decoded sort keys and about a page of
//     each other column (decoded a page at a time as the merge reaches it;
//     looking for a block's non-null rows decodes at most 8,192 rows and
//     256 KiB of pages ahead, pqenc.Chunk.PresentSpan), plus one output
//     row group's compressed pages (column merge), or the writer's buffer
//     bounded by Options.MaxBufferedBytes (row merge).
//  6. Output is sorted by the table's sort key (docs/schema.md); rows are
//     merged from the inputs in that order and ties keep input order
//     (inputs in segment id order, i.e. arrival order).
//  7. Rows keep their partition. The column merge copies rows without
//     re-partitioning them; a row's partition time for the sort key and
//     the segment's time range is its own time when inside the hour, else
//     (logs) its observed time when inside, else the hour's last
//     nanosecond, what the ingest writer chose up to its clock, which is
//     not recorded. The row merge (the fallback) pins its writer's clock
//     to that last nanosecond for the same effect. Output file ids carry
//     that time, not the wall clock; the catalog's Created is the wall
//     clock.
//  8. Output level is one more than the highest input level.
package compact
