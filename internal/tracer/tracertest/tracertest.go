// Package tracertest runs a known I/O workload in a child process, for
// tests of the tracer and of what records its events. The child is the test
// binary itself, re-executed: a test package calls MaybeRunChild from its
// TestMain.
//
// The workload makes only raw syscalls (package syscall), on one locked
// thread, so the calls the tracer must see are exactly Expected's.
package tracertest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-dev/sluice/internal/corpustest"
)

const envDir = "SLUICE_TRACERTEST_DIR"
const envMode = "SLUICE_TRACERTEST_MODE"

// Row is one expected traced call.
type Row struct {
	Syscall string
	Path    string // full path; "" none
	OldPath string
	Bytes   int64
	Ret     int64 // -1: any non-negative (an fd)
}

// PreBytes is the size of pre.dat, opened before tracing starts.
const PreBytes = 3000

// Expected lists the workload's calls in order, for dir.
func Expected(dir string) []Row {
	p := func(n string) string { return filepath.Join(dir, n) }
	return []Row{
		{"openat", p("a.dat"), "", 0, -1},
		{"write", p("a.dat"), "", 4096, 4096},
		{"write", p("a.dat"), "", 4096, 4096},
		{"write", p("a.dat"), "", 4096, 4096},
		{"fsync", p("a.dat"), "", 0, 0},
		{"close", p("a.dat"), "", 0, 0},
		{"pread64", p("pre.dat"), "", 1000, 1000},
		{"pread64", p("pre.dat"), "", 1000, 1000},
		{"pread64", p("pre.dat"), "", 1000, 1000},
		{"openat", p("b.dat"), "", 0, -1},
		{"write", p("b.dat"), "", 100, 100},
		{"close", p("b.dat"), "", 0, 0},
		{"openat", p("c.dat"), "", 0, -1}, // reuses b.dat's fd
		{"write", p("c.dat"), "", 200, 200},
		{"close", p("c.dat"), "", 0, 0},
		{"openat", p("d.dat"), "", 0, -1},
		{"dup2", p("d.dat"), "", 0, 100},
		{"write", p("d.dat"), "", 50, 50},
		{"close", p("d.dat"), "", 0, 0},
		{"write", p("d.dat"), "", 60, 60}, // through fd 100 after the original closed
		{"close", p("d.dat"), "", 0, 0},
		{"renameat", p("e.dat"), p("a.dat"), 0, 0},
		{"unlinkat", p("e.dat"), "", 0, 0},
		{"openat", p("c.dat"), "", 0, -1},
		{"read", p("c.dat"), "", 200, 200},
		{"read", p("c.dat"), "", 0, 0},
		{"close", p("c.dat"), "", 0, 0},
		{"openat", p("missing.dat"), "", 0, -int64(syscall.ENOENT)},
	}
}

// MaybeRunChild runs the workload and exits when this process is the
// child; call it first in TestMain.
func MaybeRunChild() {
	dir := os.Getenv(envDir)
	if dir == "" {
		return
	}
	runtime.LockOSThread()
	if err := child(dir, os.Getenv(envMode)); err != nil {
		fmt.Fprintln(os.Stderr, "tracertest child:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func child(dir, mode string) error {
	pre, err := syscall.Open(filepath.Join(dir, "pre.dat"), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	// Wait for the tracer's go-ahead as a signal: waiting on a channel
	// makes no traced syscall. (A blocking read of stdin did: when the Go
	// runtime's preemption signal interrupted it, the kernel restarted it
	// after tracing began, and the read showed up as a row.)
	var (
		dirfd int
		calls []byte
	)
	if mode == "syscalls" {
		if dirfd, err = syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err != nil {
			return err
		}
		if calls, err = mapCalls(dir); err != nil {
			return err
		}
	}
	var (
		tid2   int
		second func(func())
	)
	if mode == "fdtable" {
		tid2, second = startSecondThread()
	}
	goAhead := make(chan os.Signal, 1)
	signal.Notify(goAhead, syscall.SIGUSR1)
	fmt.Printf("ready %d %d %d %d\n", os.Getpid(), syscall.Gettid(), pre, tid2)
	<-goAhead
	switch mode {
	case "flood":
		return flood(dir)
	case "fdtable":
		return fdtableWorkload(dir, second)
	case "syscalls":
		made, err := syscallsWorkload(dir, pre, dirfd)
		if werr := writeCalls(calls, made); err == nil {
			err = werr
		}
		return err
	}
	return workload(dir, pre)
}

func must(n int, err error) int {
	if err != nil {
		panic(err)
	}
	return n
}

func workload(dir string, pre int) error {
	p := func(n string) string { return filepath.Join(dir, n) }
	buf := make([]byte, 4096)
	const flags = syscall.O_CREAT | syscall.O_WRONLY | syscall.O_TRUNC | syscall.O_CLOEXEC
	fd := must(syscall.Open(p("a.dat"), flags, 0o644))
	for range 3 {
		must(syscall.Write(fd, buf))
	}
	must(0, syscall.Fsync(fd))
	must(0, syscall.Close(fd))
	for i := range 3 {
		must(syscall.Pread(pre, buf[:1000], int64(i)*1000))
	}
	fd = must(syscall.Open(p("b.dat"), flags, 0o644))
	must(syscall.Write(fd, buf[:100]))
	must(0, syscall.Close(fd))
	fd2 := must(syscall.Open(p("c.dat"), flags, 0o644))
	if fd2 != fd {
		return fmt.Errorf("fd not reused: %d then %d", fd, fd2)
	}
	must(syscall.Write(fd2, buf[:200]))
	must(0, syscall.Close(fd2))
	fd = must(syscall.Open(p("d.dat"), flags, 0o644))
	must(0, syscall.Dup2(fd, 100))
	must(syscall.Write(100, buf[:50]))
	must(0, syscall.Close(fd))
	must(syscall.Write(100, buf[:60]))
	must(0, syscall.Close(100))
	must(0, syscall.Rename(p("a.dat"), p("e.dat")))
	must(0, syscall.Unlink(p("e.dat")))
	fd = must(syscall.Open(p("c.dat"), syscall.O_RDONLY|syscall.O_CLOEXEC, 0))
	must(syscall.Read(fd, buf))
	must(syscall.Read(fd, buf))
	must(0, syscall.Close(fd))
	if _, err := syscall.Open(p("missing.dat"), syscall.O_RDONLY, 0); err != syscall.ENOENT {
		return fmt.Errorf("open missing.dat: %v", err)
	}
	return nil
}

// FloodCalls is how many stat calls the flood mode makes.
const FloodCalls = 200000

func flood(dir string) error {
	var st syscall.Stat_t
	path := filepath.Join(dir, "pre.dat")
	for range FloodCalls {
		if err := syscall.Stat(path, &st); err != nil {
			return err
		}
	}
	return nil
}

// Child is a started workload process, waiting for Go.
type Child struct {
	PID, TID, PreFD int
	Dir             string // the workload's directory
	TID2            int    // the fdtable workload's second thread
	cmd             *exec.Cmd
	stderr          strings.Builder
}

// Start writes pre.dat into dir and starts the child in mode "" (the
// workload), "flood", "syscalls" (every traced syscall; Calls lists
// them after Go) or "fdtable" (threads, fork and exec; see TBytes).
func Start(tb testing.TB, dir, mode string) *Child {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(dir, "pre.dat"), make([]byte, PreBytes), 0o644); err != nil {
		tb.Fatal(err)
	}
	c := &Child{Dir: dir, cmd: exec.Command(os.Args[0], "-test.run=^$")}
	// Go's runtime re-reads the cgroup CPU limit in the background (to
	// update GOMAXPROCS) from a thread of its own: I/O the tracer would
	// see next to the workload's. updatemaxprocs=0 turns it off.
	godebug := "updatemaxprocs=0"
	if v := os.Getenv("GODEBUG"); v != "" {
		godebug = v + "," + godebug
	}
	c.cmd.Env = append(os.Environ(), envDir+"="+dir, envMode+"="+mode, "GODEBUG="+godebug)
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		tb.Fatalf("child did not get ready: %v (stderr: %s)", err, c.stderr.String())
	}
	if _, err := fmt.Sscanf(line, "ready %d %d %d %d", &c.PID, &c.TID, &c.PreFD, &c.TID2); err != nil {
		tb.Fatalf("child said %q: %v", line, err)
	}
	return c
}

// Stderr is what the child (and what it ran) wrote to stderr so far.
func (c *Child) Stderr() string { return c.stderr.String() }

// Go lets the child run its workload and waits for it to exit.
func (c *Child) Go(tb testing.TB) {
	tb.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		tb.Fatal(err)
	}
	if err := c.cmd.Wait(); err != nil {
		tb.Fatalf("child: %v (stderr: %s)", err, c.stderr.String())
	}
}

// RequireTracing skips the test (or fails it under SLUICE_REQUIRE_ALL) when
// this process cannot load eBPF programs, saying why.
func RequireTracing(tb testing.TB, checkErr error) {
	tb.Helper()
	if checkErr != nil {
		corpustest.Missing(tb, "eBPF tracing support ("+checkErr.Error()+")")
	}
}
