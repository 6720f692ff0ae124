//go:build linux && amd64

package tracer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"

	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/tracer/tracertest"
	"github.com/sluice-dev/sluice/internal/waittest"
)

func TestMain(m *testing.M) {
	tracertest.MaybeRunChild()
	os.Exit(m.Run())
}

// collect runs t until stop returns, then returns a copy of all rows.
func collect(tb testing.TB, tr *Tracer, stop func()) *signal.IOEvents {
	tb.Helper()
	all := new(signal.IOEvents)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- tr.Run(ctx, func(b *signal.IOEvents) error {
			all.AppendRows(b, 0, b.Len())
			return nil
		})
	}()
	stop()
	cancel()
	if err := waittest.Recv(tb, done, "the tracer's Run to end once cancelled"); err != nil {
		tb.Fatal(err)
	}
	return all
}

// TestTraceKnownWorkload traces a child doing known calls with a pid filter
// and checks that exactly those calls arrive, with their paths and bytes,
// while this process's own file I/O is excluded.
//
// It runs once per way of pairing enter and exit this kernel supports: the
// default (fentry or raw tracepoints, both with task storage) and the
// fallback's thread-id hash.
func TestTraceKnownWorkload(t *testing.T) {
	tracertest.RequireTracing(t, Check().Err())
	t.Run("default", func(t *testing.T) { testKnownWorkload(t, Options{}) })
	t.Run("tracepoint-hash", func(t *testing.T) { testKnownWorkload(t, Options{Attach: AttachTracepoint, hashPairing: true}) })
}

func testKnownWorkload(t *testing.T, opts Options) {
	dir := t.TempDir()
	child := tracertest.Start(t, dir, "")
	opts.PID, opts.FlushEvery = uint32(child.PID), 20*time.Millisecond
	tr, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	t.Log(tr.Attachment())
	rows := collect(t, tr, func() {
		// Our own I/O in the same directory, during tracing: the pid
		// filter must keep it out.
		for i := range 20 {
			if err := os.WriteFile(filepath.Join(dir, "parent.dat"), make([]byte, 10+i), 0o644); err != nil {
				t.Error(err)
			}
		}
		child.Go(t)
	})
	want := tracertest.Expected(dir)
	if rows.Len() != len(want) {
		for i := range rows.Len() {
			t.Logf("got %s %q %q ret=%d bytes=%d", SyscallName(rows.Syscall[i]), rows.String(rows.Path[i]), rows.String(rows.OldPath[i]), rows.Ret[i], rows.Bytes[i])
		}
		t.Fatalf("got %d rows, want %d; stats %+v", rows.Len(), len(want), tr.DecoderStats())
	}
	for i, w := range want {
		got := tracertest.Row{
			Syscall: SyscallName(rows.Syscall[i]), Path: rows.String(rows.Path[i]),
			OldPath: rows.String(rows.OldPath[i]), Bytes: rows.Bytes[i], Ret: rows.Ret[i],
		}
		if w.Ret == -1 && got.Ret >= 0 {
			got.Ret = -1
		}
		if got != w {
			t.Errorf("row %d: got %+v, want %+v", i, got, w)
		}
		if rows.PID[i] != uint32(child.PID) || rows.TID[i] != uint32(child.TID) {
			t.Errorf("row %d: pid/tid %d/%d, want %d/%d", i, rows.PID[i], rows.TID[i], child.PID, child.TID)
		}
		if c := rows.String(rows.Comm[i]); !strings.HasPrefix(filepath.Base(os.Args[0]), c) {
			t.Errorf("row %d: comm %q, want a prefix of %q", i, c, filepath.Base(os.Args[0]))
		}
		if rows.Duration[i] <= 0 || rows.Time[i] < time.Now().Add(-time.Minute).UnixNano() || rows.Time[i] > time.Now().UnixNano() {
			t.Errorf("row %d: duration %d, time %s", i, rows.Duration[i], time.Unix(0, rows.Time[i]))
		}
		if i > 0 && (rows.Gap[i] <= 0 || rows.Time[i] < rows.Time[i-1]) {
			t.Errorf("row %d: gap %d, time before the previous row's", i, rows.Gap[i])
		}
	}
	if n := rows.Errno[len(want)-1]; n != 2 {
		t.Errorf("failed open: errno %d, want ENOENT", n)
	}
	st := tr.DecoderStats()
	t.Logf("stats %+v", st)
	if st.ProcLookups != 0 || st.Preloaded < 1 {
		t.Errorf("%d lazy /proc lookups, %d preloaded fds: want 0 and at least pre.dat's", st.ProcLookups, st.Preloaded)
	}
	if st.Exits != 1 {
		t.Errorf("%d process exits, want 1", st.Exits)
	}
	if tr.Lost() != 0 {
		t.Errorf("lost %d records", tr.Lost())
	}
}

// TestTraceOverloadCountsLost fills a one-page ring buffer that nobody
// reads: the kernel must count what it dropped.
func TestTraceOverloadCountsLost(t *testing.T) {
	tracertest.RequireTracing(t, Check().Err())
	dir := t.TempDir()
	child := tracertest.Start(t, dir, "flood")
	tr, err := Open(Options{PID: uint32(child.PID), RingBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	child.Go(t) // nobody reads while the child floods
	lost := tr.Lost()
	rows := collect(t, tr, func() {})
	if lost == 0 {
		t.Fatal("no lost records reported for a flood into a 4 KiB ring")
	}
	// Every stat is either a row or counted lost; the few other records
	// (the exit, calls of the Go runtime) may be lost too.
	stats := 0
	for i := range rows.Len() {
		if Syscall(rows.Syscall[i]) == SysNewfstatat {
			stats++
		}
	}
	if got := uint64(stats) + lost; got < tracertest.FloodCalls || uint64(rows.Len())+lost > tracertest.FloodCalls+16 {
		t.Errorf("stat rows %d, all rows %d, lost %d: want stat rows + lost >= %d and not many more records", stats, rows.Len(), lost, tracertest.FloodCalls)
	}
	t.Logf("flood of %d stats: %d rows, %d lost", tracertest.FloodCalls, rows.Len(), lost)
}

// TestTraceKernelFilters runs the workload under the comm, syscall-set and
// minimum-duration filters.
func TestTraceKernelFilters(t *testing.T) {
	tracertest.RequireTracing(t, Check().Err())
	comm := filepath.Base(os.Args[0])
	if len(comm) > 15 {
		comm = comm[:15]
	}
	writes, err := ParseSyscalls("write")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		opts     Options
		want     func(tracertest.Row) bool
		filtered bool // bookkeeping calls crossed the ring and were dropped
	}{
		{"comm+syscalls", Options{Comm: comm, Syscalls: writes}, func(r tracertest.Row) bool { return r.Syscall == "write" }, true},
		{"min-duration", Options{Comm: comm, MinDuration: time.Hour}, func(tracertest.Row) bool { return false }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			child := tracertest.Start(t, dir, "")
			c.opts.FlushEvery = 20 * time.Millisecond
			tr, err := Open(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			rows := collect(t, tr, func() { child.Go(t) })
			var want []tracertest.Row
			for _, r := range tracertest.Expected(dir) {
				if c.want(r) {
					want = append(want, r)
				}
			}
			got := 0
			for i := range rows.Len() {
				if c := rows.String(rows.Comm[i]); c != comm {
					t.Fatalf("row of comm %q passed the comm filter %q", c, comm)
				}
				if rows.PID[i] != uint32(child.PID) {
					continue // another process with the same comm
				}
				if got >= len(want) || SyscallName(rows.Syscall[i]) != want[got].Syscall || rows.String(rows.Path[i]) != want[got].Path {
					t.Fatalf("row %d: %s %q, want %+v", got, SyscallName(rows.Syscall[i]), rows.String(rows.Path[i]), want)
				}
				got++
			}
			if got != len(want) {
				t.Fatalf("%d rows, want %d", got, len(want))
			}
			if st := tr.DecoderStats(); c.filtered && st.Filtered == 0 {
				t.Errorf("no bookkeeping calls filtered in user space: %+v", st)
			}
		})
	}
}

// TestAttachModes checks that the default mode is fentry exactly where the
// kernel can attach it (as --check probes it), that the fallback says why,
// and that forcing fentry where it cannot work fails with a clear error.
func TestAttachModes(t *testing.T) {
	tracertest.RequireTracing(t, Check().Err())
	probeErr := probeAttach()
	var item CheckItem
	for _, it := range Check().Items {
		if it.Name == "attach" {
			item = it
		}
	}
	if item.OK != (probeErr == nil) || item.Detail == "" {
		t.Errorf("--check's attach item %+v disagrees with the probe (%v)", item, probeErr)
	}
	tr, err := Open(Options{PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	mode, reason, what := tr.Mode(), tr.FallbackReason(), tr.Attachment()
	tr.Close()
	t.Logf("default: %s (%v)", what, reason)
	if probeErr == nil && (mode != AttachFentry || reason != nil) {
		t.Errorf("fentry works here, but the default attached %s (%v)", what, reason)
	}
	if probeErr != nil && (mode != AttachTracepoint || reason == nil || !strings.Contains(what, "task storage")) {
		t.Errorf("fentry does not work here (%v), but the default attached %s with fallback reason %v", probeErr, what, reason)
	}
	tr, err = Open(Options{PID: 1, Attach: AttachFentry})
	if probeErr != nil {
		if err == nil {
			tr.Close()
			t.Fatal("forced fentry mode opened where the probe fails")
		}
		if !strings.Contains(err.Error(), "fentry") && !strings.Contains(err.Error(), "__x64_sys_") {
			t.Errorf("forced fentry error does not name fentry: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
}

// TestTraceEverySyscall runs a child that makes every syscall the tracer
// decodes (failing calls among them, relative paths through dirfds opened
// before tracing, dup2 onto an open fd, close_range, a path longer than
// the kernel reads of one argument) and checks each row against what the
// child passed and the kernel returned: fd, path, old path, return value,
// errno, bytes and flags.
func TestTraceEverySyscall(t *testing.T) {
	tracertest.RequireTracing(t, Check().Err())
	// Each attach mode on the same workload, row for row: fentry where the
	// kernel allows it (these machines refuse BPF trampolines: see
	// docs/trace.md), raw tracepoints with task storage, and with the hash.
	t.Run("fentry", func(t *testing.T) {
		if err := probeAttach(); err != nil {
			t.Skipf("fentry mode cannot run on this kernel: %v", err)
		}
		testEverySyscall(t, Options{Attach: AttachFentry})
	})
	t.Run("tracepoint", func(t *testing.T) { testEverySyscall(t, Options{Attach: AttachTracepoint}) })
	t.Run("tracepoint-hash", func(t *testing.T) { testEverySyscall(t, Options{Attach: AttachTracepoint, hashPairing: true}) })
}

// traceChild starts the child workload mode in a new directory, traces
// it with the options the function gives for it, and returns the
// directory, the child, the tracer (closed at the test's end) and the rows.
func traceChild(t *testing.T, mode string, options func(*tracertest.Child) Options) (string, *tracertest.Child, *Tracer, *signal.IOEvents) {
	t.Helper()
	dir := t.TempDir()
	child := tracertest.Start(t, dir, mode)
	opts := options(child)
	opts.FlushEvery = 20 * time.Millisecond
	tr, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return dir, child, tr, collect(t, tr, func() { child.Go(t) })
}

func testEverySyscall(t *testing.T, opts Options) {
	dir, _, tr, rows := traceChild(t, "syscalls", func(c *tracertest.Child) Options { opts.PID = uint32(c.PID); return opts })
	want := tracertest.Calls(t, dir)
	got := make([]tracertest.Call, rows.Len())
	for i := range got {
		got[i] = tracertest.Call{
			Syscall: SyscallName(rows.Syscall[i]), FD: rows.FD[i], Path: rows.String(rows.Path[i]), OldPath: rows.String(rows.OldPath[i]),
			Ret: rows.Ret[i], Errno: rows.Errno[i], Bytes: rows.Bytes[i], Flags: rows.Flags[i],
		}
	}
	bad := len(got) != len(want)
	for i := range max(len(got), len(want)) {
		var g, w tracertest.Call
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			bad = true
			t.Errorf("row %d:\n got %s\nwant %s", i, g, w)
		}
		if i < len(got) && g.Syscall != w.Syscall {
			break // out of step: the rest would only repeat it
		}
	}
	if bad {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	seen := map[string]bool{}
	for _, w := range want {
		seen[w.Syscall] = true
	}
	for s := Syscall(1); s < NumSyscalls; s++ {
		if !seen[s.String()] {
			t.Errorf("the workload does not call %s", s)
		}
	}
	if tr.Lost() != 0 {
		t.Errorf("lost %d records", tr.Lost())
	}
}

// inCgroup moves pid into a new cgroup v2 and returns its id (the
// directory's inode), removing the cgroup at the end of the test.
// cgroupSeq numbers the test cgroups: one per call, as a cgroup of an
// earlier run may still be there (its removal waits for its processes).
var cgroupSeq atomic.Int64

func inCgroup(t *testing.T, pid int) uint64 {
	t.Helper()
	dir := filepath.Join(Cgroup2Root(), fmt.Sprintf("sluice-tracer-test-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		corpustest.Missing(t, "a writable cgroup v2 ("+err.Error()+")")
	}
	t.Cleanup(func() { _ = os.Remove(dir) }) // after the workload's processes exited
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		corpustest.Missing(t, "a writable cgroup v2 ("+err.Error()+")")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestTraceFDTableInheritance checks fd -> path where the fd table is
// shared or inherited, traced by a cgroup filter (which takes the
// workload's descendants too): a thread writes to an fd another thread
// opened; an exec keeps the fd opened without CLOEXEC and closes the one
// with it, so the shell's write finds x.dat and its use of y.dat's fd
// fails with no path; a subshell (a fork) writes through the inherited
// fd. With a path glob on top, only the calls on x.dat and y.dat remain.
func TestTraceFDTableInheritance(t *testing.T) {
	tracertest.RequireTracing(t, Check().Err())
	if _, err := os.Stat(tracertest.ShPath); err != nil {
		corpustest.Missing(t, tracertest.ShPath)
	}
	t.Run("cgroup", func(t *testing.T) { testFDTableInheritance(t, false) })
	t.Run("cgroup+glob", func(t *testing.T) { testFDTableInheritance(t, true) })
	t.Run("tid", testFDTableTID)
	t.Run("tid-hash", testFDTableTID)
	t.Run("comm", testFDTableTID)
	t.Run("comm-hash", testFDTableTID)
}

// testFDTableTID traces only the workload's second thread, by its tid or
// by its name (comm; the main thread has another), which writes to an fd
// the main thread opened (and closes right after, so that its number is
// reused): the write's row must have the file's path, which only the main
// thread's open can give.
func testFDTableTID(t *testing.T) {
	dir, child, tr, rows := traceChild(t, "fdtable", func(c *tracertest.Child) Options {
		opts := Options{TID: uint32(c.TID2)}
		if strings.Contains(t.Name(), "/comm") {
			opts = Options{Comm: tracertest.Thread2Comm}
		}
		if strings.HasSuffix(t.Name(), "-hash") {
			opts.Attach, opts.hashPairing = AttachTracepoint, true
		}
		return opts
	})
	if rows.Len() != 1 {
		for i := range rows.Len() {
			t.Logf("row %d: tid %d %s %q", i, rows.TID[i], SyscallName(rows.Syscall[i]), rows.String(rows.Path[i]))
		}
		t.Fatalf("%d rows, want the second thread's one write", rows.Len())
	}
	if got, want := rows.String(rows.Path[0]), filepath.Join(dir, "t.dat"); rows.TID[0] != uint32(child.TID2) || got != want || rows.Bytes[0] != tracertest.TBytes {
		t.Errorf("tid %d wrote %d bytes to %q, want tid %d, %d bytes to %q", rows.TID[0], rows.Bytes[0], got, child.TID2, tracertest.TBytes, want)
	}
	if st := tr.DecoderStats(); st.Filtered == 0 {
		t.Errorf("stats %+v: want the other threads' fd calls filtered after use", st)
	}
}

func testFDTableInheritance(t *testing.T, glob bool) {
	var (
		opts  Options
		dir   string
		child *tracertest.Child
		rows  *signal.IOEvents
	)
	// The shell and its subshell are the workload's, not the tracer's: a
	// run in which they did not write their lines (seen once in a loaded
	// make test, x.dat holding the shell's line only) says nothing of the
	// tracer, and is run again, at most twice, saying what the shell said.
	for attempt := 1; ; attempt++ {
		dir, child, _, rows = traceChild(t, "fdtable", func(c *tracertest.Child) Options {
			opts.Cgroup = inCgroup(t, c.PID)
			if glob {
				opts.PathGlob = c.Dir + "/[xy].dat"
			}
			return opts
		})
		b, err := os.ReadFile(filepath.Join(dir, "x.dat"))
		if (err == nil && string(b) == "a\nc\n") || attempt == 3 {
			break
		}
		t.Logf("attempt %d: the workload's shell did not write its and its subshell's lines (x.dat %q, %v; the workload's stderr: %q); again", attempt, b, err, child.Stderr())
	}
	p := func(n string) string { return filepath.Join(dir, n) }

	var xfd, yfd int32 = -1, -1
	shWrites := map[uint32]int{} // x.dat writes of 2 bytes by pid, other than the workload
	var threadWrite, badY, yRows bool
	pids := map[uint32]bool{}
	for i := range rows.Len() {
		sc, path, pid := SyscallName(rows.Syscall[i]), rows.String(rows.Path[i]), rows.PID[i]
		pids[pid] = true
		if rows.Cgroup[i] != opts.Cgroup {
			t.Errorf("row %d: cgroup %d passed the filter %d", i, rows.Cgroup[i], opts.Cgroup)
		}
		if glob && path != p("x.dat") && path != p("y.dat") && rows.String(rows.OldPath[i]) == "" {
			t.Errorf("row %d: %s %q passed the glob %s", i, sc, path, opts.PathGlob)
		}
		switch {
		case pid == uint32(child.PID) && sc == "openat" && path == p("x.dat"):
			xfd = int32(rows.Ret[i])
		case pid == uint32(child.PID) && sc == "openat" && path == p("y.dat"):
			yfd = int32(rows.Ret[i])
		case sc == "write" && path == p("t.dat"):
			threadWrite = rows.TID[i] == uint32(child.TID2) && rows.Bytes[i] == tracertest.TBytes
		case sc == "write" && path == p("x.dat") && pid != uint32(child.PID) && rows.Bytes[i] == 2:
			shWrites[pid]++
		case pid != uint32(child.PID) && path == p("y.dat"):
			yRows = true
			t.Errorf("row %d: %s by pid %d on y.dat, whose fd the exec closed", i, sc, pid)
		case pid == uint32(child.PID) && rows.FD[i] == yfd && rows.Errno[i] == int32(syscall.EBADF):
		case pid != uint32(child.PID) && rows.FD[i] == yfd && rows.Errno[i] == int32(syscall.EBADF) && path == "":
			badY = true
		}
	}
	if xfd < 0 || yfd < 0 {
		t.Fatalf("no opens of x.dat and y.dat (fds %d, %d) in %d rows", xfd, yfd, rows.Len())
	}
	if !glob && !threadWrite {
		t.Errorf("no write of %d bytes to t.dat by the second thread %d", tracertest.TBytes, child.TID2)
	}
	if len(shWrites) != 2 {
		t.Errorf("x.dat writes by the shell and its subshell: %v, want one each from two processes", shWrites)
	}
	if !glob && (!badY || yRows) {
		t.Errorf("the shell's use of y.dat's fd %d: failed with EBADF and no path: %v; rows on y.dat: %v", yfd, badY, yRows)
	}
	if b, err := os.ReadFile(p("x.dat")); err != nil || string(b) != "a\nc\n" {
		t.Errorf("x.dat holds %q (%v), want the shell's and the subshell's lines (the workload's stderr: %q)", b, err, child.Stderr())
	}
	if len(pids) < 3 {
		t.Errorf("rows of %d processes, want the workload, the shell and its subshell", len(pids))
	}
}

// TestThreadGone: a --tid trace's end is read from /proc. A thread that
// runs is not gone; once it has ended (a goroutine locked to its thread
// returns, and the runtime ends that thread) it is, while its process
// goes on; a tid that never existed is gone.
func TestThreadGone(t *testing.T) {
	tids := make(chan int)
	ends := make(chan struct{})
	var tid uint32
	// A goroutine locked to a thread ends that thread when it returns,
	// unless the thread is the process's main thread (the runtime keeps
	// that one): while a goroutine holds the main thread, the next one
	// gets another.
	for tid == 0 {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			tids <- syscall.Gettid()
			<-ends
		}()
		if got := <-tids; got != os.Getpid() {
			tid = uint32(got)
		}
	}
	if threadGone("/proc", tid) {
		t.Fatalf("thread %d reported gone while it runs", tid)
	}
	close(ends)
	deadline := time.Now().Add(10 * time.Second)
	for !threadGone("/proc", tid) {
		if time.Now().After(deadline) {
			t.Fatalf("thread %d still not gone 10 s after it ended", tid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if threadGone("/proc", uint32(syscall.Gettid())) {
		t.Fatal("the test's own thread reported gone")
	}
	if !threadGone("/proc", 1<<22+1) { // above pid_max's largest value
		t.Fatal("a tid that never existed is not gone")
	}
}
