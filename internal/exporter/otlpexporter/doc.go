// Package otlpexporter sends queue records to OTLP endpoints over HTTP
// (POST /v1/{logs,metrics,traces}, protobuf, gzip, zstd or none) or gRPC
// (the collector services' Export, gzip or none). A queue record already
// holds an OTLP export request body, and OTLP requests concatenate (their
// only field is repeated), so a batch of records of one signal and tenant
// goes out as one request without decoding anything.
//
// Several endpoints get every request (replication); sharding needs series
// labels and lives in prwexporter.
//
// An endpoint that refuses a request for its size (HTTP 413; over gRPC a
// RESOURCE_EXHAUSTED whose message is gRPC's "message larger than max",
// which retrying cannot mend) gets its records again in two requests of
// half of them each, halved again while refused; a request of one record
// still refused is dropped, counted and logged (sending.Endpoint.DoSplit).
//
// # TLS
//
// Config.TLS (built from exporters.<name>.tls by config.ExporterTLS) is
// the client side of https:// endpoints: a private CA, a client
// certificate for mutual TLS. Over gRPC an endpoint is https://host:port
// (TLS), http://host:port (plaintext) or a bare host:port: TLS when
// Config.TLS is set, plaintext otherwise. A failed handshake is a
// transport error, retried like a 503.
//
// # Concurrency
//
// Send is safe for concurrent use: the Runner keeps up to the endpoints'
// concurrency of batches in flight (exporter.BatchSender), so several
// requests go to one endpoint at once, under its sending.Endpoint's
// concurrency limit; the requests of one batch go to the endpoints in
// parallel. Requests may therefore arrive out of queue order.
package otlpexporter
