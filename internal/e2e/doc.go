// Package e2e holds end-to-end tests that build the sluice binary and run
// it as a user would, checking its results with independent readers
// (pyarrow, DuckDB and the official OpenTelemetry protobuf bindings for
// Python, installed by the test command).
package e2e
