// Package retention deletes whole lake partitions that have aged out: it
// owns the retention rules (an age per table, per rollup tier, with
// per-tenant overrides), planning (Plan: which hour partitions ended
// before now minus their age) and applying one partition (Apply).
//
// Retention never deletes a file. Apply marks every live segment of the
// partition replaced, in one catalog transaction (catalog.Replace with
// nothing added, which journals a move of each file into the trash), and
// given the lake's store does those moves at once (lake.FinishSwap), so a
// glob over the Hive tree stops seeing the partition; the sweeper
// (compact.Sweep) deletes the files once the grace period has passed, so
// a query that listed them keeps working (a reader holding a file open
// finishes; a catalog reader finds it in the trash).
//
// # Concurrency
//
// Plan only reads the catalog. Apply takes the partition's leases before
// touching it: the compaction lease ("compact/<partition dir>") always,
// and for the rollup table and raw metrics also the rollup lease
// ("rollup/<metrics partition dir>"), so retention never works on a
// partition while a compaction or rollup of it runs, in this process or
// another sharing the catalog. It returns Result.Skipped while any of them
// is held elsewhere; the next run retries. Should a lease be lost (expired
// under a stalled process), Replace still refuses stale input: whichever
// of retention and compaction commits second gets catalog.ErrStale and
// changes nothing (compaction then removes its own output files).
//
// # Invariants
//
//  1. A partition is planned only when its whole hour ended at or before
//     now minus its age: hour start + 1h <= now - age. Every row of a
//     segment lies within its hour (catalog invariant 3), so no row younger
//     than the age is ever removed.
//  2. An age of 0 (or no rule) keeps data forever.
//  3. Apply re-lists the partition's live segments under its leases and
//     removes them all at once; segments that arrive later (late data for
//     an old hour) are caught by the next run.
//  4. For metrics_rollup, a partition is one tier of one hour: the tiers
//     of an hour age out separately.
package retention
