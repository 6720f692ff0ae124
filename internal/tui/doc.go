// Package tui holds sluice's live terminal views (Charm bubbletea and
// lipgloss v2). The trace view (TraceModel) shows what sluice trace sees:
// top files, processes and syscalls by a sort key, a latency histogram per
// syscall, a pausable streaming tail, and the lost and filtered counters,
// always visible.
//
// The top view (TopModel) shows a running sluice's status document
// (package stats, GET /api/v1/status/sluice): rates per receiver and
// tenant from the difference of two documents, queue and lake lag,
// exporters and breakers, checkpoints, top metrics and rules by effect.
//
// A view reads batches and stats, never a receiver or the tracer: the
// tracer's goroutine hands each batch to a Feed (Feed.Add), and the view
// takes a Snapshot of the feed on every tick.
//
// Invariants:
//
//  1. Model state changes only in Update; View renders only the model's
//     state, so a model with a fixed Snapshot renders the same every time
//     (the model tests rely on it).
//  2. Feed.Add copies at most TailLen rows of a batch: the view's cost does
//     not grow with the call rate.
//
// Concurrency: a Feed is safe for concurrent use; a model belongs to the
// bubbletea program's goroutine.
package tui
