// Package processor runs the processing rules between the receivers and the
// queue (issue 14): an ordered list of rules per signal that drop, keep,
// relabel, sample, limit (cardinality), require labels, aggregate or
// downsample metric series, and drop, keep or sample log records. What a rule removes is never
// queued, stored nor forwarded.
//
// Rules match series as PromQL shows them (internal/promname owns the
// mapping): __name__ is the Prometheus name, job, instance and
// service_name come from the resource, and point attributes become labels
// under their sanitised names (colliding ones joined with ";"). A
// histogram or summary point matches a __name__ matcher when any of its
// Prometheus names does (base, _bucket, _sum, _count). Matchers are parsed
// by Prometheus's own parser and relabeling is Prometheus's own
// model/relabel, so a rule written for remote write matches the same OTLP
// series.
//
// # Concurrency
//
// A *Rules is immutable after Load/Parse (but for its decision cache,
// cache.go, sharded and locked) and shared by every request; a reload
// swaps the pointer, so each batch is processed by exactly one rule set (a
// reload loses and doubles nothing). A *Scratch belongs to one goroutine
// at a time (the consumer keeps one per pooled request state). Limit and
// aggregate state is locked per rule.
//
// # Invariants
//
//  1. A batch comes out with only the points (records) the rules keep, in
//     their original order; a batch no rule changes is reported unchanged
//     and the caller queues its original bytes.
//  2. Decisions that depend only on the series (drop, keep, relabel,
//     sample one_in) are made once per series and cached by a 64-bit key
//     (series id and descriptor) in the rule set's cache, shared by every
//     request; a cached decision is immutable, and series with equal
//     decisions share one (interned). Per-point work on a cache
//     hit is a table lookup and the replay of the decision's events, no
//     allocation. Lookups are made 256 points at a time under one read
//     lock per cache shard (Scratch.lookupChunk), and a batch holds its
//     limiter for such a chunk (Scratch.hold: one limiter at a time, and
//     no goroutine holding a cache, aggregate or intern lock waits for a
//     limiter), so the cache misses of successive points overlap. A
//     strip_label limit that strips a point switches, at its position, to
//     the decision of the series without the label (Scratch.stripped,
//     keyed by strippedKey: the series the point becomes and the limits,
//     shared by the series a strip folds into one), so later rules see
//     the stripped series; neither decision depends on limiter state,
//     only the choice between them does.
//  3. Sampling is deterministic: one_in by the hash of the series' labels,
//     probability by the hash of the series id and the point's time, so two
//     processes, a restart or a replay decide the same.
//  4. A shadow rule counts what it would do and changes nothing.
//  5. Rules work on the decoded batch in place: kept points move to the
//     front, nothing they reference is copied, and a relabel or strip
//     rewrites attributes inside the point's own range (appending a new
//     range only for added labels). Every point of a decoded batch has an
//     attribute range of its own.
//  6. Limit state (limits.go) holds 64-bit ids only, bounded per window by
//     max_series (max_values) times max_groups. A named rule set's rules
//     (ParseSet) are named "<set>/<rule>", so their limit and aggregate
//     state and counters are the set's own.
//  7. Aggregate and downsample state (aggregate.go) lives in Metrics, kept
//     by rule name across reloads, and Metrics.Flush is its one emitter:
//     each interval is emitted once, at its end plus flush_delay. The
//     pipeline calls Flush every second and queues the output.
//  8. What each metric rule dropped and changed is also counted per
//     (rule, tenant, metric name) (effects.go): per point, one add into a
//     scratch cell by descriptor and rule, only when a rule drops or
//     changes it; per batch, one lock and one lookup per touched cell into
//     a table bounded by processors.max_rule_effects, kept in Metrics
//     across reloads. Its entries add up to the rule's counters (but for
//     overflow, which is counted).
package processor
