//go:build linux || darwin || freebsd

package queue

import "syscall"

// Space reports the bytes available to an unprivileged writer (f_bavail,
// not f_bfree: the root-reserved blocks are not ours to fill) and the size
// of the file system holding dir.
func (osFS) Space(dir string) (free, total int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), nil
}
