package tracer

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

func wireSample() *signal.IOEvents {
	b := new(signal.IOEvents)
	for i := range 5 {
		e := signal.IOEvent{
			Time: int64(1e18) + int64(i), Duration: int64(100 * i), Gap: -1, PID: 7, TID: uint32(8 + i),
			Syscall: uint16(SysPread64), FD: int32(i - 1), Ret: int64(4096 - i), Errno: int32(i), Bytes: int64(4096 * i),
			Flags: 1 << 63, Cgroup: uint64(i) << 40,
			Comm: b.AppendString("worker"), Path: b.AppendString("/data/f" + string(rune('a'+i))),
		}
		if i == 3 {
			e.OldPath = b.AppendString("/data/old")
		}
		b.Append(&e)
	}
	return b
}

// TestWireRoundTrip checks that a batch comes back row for row, appended
// after rows already in the target.
func TestWireRoundTrip(t *testing.T) {
	src := wireSample()
	body := AppendWire(nil, src)
	got := new(signal.IOEvents)
	got.AppendRows(src, 0, 2)
	if err := DecodeWire(got, body); err != nil {
		t.Fatal(err)
	}
	want := new(signal.IOEvents)
	want.AppendRows(src, 0, 2)
	want.AppendRows(src, 0, src.Len())
	if got.Len() != want.Len() {
		t.Fatalf("%d rows, want %d", got.Len(), want.Len())
	}
	for i := range got.Len() {
		g := []any{got.Time[i], got.Duration[i], got.Gap[i], got.PID[i], got.TID[i], got.Syscall[i], got.FD[i], got.Ret[i], got.Errno[i], got.Bytes[i], got.Flags[i], got.Cgroup[i],
			got.String(got.Comm[i]), got.String(got.Path[i]), got.String(got.OldPath[i]), got.OldPath[i] == 0}
		w := []any{want.Time[i], want.Duration[i], want.Gap[i], want.PID[i], want.TID[i], want.Syscall[i], want.FD[i], want.Ret[i], want.Errno[i], want.Bytes[i], want.Flags[i], want.Cgroup[i],
			want.String(want.Comm[i]), want.String(want.Path[i]), want.String(want.OldPath[i]), want.OldPath[i] == 0}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("row %d: got %v, want %v", i, g, w)
		}
	}
	if got.SyscallName(2) != "pread64" {
		t.Errorf("syscall name %q", got.SyscallName(2))
	}
	if err := DecodeWire(got, body[:len(body)-1]); err == nil {
		t.Error("a truncated body decoded")
	}
	if err := DecodeWire(got, nil); err == nil {
		t.Error("an empty body decoded")
	}
}

// FuzzDecodeWire: any body either decodes into rows whose strings lie in
// the arena, or fails and leaves the batch untouched.
func FuzzDecodeWire(f *testing.F) {
	f.Add(AppendWire(nil, wireSample()))
	f.Add(AppendWire(nil, new(signal.IOEvents)))
	f.Add([]byte{1, 1, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		b := wireSample()
		n, bufLen := b.Len(), len(b.Buf)
		if err := DecodeWire(b, body); err != nil {
			if b.Len() != n || len(b.Buf) != bufLen {
				t.Fatalf("failed decode changed the batch: %d rows, %d bytes", b.Len(), len(b.Buf))
			}
			return
		}
		for i := range b.Len() {
			_ = b.StrBytes(b.Comm[i])
			_ = b.StrBytes(b.Path[i])
			_ = b.StrBytes(b.OldPath[i])
		}
	})
}

// BenchmarkWire measures the queue body of `sluice run`'s io_events: a
// batch of 8192 calls encoded and decoded again.
func BenchmarkWire(b *testing.B) {
	src := new(signal.IOEvents)
	paths := make([]signal.Str, 64)
	for i := range paths {
		paths[i] = src.AppendString("/var/lib/data/segment-" + strconv.Itoa(i) + ".parquet")
	}
	comm := src.AppendString("postgres")
	for i := range 8192 {
		src.Append(&signal.IOEvent{Time: int64(i), Duration: 700, PID: 42, TID: 43, Comm: comm, Syscall: uint16(SysPread64),
			FD: 7, Ret: 4096, Bytes: 4096, Path: paths[i%64]})
	}
	var body []byte
	dst := new(signal.IOEvents)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		body = AppendWire(body[:0], src)
		dst.Reset()
		if err := DecodeWire(dst, body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*src.Len()), "ns/row")
	b.ReportMetric(float64(len(body))/float64(src.Len()), "bytes/row")
}
