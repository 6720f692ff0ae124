package tracer

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

// fakeProc makes a /proc-like tree for pid with fd links and a cwd.
func fakeProc(t *testing.T, pid uint32, cwd string, fds map[int]string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, strconv.Itoa(int(pid)))
	if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cwd, filepath.Join(dir, "cwd")); err != nil {
		t.Fatal(err)
	}
	for fd, target := range fds {
		if err := os.Symlink(target, filepath.Join(dir, "fd", strconv.Itoa(fd))); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

type stream struct {
	d   *Decoder
	out *signal.IOEvents
	ts  int64
}

func (s *stream) call(sc Syscall, fd, fd2 int32, ret int64, flags uint64, path, path2 string) {
	s.ts += 1000
	b := appendRecord(nil, &rawRecord{
		ts: s.ts, duration: 10, pid: 7, tid: 8, fd: fd, fd2: fd2, sc: uint16(sc), ret: ret,
		flags: flags, comm: []byte("app"), path: []byte(path), path2: []byte(path2),
	})
	s.d.Decode(b, s.out)
}

func (s *stream) event(kind uint16) {
	s.d.Decode(appendRecord(nil, &rawRecord{pid: 7, tid: 7, kind: kind, fd: -1, fd2: -1}), s.out)
}

func (s *stream) lastPath(t *testing.T) string {
	t.Helper()
	return s.out.String(s.out.Path[s.out.Len()-1])
}

// TestDecoderFDTable follows one process through the calls that change its
// fd table and checks the path each later call is given.
func TestDecoderFDTable(t *testing.T) {
	root := fakeProc(t, 7, "/home/app", map[int]string{3: "/var/log/before.log", 4: "/data"})
	s := &stream{d: NewDecoder(DecoderOptions{ProcRoot: root}), out: new(signal.IOEvents)}
	check := func(want string) {
		t.Helper()
		if got := s.lastPath(t); got != want {
			t.Fatalf("path %q, want %q", got, want)
		}
	}
	s.call(SysWrite, 3, -1, 10, 0, "", "")
	check("/var/log/before.log") // from /proc, opened before tracing
	s.call(SysOpenat, atFDCWD, -1, 5, 0, "rel/x.txt", "")
	check("/home/app/rel/x.txt") // relative to the cwd
	s.call(SysOpenat, 4, -1, 6, oCloexec, "./y.txt", "")
	check("/data/y.txt") // relative to a dirfd
	s.call(SysRead, 6, -1, 3, 0, "", "")
	check("/data/y.txt")
	s.call(SysFcntl, 5, 0, 9, fDupfd, "", "")
	s.call(SysRead, 9, -1, 1, 0, "", "")
	check("/home/app/rel/x.txt") // F_DUPFD copy
	s.call(SysDup3, 5, 10, 10, oCloexec, "", "")
	s.call(SysClose, 5, -1, 0, 0, "", "")
	s.call(SysRead, 10, -1, 1, 0, "", "")
	check("/home/app/rel/x.txt") // dup3 copy outlives the original
	s.call(SysOpen, atFDCWD, -1, 5, 0, "/etc/z", "")
	s.call(SysRead, 5, -1, 1, 0, "", "")
	check("/etc/z") // fd 5 reused
	s.call(SysCloseRange, 9, 9, 0, 0, "", "")
	s.call(SysRead, 9, -1, 1, 0, "", "")
	check("") // closed by close_range; /proc has no fd 9 either
	s.event(kindExec)
	s.call(SysRead, 6, -1, 1, 0, "", "")
	check("") // O_CLOEXEC: gone after exec
	s.call(SysRead, 5, -1, 1, 0, "", "")
	check("/etc/z") // not CLOEXEC: survives exec
	s.call(SysRead, 10, -1, 1, 0, "", "")
	check("") // dup3(O_CLOEXEC)
	s.event(kindExit)
	if len(s.d.procs) != 0 {
		t.Fatalf("process table not dropped at exit: %d", len(s.d.procs))
	}
	// The other threads of an exit_group may report the same exit.
	s.event(kindExit)
	if st := s.d.Stats(); st.Exits != 1 {
		t.Errorf("%d exits counted for one process, want 1", st.Exits)
	}
	// A new process that reuses the pid has an exit of its own.
	s.d.Decode(appendRecord(nil, &rawRecord{pid: 1, tid: 7, kind: kindFork, fd: -1, fd2: -1}), s.out)
	s.event(kindExit)
	if st := s.d.Stats(); st.Exits != 2 {
		t.Errorf("%d exits counted after the pid was reused, want 2", st.Exits)
	}
	if st := s.d.Stats(); st.ProcLookups != 5 {
		// fd 3, dirfd 4, fd 9 after close_range, fds 6 and 10 after exec
		t.Errorf("%d /proc lookups, want 5", st.ProcLookups)
	}
}

func TestDecoderFilters(t *testing.T) {
	set, err := ParseSyscalls("read,fsync")
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{d: NewDecoder(DecoderOptions{Syscalls: set, PathPrefix: "/data/", ProcRoot: t.TempDir()}), out: new(signal.IOEvents)}
	s.call(SysOpen, atFDCWD, -1, 3, 0, "/data/a", "")
	s.call(SysOpen, atFDCWD, -1, 4, 0, "/etc/b", "")
	s.call(SysRead, 3, -1, 5, 0, "", "")
	s.call(SysRead, 4, -1, 5, 0, "", "")
	s.call(SysWrite, 3, -1, 5, 0, "", "")
	s.call(SysFsync, 3, -1, 0, 0, "", "")
	if s.out.Len() != 2 || Syscall(s.out.Syscall[0]) != SysRead || Syscall(s.out.Syscall[1]) != SysFsync {
		t.Fatalf("kept %d rows, want read and fsync of /data/a", s.out.Len())
	}
	if st := s.d.Stats(); st.Filtered != 4 {
		t.Errorf("filtered %d, want 4", st.Filtered)
	}
	if _, err := ParseSyscalls("read,bogus"); err == nil {
		t.Error("unknown syscall accepted")
	}
}

func TestDecoderNoAllocs(t *testing.T) {
	d := NewDecoder(DecoderOptions{ProcRoot: t.TempDir()})
	out := new(signal.IOEvents)
	open := appendRecord(nil, &rawRecord{sc: uint16(SysOpenat), fd: atFDCWD, ret: 3, pid: 1, tid: 1, comm: []byte("x"), path: []byte("/a/b")})
	read := appendRecord(nil, &rawRecord{sc: uint16(SysRead), fd: 3, ret: 4096, pid: 1, tid: 1, comm: []byte("x")})
	d.Decode(open, out)
	for range 2048 {
		d.Decode(read, out)
	}
	out.Reset()
	allocs := testing.AllocsPerRun(100, func() {
		for range 1000 {
			d.Decode(read, out)
		}
		out.Reset()
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per 1000 records", allocs)
	}
}

func TestParseRecordShort(t *testing.T) {
	var r rawRecord
	if parseRecord(make([]byte, 10), &r) == nil {
		t.Fatal("short header accepted")
	}
	b := appendRecord(nil, &rawRecord{path: []byte("/x")})
	if parseRecord(b[:len(b)-1], &r) == nil {
		t.Fatal("truncated path accepted")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(appendRecord(nil, &rawRecord{sc: uint16(SysOpenat), ret: 3, path: []byte("x")}))
	f.Add(appendRecord(nil, &rawRecord{sc: uint16(SysCloseRange), fd: 0, fd2: -1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(DecoderOptions{ProcRoot: "/nonexistent"})
		out := new(signal.IOEvents)
		d.Decode(b, out)
		if out.Len() > 1 {
			t.Fatal("more than one row from one record")
		}
	})
}

// TestDecoderFork: a child process starts with its parent's fds, so a
// short-lived child's writes resolve without its /proc.
func TestDecoderFork(t *testing.T) {
	s := &stream{d: NewDecoder(DecoderOptions{ProcRoot: t.TempDir()}), out: new(signal.IOEvents)}
	s.call(SysOpenat, atFDCWD, -1, 5, oCloexec, "/var/log/out.log", "")
	s.d.Decode(appendRecord(nil, &rawRecord{pid: 7, tid: 9, kind: kindFork, fd: -1, fd2: -1}), s.out)
	s.d.Decode(appendRecord(nil, &rawRecord{pid: 9, tid: 9, sc: uint16(SysWrite), fd: 5, fd2: -1, ret: 3, comm: []byte("child")}), s.out)
	if got := s.lastPath(t); got != "/var/log/out.log" {
		t.Fatalf("child's write to an inherited fd: path %q", got)
	}
	if st := s.d.Stats(); st.Forks != 1 || st.ProcLookups != 0 {
		t.Fatalf("stats %+v", st)
	}
	// The parent's table is its own: the child closing fd 5 leaves it.
	s.d.Decode(appendRecord(nil, &rawRecord{pid: 9, tid: 9, sc: uint16(SysClose), fd: 5, fd2: -1, comm: []byte("child")}), s.out)
	s.call(SysWrite, 5, -1, 1, 0, "", "")
	if got := s.lastPath(t); got != "/var/log/out.log" {
		t.Fatalf("parent's fd after the child closed its copy: %q", got)
	}
}

func TestDecoderChdir(t *testing.T) {
	root := fakeProc(t, 7, "/home/app", nil)
	s := &stream{d: NewDecoder(DecoderOptions{ProcRoot: root}), out: new(signal.IOEvents)}
	s.call(SysChdir, atFDCWD, -1, 0, 0, "sub", "")
	s.call(SysOpenat, atFDCWD, -1, 3, 0, "a.txt", "")
	if got := s.lastPath(t); got != "/home/app/sub/a.txt" {
		t.Fatalf("after chdir: %q", got)
	}
	s.call(SysOpenat, atFDCWD, -1, 4, 0, "/srv", "")
	s.call(SysFchdir, 4, -1, 0, 0, "", "")
	s.call(SysOpenat, atFDCWD, -1, 5, 0, "b.txt", "")
	if got := s.lastPath(t); got != "/srv/b.txt" {
		t.Fatalf("after fchdir: %q", got)
	}
}

// TestDecoderNonUTF8 checks that paths and command names that are not
// UTF-8 (a Linux name is any bytes but NUL) come out as valid UTF-8, with
// the bad bytes as \xNN, wherever they come from: an open's argument, a
// relative path joined to a cwd read from /proc, an fd read from /proc,
// and the comm.
func TestDecoderNonUTF8(t *testing.T) {
	root := fakeProc(t, 7, "/home/caf\xe9", map[int]string{3: "/var/\xff\xfe.log"})
	s := &stream{d: NewDecoder(DecoderOptions{ProcRoot: root}), out: new(signal.IOEvents)}
	rec := func(sc Syscall, fd int32, ret int64, path string) {
		s.ts += 1000
		s.d.Decode(appendRecord(nil, &rawRecord{ts: s.ts, pid: 7, tid: 7, fd: fd, fd2: -1, sc: uint16(sc), ret: ret,
			comm: []byte("w\xffrk;er x"), path: []byte(path)}), s.out)
	}
	rec(SysOpenat, atFDCWD, 5, "/data/a\x80b\nc ü.txt")
	rec(SysWrite, 5, 1, "")
	rec(SysStat, atFDCWD, 0, "rel\xc3")
	rec(SysRead, 3, 1, "")
	want := []string{"/data/a\\x80b\nc ü.txt", "/data/a\\x80b\nc ü.txt", "/home/caf\\xe9/rel\\xc3", "/var/\\xff\\xfe.log"}
	if s.out.Len() != len(want) {
		t.Fatalf("%d rows, want %d", s.out.Len(), len(want))
	}
	for i, w := range want {
		if got := s.out.String(s.out.Path[i]); got != w {
			t.Errorf("row %d: path %q, want %q", i, got, w)
		}
		if got := s.out.String(s.out.Comm[i]); got != "w\\xffrk;er x" {
			t.Errorf("row %d: comm %q", i, got)
		}
	}
}

// TestDecoderNewFDs follows fds that pipe, socketpair, accept4, eventfd2,
// memfd_create and pidfd_open made: each is named as /proc/PID/fd names
// it, and exec closes the close-on-exec ones (/proc is read only for
// those, after the exec).
func TestDecoderNewFDs(t *testing.T) {
	s := &stream{d: NewDecoder(DecoderOptions{ProcRoot: t.TempDir()}), out: new(signal.IOEvents)}
	rec := func(r rawRecord) {
		s.ts += 1000
		r.ts, r.duration, r.pid, r.tid, r.comm = s.ts, 10, 7, 8, []byte("app")
		s.d.Decode(appendRecord(nil, &r), s.out)
	}
	check := func(fd int32, want string) {
		t.Helper()
		s.call(SysWrite, fd, -1, 1, 0, "", "")
		if got := s.lastPath(t); got != want {
			t.Errorf("fd %d: path %q, want %q", fd, got, want)
		}
	}
	rec(rawRecord{sc: uint16(SysPipe), fd: 3, fd2: 4, ino: 1234, ino2: 1234})
	if got, fd := s.lastPath(t), s.out.FD[s.out.Len()-1]; got != "pipe:[1234]" || fd != 3 {
		t.Errorf("pipe row: fd %d path %q, want 3 pipe:[1234]", fd, got)
	}
	rec(rawRecord{sc: uint16(SysSocketpair), fd: 5, fd2: 6, ino: 10, ino2: 11, flags: oCloexec | 1})
	rec(rawRecord{sc: uint16(SysSocket), fd: -1, fd2: -1, ret: 7, ino: 20, flags: 1})
	rec(rawRecord{sc: uint16(SysAccept4), fd: 7, fd2: -1, ret: 8, ino: 21, flags: oCloexec})
	if got, fd := s.lastPath(t), s.out.FD[s.out.Len()-1]; got != "socket:[20]" || fd != 7 {
		t.Errorf("accept4 row: fd %d path %q, want the listener 7 socket:[20]", fd, got)
	}
	rec(rawRecord{sc: uint16(SysEventfd2), fd: -1, fd2: -1, ret: 9, flags: oCloexec})
	rec(rawRecord{sc: uint16(SysMemfdCreate), fd: -1, fd2: -1, ret: 10, flags: mfdCloexec, path: []byte("buf\xff")})
	rec(rawRecord{sc: uint16(SysPidfdOpen), fd: -1, fd2: -1, ret: 11})
	rec(rawRecord{sc: uint16(SysSocket), fd: -1, fd2: -1, ret: -24}) // EMFILE
	if got, fd := s.lastPath(t), s.out.FD[s.out.Len()-1]; got != "" || fd != -1 {
		t.Errorf("failed socket row: fd %d path %q, want -1 and none", fd, got)
	}
	check(4, "pipe:[1234]")
	check(5, "socket:[10]")
	check(6, "socket:[11]")
	check(8, "socket:[21]")
	check(9, "anon_inode:[eventfd]")
	check(10, `/memfd:buf\xff (deleted)`)
	check(11, "anon_inode:[pidfd]")
	s.event(kindExec)
	check(3, "pipe:[1234]") // pipe has no flags: survives
	check(5, "")            // SOCK_CLOEXEC
	check(7, "socket:[20]")
	check(8, "")  // accept4(SOCK_CLOEXEC)
	check(9, "")  // EFD_CLOEXEC
	check(10, "") // MFD_CLOEXEC
	check(11, "") // pidfds are always close-on-exec
	if st := s.d.Stats(); st.ProcLookups != 5 {
		t.Errorf("%d /proc lookups, want 5 (the fds exec closed)", st.ProcLookups)
	}
}
