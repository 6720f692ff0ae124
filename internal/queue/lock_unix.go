//go:build unix

package queue

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Lock takes an exclusive, non-blocking flock on path, created if needed.
// The kernel drops it when the process dies, so a kill -9 never leaves a
// stale lock behind.
func (osFS) Lock(path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("queue: open lock %q: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %q is held by another process (or another Open in this one)", ErrLocked, path)
		}
		return nil, fmt.Errorf("queue: lock %q: %w", path, err)
	}
	return f, nil
}
