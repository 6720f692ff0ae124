package queue

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAppend measures acknowledged (fsynced) append throughput with
// group commit. MB/s is of payload; appends/fsync shows how well concurrent
// appenders share fsyncs.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		for _, writers := range []int{1, 16} {
			b.Run(fmt.Sprintf("rec=%dKiB/writers=%d", size>>10, writers), func(b *testing.B) {
				benchmarkAppend(b, size, writers, 1)
			})
		}
	}
	// A receiver that appends a whole request's records in one call.
	b.Run("rec=4KiB/writers=1/batch=16", func(b *testing.B) { benchmarkAppend(b, 4<<10, 1, 16) })
	// The relay's small requests: 100 samples (about 3 KiB snappy) from 4
	// senders.
	b.Run("rec=3KiB/writers=4", func(b *testing.B) { benchmarkAppend(b, 3<<10, 4, 1) })
}

func benchmarkAppend(b *testing.B, size, writers, batch int) {
	q := mustOpen(b, Options{Dir: b.TempDir(), SegmentBytes: 64 << 20, MaxBytes: 2 << 30, Full: DropOldest})
	defer q.Close()
	recs := make([][]byte, batch)
	for i := range recs {
		recs[i] = payload(1, i, size)
	}
	start := q.Stats()
	b.SetBytes(int64(size * batch))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := q.Append(recs...); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	// CPU time of the process per append: fsync's work in the kernel is
	// most of it, and on a shared machine wall time says little.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/append")
	st := q.Stats()
	b.ReportMetric(float64(st.Appends-start.Appends)/float64(max(st.Fsyncs-start.Fsyncs, 1)), "appends/fsync")
}

// BenchmarkReaderNext measures sequential reads of durable 4 KiB records.
func BenchmarkReaderNext(b *testing.B) {
	q := mustOpen(b, Options{Dir: b.TempDir(), SegmentBytes: 64 << 20, MaxBytes: 1 << 30})
	defer q.Close()
	const size, n = 4 << 10, 16 << 10 // 64 MiB
	batch := make([][]byte, 256)
	for i := range batch {
		batch[i] = payload(2, i, size)
	}
	for i := 0; i < n; i += len(batch) {
		if _, err := q.Append(batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(size)
	b.ReportAllocs()
	r := q.NewReader(0)
	defer r.Close()
	ctx := context.Background()
	read := 0
	for b.Loop() {
		if read == n {
			r.Close()
			r = q.NewReader(0)
			read = 0
		}
		if _, _, err := r.Next(ctx); err != nil {
			b.Fatal(err)
		}
		read++
	}
}

// BenchmarkRecover1GiB measures Open on a 1 GiB queue whose last segment is
// nearly full, the worst case: only that segment is scanned. Building the
// queue writes 1 GiB, so it runs only with SLUICE_QUEUE_BENCH_1GIB=1.
func BenchmarkRecover1GiB(b *testing.B) {
	if testing.Short() || os.Getenv("SLUICE_QUEUE_BENCH_1GIB") == "" {
		b.Skip("set SLUICE_QUEUE_BENCH_1GIB=1 (writes 1 GiB to a temp dir)")
	}
	opts := Options{Dir: b.TempDir(), SegmentBytes: 64 << 20, MaxBytes: 2 << 30, Logger: discardLogger()}
	q := mustOpen(b, opts)
	batch := make([][]byte, 16)
	for i := range batch {
		batch[i] = payload(3, i, 64<<10)
	}
	t0 := time.Now()
	for {
		st := q.Stats()
		q.mu.Lock()
		lastFull := q.activeSeg().size > q.segData-int64(len(batch))*(64<<10+recordHeaderSize)
		q.mu.Unlock()
		if st.Bytes >= 1<<30 && lastFull {
			break
		}
		if _, err := q.Append(batch...); err != nil {
			b.Fatal(err)
		}
	}
	st := q.Stats()
	q.Close()
	b.Logf("built %d MiB in %d segments, %d records in %v", st.Bytes>>20, st.Segments, st.Records, time.Since(t0))

	for b.Loop() {
		q, err := Open(opts)
		if err != nil {
			b.Fatal(err)
		}
		if got := q.Stats(); got.Records != st.Records || got.Last != st.Last {
			b.Fatalf("recovered %+v, want %+v", got, st)
		}
		q.Close()
	}

	// Also report a full replay of the recovered queue, which is what a
	// lake writer does after a crash with nothing committed.
	q = mustOpen(b, opts)
	defer q.Close()
	t0 = time.Now()
	r := q.NewReader(0)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		if _, _, err := r.Next(done); err != nil {
			break
		}
	}
	r.Close()
	el := time.Since(t0)
	if r.Position() != st.Last {
		b.Fatalf("replay stopped at %d, want %d", r.Position(), st.Last)
	}
	b.ReportMetric(float64(st.Bytes)/el.Seconds()/(1<<20), "replay-MB/s")
}
