//go:build !linux

package queue

// DataSync is Sync where fdatasync(2) is not at hand.
func (f osFile) DataSync() error { return f.Sync() }
