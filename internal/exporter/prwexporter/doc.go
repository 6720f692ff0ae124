// Package prwexporter forwards OTLP metrics as Prometheus remote write 1.0
// (prometheus.WriteRequest) or 2.0 (io.prometheus.write.v2.Request, one
// symbols table per request; an endpoint answering 415 gets 1.0 from then
// on), snappy block encoded, to one or more
// endpoints, replicated or sharded by consistent hashing of each series'
// labels (sending.Ring).
//
// OTLP -> remote write follows the OpenTelemetry specification's
// Prometheus compatibility rules, as the query API does: metric names by
// otlptranslator's UnderscoreEscapingWithSuffixes (unit and _total
// suffixes), attributes to labels with invalid characters as "_" and
// colliding keys joined with ";", job = service.namespace/service.name,
// instance = service.instance.id, the other resource attributes on a
// target_info series (value 1); histograms as _bucket{le}/_sum/_count,
// summaries as {quantile}/_sum/_count; a point flagged "no recorded
// value" as the stale NaN. Exponential histograms (and remote-write native
// histograms on the convert path) go over 2.0 as native histograms with
// the query API's mapping (schema = scale, OTLP bucket offset+1 =
// Prometheus bucket index, zero count and threshold kept, scale above 8
// reduced to 8; native.go), over 1.0 as _sum/_count (as before: 1.0
// receivers may not ingest native histograms); one with no native form
// (scale below -4) goes as _sum/_count to both. Over 2.0 every converted
// series carries its metric family's metadata: type, unit (otlptranslator's
// unit words) and help from the OTLP descriptor, or the type, unit and help
// a remote-write sender gave (unspecified when it gave none); target_info
// is a gauge with help "Target metadata". Delta
// sums and histograms cannot be expressed in remote write 1.0 and are
// dropped and counted (Stats.DroppedPoints), as the specification allows.
//
// Remote-write records (exporter.Record.RemoteWrite, queued as received)
// of the exporter's protocol version are passed through without decoding
// when the exporter replicates: 1.0 bodies of consecutive records of one
// tenant concatenated into one request, 2.0 bodies one request each
// (passthrough.go); in shard mode a 1.0 body is split by series from its
// label bytes. 2.0 in shard mode, and the other version, are decoded with
// package prw and converted like OTLP.
//
// Not yet on the convert path: exemplars, start (created) timestamps,
// float histograms, native histograms over 1.0, metadata over 1.0.
package prwexporter
