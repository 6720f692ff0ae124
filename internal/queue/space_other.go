//go:build !(linux || darwin || freebsd)

package queue

import "errors"

// Space is not implemented here; the queue then keeps no headroom and
// logs that once.
func (osFS) Space(string) (free, total int64, err error) {
	return 0, 0, errors.ErrUnsupported
}
