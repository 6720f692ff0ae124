//go:build linux && amd64

package tracer

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/internal/signal"
)

// progRuns sums the kernel's run count and run time of the syscall enter
// and exit programs (zero unless SLUICE_BPF_STATS enabled the accounting).
func progRuns(tr *Tracer) (n [2]ebpf.ProgramStats) {
	for name, p := range tr.coll.Programs {
		i := -1
		switch {
		case name == "sys_enter" || strings.HasPrefix(name, "call_enter"):
			i = 0
		case name == "sys_exit" || strings.HasPrefix(name, "call_exit"):
			i = 1
		}
		if s, err := p.Stats(); i >= 0 && err == nil {
			n[i].RunCount += s.RunCount
			n[i].Runtime += s.Runtime
		}
	}
	return n
}

func reportProgRuns(b *testing.B, before, after [2]ebpf.ProgramStats) {
	for i, unit := range []string{"enter-ns/run", "exit-ns/run"} {
		if runs := after[i].RunCount - before[i].RunCount; runs > 0 {
			b.ReportMetric(float64(after[i].Runtime-before[i].Runtime)/float64(runs), unit)
		}
	}
}

const rusageThread = 1 // RUSAGE_THREAD

// BenchmarkTracedReads measures what tracing costs a workload of 4 KiB
// preads from the page cache: untraced, traced with no filter, and traced
// with a pid filter that excludes the workload. Run as root, one core for
// the workload (the consumer gets the other):
//
//	go test ./internal/tracer -run '^$' -bench TracedReads -benchtime 2000000x
func BenchmarkTracedReads(b *testing.B) {
	if err := Check().Err(); err != nil {
		b.Skip(err)
	}
	path := filepath.Join(b.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Close(fd)
	buf := make([]byte, 4096)
	// The machine is shared, so wall time is noisy; the CPU time of the
	// reading thread (user + system, which includes the BPF programs run
	// in its syscalls) is what tracing adds to the workload.
	loop := func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var r0, r1 syscall.Rusage
		_ = syscall.Getrusage(rusageThread, &r0)
		b.ResetTimer()
		for i := range b.N {
			if _, err := syscall.Pread(fd, buf, int64(i%256)*4096); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		_ = syscall.Getrusage(rusageThread, &r1)
		cpu := (r1.Utime.Nano() + r1.Stime.Nano()) - (r0.Utime.Nano() + r0.Stime.Nano())
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/read")
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
	}
	traced := func(b *testing.B, opts Options) {
		tr, err := Open(opts)
		if err != nil {
			b.Fatal(err)
		}
		defer tr.Close()
		b.Log(tr.Attachment())
		ctx, cancel := context.WithCancel(context.Background())
		var rows int64
		done := make(chan error, 1)
		go func() {
			done <- tr.Run(ctx, func(bt *signal.IOEvents) error { rows += int64(bt.Len()); return nil })
		}()
		before := progRuns(tr)
		loop(b)
		reportProgRuns(b, before, progRuns(tr))
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(tr.Lost()), "lost")
		b.ReportMetric(float64(rows), "rows")
	}
	if os.Getenv("SLUICE_BPF_STATS") != "" {
		// The kernel's own accounting of each program's run time; it
		// costs two clock reads per run, so CPU per read grows with it.
		st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
	}
	b.Run("untraced", loop)
	// The kernel's share alone: nothing reads the ring while the loop runs.
	b.Run("traced-kernel-only", func(b *testing.B) {
		tr, err := Open(Options{TraceSelf: true, PID: uint32(os.Getpid()), RingBytes: 1 << 28})
		if err != nil {
			b.Fatal(err)
		}
		defer tr.Close()
		loop(b)
		b.ReportMetric(float64(tr.Lost()), "lost")
	})
	b.Run("traced", func(b *testing.B) { traced(b, Options{TraceSelf: true}) })
	b.Run("pid-excluded", func(b *testing.B) { traced(b, Options{PID: 1}) })
	// The pairing before task storage, where the kernel has no trampolines.
	b.Run("traced-hash", func(b *testing.B) { traced(b, Options{TraceSelf: true, Attach: AttachTracepoint, hashPairing: true}) })
	b.Run("pid-excluded-hash", func(b *testing.B) { traced(b, Options{PID: 1, Attach: AttachTracepoint, hashPairing: true}) })
}
