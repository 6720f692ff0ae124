package tracer

import (
	"encoding/binary"
	"errors"
)

// Layout of a ring buffer record (struct record in bpf/iotrace.h); the
// generated iotraceRecord type checks these offsets in a test.
const (
	offTs       = 0
	offDuration = 8
	offGap      = 16
	offRet      = 24
	offCgroup   = 32
	offFlags    = 40
	offPid      = 48
	offTid      = 52
	offFd       = 56
	offFd2      = 60
	offIno      = 64
	offIno2     = 68
	offSc       = 72
	offPathLen  = 74
	offPath2Len = 76
	offKind     = 78
	offComm     = 80
	commLen     = 16
	headerLen   = 96

	// pathTruncated is PATH_TRUNCATED of a record's path lengths: the
	// path went on past the maxPathLen bytes the kernel read.
	pathTruncated = 0x8000
	maxPathLen    = 4095

	// keepFlag marks, in the kernel's traced[] table, the syscalls that are
	// sent even under the minimum duration because the fd table needs them.
	keepFlag = 0x80
)

// errShortRecord is returned for a record shorter than its header says.
var errShortRecord = errors.New("tracer: short ring buffer record")

// rawRecord is a decoded record header; paths alias the record bytes.
type rawRecord struct {
	ts, duration, gap int64
	ret               int64
	cgroup, flags     uint64
	pid, tid          uint32
	fd, fd2           int32
	ino, ino2         uint32 // of the new fds of pipe, socketpair, socket, accept
	sc, kind          uint16
	comm              []byte // NUL-trimmed
	path, path2       []byte
	trunc1, trunc2    bool // the path went on past what the kernel read
}

func parseRecord(b []byte, r *rawRecord) error {
	if len(b) < headerLen {
		return errShortRecord
	}
	le := binary.LittleEndian
	r.ts = int64(le.Uint64(b[offTs:]))
	r.duration = int64(le.Uint64(b[offDuration:]))
	r.gap = int64(le.Uint64(b[offGap:]))
	r.ret = int64(le.Uint64(b[offRet:]))
	r.cgroup = le.Uint64(b[offCgroup:])
	r.flags = le.Uint64(b[offFlags:])
	r.pid = le.Uint32(b[offPid:])
	r.tid = le.Uint32(b[offTid:])
	r.fd = int32(le.Uint32(b[offFd:]))
	r.fd2 = int32(le.Uint32(b[offFd2:]))
	r.ino = le.Uint32(b[offIno:])
	r.ino2 = le.Uint32(b[offIno2:])
	r.sc = le.Uint16(b[offSc:])
	l1, l2 := le.Uint16(b[offPathLen:]), le.Uint16(b[offPath2Len:])
	n1, n2 := int(l1&maxPathLen), int(l2&maxPathLen)
	r.trunc1, r.trunc2 = l1&pathTruncated != 0, l2&pathTruncated != 0
	r.kind = le.Uint16(b[offKind:])
	c := b[offComm : offComm+commLen]
	n := 0
	for n < commLen && c[n] != 0 {
		n++
	}
	r.comm = c[:n]
	if len(b) < headerLen+n1+n2 {
		return errShortRecord
	}
	r.path = b[headerLen : headerLen+n1]
	r.path2 = b[headerLen+n1 : headerLen+n1+n2]
	return nil
}

// appendRecord encodes r as the kernel would; tests and benchmarks use it
// to make synthetic ring buffer streams.
func appendRecord(dst []byte, r *rawRecord) []byte {
	off := len(dst)
	dst = append(dst, make([]byte, headerLen)...)
	b := dst[off:]
	le := binary.LittleEndian
	le.PutUint64(b[offTs:], uint64(r.ts))
	le.PutUint64(b[offDuration:], uint64(r.duration))
	le.PutUint64(b[offGap:], uint64(r.gap))
	le.PutUint64(b[offRet:], uint64(r.ret))
	le.PutUint64(b[offCgroup:], r.cgroup)
	le.PutUint64(b[offFlags:], r.flags)
	le.PutUint32(b[offPid:], r.pid)
	le.PutUint32(b[offTid:], r.tid)
	le.PutUint32(b[offFd:], uint32(r.fd))
	le.PutUint32(b[offFd2:], uint32(r.fd2))
	le.PutUint32(b[offIno:], r.ino)
	le.PutUint32(b[offIno2:], r.ino2)
	le.PutUint16(b[offSc:], r.sc)
	le.PutUint16(b[offPathLen:], pathLen(len(r.path), r.trunc1))
	le.PutUint16(b[offPath2Len:], pathLen(len(r.path2), r.trunc2))
	le.PutUint16(b[offKind:], r.kind)
	copy(b[offComm:offComm+commLen], r.comm)
	dst = append(dst, r.path...)
	return append(dst, r.path2...)
}

func pathLen(n int, truncated bool) uint16 {
	if truncated {
		return uint16(n) | pathTruncated
	}
	return uint16(n)
}
