// Package authn authenticates HTTP requests to sluice's servers: bearer
// tokens, each with a scope (read, write or both) and optionally bound to
// one tenant, and the server side of TLS and mutual TLS.
//
// A Guard wraps an http.Handler. Every request passes through it before
// any routing, so an endpoint added later is protected by default; a
// route declares the scope it needs (Read unless it says Write).
//
// # Invariants
//
//  1. No configured token means authentication is off; a configured token
//     is never empty (New refuses one), so a missing environment variable
//     can never turn authentication off.
//  2. Tokens are compared in constant time over their SHA-256 digests, and
//     every configured token is compared on every request, so neither a
//     token's length nor which token matched shows in the latency.
//  3. A request's tenant is decided here once: a token bound to a tenant
//     serves only that tenant (another tenant in the header is 403, no
//     header means the token's tenant). Handlers read it with TenantOf and
//     never re-read the header.
//  4. Failures answer 401 with WWW-Authenticate: Bearer (no or unknown
//     token) or 403 (wrong scope or tenant), with a JSON error body, and
//     are counted by reason.
//
// # Concurrency
//
// A Guard is immutable after New and safe for concurrent use.
package authn
