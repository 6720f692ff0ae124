//go:build !linux

package pgtest

import (
	"errors"
	"syscall"
)

// sysProcAttr: switching users is implemented for Linux only, where CI runs
// as root; elsewhere tests run as an ordinary user.
func sysProcAttr(owner *account) (*syscall.SysProcAttr, error) {
	if owner != nil {
		return nil, errors.New("pgtest: running PostgreSQL as another user needs Linux; run the tests as a non-root user")
	}
	return nil, nil
}
