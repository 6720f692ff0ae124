// Package version owns sluice's one version string: the one `sluice
// --version` and `sluice version` print, Parquet footers carry in
// created_by, and the query API reports beside the Prometheus version
// Grafana needs.
//
// String resolves it once, in this order:
//
//  1. the -ldflags override the Makefile sets (`-X
//     github.com/sluice-dev/sluice/internal/version.override=<git describe>`);
//  2. the main module's version from the build info (a tag, or the
//     pseudo-version Go stamps from the VCS, "+dirty" when modified);
//  3. the VCS revision (first 12 hex digits) with "-dirty" when modified;
//  4. "devel" when none is known (go run, tests without VCS data).
//
// Prometheus is not sluice's version: it is the Prometheus release whose
// HTTP API the query API implements, which Grafana's Prometheus data
// source reads from /api/v1/status/buildinfo to choose its features.
//
// Safe for concurrent use; the value never changes within a process.
package version
