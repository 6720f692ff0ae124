package otlp

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// Protobuf wire types.
const (
	wtVarint = 0
	wtI64    = 1
	wtLen    = 2
	wtSGroup = 3
	wtEGroup = 4
	wtI32    = 5
)

// Parsing works on absolute positions in one buffer: b is resliced to the end
// of the message being parsed, so len(b) is that message's end. A position
// below zero reports an error without building one on the hot path.
const (
	posTruncated = -1
	posMalformed = -2
)

// maxDepth bounds the nesting of AnyValue arrays and maps and of groups, so
// that hostile input cannot exhaust the stack.
const maxDepth = 100

func posErr(p int) error {
	if p == posMalformed {
		return ErrMalformed
	}
	return ErrTruncated
}

// uvarint decodes the varint at b[i:]. The one-byte case is inlined.
func uvarint(b []byte, i int) (uint64, int) {
	if i < len(b) && b[i] < 0x80 {
		return uint64(b[i]), i + 1
	}
	return uvarintSlow(b, i)
}

// uvarintSlow is kept out of line. The hot loops read a tag as
// "tag, j := uint64(b[i]), i+1; if tag >= 0x80 { tag, j = uvarintSlow(b, i) }"
// because a function calling another one is too costly for Go's inliner.
//
//go:noinline
func uvarintSlow(b []byte, i int) (uint64, int) {
	var v uint64
	for s := uint(0); ; s += 7 {
		if i >= len(b) {
			return 0, posTruncated
		}
		c := b[i]
		i++
		if s == 63 && c > 1 {
			return 0, posMalformed // more than 64 bits
		}
		v |= uint64(c&0x7f) << s
		if c < 0x80 {
			return v, i
		}
	}
}

// lenField reads the length prefix at i and returns the payload bounds.
func lenField(b []byte, i int) (start, end int) {
	if i < len(b) && b[i] < 0x80 {
		if e := i + 1 + int(b[i]); e <= len(b) {
			return i + 1, e
		}
	}
	return lenFieldSlow(b, i)
}

//go:noinline
func lenFieldSlow(b []byte, i int) (start, end int) {
	n, j := uvarint(b, i)
	if j < 0 {
		return j, j
	}
	if n > uint64(len(b)-j) {
		return posTruncated, posTruncated
	}
	return j, j + int(n)
}

func fixed64(b []byte, i int) (uint64, int) {
	if len(b)-i < 8 {
		return 0, posTruncated
	}
	return binary.LittleEndian.Uint64(b[i:]), i + 8
}

func fixed32(b []byte, i int) (uint32, int) {
	if len(b)-i < 4 {
		return 0, posTruncated
	}
	return binary.LittleEndian.Uint32(b[i:]), i + 4
}

// skipValue skips the value of a field with wire type wt whose tag ended at
// i. Groups are deprecated but skipped like the official decoders do.
func skipValue(b []byte, i int, tag uint64, depth int) int {
	switch tag & 7 {
	case wtVarint:
		_, i = uvarint(b, i)
		return i
	case wtI64:
		if len(b)-i < 8 {
			return posTruncated
		}
		return i + 8
	case wtI32:
		if len(b)-i < 4 {
			return posTruncated
		}
		return i + 4
	case wtLen:
		_, e := lenField(b, i)
		return e
	case wtSGroup:
		if depth >= maxDepth {
			return posMalformed
		}
		for {
			t, j := uvarint(b, i)
			if j < 0 {
				return j
			}
			if t&7 == wtEGroup {
				if t>>3 != tag>>3 {
					return posMalformed
				}
				return j
			}
			if t>>3 == 0 {
				return posMalformed
			}
			if i = skipValue(b, j, t, depth+1); i < 0 {
				return i
			}
		}
	}
	return posMalformed // end group without start, or wire type 6/7
}

// schema lists the wire type of each known field of a message (index: field
// number; 0: unknown) and names fields for error messages.
type schema struct {
	msg   string
	wt    [20]uint8 // wire type + 1
	names [20]string
}

func newSchema(msg string, fields ...any) *schema {
	s := &schema{msg: msg}
	for k := 0; k < len(fields); k += 3 {
		n := fields[k].(int)
		s.wt[n] = uint8(fields[k+1].(int)) + 1
		s.names[n] = fields[k+2].(string)
	}
	return s
}

func (s *schema) field(n uint64) string {
	if n < uint64(len(s.names)) && s.names[n] != "" {
		return s.names[n]
	}
	return fmt.Sprintf("field %d", n)
}

// skip handles a field the caller's switch did not match: a known field with
// the wrong wire type is an error (packed repeated fields excepted, which the
// caller matches itself); an unknown field is skipped for forward
// compatibility.
func (s *schema) skip(b []byte, i int, tag uint64) (int, error) {
	n, wt := tag>>3, tag&7
	if n == 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%sfield number %d: %w", s.prefix(), n, ErrMalformed)
	}
	if n < uint64(len(s.wt)) && s.wt[n] != 0 && uint64(s.wt[n]-1) != wt {
		return 0, fmt.Errorf("%s%s (field %d) has wire type %d, want %d: %w",
			s.prefix(), s.names[n], n, wt, s.wt[n]-1, ErrWireType)
	}
	j := skipValue(b, i, tag, 0)
	if j < 0 {
		return 0, fmt.Errorf("%s%s: %w", s.prefix(), s.field(n), posErr(j))
	}
	return j, nil
}

func (s *schema) prefix() string {
	if s.msg == "" {
		return ""
	}
	return s.msg + ": "
}

// truncErr reports a value of a known field that could not be read.
func (s *schema) truncErr(tag uint64, p int) error {
	return fmt.Errorf("%s%s: %w", s.prefix(), s.field(tag>>3), posErr(p))
}

// tagErr reports a tag that could not be read.
func tagErr(msg string, p int) error {
	return fmt.Errorf("%s: tag: %w", msg, posErr(p))
}

// Encoding helpers, append style.

func appendVarint(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func appendTag(dst []byte, num, wt int) []byte {
	return appendVarint(dst, uint64(num)<<3|uint64(wt))
}

func appendBytesField(dst []byte, num int, v []byte) []byte {
	dst = appendTag(dst, num, wtLen)
	dst = appendVarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func appendStringField(dst []byte, num int, v string) []byte {
	dst = appendTag(dst, num, wtLen)
	dst = appendVarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func appendFixed64Field(dst []byte, num int, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(appendTag(dst, num, wtI64), v)
}

func appendFixed32Field(dst []byte, num int, v uint32) []byte {
	return binary.LittleEndian.AppendUint32(appendTag(dst, num, wtI32), v)
}

func appendVarintField(dst []byte, num int, v uint64) []byte {
	return appendVarint(appendTag(dst, num, wtVarint), v)
}

// beginMsg appends the tag of a message field and reserves one byte for its
// length; endMsg writes the length, moving the body when it needs more
// bytes. Most messages are short, so most never move.
func beginMsg(dst []byte, num int) ([]byte, int) {
	dst = appendTag(dst, num, wtLen)
	dst = append(dst, 0)
	return dst, len(dst)
}

func endMsg(dst []byte, start int) []byte {
	n := len(dst) - start
	if n < 0x80 {
		dst[start-1] = byte(n)
		return dst
	}
	extra := varintLen(uint64(n)) - 1
	dst = append(dst, make([]byte, extra)...)
	copy(dst[start+extra:], dst[start:start+n])
	v := uint64(n)
	p := start - 1
	for v >= 0x80 {
		dst[p] = byte(v) | 0x80
		v >>= 7
		p++
	}
	dst[p] = byte(v)
	return dst
}

// validUTF8 is utf8.Valid with a wider ASCII fast path: most OTLP strings
// are ASCII, and this checks 16 bytes a step before falling back.
func validUTF8(p []byte) bool {
	i := 0
	for ; len(p)-i >= 16; i += 16 {
		if (binary.LittleEndian.Uint64(p[i:])|binary.LittleEndian.Uint64(p[i+8:]))&0x8080808080808080 != 0 {
			return utf8.Valid(p[i:])
		}
	}
	if len(p)-i >= 8 {
		if binary.LittleEndian.Uint64(p[i:])&0x8080808080808080 != 0 {
			return utf8.Valid(p[i:])
		}
		i += 8
	}
	for ; i < len(p); i++ {
		if p[i] >= 0x80 {
			return utf8.Valid(p[i:])
		}
	}
	return true
}
