//go:build linux

package queue

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// DataSync is fdatasync(2): the file's data, and of its metadata only what
// reading the data back needs (its size, its blocks), not its times. In a
// preallocated segment (zero-filled when created) an append changes
// neither size nor blocks, so the sync writes the data and flushes the
// disk's cache without a journal commit for the inode.
func (f osFile) DataSync() error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
