// Package lake writes signal batches into the Parquet lake and opens lake
// files from its stores for reading (the reader, File, is package format's,
// which owns the file format). It also owns the Store the lake lives in, and
// the IntentStore through which upkeep runs write their outputs: each
// object is announced in the catalog (catalog.AddIntent) before it is
// created, so the files of a run killed before its catalog swap can be
// found and deleted by the next holder of its lease (CleanIntents).
//
// Layout: <root>/<table>/tenant=<t>/dt=YYYY-MM-DD/hour=HH/<id>.parquet, with
// tables logs, metrics and traces; docs/schema.md describes every column.
//
// Invariants:
//
//  1. Lossless: ReadLogs/ReadMetrics/ReadSpans give back every field of every
//     record that WriteLogs/WriteMetrics/WriteSpans took, attributes with
//     their original keys and value types (order within a set is not kept;
//     of duplicate keys within one set the last wins, as in OTLP maps).
//  2. Attribute column names are injective: prefix ("resource.", "scope.",
//     "attr.") + key with '%' → "%25" and '#' → "%23" + type suffix ("" for
//     string, "#int", "#double", ...). A name decodes to exactly one
//     (scope, key, type). The codec, the table descriptors and the column
//     names are package format's (internal/lake/format), which owns the
//     file format; this package uses them.
//     At most Options.MaxAttributeColumns attribute columns per file
//     (format.KeptColumns chooses them: most used, then first seen);
//     the other attributes of a row go, typed, to its scope's overflow
//     column (resource_overflow, scope_overflow, attr_overflow: a JSON
//     object of key → OTLP JSON AnyValue). A key of a row is in its column
//     or in the overflow, never both; readers take both.
//  3. Partition time: a record's own time when it is > 0 and at most
//     MaxFutureSkew past Now(); else (logs) its observed time under the same
//     rule; else Now(). The stored timestamp columns are never altered.
//  4. A file is visible under its final name only once it is complete and
//     fsynced; commit(Segment) runs after that, and a commit error removes
//     the file. A failure at any step leaves no file behind.
//  5. Buffered memory is bounded: a partition rolls into a file when its
//     estimate reaches TargetFileBytes, and when the total over all open
//     partitions exceeds MaxBufferedBytes the largest is flushed.
//     AppendMetrics (a decoder appending straight into a partition's
//     batch) takes a record only when it stays below both limits whole,
//     and within one partition hour; otherwise the caller writes it with
//     WriteMetrics, so files roll where they would have.
//  6. A failed flush drops that partition's buffered rows (nothing of them
//     is committed) and returns the error; the caller replays from what the
//     catalog did not record, so no row is committed twice or lost.
//  7. Nested values (array and map attributes, non-string bodies, span
//     events and links, exemplars, metric metadata) are stored as OTLP JSON
//     by package otlp's codecs and converted back to protobuf on read.
//
// Quarantine (quarantine.go): records the lake loop could not write are
// kept under QuarantineDir, body and entry named by queue position; a
// Probe encodes a batch into nothing to tell such a record from a failing
// store.
//
// Concurrency: a Writer is used by one goroutine at a time. A File is used by
// one goroutine at a time; distinct Files may be read concurrently. An
// IntentStore is safe for concurrent use.
package lake
