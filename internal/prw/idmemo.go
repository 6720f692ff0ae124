package prw

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/sluice-dev/sluice/internal/signal"
)

// IDMemo remembers the series id of remote write series across
// requests, keyed by their label bytes, so that a series seen before is
// not hashed again: its id (signal/seriesid.go: an xxhash of every label
// value and a mix per label, about a fifth of a 10-label series' decode)
// is read from one 16-byte slot. The labels are still parsed and checked
// (they are the point's attributes); only the id is remembered.
//
// The key is a 64-bit maphash of a series' label fields (the run of Label
// messages a TimeSeries starts with, as every encoder writes them), with a
// seed made per process, and it is trusted as the series' identity
// without comparing bytes, as the lake trusts its 64-bit series ids: two
// different label byte strings share a key with probability about 2^-64
// per pair (2^-63 with key 0 reserved), about 5e-11 for 32,000 series
// held at once; the seed is not known outside the process, so a client
// cannot aim at a collision. Only a series whose labels passed every check
// (sorted or sortable, unique, valid UTF-8, a non-empty __name__) is
// remembered.
//
// Remote write 2.0's labels are references into a symbols table that is
// new in every request, so its key is made from the strings the references
// name instead (v2Key): each symbol of a request is hashed once with a
// seeded multiply-fold hash (symbolKey), and a series' key is the sum over
// its labels as sent of a seeded mix of its name's and value's symbol
// hashes, so the same whatever their order. The same argument holds: a
// key equal for two different label sets has probability about 2^-64, and
// without the seeds a client cannot aim at one. A symbol written twice in
// a table hashes alike, so a series keys alike whichever copy it
// references; forms of one series the decoder normalises to one (a label
// of empty value added) and the 1.0 and 2.0 forms of one series have keys
// of their own, slots of their own, and one id.
//
// The table is a fixed array of buckets of 4 slots (one 64-byte cache
// line): bounded memory (DefaultIDMemoSlots, 2 MiB, shared by every
// decoder of the process), a full bucket replaces one of its
// slots. Concurrent use is safe without locks: a slot holds key^id and id,
// each an atomic word, so that a torn read (one word of an older entry)
// fails the key check, save for the same 2^-64 chance.
//
// The Scanner (ScanV1, the relay's and the lake path's receiver) does not
// use it: its series cost about half a decoded one's, and with 30,000
// series in rotation (BenchmarkScanV1Relay) the memo's bucket reads cost
// more than the hashing they save (BENCHMARKS.md, "Decode, a series-id
// memo").
type IDMemo struct {
	slots []idSlot
	mask  uint64 // bucket index mask
}

type idSlot struct{ chk, sid atomic.Uint64 } // chk = key ^ sid; 0, 0 is empty

// DefaultIDMemoSlots is the number of slots (16 bytes each) of the memo
// the process's decoders share: 131,072, 2 MiB, room for the active
// series of senders of ~100,000 series (a bucket of 4 slots that is full
// loses one to a new series). Twice 1 MiB made 32,000 series in rotation
// decode 1-7% (1.0) and 8-10% (2.0) faster, the other shapes alike
// (BENCHMARKS.md, "End of session 21").
const DefaultIDMemoSlots = 1 << 17

// NewIDMemo returns a memo of at least slots slots (a power of 2, 4 or more).
func NewIDMemo(slots int) *IDMemo {
	n := 4
	for n < slots {
		n <<= 1
	}
	return &IDMemo{slots: make([]idSlot, n), mask: uint64(n/4 - 1)}
}

var sharedIDMemo = sync.OnceValue(func() *IDMemo { return NewIDMemo(DefaultIDMemoSlots) })

var idMemoSeed = maphash.MakeSeed()

// idKey is the memo key of the label fields b (never 0: 0 means none).
func idKey(b []byte) uint64 {
	k := maphash.Bytes(idMemoSeed, b)
	if k == 0 {
		k = 1
	}
	return k
}

// memoK are the seeds of symbolKey and v2Key, made per process.
var memoK = [4]uint64{rand.Uint64(), rand.Uint64(), rand.Uint64(), rand.Uint64()}

// mum is the folded 128-bit product of a and b (as wyhash and Go's
// runtime fallback hash mix).
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// symbolKey is a seeded hash of the string b[o:o+n]: one multiply-fold of
// its first and last words, for the names and values of up to 16 bytes
// that most symbols are, and maphash past that. The length is folded in
// after the multiply, so that strings of different lengths whose words
// are alike (a short string and the same with zero bytes appended) differ.
func symbolKey(b []byte, o, n int) uint64 {
	var w0, w1 uint64
	switch {
	case n > 16:
		return maphash.Bytes(idMemoSeed, b[o:o+n])
	case n >= 8:
		w0, w1 = binary.LittleEndian.Uint64(b[o:o+8]), binary.LittleEndian.Uint64(b[o+n-8:o+n])
	case o+8 <= len(b):
		w0 = binary.LittleEndian.Uint64(b[o:o+8]) & (^uint64(0) >> (64 - 8*uint(n)))
	default: // at the arena's end: no word to load past it
		var t [8]byte
		copy(t[:], b[o:o+n])
		w0 = binary.LittleEndian.Uint64(t[:])
	}
	return mum(w0^memoK[0], w1^memoK[1]) ^ uint64(n)
}

// symbolKeys sets dst to the symbolKey of each of syms (strings of b) and
// returns it: a leaf loop for the symbols of 8 to 16 bytes.
func symbolKeys(dst []uint64, b []byte, syms []signal.Str) []uint64 {
	if cap(dst) < len(syms) {
		dst = make([]uint64, len(syms), len(syms)+len(syms)/4)
	}
	dst = dst[:len(syms)]
	k0, k1 := memoK[0], memoK[1]
	for i, sym := range syms {
		if o, n := sym.Off(), sym.Len(); n >= 8 && n <= 16 && o+n <= len(b) {
			dst[i] = mum(binary.LittleEndian.Uint64(b[o:o+8])^k0, binary.LittleEndian.Uint64(b[o+n-8:o+n])^k1) ^ uint64(n)
		} else {
			dst[i] = symbolKey(b, o, n)
		}
	}
	return dst
}

// v2Key is the memo key of a 2.0 series whose labels, as sent, are ls,
// from its request's symbol hashes sk (symbolKey of each symbol): the sum
// of a seeded mix of each label's name and value hashes, which does not
// depend on their order (never 0: 0 means none). The labels as sent
// determine the labels the decoder keeps (sorted, empty values dropped),
// hence the id; only a series whose labels pass the checks is looked up.
func v2Key(ls []label, sk []uint64) uint64 {
	var k uint64
	for i := range ls {
		k += mum(sk[ls[i].nref-1]^memoK[2], sk[ls[i].ref-1]^memoK[3])
	}
	if k == 0 {
		k = 1
	}
	return k
}

// bucket is the first slot of key's bucket.
func (m *IDMemo) bucket(key uint64) *[4]idSlot {
	i := (key & m.mask) << 2
	return (*[4]idSlot)(m.slots[i : i+4])
}

// lookup returns the id remembered for key.
func (m *IDMemo) lookup(key uint64) (uint64, bool) {
	b := m.bucket(key)
	for i := range b {
		s := b[i].sid.Load()
		if b[i].chk.Load()^s == key {
			return s, true
		}
	}
	return 0, false
}

// insert remembers id for key, in an empty slot of its bucket or in place
// of the slot the key's top bits name.
func (m *IDMemo) insert(key, id uint64) {
	b := m.bucket(key)
	v := &b[key>>62]
	for i := range b {
		if b[i].chk.Load() == 0 && b[i].sid.Load() == 0 {
			v = &b[i]
			break
		}
	}
	// id first: a reader that sees the new chk with the old id fails the
	// check, as one that sees the old chk with the new id.
	v.sid.Store(id)
	v.chk.Store(key ^ id)
}

// idBlockLen is how many series' keys a memo block hashes and whose
// buckets it loads before they are decoded, so that their cache misses
// overlap (the table is not in L2 for long; a bucket per series read as
// each series is decoded would stall on each).
const idBlockLen = 32

// idBlock is a decoder's view of the memo: the keys of the
// next block of series and the admission state.
type idBlock struct {
	memo  *IDMemo
	n, at int
	start [idBlockLen]int    // each series' first byte
	lab   [idBlockLen]int    // the end of its leading label fields
	key   [idBlockLen]uint64 // 0: none
	// 2.0: the series' labels from its leading references in
	// Decoder.preLabels [pre[k][0], pre[k][1]) (preV2)
	pre  [idBlockLen][2]int32
	sink uint64

	// Admission: a load of new series every request pays the key and a
	// bucket per series for nothing, so a decoder whose lookups hit fewer
	// than 1 in 2 over idWindow of them uses the memo in one call of 16
	// ("probation") until such a call hits 3 in 4.
	off        bool // tests: no memo
	on         bool // this call uses the memo
	probation  bool
	calls      uint32
	look, hits uint32
}

const idWindow = 1 << 15

// begin prepares a call: whether it uses the memo.
func (ib *idBlock) begin() {
	ib.n, ib.at = 0, 0
	if ib.off {
		ib.on = false
		return
	}
	if ib.memo == nil {
		ib.memo = sharedIDMemo()
	}
	if ib.probation {
		if ib.on {
			if ib.look >= 64 && ib.hits >= ib.look/4*3 {
				ib.probation = false
			}
			ib.look, ib.hits = 0, 0
		}
	} else if ib.look >= idWindow {
		ib.probation = ib.hits < ib.look/2
		ib.look, ib.hits = 0, 0
	}
	ib.calls++
	ib.on = !ib.probation || ib.calls&15 == 0
}

// next returns the key and the label fields' end of the series whose
// field starts at b[i] and whose message starts at s; key 0 when the
// memo is not used or the series has no key. It hashes a block of series
// from i on when s is not the block's next.
func (ib *idBlock) next(b []byte, i, s int) (uint64, int) {
	if !ib.on {
		return 0, 0
	}
	if ib.at >= ib.n || ib.start[ib.at] != s {
		ib.fill(b, i)
		if ib.n == 0 || ib.start[0] != s {
			return 0, 0
		}
	}
	k := ib.at
	ib.at++
	return ib.key[k], ib.lab[k]
}

// fill hashes the label fields of up to idBlockLen TimeSeries fields from
// b[i] on, then loads their buckets in one loop of independent loads.
func (ib *idBlock) fill(b []byte, i int) {
	n := 0
	for n < idBlockLen && i+1 < len(b) && b[i] == 1<<3|wtLen {
		s, e := lenField(b, i+1)
		if s < 0 {
			break
		}
		j := labelsEnd(b, s, e)
		ib.start[n], ib.lab[n], ib.key[n] = s, j, 0
		if j > s && j <= e {
			ib.key[n] = idKey(b[s:j])
		}
		n++
		i = e
	}
	ib.n, ib.at = n, 0
	ib.touch()
}

// labelsEnd returns where the leading Label fields of the TimeSeries
// b[s:e] end, as the key of a series hashes them: the decode uses the key
// only when its labels are exactly b[s:end] (seriesV1), so a guess that is
// wrong costs the memo's help, never a wrong id. The usual series ends
// with one sample (value and a timestamp of 6 bytes, times from 1971 to
// 2109): its labels end where that sample starts, found without walking
// the labels, whose lengths make a chain of dependent loads. Else the
// leading Label fields with one-byte lengths are walked.
func labelsEnd(b []byte, s, e int) int {
	if t := e - plainSampleLen; t > s && e <= len(b) {
		q := (*[plainSampleLen]byte)(b[t : t+plainSampleLen])
		if q[0] == 2<<3|wtLen && q[1] == plainSampleLen-2 && q[2] == 1<<3|wtI64 && q[11] == 2<<3|wtVarint {
			return t
		}
	}
	j := s
	for j+1 < e && b[j] == 1<<3|wtLen && b[j+1] < 0x80 {
		j += 2 + int(b[j+1])
	}
	return j
}

// plainSampleLen is the length of a Sample field of a value and a
// timestamp of 6 bytes (plainSample).
const plainSampleLen = 2 + 9 + 1 + 6

// touch loads the buckets of the block's keys in one loop of independent
// loads.
func (ib *idBlock) touch() {
	m := ib.memo
	var t uint64
	for k := range ib.n {
		t += m.bucket(ib.key[k])[0].chk.Load()
	}
	ib.sink = t
}

// lookup is IDMemo.lookup, counted for admission.
func (ib *idBlock) lookup(key uint64) (uint64, bool) {
	id, ok := ib.memo.lookup(key)
	ib.look++
	if ok {
		ib.hits++
	}
	return id, ok
}

// useIDMemo makes the decoder use m instead of the process's memo (nil:
// none).
func (d *Decoder) useIDMemo(m *IDMemo) { d.ids.memo, d.ids.off = m, m == nil }
