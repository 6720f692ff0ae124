// Package prw owns the Prometheus remote-write protocol at sluice's edge:
// hand-written protobuf decoders for remote write 1.0 (prometheus.WriteRequest)
// and 2.0 (io.prometheus.write.v2.Request) that append straight into a
// columnar signal.Metrics batch, with no generated object graph and no
// allocation per series or sample once a Decoder and its batch have grown.
//
// Mapping (documented in docs/schema.md, "Prometheus remote write"):
//
//   - __name__ is the metric name; every other label becomes a string
//     data-point attribute with exactly its name and value, sorted by name.
//   - Float samples are gauge points (type gauge, empty unit), so that the
//     PromQL adapter adds no suffix: a series comes back with its own name.
//     The Prometheus type, unit and help from metadata are kept on the metric
//     (help as the description; type and unit as the Metric.metadata
//     attributes prometheus.type and prometheus.unit).
//   - Values keep their bits: a stale marker (NaN 0x7ff0000000000002) is
//     stored as is. Timestamps are milliseconds times 1e6.
//   - Native histograms with an exponential schema (-4..8) are exponential
//     histogram points (scale = schema, OTLP bucket offset = Prometheus bucket
//     index - 1); custom-bucket histograms (schema -53) are explicit-bucket
//     histogram points whose bounds are the custom values.
//   - Exemplars are kept as raw OTLP Exemplar messages on the series' last
//     point, their labels as filtered attributes.
//
// Invariants:
//
//  1. Decode* append to dst. The request is copied into dst's arena with one
//     append and every label Str points into that copy, so the caller may
//     reuse its buffer as soon as the call returns.
//  2. A malformed message (bad wire format) leaves dst exactly as it was and
//     returns an error wrapping ErrMalformed: nothing of it is kept.
//  3. Invalid data in one series (no __name__, empty or duplicate label name,
//     histogram count not matching its buckets, ...) drops that series only:
//     the good series are appended and the call returns a *PartialError that
//     names the first problems and counts the dropped series.
//  4. Every label set appended is sorted by name and has unique, non-empty
//     names; every name and value is valid UTF-8.
//
// Scanner (scan.go, scan2.go) checks a 1.0 or 2.0 request without building
// a batch, for a relay that queues the request as received: it takes only
// plain requests and leaves everything else to the Decoder; FuzzScanV1 and
// FuzzScanV2 check the two agree on every request the scan takes.
// PlainAppender (append_plain.go) appends such a request straight into a
// lake partition, reading only the samples of a series the partition
// knows (by a seeded hash of its label bytes); FuzzPlainAppender checks it
// takes what ScanV1 takes and appends what Appender does.
//
// IDMemo (idmemo.go) remembers series' ids across requests by a seeded
// 64-bit hash of their labels (2 MiB shared by the process's decoders,
// lock-free): DecodeV1 and DecodeV2 read a known series' id instead of
// hashing its values. 1.0 keys a series by its label bytes; 2.0 by the
// strings its references name (each symbol hashed once per request), so
// that a series keys alike whatever the request's symbols table. The ids
// are the same (TestIDMemoMatchesNoMemo, TestIDMemoV2MatchesNoMemo,
// FuzzDecodeV1 and FuzzDecodeV2 with and without it).
//
// Concurrency: a Decoder holds scratch space and is used by one goroutine at
// a time; pool them. Different batches may be decoded in parallel.
package prw
