package signal

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"unsafe"
)

// tableBytes is the memory of the copier's interning tables, which a
// batch keeps across Resets: the writer counts it in a partition's size.
func (cp *copier) tableBytes() int64 {
	return int64(cap(cp.values.slots))*int64(unsafe.Sizeof(internSlot{})) +
		int64(cap(cp.sets.slots))*int64(unsafe.Sizeof(setSlot{}))
}

// CopyTableBytes is the memory the batch holds for copying into it (its
// interned values and attribute sets: up to 10 MiB), beside its arena.
func (l *Logs) CopyTableBytes() int64 { return l.cp.tableBytes() }

// CopyTableBytes is the memory the batch holds for copying into it (its
// interned values and attribute sets: up to 10 MiB), beside its arena,
// and its known series' table (knownseries.go: up to 64 MiB).
func (m *Metrics) CopyTableBytes() int64 {
	return m.cp.tableBytes() + int64(cap(m.known.slots))*int64(unsafe.Sizeof(knownSlot{}))
}

// CopyTableBytes is the memory the batch holds for copying into it (its
// interned values and attribute sets: up to 10 MiB), beside its arena.
func (s *Spans) CopyTableBytes() int64 { return s.cp.tableBytes() }

// valueTable interns the string values of a destination batch's
// attributes by (key, bytes) (copier.value): equal values of one key
// share one Str, so that readers of the batch (the lake's encoder
// comparing the attribute sets of neighbouring rows, its columns' run
// checks) find them equal by comparing offsets, without reading bytes.
// It is an open addressing table over Strs in the arena, so interning
// allocates nothing once grown; it stops taking new values at
// maxInterned, past which values are still shared with the last of their
// key (copier.last).
type valueTable struct {
	seed   maphash.Seed
	seeded bool
	slots  []internSlot
	n      int
}

type internSlot struct {
	s   Str // 0: empty
	k   KeyID
	tag uint32 // high bits of the hash: most misses end without the arena
}

// maxInterned bounds the values a table holds: its slots, at most half
// full, take 2 MiB at most per destination batch (high-cardinality values,
// such as request ids, would fill any bound; past it they are copied as
// before).
const maxInterned = 1 << 16

func (t *valueTable) reset() {
	if t.n > 0 {
		clear(t.slots)
		t.n = 0
	}
}

// bytesHash is the hash of a value's bytes; hash mixes in its key.
func (t *valueTable) bytesHash(b []byte) uint64 {
	if !t.seeded {
		t.seed, t.seeded = maphash.MakeSeed(), true
	}
	return maphash.Bytes(t.seed, b)
}

func (t *valueTable) hash(k KeyID, b []byte) uint64 {
	return t.bytesHash(b) ^ uint64(k)*0x9e3779b97f4a7c15
}

// find returns the Str interned for (k, b) in d's arena and true, or the
// slot where it would go and false; bh is bytesHash(b).
func (t *valueTable) find(d *Common, k KeyID, b []byte, bh uint64) (Str, int, bool) {
	if len(t.slots) == 0 {
		return 0, -1, false
	}
	mask := uint64(len(t.slots) - 1)
	h := bh ^ uint64(k)*0x9e3779b97f4a7c15
	tag := uint32(h >> 32)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := t.slots[i]
		if sl.s == 0 {
			return 0, int(i), false
		}
		// A stale entry (the batch was rolled back below it) never
		// matches: the bytes are compared within the arena.
		if sl.tag == tag && sl.k == k && sl.s.Len() == len(b) && sl.s.Off()+len(b) <= len(d.Buf) && string(d.Bytes(sl.s)) == string(b) {
			return sl.s, int(i), true
		}
	}
}

// add interns s, the copy of b in d's arena, for key k at slot i (from
// find), unless the table is full; bh is bytesHash(b).
func (t *valueTable) add(d *Common, k KeyID, b []byte, bh uint64, s Str, i int) {
	if t.n >= maxInterned {
		return
	}
	if i < 0 || 2*(t.n+1) > len(t.slots) {
		t.grow(d)
		_, i, _ = t.find(d, k, b, bh)
	}
	t.slots[i] = internSlot{s, k, uint32((bh ^ uint64(k)*0x9e3779b97f4a7c15) >> 32)}
	t.n++
}

func (t *valueTable) grow(d *Common) {
	old := t.slots
	t.slots = make([]internSlot, max(1024, 2*len(old)))
	mask := uint64(len(t.slots) - 1)
	for _, sl := range old {
		if sl.s == 0 || sl.s.Off()+sl.s.Len() > len(d.Buf) {
			continue
		}
		h := t.hash(sl.k, d.Bytes(sl.s))
		sl.tag = uint32(h >> 32)
		i := h & mask
		for t.slots[i].s != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = sl
	}
}

// setTable interns the attribute sets of a destination batch whose
// ShareAttrSets is set: an open addressing table over Ranges of its Attrs,
// keyed by a hash of each set's content (copier.sourceSetHash), so that a
// set is found before it is copied.
type setTable struct {
	slots []setSlot
	n     int
}

type setSlot struct {
	r   Range // empty: free (empty sets are never interned)
	tag uint64
}

// maxSets bounds the sets a table holds (its slots: 8 MiB at most).
const maxSets = 1 << 18

func (t *setTable) reset() {
	if t.n > 0 {
		clear(t.slots)
		t.n = 0
	}
}

// sourceSetHash hashes the content of a source set (destination keys,
// types, string bytes, other values), so that equal sets from any source
// hash alike.
func (cp *copier) sourceSetHash(dst *Common, keys []KeyID, types []ValueType, vals []uint64) uint64 {
	h := uint64(len(keys)) * 0x9e3779b97f4a7c15
	types, vals = types[:len(keys)], vals[:len(keys)]
	buf := cp.src.Buf
	for j, sk := range keys {
		var k KeyID
		if int(sk) < len(cp.keyMap) && cp.keyMap[sk] != 0 {
			k = cp.keyMap[sk] - 1
		} else {
			k = cp.key(dst, sk)
		}
		ty, v := types[j], vals[j]
		switch ty {
		case ValueString, ValueBytes, ValueArray, ValueMap:
			// quickHash, with a short value (a third of the corpus's)
			// read as one load of the arena, masked, where the arena
			// has eight bytes from it.
			off, n := Str(v).Off(), Str(v).Len()
			if n < 8 && off+8 <= len(buf) {
				v = binary.LittleEndian.Uint64(buf[off:off+8])&(1<<(8*n)-1) ^ uint64(n)<<56
			} else {
				v = quickHash(buf[off : off+n : off+n])
			}
		}
		h = setHashStep(h, k, ty, v)
	}
	return h
}

// setHashStep mixes one attribute (destination key, type, value or
// quickHash of its bytes) into a set's hash; every way into a setTable
// (copier.sourceSetHash, Metrics.InternStrAttrs) hashes with it, so equal
// sets meet whichever way they came.
func setHashStep(h uint64, k KeyID, ty ValueType, v uint64) uint64 {
	h = (h ^ uint64(k) ^ uint64(ty)<<32) * 0xff51afd7ed558ccd
	h = (h ^ v) * 0xc4ceb9fe1a85ec53
	return h ^ h>>32
}

// findSet returns the Range of a destination set equal to the source set
// (keys, types, vals; of hash h) and true, or the slot where it would go
// and false.
func (cp *copier) findSet(dst *Common, h uint64, keys []KeyID, types []ValueType, vals []uint64) (Range, int, bool) {
	t := &cp.sets
	if len(t.slots) == 0 {
		return Range{}, -1, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := t.slots[i]
		if sl.r.Len() == 0 {
			return Range{}, int(i), false
		}
		if sl.tag == h && cp.sameAsSource(dst, sl.r, keys, types, vals) {
			return sl.r, int(i), true
		}
	}
}

// touchSets reads the set table's slots that the set hashes hs fall on,
// then the first attribute of each destination set whose tag matches, in
// two passes of loads that do not depend on each other, so that their
// cache misses overlap (sharedAttrRanges); findSet then finds them in
// the cache. It only reads.
func (cp *copier) touchSets(dst *Common, hs []uint64) {
	t := &cp.sets
	if len(t.slots) == 0 || len(hs) == 0 {
		return
	}
	mask := uint64(len(t.slots) - 1)
	var x uint64
	for _, h := range hs {
		x += t.slots[h&mask].tag
	}
	a := &dst.Attrs
	for _, h := range hs {
		if sl := t.slots[h&mask]; sl.tag == h && int(sl.r.Start) < len(a.Key) && int(sl.r.Start) < len(a.Val) {
			x += a.Val[sl.r.Start] + uint64(a.Key[sl.r.Start])
		}
	}
	cp.sink += x
}

// sameAsSource reports whether destination set r holds the source set's
// keys (mapped by sourceSetHash), types and values. A stale entry (the
// batch was rolled back below it) is out of range or compares unequal.
func (cp *copier) sameAsSource(dst *Common, r Range, keys []KeyID, types []ValueType, vals []uint64) bool {
	if r.Len() != len(keys) || int(r.End) > len(dst.Attrs.Key) {
		return false
	}
	a := &dst.Attrs
	dk := a.Key[r.Start:r.End]
	dt := a.Type[r.Start : r.End : r.Start+uint32(len(dk))]
	dv := a.Val[r.Start : r.End : r.Start+uint32(len(dk))]
	types, vals = types[:len(dk)], vals[:len(dk)]
	for j, sk := range keys[:len(dk)] {
		if dk[j] != cp.keyMap[sk]-1 || dt[j] != types[j] {
			return false
		}
		switch types[j] {
		case ValueString, ValueBytes, ValueArray, ValueMap:
			s, d := Str(vals[j]), Str(dv[j])
			if s.Len() != d.Len() || d.Off()+d.Len() > len(dst.Buf) || string(cp.src.Bytes(s)) != string(dst.Bytes(d)) {
				return false
			}
		default:
			if vals[j] != dv[j] {
				return false
			}
		}
	}
	return true
}

// add interns r, of hash h, at slot i (from findSet), unless the table
// is full.
func (t *setTable) add(r Range, h uint64, i int) {
	if r.Len() == 0 {
		return
	}
	if i < 0 || 2*(t.n+1) > len(t.slots) {
		if t.n >= maxSets {
			return
		}
		t.grow()
		mask := uint64(len(t.slots) - 1)
		i = int(h & mask)
		for t.slots[i].r.Len() != 0 {
			i = (i + 1) & int(mask)
		}
	}
	t.slots[i] = setSlot{r, h}
	t.n++
}

func (t *setTable) grow() {
	old := t.slots
	t.slots = make([]setSlot, max(1024, 2*len(old)))
	mask := uint64(len(t.slots) - 1)
	for _, sl := range old {
		if sl.r.Len() == 0 {
			continue
		}
		i := sl.tag & mask
		for t.slots[i].r.Len() != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = sl
	}
}

// quickHash is a cheap hash of a string value for a set's hash: its
// length and its first and last eight bytes, or, shorter, its bytes as a
// little-endian number (sets are compared in full when hashes meet, so a
// weak hash costs compares, never a wrong set). sourceSetHash reads short
// values of its arena its own way, to the same result.
func quickHash(b []byte) uint64 {
	if n := len(b); n >= 8 {
		return binary.LittleEndian.Uint64(b) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(b[n-8:]), 29) ^ uint64(n)<<56
	}
	return quickHashShort(b)
}

// quickHashShort is quickHash of fewer than eight bytes.
func quickHashShort(b []byte) uint64 {
	var x uint64
	for i := len(b) - 1; i >= 0; i-- {
		x = x<<8 | uint64(b[i])
	}
	return x ^ uint64(len(b))<<56
}
