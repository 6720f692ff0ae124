// Package httpapi serves the Prometheus HTTP API (/api/v1/query,
// query_range, series, labels, label/<name>/values, metadata) over the
// lake through package prom, with Prometheus's JSON response format and
// error types: bad_data 400, execution and cost_limit 422, canceled 499,
// timeout 503, internal 500. Query endpoints accept GET and POST forms.
//
// Every request, routed or not, first passes an authn.Guard: with
// Config.Tokens set it needs a bearer token with the route's scope (every
// route is registered through Handler.route, which records it in Routes
// with its scope). The guard also decides the request's one tenant: the
// token's tenant when it is bound to one, else the configured header (the
// ingestion setting receivers.otlp.tenant_header); an empty header means
// the default tenant and an invalid one is rejected with 400. Start serves
// TLS or mutual TLS when Config.TLS is set.
//
// /api/v1/status/buildinfo, runtimeinfo and flags answer Prometheus's
// fields (flags: the Prometheus flags sluice's query settings stand for).
// /api/v1/status/tsdb (Prometheus's format, for the request's tenant) and
// /api/v1/status/sluice (the process's status for `sluice top`; a token
// bound to a tenant sees that tenant's rows only) serve Config.Stats and
// Config.Gatherer (status.go, docs/stats.md); they take no query slot.
//
// When Config.Search is set it is mounted under /api/v1/logs/ and
// /api/v1/traces/; Start (used by sluice run and sluice query-server) sets
// it to the logs and traces search API of package search.
//
// # Limits
//
// Queries that touch the lake (PromQL, series, labels, metadata and the
// mounted search API) run in one of MaxConcurrency slots; MaxQueued more
// wait, and past that a query gets 429 at once. Admission is fair
// between tenants (limiter.acquire): a freed slot goes to the waiting
// tenant running fewest, and a full queue refuses the newest waiter of
// the tenant with the most waiting to make room for another tenant. A
// running query reserves MaxQueryBytes of MaxTotalBytes when admitted (so at most MaxTotalBytes /
// MaxQueryBytes run at once, and the total bounds the engines' working
// sets too) and counts its memory in bytes (samples loaded, through
// prom.Limits.Charge; the result before it is sent; series label sets)
// against that reservation; the engine's MaxSamples is derived from
// MaxQueryBytes. PromQL text is checked for length and depth
// before the parser sees it. One deadline covers queueing, parsing,
// evaluation and the streamed answer.
//
// # Concurrency
//
// A Handler is safe for concurrent use; each request builds its own
// querier, so limits apply per query.
package httpapi
