//go:build linux

package queue

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BenchmarkDataSync is the CPU a durable write costs the process, the
// floor under every acknowledged request of sluice's queue: a 12 KiB write
// (a group commit of four 3 KiB records, as the relay's 100-sample requests
// make) into a preallocated, written file and its sync, in the ways Linux
// offers. cpu-us/op counts user and system time of the process, the
// kernel's work for the sync included; the disk's own time is not CPU.
//
//	GOMAXPROCS=1 go test ./internal/queue -run XXX -bench DataSync -benchtime 3000x
func BenchmarkDataSync(b *testing.B) {
	const rec = 12 << 10
	path := filepath.Join(b.TempDir(), "seg")
	if err := os.WriteFile(path, make([]byte, 64<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, rec+4096)
	off := 4096 - int(uintptr(unsafe.Pointer(&buf[0]))&4095)
	data := buf[off : off+rec] // O_DIRECT wants aligned memory
	for i := range data {
		data[i] = byte(i)
	}
	for _, c := range []struct {
		name  string
		flags int
		write func(fd int, at int64) error
	}{
		{"pwrite+fdatasync", 0, func(fd int, at int64) error {
			if _, err := unix.Pwrite(fd, data, at); err != nil {
				return err
			}
			return unix.Fdatasync(fd)
		}},
		{"O_DSYNC", unix.O_DSYNC, func(fd int, at int64) error { _, err := unix.Pwrite(fd, data, at); return err }},
		{"O_DIRECT|O_DSYNC", unix.O_DIRECT | unix.O_DSYNC, func(fd int, at int64) error { _, err := unix.Pwrite(fd, data, at); return err }},
		{"pwrite only", 0, func(fd int, at int64) error { _, err := unix.Pwrite(fd, data, at); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			fd, err := unix.Open(path, unix.O_RDWR|c.flags, 0)
			if err != nil {
				b.Skipf("open with %s: %v (the file system may not take it)", c.name, err)
			}
			defer unix.Close(fd)
			b.ReportAllocs()
			cpu0 := cpuTime()
			for i := 0; b.Loop(); i++ {
				if err := c.write(fd, int64(i%(64<<20/rec))*rec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-us/op")
		})
	}
}
