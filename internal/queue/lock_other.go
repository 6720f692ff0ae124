//go:build !unix

package queue

import (
	"fmt"
	"io"
	"os"
)

// Lock only creates the file where flock is unavailable: one process per
// directory is then the operator's to ensure.
func (osFS) Lock(path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("queue: open lock %q: %w", path, err)
	}
	return f, nil
}
