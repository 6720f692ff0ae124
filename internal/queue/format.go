package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
)

// Position is a logical byte offset into the queue's record stream. Segment
// headers take no positions, so a segment's records cover
// [base, base+data bytes) and positions compare across segments with <.
type Position uint64

const (
	segmentMagic      = "SLQS"
	segmentVersion    = 1
	segmentHeaderSize = 32
	recordHeaderSize  = 8
	segmentExt        = ".seg"
	segmentNameDigits = 20

	// readAhead is how much a scanner reads per system call; records are
	// small compared to it, so sequential reads cost one syscall per
	// readAhead bytes rather than one per record.
	readAhead = 256 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segmentHeader is the fixed 32-byte prefix of every segment file:
//
//	[0,4)   magic "SLQS"
//	[4,6)   version (uint16 LE) = 1
//	[6,8)   reserved, zero
//	[8,16)  base position (uint64 LE), equal to the number in the file name
//	[16,24) ordinal of the segment's first record (uint64 LE)
//	[24,28) reserved, zero
//	[28,32) CRC32C of bytes [0,28) (uint32 LE)
type segmentHeader struct {
	base        Position
	firstRecord uint64
}

func appendSegmentHeader(dst []byte, h segmentHeader) []byte {
	var b [segmentHeaderSize]byte
	copy(b[:], segmentMagic)
	binary.LittleEndian.PutUint16(b[4:], segmentVersion)
	binary.LittleEndian.PutUint64(b[8:], uint64(h.base))
	binary.LittleEndian.PutUint64(b[16:], h.firstRecord)
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
	return append(dst, b[:]...)
}

func parseSegmentHeader(b []byte) (segmentHeader, error) {
	if len(b) < segmentHeaderSize {
		return segmentHeader{}, fmt.Errorf("%w: segment header is %d bytes, want %d", ErrCorrupt, len(b), segmentHeaderSize)
	}
	if string(b[:4]) != segmentMagic {
		return segmentHeader{}, fmt.Errorf("%w: bad segment magic %q", ErrCorrupt, b[:4])
	}
	if got, want := binary.LittleEndian.Uint32(b[28:]), crc32.Checksum(b[:28], castagnoli); got != want {
		return segmentHeader{}, fmt.Errorf("%w: segment header crc %#x, want %#x", ErrCorrupt, got, want)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != segmentVersion {
		return segmentHeader{}, fmt.Errorf("%w: unsupported segment version %d", ErrCorrupt, v)
	}
	return segmentHeader{
		base:        Position(binary.LittleEndian.Uint64(b[8:])),
		firstRecord: binary.LittleEndian.Uint64(b[16:]),
	}, nil
}

func segmentName(base Position) string {
	return fmt.Sprintf("%0*d%s", segmentNameDigits, uint64(base), segmentExt)
}

func parseSegmentName(name string) (Position, bool) {
	digits, ok := strings.CutSuffix(name, segmentExt)
	if !ok || len(digits) != segmentNameDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return Position(n), true
}

// recordCRC covers the record's position, length and payload. Binding the
// position means a stale record (left in a reused disk block, or copied from
// another segment) never validates where it does not belong, which keeps
// resynchronization after corruption from resurrecting old data.
// scratch is caller-owned so the hot path does not allocate: crc32.Update
// makes its argument escape.
func recordCRC(scratch *[12]byte, pos Position, payload []byte) uint32 {
	b := scratch[:]
	binary.LittleEndian.PutUint64(b, uint64(pos))
	binary.LittleEndian.PutUint32(b[8:], uint32(len(payload)))
	return crc32.Update(crc32.Update(0, castagnoli, b), castagnoli, payload)
}

// appendRecord encodes payload as the record at pos:
// length (uint32 LE) | CRC32C (uint32 LE) | payload.
func appendRecord(dst []byte, scratch *[12]byte, pos Position, payload []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, recordCRC(scratch, pos, payload))
	return append(dst, payload...)
}

type recordStatus int

const (
	recordOK recordStatus = iota
	// recordShort: the record does not end before the scanner's limit.
	recordShort
	// recordBad: the CRC does not match.
	recordBad
)

var errBeyondLimit = errors.New("beyond limit")

// segmentScanner reads records of one segment file through a reusable
// read-ahead buffer. Payloads it returns alias that buffer and stay valid
// until the next call. Not safe for concurrent use.
type segmentScanner struct {
	f       file
	base    Position
	limit   int64 // file offset where readable data ends
	buf     []byte
	bufOff  int64 // file offset of buf[0]
	scratch [12]byte
}

func (s *segmentScanner) reset(f file, base Position, limit int64) {
	s.f, s.base, s.limit = f, base, limit
	s.buf, s.bufOff = s.buf[:0], 0
}

func (s *segmentScanner) pos(off int64) Position {
	return s.base + Position(off-segmentHeaderSize)
}

// window returns the file bytes [off, off+n).
func (s *segmentScanner) window(off int64, n int) ([]byte, error) {
	end := off + int64(n)
	if end > s.limit {
		return nil, errBeyondLimit
	}
	if off >= s.bufOff && end <= s.bufOff+int64(len(s.buf)) {
		return s.buf[off-s.bufOff : end-s.bufOff], nil
	}
	size := int64(max(n, readAhead))
	size = min(size, s.limit-off)
	if int64(cap(s.buf)) < size {
		s.buf = make([]byte, size)
	}
	s.buf = s.buf[:size]
	m, err := s.f.ReadAt(s.buf, off)
	if m < n {
		s.buf = s.buf[:0]
		if err == nil || err == io.EOF {
			// The file is shorter than the limit says (truncated under us,
			// or a crash image shorter than its recorded size).
			return nil, errBeyondLimit
		}
		return nil, err
	}
	s.buf, s.bufOff = s.buf[:m], off
	return s.buf[:n], nil
}

// record decodes the record at file offset off. The returned error is an
// I/O error; malformed data is reported through the status.
func (s *segmentScanner) record(off int64) (payload []byte, next int64, st recordStatus, err error) {
	h, err := s.window(off, recordHeaderSize)
	if err != nil {
		if err == errBeyondLimit {
			return nil, off, recordShort, nil
		}
		return nil, off, recordShort, err
	}
	if binary.LittleEndian.Uint64(h) == 0 {
		// Never a record (Append refuses empty ones): preallocated space
		// past the data, or a hole in a torn write.
		return nil, off, recordBad, nil
	}
	n := int64(binary.LittleEndian.Uint32(h))
	sum := binary.LittleEndian.Uint32(h[4:])
	if n > s.limit-off-recordHeaderSize {
		return nil, off, recordShort, nil
	}
	b, err := s.window(off, recordHeaderSize+int(n))
	if err != nil {
		if err == errBeyondLimit {
			return nil, off, recordShort, nil
		}
		return nil, off, recordShort, err
	}
	payload = b[recordHeaderSize:]
	if recordCRC(&s.scratch, s.pos(off), payload) != sum {
		return nil, off, recordBad, nil
	}
	return payload, off + recordHeaderSize + n, recordOK, nil
}

// resync searches for the first valid record after a bad one at off. It
// tries every byte offset because a corrupt length cannot be trusted; the
// position-bound CRC makes a false match vanishingly unlikely. Runs of zero
// bytes (a preallocated segment's space past its data, holes of a torn
// write) are skipped a word at a time: a record header is never eight zero
// bytes, so no record starts more than 7 bytes before the next non-zero
// byte.
func (s *segmentScanner) resync(off int64) (int64, bool, error) {
	for p := off + 1; p+recordHeaderSize <= s.limit; p++ {
		h, err := s.window(p, recordHeaderSize)
		if err != nil {
			if err == errBeyondLimit {
				break
			}
			return 0, false, err
		}
		if binary.LittleEndian.Uint64(h) == 0 {
			// The buffer from p on: jump to 7 bytes before its first
			// non-zero byte (the loop adds one), or to its end.
			rest := s.buf[p-s.bufOff:]
			nz := firstNonZero(rest)
			if nz < 0 {
				p = s.bufOff + int64(len(s.buf)) - recordHeaderSize
			} else {
				p += int64(max(nz-recordHeaderSize, 0))
			}
			continue
		}
		_, _, st, err := s.record(p)
		if err != nil {
			return 0, false, err
		}
		if st == recordOK {
			return p, true, nil
		}
	}
	return s.limit, false, nil
}

// firstNonZero returns the index of the first non-zero byte of b, or -1.
func firstNonZero(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

// dataEnd returns the offset after the last non-zero byte of f in
// [from, to), or from when they are all zero (a preallocated segment's
// space past its data).
func dataEnd(f file, from, to int64) (int64, error) {
	buf := make([]byte, min(readAhead, max(to-from, 0)))
	for end := to; end > from; {
		start := max(from, end-int64(len(buf)))
		b := buf[:end-start]
		if n, err := f.ReadAt(b, start); n < len(b) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != 0 {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return from, nil
}
