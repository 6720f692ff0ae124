// Package promtest builds small real lakes (files written by lake.Writer,
// segments in an SQLite catalog) with metric values known in advance, for
// the query tests and benchmarks. Nothing in it is used outside tests.
//
// Concurrency: a Lake is used by one test at a time. Invariant: Synth's
// values are a closed form of the point index (see Synth), so tests can
// state expected PromQL results without reading the lake.
package promtest
