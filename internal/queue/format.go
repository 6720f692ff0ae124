package queue

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Position is a logical byte offset into the queue's record stream. Segment
// headers take no positions, so a segment's records cover
// [base, base+data bytes) and positions compare across segments with <.
type Position uint64

const (
	segmentMagic      = "SLQS"
	segmentVersion    = 2 // written; version 1 segments are still read
	segmentVersionV1  = 1
	segmentHeaderSize = 32
	recordHeaderSize  = 12 // version 2: length | tag | CRC
	recordHeaderV1    = 8  // version 1: length | CRC
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
//	[4,6)   version (uint16 LE): 2 (1: written by builds before segments
//	        were recycled; read, never written)
//	[6,8)   reserved, zero
//	[8,16)  base position (uint64 LE), equal to the number in the file name
//	[16,24) ordinal of the segment's first record (uint64 LE)
//	[24,28) version 2: the segment's tag (uint32 LE, never 0), which every
//	        record header of the segment repeats; version 1: zero
//	[28,32) CRC32C of bytes [0,28) (uint32 LE)
//
// The tag is drawn at random each time a segment file is started, fresh or
// recycled (a released segment file reused for a new segment: recycle), so
// the records an earlier use of the file left behind carry another tag, or
// none where the bytes are not a record header: recovery ends the records
// at the first header without the segment's tag, and resynchronization
// after corruption looks only at headers with it.
type segmentHeader struct {
	version     uint16
	base        Position
	firstRecord uint64
	tag         uint32
}

// newTag returns a random segment tag; 0 is never one, so zeros are never
// a version 2 record header.
func newTag() uint32 {
	for {
		if t := rand.Uint32(); t != 0 {
			return t
		}
	}
}

func appendSegmentHeader(dst []byte, h segmentHeader) []byte {
	var b [segmentHeaderSize]byte
	copy(b[:], segmentMagic)
	v := h.version
	if v == 0 {
		v = segmentVersion
	}
	binary.LittleEndian.PutUint16(b[4:], v)
	binary.LittleEndian.PutUint64(b[8:], uint64(h.base))
	binary.LittleEndian.PutUint64(b[16:], h.firstRecord)
	if v >= segmentVersion {
		binary.LittleEndian.PutUint32(b[24:], h.tag)
	}
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
	h := segmentHeader{
		version:     binary.LittleEndian.Uint16(b[4:]),
		base:        Position(binary.LittleEndian.Uint64(b[8:])),
		firstRecord: binary.LittleEndian.Uint64(b[16:]),
	}
	switch h.version {
	case segmentVersionV1:
	case segmentVersion:
		h.tag = binary.LittleEndian.Uint32(b[24:])
		if h.tag == 0 {
			return segmentHeader{}, fmt.Errorf("%w: segment tag 0", ErrCorrupt)
		}
	default:
		// A later build's format: refused with the version named (the
		// segment is skipped whole and counted, as any bad header).
		return segmentHeader{}, fmt.Errorf("%w: unsupported segment version %d (this build reads 1 and 2)", ErrCorrupt, h.version)
	}
	return h, nil
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

// appendRecord encodes payload as the record at pos of a version 2
// segment with the given tag:
// length (uint32 LE) | tag (uint32 LE) | CRC32C (uint32 LE) | payload.
func appendRecord(dst []byte, scratch *[12]byte, pos Position, tag uint32, payload []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, tag)
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
	// recordForeign: a version 2 header without the segment's tag: where
	// the records end (zeros, or what an earlier use of a recycled file
	// left), or a damaged header.
	recordForeign
)

var errBeyondLimit = errors.New("beyond limit")

// segmentScanner reads records of one segment file through a reusable
// read-ahead buffer. Payloads it returns alias that buffer and stay valid
// until the next call. Not safe for concurrent use.
type segmentScanner struct {
	f       file
	base    Position
	limit   int64 // file offset where readable data ends
	tag     uint32
	hdr     int64 // record header size: recordHeaderSize, or recordHeaderV1
	buf     []byte
	bufOff  int64 // file offset of buf[0]
	scratch [12]byte
	// tornEnd is set by resync in a version 2 segment: the end of the
	// furthest record with the segment's tag it passed that did not
	// validate (clamped to limit), or the offset it started from.
	tornEnd int64
}

// reset points the scanner at a segment: its version and tag come from
// its header.
func (s *segmentScanner) reset(f file, base Position, limit int64, h segmentHeader) {
	s.f, s.base, s.limit = f, base, limit
	s.tag, s.hdr = h.tag, recordHeaderSize
	if h.version == segmentVersionV1 {
		s.tag, s.hdr = 0, recordHeaderV1
	}
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
	h, err := s.window(off, int(s.hdr))
	if err != nil {
		if err == errBeyondLimit {
			return nil, off, recordShort, nil
		}
		return nil, off, recordShort, err
	}
	n := int64(binary.LittleEndian.Uint32(h))
	sum := binary.LittleEndian.Uint32(h[s.hdr-4:])
	if s.tag != 0 {
		if binary.LittleEndian.Uint32(h[4:]) != s.tag {
			return nil, off, recordForeign, nil
		}
		if n == 0 {
			return nil, off, recordBad, nil // Append refuses empty records
		}
	} else if binary.LittleEndian.Uint64(h) == 0 {
		// Never a record (Append refuses empty ones): preallocated space
		// past the data, or a hole in a torn write.
		return nil, off, recordBad, nil
	}
	if n > s.limit-off-s.hdr {
		return nil, off, recordShort, nil
	}
	b, err := s.window(off, int(s.hdr+n))
	if err != nil {
		if err == errBeyondLimit {
			return nil, off, recordShort, nil
		}
		return nil, off, recordShort, err
	}
	payload = b[s.hdr:]
	if recordCRC(&s.scratch, s.pos(off), payload) != sum {
		return nil, off, recordBad, nil
	}
	return payload, off + s.hdr + n, recordOK, nil
}

// taggedEnd is where a record header at off with the segment's tag says
// its record ends, clamped to limit.
func (s *segmentScanner) taggedEnd(off int64) (int64, error) {
	h, err := s.window(off, int(s.hdr))
	if err != nil {
		if err == errBeyondLimit {
			return s.limit, nil
		}
		return 0, err
	}
	return min(off+s.hdr+int64(binary.LittleEndian.Uint32(h)), s.limit), nil
}

// resync searches for the first valid record after a bad one at off. It
// tries every byte offset because a corrupt length cannot be trusted; the
// position-bound CRC makes a false match vanishingly unlikely. Runs of zero
// bytes (a preallocated segment's space past its data, holes of a torn
// write) are skipped a word at a time: a record header is never eight zero
// bytes, so no record starts more than 7 bytes before the next non-zero
// byte.
func (s *segmentScanner) resync(off int64) (int64, bool, error) {
	if s.tag != 0 {
		return s.resyncTagged(off)
	}
	for p := off + 1; p+recordHeaderV1 <= s.limit; p++ {
		h, err := s.window(p, recordHeaderV1)
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
				p = s.bufOff + int64(len(s.buf)) - recordHeaderV1
			} else {
				p += int64(max(nz-recordHeaderV1, 0))
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

// resyncTagged is resync in a version 2 segment: only headers with the
// segment's tag can start a record, so it searches the tag's four bytes
// (bytes.Index, vectorized) and checks the records they frame. The bytes
// an earlier use of a recycled file left are skipped at the speed of that
// search, not parsed: recovery of a recycled last segment stays linear.
// Headers with the tag that do not validate extend tornEnd.
func (s *segmentScanner) resyncTagged(off int64) (int64, bool, error) {
	var tag [4]byte
	binary.LittleEndian.PutUint32(tag[:], s.tag)
	s.tornEnd = off
	for p := off + 1; p+s.hdr <= s.limit; {
		// The tag of a header at p is at p+4.
		if _, err := s.window(p+4, 4); err != nil {
			if err == errBeyondLimit {
				break
			}
			return 0, false, err
		}
		rest := s.buf[p+4-s.bufOff:]
		i := bytes.Index(rest, tag[:])
		if i < 0 {
			// Keep 3 bytes: a tag may straddle the buffer's end.
			p = max(p+1, s.bufOff+int64(len(s.buf))-3-4)
			continue
		}
		p += int64(i)
		_, _, st, err := s.record(p)
		if err != nil {
			return 0, false, err
		}
		if st == recordOK {
			return p, true, nil
		}
		if st == recordBad {
			// A header with the tag whose record fits: torn (a false
			// match in old bytes needs the tag and a fitting length).
			e, err := s.taggedEnd(p)
			if err != nil {
				return 0, false, err
			}
			s.tornEnd = max(s.tornEnd, e)
		}
		p++
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
