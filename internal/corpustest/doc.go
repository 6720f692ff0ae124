// Package corpustest finds the shared corpus of real OTLP files for tests
// and benchmarks. The corpus lives beside the repository (../shared/corpus)
// and is never copied into it.
package corpustest
