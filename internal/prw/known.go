package prw

import (
	"encoding/binary"

	"github.com/sluice-dev/sluice/internal/signal"
)

// knownName is a label name of the previous series as 1.0's label loop
// matches it: the bytes a Label field with that name has after the field's
// length and before the value's length (0x0a, the name's length, the name,
// 0x12), fixed bytes long, compared as two masked words of a 32-byte
// window that starts at the field's tag: window[2:10] against w0 under m0,
// window[off1:off1+8] against w1 under m1 (m1 0 when fixed <= 8).
type knownName struct {
	w0, m0 uint64
	w1, m1 uint64
	off1   int
	fixed  int // 0: the name is too long for the word compare
}

// knownWindow is how many bytes from a label field's tag knownLabelsV1
// reads at once: a name of up to 13 bytes and the value's length byte are
// inside it, so that the compiler checks no index within it.
const knownWindow = 32

func newKnownName(name []byte) knownName {
	fixed, w0, m0, w1, ok := labelFrame(name)
	if !ok {
		return knownName{}
	}
	n := knownName{fixed: fixed, off1: 2, w0: w0, m0: m0}
	if fixed > 8 {
		n.w1, n.m1 = w1, ^uint64(0)
		n.off1 = fixed - 6 // window offset of the frame's last 8 bytes: the window starts 2 bytes before it
	}
	return n
}

// knownLabelsV1 reads the label fields at b[i:e] named as kn says, in
// order, into ls (at least len(kn) long), and returns the index after the
// last one matched and how many matched. A field matches when it is a
// Label message {1: name, 2: value} with short lengths, the name kn's and
// the value inside the field and the field inside e. It stops at the
// first field that does not (the caller's general loop takes it), and
// when fewer than knownWindow bytes of b are left at i (the request's
// tail).
//
// A leaf without calls, so that its few live values stay in registers
// (Go's calling convention saves none across a call).
func knownLabelsV1(b []byte, i, e int, kn []knownName, ls []label) (int, int) {
	ls = ls[:len(kn)]
	k := 0
	for ; k < len(kn); k++ {
		if i < 0 || len(b)-i < knownWindow {
			break
		}
		q := (*[knownWindow]byte)(b[i : i+knownWindow])
		p := &kn[k]
		fl := p.fixed
		if q[0] != 1<<3|wtLen || fl == 0 ||
			binary.LittleEndian.Uint64(q[2:10])&p.m0 != p.w0 ||
			binary.LittleEndian.Uint64(q[p.off1&15:])&p.m1 != p.w1 {
			break
		}
		l, vl := int(q[1]), int(q[(fl+2)&(knownWindow-1)])
		le := i + 3 + fl + vl
		if l >= 0x80 || vl >= 0x80 || le != i+2+l || le > e {
			break
		}
		ls[k] = label{signal.MakeStr(i+4, fl-3), signal.MakeStr(i+3+fl, vl), 0, 0}
		i = le
	}
	return i, k
}

// knownBlock looks a request's series up in a partition's known series
// (signal.Metrics.KnownSeriesBlock) a block at a time, so that the
// block's cache misses overlap: PlainAppender.AppendV1 and
// PlainAppender2.AppendV2 ask for each series of the request in order.
type knownBlock struct {
	res   [32]signal.KnownSeries
	found uint64 // bit b: res[b] is one dst holds
}

// lookup returns what dst remembers of series j of the request, keys
// being the request's series keys in order, when its check (Len) is
// check; false when dst holds nothing under the key, or an entry of
// another check (another series, or one of the other version's). Series
// must be asked for in order from 0: the block that starts at j (a
// multiple of the block's size) is looked up when j is asked for, so a
// series added to dst later in the same block is not found in it.
//
// A set that is empty comes back as the empty Range at the end of
// dst's attributes, as a copy gives it. Small enough to be inlined in
// the appenders' loops.
func (kb *knownBlock) lookup(dst *signal.Metrics, keys []uint64, j int, check uint32) (signal.KnownSeries, bool) {
	b := j % len(kb.res)
	if b == 0 {
		kb.fill(dst, keys[j:])
	}
	ks := kb.res[b]
	ok := kb.found&(1<<b) != 0 && ks.Len == check
	if ok && ks.Attr.Len() == 0 {
		a := uint32(dst.Attrs.Len())
		ks.Attr = signal.Range{Start: a, End: a}
	}
	return ks, ok
}

// fill looks up the block of the first keys.
func (kb *knownBlock) fill(dst *signal.Metrics, keys []uint64) {
	n := min(len(kb.res), len(keys))
	kb.found = dst.KnownSeriesBlock(keys[:n], kb.res[:n])
}
