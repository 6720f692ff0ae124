// Package exporter forwards what sluice received to other backends. Each
// exporter reads the durable queue through a queue.Cursor of its own
// (Runner), batches records by size and time, hands a batch to its Sender
// (otlpexporter, prwexporter) and commits the cursor only after the Sender
// returns: delivery is at least once. Package sending holds the retry,
// breaker and sharding logic the Senders share.
//
// # Invariants
//
//  1. The cursor is committed only past records the Sender accepted,
//     dropped and counted (a permanent 4xx), or skipped and counted (a
//     record of a signal the exporter does not take, or one that does not
//     parse). A Send that ends with ctx is not committed; after a restart
//     those records are sent again.
//  2. With a BatchSender (otlp) up to BatchesInFlight batches are sent at
//     once; the cursor is still committed in queue order, past a batch only
//     when it and every batch before it were delivered, and a batch that
//     was not is read again with every batch after it.
//  3. An exporter never blocks the lake or another exporter: each has its
//     own cursor and goroutine, and its backlog is bounded by the cursor's
//     MaxBytes/MaxAge (queue invariant 10), past which whole segments are
//     dropped for it and counted. An exporter of several endpoints is one
//     Runner per endpoint (the pipeline builds them, of the same Name, each
//     on a cursor and with a Sender of its own), so that one endpoint never
//     blocks another; the Collector reports them as one exporter (group).
//
// # Concurrency
//
// A Runner's Run owns its cursor (reads and commits happen on its
// goroutine; only a BatchSender's Sends run on goroutines of their own); Stats and the collector read atomics
// and the cursor's Stats, safe from any goroutine.
package exporter
