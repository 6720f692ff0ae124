package tracertest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Call is one call of the syscalls workload as the child made it: what it
// passed and what the kernel returned, which is what the tracer must
// record. FD, Flags and Path follow the io_events columns (docs/schema.md).
type Call struct {
	Syscall string
	FD      int32 // the fd worked on; an open's returned fd (-1 failed); a path call's dirfd (-100 the cwd)
	Path    string
	OldPath string
	Ret     int64
	Errno   int32
	Bytes   int64
	Flags   uint64
}

func (c Call) String() string {
	return fmt.Sprintf("%s fd=%d path=%s old=%s ret=%d errno=%d bytes=%d flags=%#x", c.Syscall, c.FD, short(c.Path), short(c.OldPath), c.Ret, c.Errno, c.Bytes, c.Flags)
}

// short quotes a path, eliding the middle of a long one.
func short(p string) string {
	if len(p) <= 100 {
		return fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf("%q…(%d bytes)…%q", p[:40], len(p), p[len(p)-40:])
}

// callsFile is where the child leaves its calls: written through a shared
// mapping, so reporting them makes no traced syscall.
const (
	callsFile = ".calls.json"
	callsSize = 1 << 20
)

// Calls returns the calls the syscalls workload made in dir, after Go.
func Calls(tb testing.TB, dir string) []Call {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, callsFile))
	if err != nil {
		tb.Fatal(err)
	}
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	var calls []Call
	if err := json.Unmarshal(b, &calls); err != nil {
		tb.Fatalf("calls of the workload: %v", err)
	}
	return calls
}

// DeepName is the directory component the syscalls workload nests
// DeepLevels times, so that the last file's path is longer than the
// 4096 bytes the kernel reads of one path argument.
var DeepName = strings.Repeat("d", 250)

// DeepLevels is how often DeepName is nested.
const DeepLevels = 18

// recorder makes raw syscalls and records each as a Call.
type recorder struct {
	calls []Call
	err   error
}

// do makes syscall nr and records c with the kernel's answer; bytes is
// the Bytes column of a data call that succeeds.
func (r *recorder) do(c Call, nr uintptr, a ...uintptr) int64 {
	var args [6]uintptr
	copy(args[:], a)
	r1, _, e := unix.Syscall6(nr, args[0], args[1], args[2], args[3], args[4], args[5])
	c.Ret = int64(r1)
	if e != 0 {
		c.Ret, c.Errno, c.Bytes = -int64(e), int32(e), 0
	}
	r.calls = append(r.calls, c)
	return c.Ret
}

// open records an open-like call whose fd column is its result.
func (r *recorder) open(c Call, nr uintptr, a ...uintptr) int {
	i := len(r.calls)
	ret := r.do(c, nr, a...)
	r.calls[i].FD = int32(ret)
	if ret < 0 {
		r.calls[i].FD = -1
		if r.err == nil && c.Path != "" && !strings.Contains(c.Path, "missing") && len(c.Path) < 4096 {
			r.err = fmt.Errorf("%s %s: %v", c.Syscall, c.Path, syscall.Errno(-ret))
		}
	}
	return int(ret)
}

func ptr(s string) uintptr {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	return uintptr(unsafe.Pointer(p))
}

func iovecs(bufs ...[]byte) (uintptr, uintptr) {
	iov := make([]unix.Iovec, len(bufs))
	for i, b := range bufs {
		iov[i].Base = &b[0]
		iov[i].SetLen(len(b))
	}
	return uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov))
}

// syscallsWorkload calls every syscall the tracer decodes, on files in
// dir, through pre (an fd opened before tracing) and dirfd (dir, opened
// before tracing), failing calls among them, and returns what it called.
func syscallsWorkload(dir string, pre, dirfd int) ([]Call, error) {
	p := func(n string) string { return filepath.Join(dir, n) }
	var r recorder
	buf := make([]byte, 4096)
	const (
		wr      = unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC
		rw      = unix.O_CREAT | unix.O_RDWR | unix.O_CLOEXEC
		cwd     = unix.AT_FDCWD
		trunc   = unix.O_CREAT | unix.O_WRONLY | unix.O_TRUNC
		noFlags = 0
	)
	var st unix.Stat_t
	var stx unix.Statx_t
	stp, stxp := uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&stx))

	// open family
	fd := r.open(Call{Syscall: "open", Path: p("open.dat"), Flags: wr}, unix.SYS_OPEN, ptr(p("open.dat")), wr, 0o644)
	r.do(Call{Syscall: "close", FD: int32(fd), Path: p("open.dat")}, unix.SYS_CLOSE, uintptr(fd))
	b := r.open(Call{Syscall: "creat", Path: p("creat.dat"), Flags: trunc}, unix.SYS_CREAT, ptr(p("creat.dat")), 0o644)
	how := unix.OpenHow{Flags: rw, Mode: 0o644}
	a := r.open(Call{Syscall: "openat2", Path: p("o2.dat"), Flags: rw}, unix.SYS_OPENAT2, uintptr(dirfd), ptr("o2.dat"), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how))
	A, o2 := int32(a), p("o2.dat")

	// data calls: 30 bytes at 0, 5 at 100, 6 at 200: the file has 206
	iov, n := iovecs(buf[:10], buf[:20])
	r.do(Call{Syscall: "writev", FD: A, Path: o2, Bytes: 30}, unix.SYS_WRITEV, uintptr(a), iov, n)
	iov, n = iovecs(buf[:5])
	r.do(Call{Syscall: "pwritev", FD: A, Path: o2, Bytes: 5}, unix.SYS_PWRITEV, uintptr(a), iov, n, 100, 0)
	iov, n = iovecs(buf[:6])
	r.do(Call{Syscall: "pwritev2", FD: A, Path: o2, Bytes: 6}, unix.SYS_PWRITEV2, uintptr(a), iov, n, 200, 0, 0)
	r.do(Call{Syscall: "pwrite64", FD: A, Path: o2, Bytes: 4}, unix.SYS_PWRITE64, uintptr(a), uintptr(unsafe.Pointer(&buf[0])), 4, 300)
	r.do(Call{Syscall: "lseek", FD: A, Path: o2}, unix.SYS_LSEEK, uintptr(a), 0, 0)
	iov, n = iovecs(buf[:8], buf[:8])
	r.do(Call{Syscall: "readv", FD: A, Path: o2, Bytes: 16}, unix.SYS_READV, uintptr(a), iov, n)
	r.do(Call{Syscall: "read", FD: A, Path: o2, Bytes: 14}, unix.SYS_READ, uintptr(a), uintptr(unsafe.Pointer(&buf[0])), 14)
	iov, n = iovecs(buf[:4])
	r.do(Call{Syscall: "preadv", FD: A, Path: o2, Bytes: 4}, unix.SYS_PREADV, uintptr(a), iov, n, 100, 0)
	iov, n = iovecs(buf[:400])
	r.do(Call{Syscall: "preadv2", FD: A, Path: o2, Bytes: 304}, unix.SYS_PREADV2, uintptr(a), iov, n, 0, 0, 0)
	r.do(Call{Syscall: "pread64", FD: int32(pre), Path: p("pre.dat"), Bytes: 10}, unix.SYS_PREAD64, uintptr(pre), uintptr(unsafe.Pointer(&buf[0])), 10, 0)

	// fd table: dup, dup2 onto an open fd, dup3, fcntl, close_range
	d := r.do(Call{Syscall: "dup", FD: A, Path: o2}, unix.SYS_DUP, uintptr(a))
	r.do(Call{Syscall: "close", FD: int32(d), Path: o2}, unix.SYS_CLOSE, uintptr(d))
	r.do(Call{Syscall: "dup2", FD: A, Path: o2}, unix.SYS_DUP2, uintptr(a), uintptr(b), unix.O_CLOEXEC) // b was creat.dat; a third register dup2 does not read
	r.do(Call{Syscall: "write", FD: int32(b), Path: o2, Bytes: 3}, unix.SYS_WRITE, uintptr(b), uintptr(unsafe.Pointer(&buf[0])), 3)
	r.do(Call{Syscall: "close", FD: int32(b), Path: o2}, unix.SYS_CLOSE, uintptr(b))
	r.do(Call{Syscall: "dup3", FD: A, Path: o2, Flags: unix.O_CLOEXEC}, unix.SYS_DUP3, uintptr(a), 50, unix.O_CLOEXEC)
	r.do(Call{Syscall: "write", FD: 50, Path: o2, Bytes: 7}, unix.SYS_WRITE, 50, uintptr(unsafe.Pointer(&buf[0])), 7)
	r.do(Call{Syscall: "fcntl", FD: A, Path: o2, Flags: unix.F_DUPFD}, unix.SYS_FCNTL, uintptr(a), unix.F_DUPFD, 60)
	r.do(Call{Syscall: "fcntl", FD: A, Path: o2, Flags: unix.F_DUPFD_CLOEXEC}, unix.SYS_FCNTL, uintptr(a), unix.F_DUPFD_CLOEXEC, 70)
	r.do(Call{Syscall: "fcntl", FD: A, Path: o2, Flags: unix.F_SETFD}, unix.SYS_FCNTL, uintptr(a), unix.F_SETFD, unix.FD_CLOEXEC)
	r.do(Call{Syscall: "write", FD: 60, Path: o2, Bytes: 1}, unix.SYS_WRITE, 60, uintptr(unsafe.Pointer(&buf[0])), 1)
	r.do(Call{Syscall: "write", FD: 70, Path: o2, Bytes: 1}, unix.SYS_WRITE, 70, uintptr(unsafe.Pointer(&buf[0])), 1)
	r.do(Call{Syscall: "close_range", FD: 50}, unix.SYS_CLOSE_RANGE, 50, 80, 0)
	r.do(Call{Syscall: "write", FD: 60}, unix.SYS_WRITE, 60, uintptr(unsafe.Pointer(&buf[0])), 1) // EBADF: closed by the range
	r.do(Call{Syscall: "read", FD: 999}, unix.SYS_READ, 999, uintptr(unsafe.Pointer(&buf[0])), 1) // EBADF: never open

	// sync
	r.do(Call{Syscall: "sync_file_range", FD: A, Path: o2}, unix.SYS_SYNC_FILE_RANGE, uintptr(a), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	r.do(Call{Syscall: "fsync", FD: A, Path: o2}, unix.SYS_FSYNC, uintptr(a))
	r.do(Call{Syscall: "fdatasync", FD: A, Path: o2}, unix.SYS_FDATASYNC, uintptr(a))

	// truncate and the stat family
	r.do(Call{Syscall: "ftruncate", FD: A, Path: o2}, unix.SYS_FTRUNCATE, uintptr(a), 100)
	r.do(Call{Syscall: "truncate", FD: cwd, Path: o2}, unix.SYS_TRUNCATE, ptr(o2), 50)
	r.do(Call{Syscall: "stat", FD: cwd, Path: o2}, unix.SYS_STAT, ptr(o2), stp)
	r.do(Call{Syscall: "lstat", FD: cwd, Path: o2}, unix.SYS_LSTAT, ptr(o2), stp)
	r.do(Call{Syscall: "fstat", FD: A, Path: o2}, unix.SYS_FSTAT, uintptr(a), stp)
	r.do(Call{Syscall: "newfstatat", FD: cwd, Path: o2, Flags: noFlags}, unix.SYS_NEWFSTATAT, cwdArg, ptr(o2), stp, 0)
	// glibc's fstat: the fd itself, with an empty path
	r.do(Call{Syscall: "newfstatat", FD: A, Path: o2, Flags: unix.AT_EMPTY_PATH}, unix.SYS_NEWFSTATAT, uintptr(a), ptr(""), stp, unix.AT_EMPTY_PATH)
	r.do(Call{Syscall: "statx", FD: cwd, Path: o2}, unix.SYS_STATX, uintptr(cwdArg), ptr(o2), 0, unix.STATX_SIZE, stxp)
	r.do(Call{Syscall: "statx", FD: int32(dirfd), Path: o2, Flags: unix.AT_SYMLINK_NOFOLLOW}, unix.SYS_STATX, uintptr(dirfd), ptr("o2.dat"), unix.AT_SYMLINK_NOFOLLOW, unix.STATX_SIZE, stxp)
	r.do(Call{Syscall: "statx", FD: A, Path: o2, Flags: unix.AT_EMPTY_PATH}, unix.SYS_STATX, uintptr(a), ptr(""), unix.AT_EMPTY_PATH, unix.STATX_SIZE, stxp)
	r.do(Call{Syscall: "stat", FD: cwd, Path: p("missing.dat")}, unix.SYS_STAT, ptr(p("missing.dat")), stp) // ENOENT

	// directories, relative paths, getdents64, renames
	r.do(Call{Syscall: "mkdir", FD: cwd, Path: p("sub")}, unix.SYS_MKDIR, ptr(p("sub")), 0o755)
	r.do(Call{Syscall: "mkdirat", FD: int32(dirfd), Path: p("sub2")}, unix.SYS_MKDIRAT, uintptr(dirfd), ptr("sub2"), 0o755)
	s := r.open(Call{Syscall: "openat", Path: p("sub"), Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC}, unix.SYS_OPENAT, uintptr(cwdArg), ptr(p("sub")), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	rel := r.open(Call{Syscall: "openat", Path: p("sub/rel.dat"), Flags: wr}, unix.SYS_OPENAT, uintptr(s), ptr("rel.dat"), wr, 0o644)
	r.do(Call{Syscall: "write", FD: int32(rel), Path: p("sub/rel.dat"), Bytes: 4}, unix.SYS_WRITE, uintptr(rel), uintptr(unsafe.Pointer(&buf[0])), 4)
	r.do(Call{Syscall: "close", FD: int32(rel), Path: p("sub/rel.dat")}, unix.SYS_CLOSE, uintptr(rel))
	r.do(Call{Syscall: "getdents64", FD: int32(s), Path: p("sub")}, unix.SYS_GETDENTS64, uintptr(s), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	r.do(Call{Syscall: "renameat2", FD: int32(s), OldPath: p("sub/rel.dat"), Path: p("moved.dat"), Flags: unix.RENAME_NOREPLACE},
		unix.SYS_RENAMEAT2, uintptr(s), ptr("rel.dat"), uintptr(dirfd), ptr("moved.dat"), unix.RENAME_NOREPLACE)
	r.do(Call{Syscall: "renameat2", FD: int32(dirfd), OldPath: p("moved.dat"), Path: o2, Flags: unix.RENAME_NOREPLACE}, // EEXIST
		unix.SYS_RENAMEAT2, uintptr(dirfd), ptr("moved.dat"), uintptr(dirfd), ptr("o2.dat"), unix.RENAME_NOREPLACE)
	r.do(Call{Syscall: "rename", FD: cwd, OldPath: p("moved.dat"), Path: p("moved2.dat")}, unix.SYS_RENAME, ptr(p("moved.dat")), ptr(p("moved2.dat")))
	r.do(Call{Syscall: "renameat", FD: cwd, OldPath: p("moved2.dat"), Path: p("sub/back.dat")}, unix.SYS_RENAMEAT, uintptr(cwdArg), ptr(p("moved2.dat")), uintptr(s), ptr("back.dat"))

	// transfers: the source is the fd and the path
	c := r.open(Call{Syscall: "openat", Path: p("copy.dat"), Flags: wr}, unix.SYS_OPENAT, uintptr(cwdArg), ptr(p("copy.dat")), wr, 0o644)
	var off int64
	offp := uintptr(unsafe.Pointer(&off))
	r.do(Call{Syscall: "sendfile", FD: A, Path: o2, Bytes: 10}, unix.SYS_SENDFILE, uintptr(c), uintptr(a), offp, 10)
	off = 0
	r.do(Call{Syscall: "copy_file_range", FD: A, Path: o2, Bytes: 10}, unix.SYS_COPY_FILE_RANGE, uintptr(a), offp, uintptr(c), 0, 10, 0)
	var pfd [2]int32
	r.newFD(Call{Syscall: "pipe2", Flags: unix.O_CLOEXEC}, &pfd, unix.SYS_PIPE2, uintptr(unsafe.Pointer(&pfd)), unix.O_CLOEXEC)
	off = 0
	r.do(Call{Syscall: "splice", FD: A, Path: o2, Bytes: 10}, unix.SYS_SPLICE, uintptr(a), offp, uintptr(pfd[1]), 0, 10, 0)
	r.do(Call{Syscall: "io_uring_enter", FD: A, Path: o2}, unix.SYS_IO_URING_ENTER, uintptr(a), 0, 0, 0, 0, 0) // EOPNOTSUPP: not a ring

	r.do(Call{Syscall: "read", FD: pfd[0], Path: r.fdName(pfd[0]), Bytes: 10}, unix.SYS_READ, uintptr(pfd[0]), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	newFDs(&r, buf)

	// cwd: chdir and fchdir move what relative paths are joined to
	r.do(Call{Syscall: "chdir", FD: cwd, Path: dir}, unix.SYS_CHDIR, ptr(dir), 0x1234)
	r.open(Call{Syscall: "openat", Path: p("missing.dat"), Flags: unix.O_RDONLY}, unix.SYS_OPENAT, uintptr(cwdArg), ptr("missing.dat"), unix.O_RDONLY)
	r.do(Call{Syscall: "fchdir", FD: int32(s), Path: p("sub")}, unix.SYS_FCHDIR, uintptr(s))
	r.do(Call{Syscall: "unlink", FD: cwd, Path: p("sub/back.dat")}, unix.SYS_UNLINK, ptr("back.dat"), 0x1234)

	// a path longer than the kernel reads of one argument: nested dirs
	deep, deepPath := s, p("sub")
	for range DeepLevels {
		r.do(Call{Syscall: "mkdirat", FD: int32(deep), Path: deepPath + "/" + DeepName}, unix.SYS_MKDIRAT, uintptr(deep), ptr(DeepName), 0o755)
		deepPath += "/" + DeepName
		deep = r.open(Call{Syscall: "openat", Path: deepPath, Flags: unix.O_RDONLY | unix.O_DIRECTORY}, unix.SYS_OPENAT, uintptr(deep), ptr(DeepName), unix.O_RDONLY|unix.O_DIRECTORY)
	}
	f := r.open(Call{Syscall: "openat", Path: deepPath + "/f.dat", Flags: wr}, unix.SYS_OPENAT, uintptr(deep), ptr("f.dat"), wr, 0o644)
	r.do(Call{Syscall: "write", FD: int32(f), Path: deepPath + "/f.dat", Bytes: 9}, unix.SYS_WRITE, uintptr(f), uintptr(unsafe.Pointer(&buf[0])), 9)

	// path arguments longer than the kernel reads: ENAMETOOLONG, and the
	// path recorded as what was read and "…"
	long := "/" + strings.Repeat("x", 5000)
	r.open(Call{Syscall: "openat", Path: long[:4095] + "…", Flags: unix.O_RDONLY}, unix.SYS_OPENAT, uintptr(cwdArg), ptr(long), unix.O_RDONLY)
	r.do(Call{Syscall: "rename", FD: cwd, OldPath: o2, Path: long[:4095] + "…"}, unix.SYS_RENAME, ptr(o2), ptr(long))

	// removals
	r.do(Call{Syscall: "unlinkat", FD: cwd, Path: p("copy.dat")}, unix.SYS_UNLINKAT, uintptr(cwdArg), ptr(p("copy.dat")), 0)
	r.do(Call{Syscall: "unlinkat", FD: int32(dirfd), Path: p("sub2"), Flags: unix.AT_REMOVEDIR}, unix.SYS_UNLINKAT, uintptr(dirfd), ptr("sub2"), unix.AT_REMOVEDIR)
	r.do(Call{Syscall: "rmdir", FD: cwd, Path: p("missing.dir")}, unix.SYS_RMDIR, ptr(p("missing.dir")), 0x1234) // ENOENT
	r.do(Call{Syscall: "unlink", FD: cwd, Path: p("creat.dat")}, unix.SYS_UNLINK, ptr(p("creat.dat")))
	r.do(Call{Syscall: "close", FD: A, Path: o2}, unix.SYS_CLOSE, uintptr(a))
	r.do(Call{Syscall: "close", FD: A}, unix.SYS_CLOSE, uintptr(a)) // EBADF: closed twice
	return r.calls, r.err
}

// fdName is what /proc/self/fd shows for fd (readlink is not traced).
func (r *recorder) fdName(fd int32) string {
	name, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("readlink fd %d: %w", fd, err)
	}
	return name
}

// newFD records a call that makes an fd without a path: the fd column is
// its result (or, with pair, the first fd it filled in) and the path what
// /proc/self/fd shows for that fd.
func (r *recorder) newFD(c Call, pair *[2]int32, nr uintptr, a ...uintptr) int32 {
	i := len(r.calls)
	ret := r.do(c, nr, a...)
	fd := int32(ret)
	if pair != nil && ret == 0 {
		fd = pair[0]
	}
	if ret < 0 {
		fd = -1
	} else {
		r.calls[i].Path = r.fdName(fd)
	}
	r.calls[i].FD = fd
	return fd
}

// newFDs calls each syscall that makes fds without a path, uses some of
// the fds and closes them all: each row must carry the fd's name as
// /proc/self/fd shows it (pipe:[ino], socket:[ino], anon_inode:[eventfd]).
func newFDs(r *recorder, buf []byte) {
	b0 := uintptr(unsafe.Pointer(&buf[0]))
	var opened []int32
	keep := func(fds ...int32) {
		for _, fd := range fds {
			if fd >= 0 {
				opened = append(opened, fd)
			}
		}
	}
	var pp [2]int32
	r.newFD(Call{Syscall: "pipe"}, &pp, unix.SYS_PIPE, uintptr(unsafe.Pointer(&pp)))
	r.do(Call{Syscall: "write", FD: pp[1], Path: r.fdName(pp[1]), Bytes: 3}, unix.SYS_WRITE, uintptr(pp[1]), b0, 3)
	keep(pp[0], pp[1])

	const stream = unix.SOCK_STREAM | unix.SOCK_CLOEXEC
	var sv [2]int32
	r.newFD(Call{Syscall: "socketpair", Flags: stream}, &sv, unix.SYS_SOCKETPAIR, unix.AF_UNIX, stream, 0, uintptr(unsafe.Pointer(&sv)))
	r.do(Call{Syscall: "write", FD: sv[1], Path: r.fdName(sv[1]), Bytes: 5}, unix.SYS_WRITE, uintptr(sv[1]), b0, 5)
	r.do(Call{Syscall: "read", FD: sv[0], Path: r.fdName(sv[0]), Bytes: 5}, unix.SYS_READ, uintptr(sv[0]), b0, uintptr(len(buf)))
	keep(sv[0], sv[1])

	// A listening socket with two connections waiting (bind, listen and
	// connect are not traced), accepted by accept and accept4; a third
	// accept finds none (EAGAIN). accept's fd column is the listener.
	const listen = unix.SOCK_STREAM | unix.SOCK_NONBLOCK
	ls := r.newFD(Call{Syscall: "socket", Flags: listen}, nil, unix.SYS_SOCKET, unix.AF_UNIX, listen, 0)
	addr := &unix.SockaddrUnix{Name: fmt.Sprintf("@sluice-tracertest-%d", os.Getpid())}
	if err := unix.Bind(int(ls), addr); err != nil && r.err == nil {
		r.err = err
	}
	_ = unix.Listen(int(ls), 4)
	lsName := r.fdName(ls)
	for range 2 {
		cl := r.newFD(Call{Syscall: "socket", Flags: unix.SOCK_STREAM}, nil, unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err := unix.Connect(int(cl), addr); err != nil && r.err == nil {
			r.err = err
		}
		keep(cl)
	}
	a1 := int32(r.do(Call{Syscall: "accept", FD: ls, Path: lsName}, unix.SYS_ACCEPT, uintptr(ls), 0, 0))
	r.do(Call{Syscall: "write", FD: a1, Path: r.fdName(a1), Bytes: 2}, unix.SYS_WRITE, uintptr(a1), b0, 2)
	a2 := int32(r.do(Call{Syscall: "accept4", FD: ls, Path: lsName, Flags: unix.SOCK_CLOEXEC}, unix.SYS_ACCEPT4, uintptr(ls), 0, 0, unix.SOCK_CLOEXEC))
	r.do(Call{Syscall: "write", FD: a2, Path: r.fdName(a2), Bytes: 4}, unix.SYS_WRITE, uintptr(a2), b0, 4)
	r.do(Call{Syscall: "accept4", FD: ls, Path: lsName, Flags: unix.SOCK_CLOEXEC}, unix.SYS_ACCEPT4, uintptr(ls), 0, 0, unix.SOCK_CLOEXEC) // EAGAIN
	keep(ls, a1, a2)

	keep(r.newFD(Call{Syscall: "eventfd"}, nil, unix.SYS_EVENTFD, 0))
	efd := r.newFD(Call{Syscall: "eventfd2", Flags: unix.EFD_CLOEXEC}, nil, unix.SYS_EVENTFD2, 0, unix.EFD_CLOEXEC)
	one := uint64(1)
	r.do(Call{Syscall: "write", FD: efd, Path: r.fdName(efd), Bytes: 8}, unix.SYS_WRITE, uintptr(efd), uintptr(unsafe.Pointer(&one)), 8)
	keep(efd)
	keep(r.newFD(Call{Syscall: "epoll_create"}, nil, unix.SYS_EPOLL_CREATE, 1))
	keep(r.newFD(Call{Syscall: "epoll_create1", Flags: unix.EPOLL_CLOEXEC}, nil, unix.SYS_EPOLL_CREATE1, unix.EPOLL_CLOEXEC))
	mfd := r.newFD(Call{Syscall: "memfd_create", Flags: unix.MFD_CLOEXEC}, nil, unix.SYS_MEMFD_CREATE, ptr("tracer test"), unix.MFD_CLOEXEC)
	r.do(Call{Syscall: "write", FD: mfd, Path: r.fdName(mfd), Bytes: 6}, unix.SYS_WRITE, uintptr(mfd), b0, 6)
	keep(mfd)
	var mask uint64
	mp := uintptr(unsafe.Pointer(&mask))
	keep(r.newFD(Call{Syscall: "signalfd"}, nil, unix.SYS_SIGNALFD, ^uintptr(0), mp, 8))
	keep(r.newFD(Call{Syscall: "signalfd4", Flags: unix.SFD_CLOEXEC}, nil, unix.SYS_SIGNALFD4, ^uintptr(0), mp, 8, unix.SFD_CLOEXEC))
	keep(r.newFD(Call{Syscall: "timerfd_create", Flags: unix.TFD_CLOEXEC}, nil, unix.SYS_TIMERFD_CREATE, unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC))
	keep(r.newFD(Call{Syscall: "inotify_init"}, nil, unix.SYS_INOTIFY_INIT))
	keep(r.newFD(Call{Syscall: "inotify_init1", Flags: unix.IN_CLOEXEC}, nil, unix.SYS_INOTIFY_INIT1, unix.IN_CLOEXEC))
	keep(r.newFD(Call{Syscall: "userfaultfd", Flags: unix.O_CLOEXEC}, nil, unix.SYS_USERFAULTFD, unix.O_CLOEXEC))
	keep(r.newFD(Call{Syscall: "pidfd_open"}, nil, unix.SYS_PIDFD_OPEN, uintptr(os.Getpid()), 0))
	for _, fd := range opened {
		r.do(Call{Syscall: "close", FD: fd, Path: r.fdName(fd)}, unix.SYS_CLOSE, uintptr(fd))
	}
}

// cwdArg is AT_FDCWD as a syscall argument register.
const cwdArg = ^uintptr(99) // -100

// writeCalls leaves calls in the shared mapping m.
func writeCalls(m []byte, calls []Call) error {
	b, err := json.Marshal(calls)
	if err != nil {
		return err
	}
	if len(b) >= len(m) {
		return fmt.Errorf("%d bytes of calls do not fit the %d-byte mapping", len(b), len(m))
	}
	copy(m, b)
	return nil
}

// mapCalls creates the calls file in dir and maps it, before tracing.
func mapCalls(dir string) ([]byte, error) {
	f, err := os.OpenFile(filepath.Join(dir, callsFile), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(callsSize); err != nil {
		return nil, err
	}
	return unix.Mmap(int(f.Fd()), 0, callsSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}
