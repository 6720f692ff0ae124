// Package ingest loads OTLP export-request files (protobuf or JSON, plain,
// gzip or zstd) into a sink such as the lake writer.
//
// Each file is read and decoded whole into a columnar batch before any of
// its records reach the sink, so a file that fails to decode contributes
// nothing: no partial Parquet file, no catalog row. Reading and decoding run
// on one goroutine and writing on the caller's, so the two overlap; batches
// travel between them through a small pool and are owned by one side at a
// time.
package ingest
