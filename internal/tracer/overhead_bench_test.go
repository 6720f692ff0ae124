//go:build linux && amd64

package tracer

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

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
		ctx, cancel := context.WithCancel(context.Background())
		var rows int64
		done := make(chan error, 1)
		go func() {
			done <- tr.Run(ctx, func(bt *signal.IOEvents) error { rows += int64(bt.Len()); return nil })
		}()
		loop(b)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(tr.Lost()), "lost")
		b.ReportMetric(float64(rows), "rows")
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
}
