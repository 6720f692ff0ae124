package format

import (
	"encoding/binary"
)

// DELTA_LENGTH_BYTE_ARRAY pages (the lake writer's encoding of string
// columns it does not dictionary-encode: ids, bodies, the OTLP JSON of
// array and map attributes) are decoded here rather than by parquet-go,
// whose decoder copies every value out of the page: the values are read
// where they lie in the decompressed page (pageVals.data aliases it,
// valid until the next page, as pageVals promises), and only the lengths
// are decoded. For logs those copies were most of a page's bytes: the
// JSON of map attributes runs to ~1 KB a row.

// Bounds of a DELTA_BINARY_PACKED header: parquet-go's largest block,
// and checkDeltaHeader's most mini blocks.
const (
	maxDeltaBlock      = 65536
	maxDeltaMiniBlocks = 1 << 10
)

// deltaLengthByteArrays decodes n DELTA_LENGTH_BYTE_ARRAY values of src:
// data holds them back to back (a sub-slice of src, not a copy) and offs
// their n+1 offsets into it (offs is reused). Lengths must be >= 0 and
// the values fit in src; bytes after the last value are ignored, as
// parquet-go ignores them.
func deltaLengthByteArrays(src []byte, n int, offs []uint32) (data []byte, _ []uint32, err error) {
	offs = grow(offs[:0], n+1)
	rest, err := deltaLengths(src, n, offs[1:])
	if err != nil {
		return nil, offs[:0], err
	}
	offs[0] = 0
	var sum uint64
	for i := 1; i <= n; i++ {
		l := int32(offs[i])
		if l < 0 {
			return nil, offs[:0], shapeErr("byte array of length %d", l)
		}
		sum += uint64(l)
		if sum > uint64(len(rest)) {
			return nil, offs[:0], shapeErr("byte arrays of %d bytes past the page's %d", sum, len(rest))
		}
		offs[i] = uint32(sum)
	}
	return rest[:sum], offs, nil
}

// deltaLengths decodes the DELTA_BINARY_PACKED int32 values at the front
// of src into dst (as uint32 bits: the caller checks their sign), which
// must be as long as the header says, and returns what follows them.
// Every step is bounded by src: a damaged header or block is an error.
func deltaLengths(src []byte, n int, dst []uint32) ([]byte, error) {
	var hdr [3]uint64
	for i := range hdr {
		v, k := binary.Uvarint(src)
		if k <= 0 {
			return nil, shapeErr("delta header")
		}
		hdr[i], src = v, src[k:]
	}
	first, k := binary.Varint(src)
	if k <= 0 {
		return nil, shapeErr("delta header")
	}
	src = src[k:]
	block, minis, total := hdr[0], hdr[1], hdr[2]
	if block == 0 || block%128 != 0 || block > maxDeltaBlock || minis == 0 || minis > maxDeltaMiniBlocks ||
		(block/minis)%32 != 0 || block%minis != 0 {
		return nil, shapeErr("delta block of %d values in %d mini blocks", block, minis)
	}
	if total != uint64(n) {
		return nil, shapeErr("%d byte array lengths, the levels say %d", total, n)
	}
	if n == 0 {
		return src, nil
	}
	perMini := int(block / minis)
	last := int32(first) // int32 arithmetic wraps, as the format's
	dst[0] = uint32(last)
	o := 1
	for o < n {
		minDelta, k := binary.Varint(src)
		if k <= 0 {
			return nil, shapeErr("delta block header")
		}
		src = src[k:]
		if uint64(len(src)) < minis {
			return nil, shapeErr("delta block bit widths past the page")
		}
		widths := src[:minis]
		src = src[minis:]
		md := int32(minDelta)
		for _, w := range widths {
			if o >= n {
				break
			}
			if w > 32 {
				return nil, shapeErr("delta bit width %d", w)
			}
			m := min(perMini, n-o)
			size := perMini * int(w) / 8
			if size > len(src) {
				return nil, shapeErr("delta mini block past the page")
			}
			out := dst[o : o+m]
			if w == 0 {
				for i := range out {
					last += md
					out[i] = uint32(last)
				}
			} else {
				unpackDeltas(out, src[:size], uint(w), md, &last)
			}
			src = src[size:]
			o += m
		}
	}
	return src, nil
}

// unpackDeltas sets out to the running sum from *last of md plus each
// w-bit value of packed (least significant bits first).
func unpackDeltas(out []uint32, packed []byte, w uint, md int32, last *int32) {
	mask := uint64(1)<<w - 1
	var acc uint64
	var have uint
	p := 0
	v := *last
	for i := range out {
		for have < w {
			acc |= uint64(packed[p]) << have
			p++
			have += 8
		}
		v += md + int32(uint32(acc&mask))
		acc >>= w
		have -= w
		out[i] = uint32(v)
	}
	*last = v
}
