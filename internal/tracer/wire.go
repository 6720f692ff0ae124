package tracer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-dev/sluice/internal/signal"
)

// The wire form of a batch of traced calls, the body of an io_events
// queue record in `sluice run` (pipeline/record.go frames it):
//
//	version uint8 = 1 | rows uvarint | len(arena) uvarint | arena
//	then per column, rows values, little-endian and fixed-width:
//	Time, Duration, Gap, Ret, Bytes int64; Flags, Cgroup uint64;
//	PID, TID uint32; FD, Errno int32; Syscall uint16;
//	Comm, Path, OldPath as Strs (uint32 offset, uint32 length) into arena.
//
// Fixed-width columns cost a copy each way and no per-row branching; the
// queue is local disk, so their size (about 110 bytes a row, the arena's
// strings interned per batch by the decoder) matters less than the CPU.
const wireVersion = 1

// ErrBadWire is returned for a body that is not a valid batch.
var ErrBadWire = errors.New("tracer: bad io_events wire batch")

const wireRowBytes = 5*8 + 2*8 + 2*4 + 2*4 + 2 + 3*8

// AppendWire appends b's wire form to dst.
func AppendWire(dst []byte, b *signal.IOEvents) []byte {
	n := b.Len()
	dst = append(dst, wireVersion)
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.AppendUvarint(dst, uint64(len(b.Buf)))
	dst = append(dst, b.Buf...)
	// One growth, then fixed-width stores: no per-value length checks.
	at := len(dst)
	dst = slices.Grow(dst, n*wireRowBytes)[:at+n*wireRowBytes]
	out := dst[at:]
	le := binary.LittleEndian
	for _, col := range [...][]int64{b.Time, b.Duration, b.Gap, b.Ret, b.Bytes} {
		for i, v := range col[:n] {
			le.PutUint64(out[8*i:], uint64(v))
		}
		out = out[8*n:]
	}
	for _, col := range [...][]uint64{b.Flags, b.Cgroup} {
		for i, v := range col[:n] {
			le.PutUint64(out[8*i:], v)
		}
		out = out[8*n:]
	}
	for _, col := range [...][]uint32{b.PID, b.TID} {
		for i, v := range col[:n] {
			le.PutUint32(out[4*i:], v)
		}
		out = out[4*n:]
	}
	for _, col := range [...][]int32{b.FD, b.Errno} {
		for i, v := range col[:n] {
			le.PutUint32(out[4*i:], uint32(v))
		}
		out = out[4*n:]
	}
	for i, v := range b.Syscall[:n] {
		le.PutUint16(out[2*i:], v)
	}
	out = out[2*n:]
	for _, col := range [...][]signal.Str{b.Comm, b.Path, b.OldPath} {
		for i, v := range col[:n] {
			le.PutUint32(out[8*i:], uint32(v.Off()))
			le.PutUint32(out[8*i+4:], uint32(v.Len()))
		}
		out = out[8*n:]
	}
	return dst
}

// DecodeWire appends the rows of a wire batch to b (normally empty) and
// names its syscalls. On error b is left as it was.
func DecodeWire(b *signal.IOEvents, body []byte) error {
	if len(body) == 0 || body[0] != wireVersion {
		return fmt.Errorf("%w: version %v (this build reads %d)", ErrBadWire, body[:min(1, len(body))], wireVersion)
	}
	p := body[1:]
	rows, k := binary.Uvarint(p)
	if k <= 0 {
		return fmt.Errorf("%w: row count", ErrBadWire)
	}
	p = p[k:]
	arena, k := binary.Uvarint(p)
	if k <= 0 || arena > uint64(len(p)-k) {
		return fmt.Errorf("%w: arena length", ErrBadWire)
	}
	p = p[k:]
	if rows > uint64(len(p)) || uint64(len(p))-arena != rows*wireRowBytes {
		return fmt.Errorf("%w: %d rows in %d bytes", ErrBadWire, rows, len(p)-int(arena))
	}
	n := int(rows)
	strs := p[:arena]
	cols := p[arena:]
	le := binary.LittleEndian
	// Check every Str before touching b, so a bad body changes nothing.
	strCols := cols[n*(wireRowBytes-24):]
	for i := 0; i < 3*n; i++ {
		off, ln := uint64(le.Uint32(strCols[8*i:])), uint64(le.Uint32(strCols[8*i+4:]))
		if off+ln > arena {
			return fmt.Errorf("%w: string %d+%d outside the %d-byte arena", ErrBadWire, off, ln, arena)
		}
	}
	base := len(b.Buf)
	b.Buf = append(b.Buf, strs...)
	take := func(size int) []byte {
		c := cols[:size*n]
		cols = cols[size*n:]
		return c
	}
	for _, col := range [...]*[]int64{&b.Time, &b.Duration, &b.Gap, &b.Ret, &b.Bytes} {
		c, dst := take(8), grow(col, n)
		for i := range dst {
			dst[i] = int64(le.Uint64(c[8*i:]))
		}
	}
	for _, col := range [...]*[]uint64{&b.Flags, &b.Cgroup} {
		c, dst := take(8), grow(col, n)
		for i := range dst {
			dst[i] = le.Uint64(c[8*i:])
		}
	}
	for _, col := range [...]*[]uint32{&b.PID, &b.TID} {
		c, dst := take(4), grow(col, n)
		for i := range dst {
			dst[i] = le.Uint32(c[4*i:])
		}
	}
	for _, col := range [...]*[]int32{&b.FD, &b.Errno} {
		c, dst := take(4), grow(col, n)
		for i := range dst {
			dst[i] = int32(le.Uint32(c[4*i:]))
		}
	}
	c, sc := take(2), grow(&b.Syscall, n)
	for i := range sc {
		sc[i] = le.Uint16(c[2*i:])
	}
	for _, col := range [...]*[]signal.Str{&b.Comm, &b.Path, &b.OldPath} {
		c, dst := take(8), grow(col, n)
		for i := range dst {
			var s signal.Str // empty strings stay the zero Str
			if ln := int(le.Uint32(c[8*i+4:])); ln > 0 {
				s = signal.MakeStr(base+int(le.Uint32(c[8*i:])), ln)
			}
			dst[i] = s
		}
	}
	b.SyscallNames = syscallNames[:]
	return nil
}

// grow extends *s by n elements and returns them.
func grow[T any](s *[]T, n int) []T {
	at := len(*s)
	*s = slices.Grow(*s, n)[:at+n]
	return (*s)[at:]
}
