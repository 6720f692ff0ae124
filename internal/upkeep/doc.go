// Package upkeep runs lake upkeep in the background of `sluice run`: every
// interval one pass of compaction (plan and run), rollups, retention and
// the sweeper, in that order. It owns the schedule, the translation of the
// upkeep config into the options of each task, and the upkeep metrics
// (sluice_upkeep_*). The work itself lives in internal/lake/compact,
// internal/lake/rollup and internal/lake/retention.
//
// # Concurrency
//
// A Scheduler runs one goroutine; passes never overlap. It opens its own
// catalog handle, so the ingest path never waits on it for a connection,
// and it holds no lock the ingest path takes: the only shared resource is
// the catalog database, where upkeep writes are single short transactions
// (Replace, DeleteReplaced, leases). Several schedulers, in one process or
// in several sharing a catalog, may run at once: every task takes a catalog
// lease per partition, and catalog.Replace refuses stale input.
//
// # Invariants
//
//  1. Cancel stops the pass in progress without waiting (the pipeline calls
//     it first on shutdown, so upkeep never eats into the final checkpoint's
//     time); Stop cancels too and returns once the goroutine has ended (or
//     its context expires). A task cut short commits nothing or
//     everything (one catalog transaction per partition); files it wrote
//     but did not commit are uncatalogued orphans, which the start-up
//     orphan sweep of the pipeline removes.
//  2. A failing task is logged and counted
//     (sluice_upkeep_runs_total{result="error"}) and does not stop the
//     other tasks nor the next pass.
//  3. Only partitions whose hour ended at least compaction.min_age ago are
//     compacted, so compaction does not chase the ingest writer; partitions
//     retention removes in the same pass are not compacted first, and the
//     metrics_rollup table is never compacted (rollups rewrite it whole,
//     and a merge would mix its tiers).
//  4. Retention rules never let a rollup tier go before the raw metrics it
//     is computed from (retention.Rules.Validate), so rollups and retention
//     never undo each other pass after pass.
package upkeep
