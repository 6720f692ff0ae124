// Package otlp owns the OpenTelemetry protocol at sluice's edge: it decodes
// OTLP export requests (protobuf and JSON) into signal batches, encodes
// batches back into OTLP protobuf for export and round-trip tests, tells
// requests apart by content (Sniff), and converts the nested messages that
// batches keep as raw protobuf (AnyValue arrays and maps, span events and
// links, exemplars, key/value lists) to and from OTLP JSON for the lake.
//
// The protobuf decoders are hand-written and decode straight into columns:
// no pdata or generated object graph, no allocation per record once a
// batch's slices have grown (Reset keeps them).
//
// Invariants:
//
//  1. Decode* append to dst. The request is copied into dst's arena with one
//     append and every Str of the new records points into that copy, so the
//     caller may reuse its buffer as soon as the call returns.
//  2. A failed Decode* leaves dst exactly as it was: every slice is cut back
//     to its length before the call, and keys interned by the call are
//     forgotten. No partial request is ever visible.
//  3. Every string field, key and nested string is valid UTF-8 and every
//     trace id is 16 bytes and span id 8 (or absent) once decoded; bytes
//     values are not checked. Nested messages kept raw were fully checked,
//     so converting them to JSON later cannot fail on decoder output.
//  4. Unknown fields are skipped at every level, so newer producers work;
//     a known field with the wrong wire type is an error.
//  5. One Resource per ResourceX message and one Scope per ScopeX message
//     are appended; records refer to them by index.
//  6. Errors wrap a sentinel from errors.go and carry the path of what
//     failed, e.g. resource_logs[3].scope_logs[0].log_records[17].
//  7. Protobuf → JSON → protobuf through the sub-message codecs gives back
//     the same bytes for encodings without unknown or repeated singular
//     fields; NaN payloads become the one NaN that JSON can name.
//
// Concurrency: functions hold no shared state; a call owns dst for its
// duration, like any batch owner (see package signal). Different batches
// may be decoded in parallel.
package otlp
