// Package cli defines sluice's command line: one cobra command per
// subcommand, each a thin layer that parses flags and calls the package that
// does the work. It never calls os.Exit; Main returns the exit code.
//
// Exit codes: 0 success, 1 the work ran but something failed (for example
// some input files were rejected), 2 bad usage.
package cli
