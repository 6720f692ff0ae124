package prw

import (
	"encoding/binary"
	"math"
)

// Protobuf wire types.
const (
	wtVarint = 0
	wtI64    = 1
	wtLen    = 2
	wtI32    = 5
)

// uvarint reads a varint at b[i:] and returns it and the index after it;
// the index is -1 when the varint is truncated or longer than 10 bytes.
func uvarint(b []byte, i int) (uint64, int) {
	if i < len(b) && b[i] < 0x80 {
		return uint64(b[i]), i + 1
	}
	var v uint64
	for s := uint(0); s < 64; s += 7 {
		if i >= len(b) {
			return 0, -1
		}
		c := b[i]
		i++
		v |= uint64(c&0x7f) << s
		if c < 0x80 {
			return v, i
		}
	}
	return 0, -1
}

// tag reads a field tag at b[i:]: field number, wire type, next index (-1 on error).
func tag(b []byte, i int) (int, int, int) {
	v, j := uvarint(b, i)
	if j < 0 || v>>3 == 0 || v>>3 > math.MaxInt32 {
		return 0, 0, -1
	}
	return int(v >> 3), int(v & 7), j
}

// lenField reads a length prefix at b[i:] and returns the field's [start, end).
func lenField(b []byte, i int) (int, int) {
	var n uint64
	var j int
	if i+1 < len(b) && b[i] >= 0x80 && b[i+1] < 0x80 {
		// Two bytes (128 to 16,383: a 1.0 series of several labels)
		// without uvarint's loop.
		n, j = uint64(b[i]&0x7f)|uint64(b[i+1])<<7, i+2
	} else {
		n, j = uvarint(b, i)
	}
	if j < 0 || n > uint64(len(b)-j) {
		return -1, -1
	}
	return j, j + int(n)
}

func fixed64(b []byte, i int) (uint64, int) {
	if len(b)-i < 8 {
		return 0, -1
	}
	return binary.LittleEndian.Uint64(b[i:]), i + 8
}

// skip skips a field of wire type wt at b[i:].
func skip(b []byte, i, wt int) int {
	switch wt {
	case wtVarint:
		_, i = uvarint(b, i)
		return i
	case wtI64:
		if len(b)-i < 8 {
			return -1
		}
		return i + 8
	case wtLen:
		_, e := lenField(b, i)
		return e
	case wtI32:
		if len(b)-i < 4 {
			return -1
		}
		return i + 4
	}
	return -1
}

func zigzag(v uint64) int64 { return int64(v>>1) ^ -int64(v&1) }

// Appenders for the OTLP Exemplar messages kept raw in the batch.
func appendVarint(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

func appendLenPrefix(dst []byte, num int, b []byte) []byte {
	dst = appendVarint(dst, uint64(num)<<3|wtLen)
	dst = appendVarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendFixed64(dst []byte, num int, v uint64) []byte {
	dst = appendVarint(dst, uint64(num)<<3|wtI64)
	return binary.LittleEndian.AppendUint64(dst, v)
}

func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// ascii reports whether every byte of b is below 0x80 (then b is valid
// UTF-8), eight bytes at a time.
func ascii(b []byte) bool {
	// Four words per step and overlapping loads for the tail: the label
	// spans it checks are short, so the tail matters.
	var or uint64
	for len(b) >= 32 {
		or |= binary.LittleEndian.Uint64(b) | binary.LittleEndian.Uint64(b[8:]) |
			binary.LittleEndian.Uint64(b[16:]) | binary.LittleEndian.Uint64(b[24:])
		b = b[32:]
	}
	if len(b) >= 16 {
		or |= binary.LittleEndian.Uint64(b) | binary.LittleEndian.Uint64(b[8:])
		b = b[16:]
	}
	switch {
	case len(b) >= 8:
		or |= binary.LittleEndian.Uint64(b) | binary.LittleEndian.Uint64(b[len(b)-8:])
	case len(b) >= 4:
		or |= uint64(binary.LittleEndian.Uint32(b) | binary.LittleEndian.Uint32(b[len(b)-4:]))
	default:
		for _, c := range b {
			or |= uint64(c)
		}
	}
	return or&0x8080808080808080 == 0
}
