package signal

import "github.com/sluice-dev/sluice/internal/unsafex"

// IOEvents is a columnar batch of traced I/O syscalls (one row per completed
// call), as the eBPF tracer produces them and the io_events lake table
// stores them. Strings (comm, path, old path) are Strs into Buf, as for the
// other batches (invariant 1); equal strings may share one Str. Every
// per-row slice has length Len() (invariant 6).
type IOEvents struct {
	Buf []byte

	Time     []int64  // enter time, Unix ns
	Duration []int64  // ns
	Gap      []int64  // ns since the thread's previous traced syscall ended; 0 unknown
	PID      []uint32 // process (thread group) id
	TID      []uint32 // thread id
	Comm     []Str
	Syscall  []uint16 // tracer syscall id; names via the tracer's table
	FD       []int32  // the fd the call worked on (the new fd for opens and dups); -1 none
	Ret      []int64  // raw return value
	Errno    []int32  // -Ret when the call failed, else 0
	Bytes    []int64  // bytes moved for data calls that succeeded, else 0
	Path     []Str    // path the call worked on (for renames, the new path)
	OldPath  []Str    // renames: the old path
	Flags    []uint64 // open flags, fcntl command, dup3/close_range/renameat2 flags
	Cgroup   []uint64 // cgroup v2 id

	// SyscallNames names the Syscall ids (index = id); the producer sets it
	// and Reset keeps it.
	SyscallNames []string

	gen uint64
}

// Len is the number of rows.
func (b *IOEvents) Len() int { return len(b.Time) }

// Gen changes on every Reset; callers that cache Strs of this batch (an
// interned path) compare it to know when their cache is stale.
func (b *IOEvents) Gen() uint64 { return b.gen }

// Reset empties the batch, keeping its capacity.
func (b *IOEvents) Reset() {
	b.gen++
	b.Buf = b.Buf[:0]
	b.Time, b.Duration, b.Gap = b.Time[:0], b.Duration[:0], b.Gap[:0]
	b.PID, b.TID, b.Comm = b.PID[:0], b.TID[:0], b.Comm[:0]
	b.Syscall, b.FD, b.Ret, b.Errno, b.Bytes = b.Syscall[:0], b.FD[:0], b.Ret[:0], b.Errno[:0], b.Bytes[:0]
	b.Path, b.OldPath, b.Flags, b.Cgroup = b.Path[:0], b.OldPath[:0], b.Flags[:0], b.Cgroup[:0]
}

// IOEvent is one row, for appending; strings are Strs already in Buf.
type IOEvent struct {
	Time, Duration, Gap int64
	PID, TID            uint32
	Comm                Str
	Syscall             uint16
	FD                  int32
	Ret                 int64
	Errno               int32
	Bytes               int64
	Path, OldPath       Str
	Flags, Cgroup       uint64
}

// Append adds one row.
func (b *IOEvents) Append(e *IOEvent) {
	b.Time = append(b.Time, e.Time)
	b.Duration = append(b.Duration, e.Duration)
	b.Gap = append(b.Gap, e.Gap)
	b.PID = append(b.PID, e.PID)
	b.TID = append(b.TID, e.TID)
	b.Comm = append(b.Comm, e.Comm)
	b.Syscall = append(b.Syscall, e.Syscall)
	b.FD = append(b.FD, e.FD)
	b.Ret = append(b.Ret, e.Ret)
	b.Errno = append(b.Errno, e.Errno)
	b.Bytes = append(b.Bytes, e.Bytes)
	b.Path = append(b.Path, e.Path)
	b.OldPath = append(b.OldPath, e.OldPath)
	b.Flags = append(b.Flags, e.Flags)
	b.Cgroup = append(b.Cgroup, e.Cgroup)
}

// SyscallName is the name of row i's syscall.
func (b *IOEvents) SyscallName(i int) string {
	if s := int(b.Syscall[i]); s < len(b.SyscallNames) {
		return b.SyscallNames[s]
	}
	return ""
}

// AppendRows copies rows [from, to) of src, strings included.
func (b *IOEvents) AppendRows(src *IOEvents, from, to int) {
	if b.SyscallNames == nil {
		b.SyscallNames = src.SyscallNames
	}
	for i := from; i < to; i++ {
		e := IOEvent{
			Time: src.Time[i], Duration: src.Duration[i], Gap: src.Gap[i],
			PID: src.PID[i], TID: src.TID[i], Syscall: src.Syscall[i], FD: src.FD[i],
			Ret: src.Ret[i], Errno: src.Errno[i], Bytes: src.Bytes[i],
			Flags: src.Flags[i], Cgroup: src.Cgroup[i],
			Comm:    b.AppendBytes(src.StrBytes(src.Comm[i])),
			Path:    b.AppendBytes(src.StrBytes(src.Path[i])),
			OldPath: b.AppendBytes(src.StrBytes(src.OldPath[i])),
		}
		b.Append(&e)
	}
}

// AppendBytes copies p into Buf and returns its Str; empty p is the zero Str.
func (b *IOEvents) AppendBytes(p []byte) Str {
	if len(p) == 0 {
		return 0
	}
	off := len(b.Buf)
	b.Buf = append(b.Buf, p...)
	return MakeStr(off, len(p))
}

// AppendString copies s into Buf and returns its Str.
func (b *IOEvents) AppendString(s string) Str {
	if len(s) == 0 {
		return 0
	}
	off := len(b.Buf)
	b.Buf = append(b.Buf, s...)
	return MakeStr(off, len(s))
}

// StrBytes returns the bytes of s, aliasing Buf (valid until Reset or growth).
func (b *IOEvents) StrBytes(s Str) []byte {
	off := s.Off()
	return b.Buf[off : off+s.Len() : off+s.Len()]
}

// String returns s as a string aliasing Buf (see unsafex.String): valid
// until the batch is reset or Buf grows.
func (b *IOEvents) String(s Str) string { return unsafex.String(b.StrBytes(s)) }
