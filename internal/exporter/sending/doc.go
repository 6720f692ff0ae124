// Package sending owns how an exporter talks to its endpoints: retries with
// exponential backoff and jitter (retry n waits between initial*2^n and
// twice that, capped) that honour Retry-After, the
// remote-write status rule (2xx sent; 429, 5xx and transport errors retried;
// 413 split by the caller where it can (DoSplit); any other 4xx dropped and
// counted), a circuit breaker per endpoint
// (closed, open, half-open), a concurrency limit per endpoint, and the
// choice of endpoints for a series: a consistent-hash ring (sharding) or
// all of them (replication).
//
// It knows nothing of wire formats: an exporter hands Do a function that
// sends one request and reports an Outcome.
//
// # Concurrency
//
// Endpoint and Breaker are safe for concurrent use; Ring is immutable after
// NewRing.
//
// # Invariants
//
//  1. Do returns nil only after an attempt answered 2xx: the caller may then
//     commit its queue cursor (at-least-once delivery).
//  2. Do gives up only on a permanent answer (ErrRejected, counted as
//     dropped) or when ctx ends (DoSplit also on a 413, ErrTooLarge, not
//     counted as dropped: the caller sends the data again in parts, and
//     counts a part it cannot split with DropTooLarge); retryable failures retry forever with a
//     delay capped by Policy.MaxBackoff, so nothing is lost while an
//     endpoint is down (the queue cursor's bounds decide what is dropped).
//  3. While a breaker is open no request is sent to its endpoint; after
//     Policy.BreakerCooldown exactly one probe (half-open) is let through,
//     and its outcome closes or re-opens the breaker.
package sending
