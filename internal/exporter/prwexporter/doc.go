// Package prwexporter forwards OTLP metrics as Prometheus remote write 1.0
// (prometheus.WriteRequest) or 2.0 (io.prometheus.write.v2.Request, one
// symbols table per request; an endpoint answering 415, or a 2xx without
// any X-Prometheus-Remote-Write-*-Written header as a 1.0 receiver does,
// gets 1.0 from then on), snappy block encoded, to one or more
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
// histograms on the convert path) go as native histograms with the query
// API's mapping (schema = scale, OTLP bucket offset+1 = Prometheus bucket
// index, zero count and threshold kept, scale above 8 reduced to 8;
// native.go): over 2.0 always, over 1.0 with Config.SendNativeHistograms
// (send_native_histograms, as Prometheus names it); without it 1.0 drops
// them and counts them in DroppedPoints, as the specification says for a
// format without native histograms. One with no native form (scale below
// -4) goes as _sum/_count to both. Every converted series carries its
// metric family's metadata (unless Config.NoMetadata): type, unit
// (otlptranslator's unit words) and help from the OTLP descriptor, or the
// type, unit and help a remote-write sender gave (unspecified when it gave
// none); target_info is a gauge with help "Target metadata". Over 2.0 it
// is on every series; over 1.0 it is one MetricMetadata per metric family
// and request. Exemplars (exemplar.go) go on the series otlptranslator
// puts them on: a sum's or gauge's series, the _bucket series of the
// exemplar value's bucket, the native histogram; labels are the filtered
// attributes and trace_id/span_id in hex. Over 2.0 a cumulative point's
// start time is its sample's or histogram's start_timestamp. A
// remote-write custom-bucket histogram (schema -53, an explicit histogram
// in the batch) goes as a native histogram of schema -53 where native
// histograms go, as its classic _bucket/_sum/_count to 1.0 without them
// (seriesMeta.only says which request carries which form). Delta
// sums and histograms cannot be expressed in remote write 1.0 and are
// dropped and counted (Stats.DroppedPoints), as the specification allows;
// so is a point without a time (0), which a receiver would refuse with
// the rest of its request.
//
// A 2.0 series holds a sample or a histogram: exemplars a remote-write
// sender sent alone (Prometheus sends each exemplar so) go on a series of
// their labels with one in the request (exemplarHosts), else are dropped
// and counted.
//
// A 2.0 answer's X-Prometheus-Remote-Write-*-Written counts are checked
// against converted requests: what the endpoint says it did not write is
// counted as rejected (sending.Endpoint.PartialRejection), not resent.
//
// Remote-write records (exporter.Record.RemoteWrite, queued as received)
// of the exporter's protocol version are passed through without decoding:
// replicated with one lane, 1.0 bodies of consecutive records of one
// tenant concatenated into one request, 2.0 bodies one request each or
// merged (passthrough.go, mergev2.go); with lanes or in shard mode, split
// by series from their label bytes into one request per lane and endpoint
// (split.go: 1.0 series copied as their bytes, 2.0 series with their
// symbol references rewritten into a table per request). The other
// version is decoded with package prw and converted like OTLP.
//
// Config.Concurrency above 1 sends each batch as up to that many requests
// per endpoint at once (lanes): a series goes to lane laneOf of its sorted
// labels' hash (beside the shard mode's ring pick) on either path
// (split.go for remote-write records, sendSeries for converted ones), so
// it is always in the same lane and its samples stay in order (batches
// and the groups of a batch are sequential). Each lane's requests are
// retried or dropped on their own; Send returns when every lane is done.
//
// An endpoint that refuses a request for its size (413: Mimir, Cortex,
// Thanos and VictoriaMetrics above their request size limit) gets its
// series again in two requests of half of them each, the first delivered
// before the second goes, halved again while refused (sendHalves). The
// converter's series hold one sample or histogram each (emit), so this
// halves one series' samples too; a request of one sample still refused is
// dropped, counted and logged with its series' labels. A request forwarded as received is decoded for this and
// takes the convert path (resendInParts). Send returns, and the cursor
// commits, only when every part is delivered or dropped and counted.
//
// On the convert path a batch's series go oldest first (stably) when they
// are not in time order already, so that a series listed twice (several
// records, or an OTLP request listing its points newest first) reaches
// the receiver in time order; target_info goes once per resource and time.
//
// Not yet on the convert path: float histograms with fractional counts
// (package prw refuses them on receipt).
package prwexporter
