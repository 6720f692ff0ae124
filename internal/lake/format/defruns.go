package format

import (
	"encoding/binary"
	"math/bits"
)

// Definition levels as runs: an attribute column is null in most rows of
// most files (a key that only some records carry), and its pages' levels
// are RLE runs, or bit-packed where the runs are short. File takes them
// as runs of null and present rows (pageVals.defRuns) rather than a byte
// per row that it then scans for the next change.

// decodeDefRuns decodes the n definition levels (width 1, each 0 or 1) of
// src's RLE/bit-packed hybrid runs into runs of equal levels, consecutive
// runs merged, appended to runs; nn is the number of 1s. The bounds are
// decodeHybrid's: the runs may hold up to 7 levels past n (a bit-packed
// group's padding), runs after the page's levels are ignored.
func decodeDefRuns(src []byte, n int, runs []valRun) (_ []valRun, nn int, err error) {
	i, o := 0, 0
	limit := uint64(n) + 7
	for o < n {
		u, k := binary.Uvarint(src[i:])
		if k <= 0 {
			return runs, 0, shapeErr("runs of %d values, the page has %d", o, n)
		}
		i += k
		if u&1 == 0 { // RLE run
			cnt := u >> 1
			if cnt > uint64(n) || cnt > limit-uint64(o) {
				return runs, 0, shapeErr("run of %d values past the page's %d", cnt, n-o)
			}
			if i >= len(src) {
				return runs, 0, shapeErr("run value past its bytes")
			}
			v := src[i]
			i++
			if v > 1 {
				return runs, 0, shapeErr("level or index %d past %d", v, 1)
			}
			m := int(min(cnt, uint64(n-o)))
			if m > 0 {
				runs = appendRun(runs, int32(v), m)
				if v == 1 {
					nn += m
				}
			}
			o += m
			continue
		}
		groups := u >> 1
		if groups > uint64(len(src)) || groups*8 > limit-uint64(o) {
			return runs, 0, shapeErr("bit-packed run of %d groups past the page's %d values", groups, n-o)
		}
		nb := int(groups)
		if nb > len(src)-i {
			return runs, 0, shapeErr("bit-packed run past its bytes")
		}
		packed := src[i : i+nb]
		i += nb
		m := int(min(groups*8, uint64(n-o)))
		runs, nn = bitRuns(runs, packed, m, nn)
		o += m
	}
	return runs, nn, nil
}

// bitRuns appends the first m bits of packed (least significant first)
// as runs of equal bits to runs, and adds the 1s to nn.
func bitRuns(runs []valRun, packed []byte, m, nn int) ([]valRun, int) {
	for m > 0 {
		var w uint64
		take := min(m, 64)
		if len(packed) >= 8 {
			w = binary.LittleEndian.Uint64(packed)
		} else {
			for b := range len(packed) {
				w |= uint64(packed[b]) << (8 * b)
			}
		}
		if take < 64 {
			w &= 1<<take - 1
		}
		nn += bits.OnesCount64(w)
		for left := take; left > 0; {
			// The run at the bottom of w: ones or zeros.
			var k int
			v := int32(w & 1)
			if v == 1 {
				k = bits.TrailingZeros64(^w)
			} else {
				k = bits.TrailingZeros64(w)
			}
			k = min(k, left)
			runs = appendRun(runs, v, k)
			w >>= k
			left -= k
		}
		m -= take
		packed = packed[min(len(packed), 8):]
	}
	return runs, nn
}

// runsOfDefs returns the definition levels of a flat optional column's
// page as runs of null (0) and present (1) rows: p.defRuns when the
// decoder gave them, else made from p.defs (into buf), else one run of
// present rows.
func (p *pageVals) runsOfDefs(buf []valRun) []valRun {
	if p.defRuns != nil || p.n == 0 {
		return p.defRuns
	}
	buf = buf[:0]
	if p.defs == nil {
		return append(buf, valRun{v: 1, n: int32(p.n)})
	}
	for i := 0; i < len(p.defs); {
		v := p.defs[i]
		j := i + 1
		for j < len(p.defs) && p.defs[j] == v {
			j++
		}
		buf = append(buf, valRun{v: int32(min(v, 1)), n: int32(j - i)})
		i = j
	}
	return buf
}
