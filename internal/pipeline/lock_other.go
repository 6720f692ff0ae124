//go:build !unix

package pipeline

import (
	"fmt"
	"os"
)

// lockFile only creates the file where flock is unavailable; one process
// per lake is then the operator's responsibility.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %q: %w", path, err)
	}
	return f, nil
}
