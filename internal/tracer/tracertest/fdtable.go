package tracertest

import (
	"fmt"
	"path/filepath"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The fdtable workload (mode "fdtable") follows an fd through the ways a
// table is shared or inherited:
//
//  1. the main thread opens t.dat (CLOEXEC), a second thread (Child.TID2)
//     writes TBytes to it and the main thread closes it: threads share
//     the table;
//  2. it opens x.dat without CLOEXEC and y.dat with CLOEXEC, and execs
//     /bin/sh (fork, then exec) running ExecScript: the shell writes "a\n"
//     to x.dat's fd, fails with EBADF on y.dat's (closed by the exec), and
//     a subshell (a fork of the shell) writes "c\n" to x.dat's fd.
const TBytes = 5

// ExecScript is the shell's script for x.dat's and y.dat's fds.
func ExecScript(x, y int) string {
	return fmt.Sprintf("echo a >&%d; echo b >&%d; (echo c >&%d)", x, y, x)
}

// fdtableWorkload runs the workload; second runs a function on the
// second thread and waits for it.
func fdtableWorkload(dir string, second func(func())) error {
	p := func(n string) string { return filepath.Join(dir, n) }
	fd, err := syscall.Open(p("t.dat"), syscall.O_CREAT|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	second(func() { _, err = syscall.Write(fd, make([]byte, TBytes)) })
	if err != nil {
		return err
	}
	if err := syscall.Close(fd); err != nil {
		return err
	}
	x, err := syscall.Open(p("x.dat"), syscall.O_CREAT|syscall.O_WRONLY|syscall.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	y, err := syscall.Open(p("y.dat"), syscall.O_CREAT|syscall.O_WRONLY|syscall.O_TRUNC|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	pid, err := syscall.ForkExec(ShPath, []string{"sh", "-c", ExecScript(x, y)}, &syscall.ProcAttr{
		Dir: dir, Files: []uintptr{0, 1, 2}, Env: []string{"PATH=/usr/bin:/bin"},
	})
	if err != nil {
		return err
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		return err
	}
	// The shell fails on y's fd: "echo b" is not run, the subshell is.
	return nil
}

// Thread2Comm is the fdtable workload's second thread's name (comm), so
// that --comm can select it without its process's main thread.
const Thread2Comm = "tracertest-t2"

// startSecondThread starts a goroutine locked to a thread of its own,
// named Thread2Comm, and returns its tid and a function that runs f on it.
func startSecondThread() (int, func(func())) {
	work := make(chan func())
	done := make(chan struct{})
	tid := make(chan int)
	go func() {
		runtime.LockOSThread()
		name, _ := unix.BytePtrFromString(Thread2Comm)
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0)
		tid <- syscall.Gettid()
		for f := range work {
			f()
			done <- struct{}{}
		}
	}()
	return <-tid, func(f func()) { work <- f; <-done }
}

// ShPath is the shell the fdtable workload execs.
const ShPath = "/bin/sh"
