package signal

import "hash/maphash"

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
	seed  maphash.Seed
	slots []internSlot
	n     int
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

func (t *valueTable) hash(k KeyID, b []byte) uint64 {
	return maphash.Bytes(t.seed, b) ^ uint64(k)*0x9e3779b97f4a7c15
}

// find returns the Str interned for (k, b) in d's arena and true, or the
// slot where it would go and false.
func (t *valueTable) find(d *Common, k KeyID, b []byte) (Str, int, bool) {
	if len(t.slots) == 0 {
		return 0, -1, false
	}
	mask := uint64(len(t.slots) - 1)
	h := t.hash(k, b)
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
// find), unless the table is full.
func (t *valueTable) add(d *Common, k KeyID, b []byte, s Str, i int) {
	if t.n >= maxInterned {
		return
	}
	if i < 0 || 2*(t.n+1) > len(t.slots) {
		t.grow(d)
		_, i, _ = t.find(d, k, b)
	}
	t.slots[i] = internSlot{s, k, uint32(t.hash(k, b) >> 32)}
	t.n++
}

func (t *valueTable) grow(d *Common) {
	if t.slots == nil {
		t.seed = maphash.MakeSeed()
	}
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
// ShareAttrSets is set: an open addressing table over Ranges of its Attrs.
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

// hashSet hashes the words of an attribute set.
func hashSet(keys []KeyID, types []ValueType, vals []uint64) uint64 {
	h := uint64(len(keys)) * 0x9e3779b97f4a7c15
	types, vals = types[:len(keys)], vals[:len(keys)]
	for j, k := range keys {
		h = (h ^ uint64(k) ^ uint64(types[j])<<32) * 0xff51afd7ed558ccd
		h = (h ^ vals[j]) * 0xc4ceb9fe1a85ec53
		h ^= h >> 32
	}
	return h
}

func sameSet(a *Attrs, x, y Range) bool {
	n := x.Len()
	if n != y.Len() || int(x.End) > len(a.Key) || int(y.End) > len(a.Key) {
		return false
	}
	for j := range uint32(n) {
		if a.Key[x.Start+j] != a.Key[y.Start+j] || a.Type[x.Start+j] != a.Type[y.Start+j] || a.Val[x.Start+j] != a.Val[y.Start+j] {
			return false
		}
	}
	return true
}

// intern returns the Range of an earlier set equal to r (the last set of
// d's Attrs, of hash h) and true, or adds r and returns false.
func (t *setTable) intern(d *Common, r Range, h uint64) (Range, bool) {
	if r.Len() == 0 {
		return r, false
	}
	if 2*(t.n+1) > len(t.slots) {
		if t.n >= maxSets {
			return r, false
		}
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.r.Len() == 0 {
			*sl = setSlot{r, h}
			t.n++
			return r, false
		}
		// A stale entry (the batch was rolled back below it) is out of
		// range or compares unequal.
		if sl.tag == h && sameSet(&d.Attrs, sl.r, r) {
			return sl.r, true
		}
	}
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
