// Package signal owns sluice's columnar in-memory model of telemetry: batches
// of log records, metric data points and spans stored as typed column slices.
//
// Invariants:
//
//  1. Every string a batch holds lives in the batch's own byte arena
//     (Common.Buf) and is addressed by a Str (offset and length). A Str never
//     points into another batch's arena. Because a Str is an offset, not a
//     pointer, appending to Buf never invalidates one, and the garbage
//     collector has no per-string pointer to scan.
//  2. Attribute keys are interned per batch in a KeyTable; records hold KeyIDs.
//  3. Resources and scopes are stored once per batch and referenced by index
//     from each record, exactly as OTLP nests them; a record never copies its
//     resource's attributes.
//  4. Attribute sets are half-open ranges [Start, End) into Common.Attrs.
//  5. Nested values that have no column of their own (array and map attribute
//     values, span events and links, exemplars, metric metadata) are kept as
//     the raw OTLP protobuf bytes of that message in the arena; the otlp
//     package converts them to and from OTLP JSON.
//  6. Per-record slices of a batch always have the same length, Len().
//  7. A copy into a batch (CopyFrom, CopyRows) keeps one Str per distinct
//     (key, string value) of the destination, up to a bound (intern.go),
//     and, where Common.ShareAttrSets is set, one Range per distinct
//     attribute set. Nothing writes through a Str; a batch whose records
//     share Ranges must not change attributes in place.
//
// Concurrency: a batch is owned by one goroutine at a time. Handing a batch to
// a consumer hands over ownership; the producer must not touch it again
// until it is given back (for example through a pool).
package signal
