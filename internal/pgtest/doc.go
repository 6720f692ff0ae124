// Package pgtest gives tests a real PostgreSQL server: the one named by
// $SLUICE_POSTGRES_DSN, or a throwaway server it starts from the local
// PostgreSQL binaries (initdb and postgres; Debian keeps them in
// /usr/lib/postgresql/<version>/bin) in a temporary directory, on a free
// loopback port, with fsync off. It never uses a system cluster.
//
// PostgreSQL refuses to run as root, so as root the server runs as the
// "postgres" user (or "nobody"), owning its temporary directory. With no
// binaries a test is skipped, or fails when SLUICE_REQUIRE_ALL is set, via
// corpustest.Missing.
//
// Two ways to use it:
//
//   - Shared: call Main from TestMain and DSN from tests; the server starts
//     on first use and stops when the tests are done. Schema gives each test
//     its own schema, dropped at cleanup.
//   - Per test: Start(tb) starts a server stopped at tb.Cleanup, for
//     packages whose TestMain is someone else's.
//
// The server process gets SIGQUIT if the test process dies on Linux, so a
// killed test does not leave a server running.
package pgtest
