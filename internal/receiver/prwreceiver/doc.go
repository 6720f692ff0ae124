// Package prwreceiver serves Prometheus remote write 1.0 and 2.0
// (POST /api/v1/write). It is an http.Handler that the query API mounts
// behind its authentication guard (write scope); the guard resolves the
// tenant, which the handler reads with authn.TenantOf. Listen serves the
// same handler on an address of its own, behind a guard built from the
// same tokens and TLS files (listen.go).
//
// A request goes: content negotiation (Content-Type: application/x-protobuf
// with no proto parameter or proto=prometheus.WriteRequest is 1.0,
// proto=io.prometheus.write.v2.Request is 2.0, anything else 415;
// Content-Encoding snappy or none, anything else such as gzip 415), read
// the body within max_request_bytes, snappy block decode, decode with
// package prw into a columnar batch, and hand both the batch and the
// request as received (snappy) to the same Consumer contract the OTLP receiver
// uses (otlpreceiver.Consumer; Request.Metrics carries the batch, so the
// consumer does not decode again, and Request.RemoteWrite says Body is a
// remote-write request of that version). That is where processors
// (governance, issue 14) plug in, and the consumer of `sluice run` appends
// it to the durable queue and returns only after fsync; the answer is sent
// after that, so 2xx means durable.
//
// The scan: when the consumer takes requests without their batch
// (ScanTaker: no processing rule would read it), a request (1.0 or 2.0)
// is first checked by prw.Scanner instead of decoded. A plain request
// (labels sorted and valid, float samples only, 2.0 metadata and start
// timestamps included: what Prometheus and vmagent send in steady state;
// a 2.0 answer's headers count its samples) goes to the consumer as Request.Scanned, with its point
// and attribute counts and, per sample, the metric name, label-set key
// (prw.LabelsKey, Scanner.LabelKeys: one hash of the series' label bytes,
// not the lake's series id, which the lake loop computes from the body it
// is handed) and time the live statistics count; no batch is built. Anything else
// (histograms, exemplars, metadata, unsorted labels, invalid series, a
// malformed message) is decoded as below, so every answer is the one the
// decoder gives (TestScanAnswersAsTheDecoder).
//
// What is queued: the request as received when no rule changed the batch
// (record encodings encPRW1 and encPRW2, package pipeline's prwrecord.go;
// encPRW1N and encPRW2N, a scanned request with its series count, so the
// exporter forwards it without decoding it), so the receiver never encodes OTLP; the lake, the tail and the exporters
// decode it with package prw into the same batch. A partial write (some
// series invalid) hands over its good series as OTLP instead
// (RemoteWrite 0), so a queued remote-write body never holds a series the
// receiver refused; so does a request with labels out of order (the
// batch is sorted, the body is not), so that a relay never forwards
// unsorted labels.
//
// Answers: 204 on success; 400 naming the problem for a malformed message
// or invalid series (a partial write keeps its good series and still
// answers 400); 413 past max_request_bytes; 415 for an unsupported type or
// encoding; 503 with Retry-After under backpressure (queue full or low on
// disk: not 429, which Prometheus's sender drops by default) and for other
// failures. Every 2.0 answer past
// content negotiation carries
// X-Prometheus-Remote-Write-{Samples,Histograms,Exemplars}-Written: what
// was written, a partial write's good series on its 400, 0 for a request
// refused whole (malformed, too large, backpressure); 1.0 answers never do.
//
// Retries are harmless for queries: PromQL reads at most one sample per
// series and millisecond (see package prom), so a batch sent twice reads
// as once.
//
// Concurrency: ServeHTTP is safe for concurrent use; at most
// MaxConcurrentRequests requests are read and processed at once, the
// others wait for a slot (bounded memory: each holds at most
// 2 × MaxRequestBytes plus its batch).
package prwreceiver
