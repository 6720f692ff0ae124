// Package progress owns the progress display of long-running CLI work
// (compaction, rollups, retention, ingest): a single redrawn line on a
// terminal, plain periodic log lines otherwise, and one summary line at the end.
//
// Concurrency: Add may be called from any number of goroutines; counters are
// atomic and drawing is serialised by a mutex that Add only tries to take, so a
// slow writer never stalls the workers. Done must be called once, after the
// last Add (later Adds are counted but not drawn).
//
// Invariants:
//  1. A nil *Bar, or one made with a nil writer, is a valid no-op.
//  2. A terminal is redrawn at most every 100 ms, other writers get a line at
//     most every 5 s; the summary line is always written by Done, exactly once.
//  3. Output is only ever written to the writer given to New.
package progress
