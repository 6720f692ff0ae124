// Package otlpreceiver is the OTLP transport layer: it accepts OTLP export
// requests over gRPC (the collector LogsService, MetricsService and
// TraceService Export methods) and HTTP (POST /v1/logs, /v1/metrics,
// /v1/traces; protobuf or JSON; gzip, zstd or no compression) and hands
// each request body to a Consumer as decompressed OTLP protobuf bytes.
//
// It owns: listeners and servers, TLS, bearer-token auth, tenant
// resolution, size and time limits, decompression, OTLP/JSON to protobuf
// conversion, mapping consumer errors to OTLP status codes, writing
// Export*ServiceResponse (with partial success) and error bodies, and the
// sluice_receiver_* metrics. It does not decode OTLP: gRPC runs with a
// raw-bytes codec and hand-written service descriptors, so no generated
// message types are on the path. It only counts a request's records and
// the messages holding them (otlp.CountRecords, skipping each record
// whole) to refuse one past Config.MaxRecordsPerRequest before anything
// decodes it, and checks an OTLP/JSON body (otlp.PrepareJSONRequest: one
// object, bounded nesting, nulls as defaults) before pdata parses it.
//
// Concurrency: Consume is called from many goroutines at once, at most
// Config.MaxConcurrentRequests at a time. A request takes that slot only
// after its body is read, so a slow client (a trickling HTTP body, a gRPC
// stream that never sends) holds its connection and the bytes it sent,
// never processing capacity. Bodies being read or consumed share a byte
// budget (Config.MaxInflightBytes), reserved as bytes arrive; an HTTP body
// slower than Config.MinBodyRate after Config.BodyRateGrace gets 408, a
// gRPC message not in within ReadTimeout ends its stream, both counted in
// sluice_receiver_slow_clients_total. A request that finds no slot or no
// bytes within maxAdmitWait gets 429 / RESOURCE_EXHAUSTED with a retry hint.
// Each listener keeps at most Config.MaxConnections connections open.
// Start, Shutdown and the address getters are safe for concurrent use.
//
// Invariants:
//
//  1. A 2xx / OK is only sent after Consume returned nil for that request;
//     so the response is the acknowledgement that the data is durable.
//  2. Request.Body is only valid until Consume returns; the buffer (pooled,
//     or gRPC's own receive buffer) is reused afterwards.
//  3. No body larger than Config.MaxRequestBytes is held, compressed or
//     decompressed: reading stops one byte past the limit (413 /
//     RESOURCE_EXHAUSTED), so a zip bomb costs at most the limit. All
//     bodies held at once stay within Config.MaxInflightBytes.
//  4. The tenant label of a metric is either "" or a tenant that passed
//     auth and validation ([A-Za-z0-9._-]{1,64}); no other label takes a
//     client-chosen value, so the series count stays bounded.
//  5. Bad input is answered, counted and, rate-limited, logged; it never
//     panics or stops the server. Logs are per failure class, never per
//     request or record.
//  6. Shutdown stops accepting first, then waits for in-flight requests,
//     so an accepted request is always answered unless Shutdown's context
//     runs out (then connections are closed and Consume's context is
//     cancelled; the client did not get OK and will retry).
//
// Errors from a Consumer: a *BackpressureError or ErrBackpressure gives
// HTTP 429 with Retry-After / gRPC RESOURCE_EXHAUSTED with RetryInfo;
// ErrInvalid gives 400 / InvalidArgument (permanent); anything else gives
// 503 with Retry-After / Unavailable (retryable).
package otlpreceiver
