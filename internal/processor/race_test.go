//go:build race

package processor

// The race detector adds allocations of its own: allocation counts mean
// nothing there.
const raceEnabled = true
