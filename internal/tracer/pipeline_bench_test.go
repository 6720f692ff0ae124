//go:build linux

package tracer

import (
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/signal"
)

// syntheticStream builds n raw ring buffer records the way the kernel
// sends them: 16 processes, each opening files from a set of 64, then
// reads, writes, lseeks, fsyncs and a close on each, with some failing
// stats; like ior's benchmark mix. With sockets, every second fd is a
// connection accept4 made instead (a new socket inode each time, so a new
// name) and every fourth a pipe.
func syntheticStream(n int, sockets bool) [][]byte {
	recs := make([][]byte, 0, n)
	ts := int64(1_700_000_000_000_000_000)
	for i := 0; len(recs) < n; i++ {
		pid := uint32(1000 + i%16)
		comm := []byte(fmt.Sprintf("worker-%d", i%16))
		path := []byte(fmt.Sprintf("/var/lib/app/data/shard-%02d/segment-%04d.log", i%8, i%64))
		fd := int32(3 + i%5)
		add := func(sc Syscall, ret int64, p []byte) {
			ts += 1500
			recs = append(recs, appendRecord(nil, &rawRecord{
				ts: ts, duration: 800 + int64(len(recs)%977), gap: 300, ret: ret, pid: pid, tid: pid + 1,
				fd: fd, fd2: -1, sc: uint16(sc), comm: comm, path: p, cgroup: 42,
			}))
		}
		switch {
		case sockets && i%4 == 1:
			recs = append(recs, appendRecord(nil, &rawRecord{ts: ts, duration: 2000, ret: int64(fd), pid: pid, tid: pid + 1, fd: 2, fd2: -1, sc: uint16(SysAccept4), comm: comm, ino: uint32(100000 + i)}))
		case sockets && i%4 == 3:
			recs = append(recs, appendRecord(nil, &rawRecord{ts: ts, duration: 2000, pid: pid, tid: pid + 1, fd: fd, fd2: 9, sc: uint16(SysPipe2), comm: comm, ino: uint32(100000 + i), ino2: uint32(100000 + i)}))
		default:
			recs = append(recs, appendRecord(nil, &rawRecord{ts: ts, duration: 2000, ret: int64(fd), pid: pid, tid: pid + 1, fd: atFDCWD, fd2: -1, sc: uint16(SysOpenat), comm: comm, path: path}))
		}
		for j := range 12 {
			add(SysRead, 4096, nil)
			add(SysWrite, 512, nil)
			if j%4 == 0 {
				add(SysLseek, 0, nil)
			}
		}
		add(SysFsync, 0, nil)
		add(SysNewfstatat, -2, []byte("/etc/missing.conf"))
		add(SysClose, 0, nil)
	}
	return recs[:n]
}

// cpuNanos is the CPU time (user + system) of this process: on a shared
// machine it is steadier than wall time, which counts time other
// processes held the core.
func cpuNanos() int64 {
	var r syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return r.Utime.Nano() + r.Stime.Nano()
}

// BenchmarkPipelineParquet measures the user-space path as ior's headless
// Parquet benchmark does: raw ring buffer records -> pairs (paired in the
// kernel here, so records are pairs) -> fd/path and comm resolution ->
// Parquet (zstd, the lake's options), on one core.
func BenchmarkPipelineParquet(b *testing.B) {
	b.Run("files", func(b *testing.B) { benchPipelineParquet(b, false) })
	b.Run("sockets", func(b *testing.B) { benchPipelineParquet(b, true) })
}

func benchPipelineParquet(b *testing.B, sockets bool) {
	const pairs = 1 << 16
	recs := syntheticStream(pairs, sockets)
	var bytesIn int64
	for _, r := range recs {
		bytesIn += int64(len(r))
	}
	d := NewDecoder(DecoderOptions{ProcRoot: "/nonexistent"})
	batch := new(signal.IOEvents)
	b.ReportAllocs()
	b.SetBytes(bytesIn)
	b.ResetTimer()
	cpu0 := cpuNanos()
	for range b.N {
		f := lake.NewIOFile(io.Discard, "bench-host")
		for _, r := range recs {
			d.Decode(r, batch)
			if batch.Len() == DefaultBatchRows {
				if err := f.Write(batch); err != nil {
					b.Fatal(err)
				}
				batch.Reset()
			}
		}
		if err := f.Write(batch); err != nil {
			b.Fatal(err)
		}
		batch.Reset()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(pairs)*float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	b.ReportMetric(float64(pairs)*float64(b.N)/(float64(cpuNanos()-cpu0)/1e9), "pairs/cpu-s")
}

// BenchmarkDecode is the decode and resolution step alone.
func BenchmarkDecode(b *testing.B) {
	recs := syntheticStream(1<<16, false)
	d := NewDecoder(DecoderOptions{ProcRoot: "/nonexistent"})
	batch := new(signal.IOEvents)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuNanos()
	for range b.N {
		for _, r := range recs {
			d.Decode(r, batch)
			if batch.Len() == DefaultBatchRows {
				batch.Reset()
			}
		}
	}
	b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	b.ReportMetric(float64(len(recs))*float64(b.N)/(float64(cpuNanos()-cpu0)/1e9), "pairs/cpu-s")
}
