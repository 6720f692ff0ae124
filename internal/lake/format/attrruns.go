package format

import (
	"math/bits"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Record attributes are read as changes (attrSet, attrNull: a column's
// entry where its value differs from the previous row's), like resource
// and scope attributes, and replayed row by row here: a record whose
// columns all hold the previous record's values shares its set, one Range
// stored once (signal invariant 7), and a record with changes appends
// the current set (a bit per slot: sets of sparse columns change their
// members often). A series' points, and runs of records with the same
// attributes, then cost one set each instead of one entry per value
// scattered into its row.

// recordAttrs appends the record attributes of the group's n rows to
// c.Attrs and sets their Ranges in rec, then each row's overflow
// attributes. The changes in t.recEnt come one column after another
// (t.recSegs: where each starts), rows ascending in each, at most one per
// row and column. A block of rows at a time, a bit per row and slot marks
// the changes (a pass over the block's changes); the rows are then
// replayed in order, each changed slot taking the next change of its
// column, so the changes are never sorted or copied. A record whose
// changes only change values (no slot joins or leaves the set) copies the
// previous record's entries and puts its new values in place.
func (f *File) recordAttrs(c *signal.Common, rec []signal.Range, n int) error {
	t := f.t
	f.attrCols()
	keys, types := f.slotKey, t.slotTypes
	ents, segs := t.recEnt, t.recSegs
	cur := append(t.segCur[:0], segs...)
	t.segCur = cur
	segEnd := func(k int) int {
		if k+1 < len(segs) {
			return int(segs[k+1])
		}
		return len(ents)
	}
	// segOf: the column (segment) of each slot that has changes.
	segOf := resize(t.segOf, f.nattr)
	t.segOf = segOf
	for k := range segs {
		if i := int(segs[k]); i < segEnd(k) {
			segOf[ents[i].slot&^absentSlot] = int32(k)
		}
	}
	words := (f.nattr + 63) / 64
	set := resize(t.recSet, words)
	t.recSet = set
	vals := t.lastVal
	a := &c.Attrs
	// The set last written: its record attributes are a.*[prevStart:
	// prevStart+prevM], slot s at pos[s] (prevM -1: none yet).
	pos := resize(t.slotPos, f.nattr)
	t.slotPos = pos
	prevStart, prevM := 0, -1
	for r0 := 0; r0 < n; r0 += recBlockRows {
		r1 := min(n, r0+recBlockRows)
		chg := resize(t.chgBits, (r1-r0)*words)
		t.chgBits = chg
		for k := range cur {
			for i, end := int(cur[k]), segEnd(k); i < end && int(ents[i].row) < r1; i++ {
				e := ents[i]
				slot := e.slot &^ absentSlot
				chg[(int(e.row)-r0)*words+int(slot>>6)] |= 1 << (slot & 63)
			}
		}
		for r := r0; r < r1; r++ {
			rowChg := chg[(r-r0)*words : (r-r0+1)*words]
			ovf := t.ovfAt(ScopeRecord, r)
			changed := uint64(0)
			for _, w := range rowChg {
				changed |= w
			}
			if r > 0 && changed == 0 && ovf == t.ovfAt(ScopeRecord, r-1) {
				rec[r] = rec[r-1]
				continue
			}
			members := false // a slot joins or leaves the set
			for w, word := range rowChg {
				for word != 0 {
					slot := w<<6 | bits.TrailingZeros64(word)
					word &= word - 1
					k := segOf[slot]
					e := ents[cur[k]]
					cur[k]++
					bit := uint64(1) << (slot & 63)
					if e.slot&absentSlot != 0 {
						set[w] &^= bit
						members = true
					} else {
						members = members || set[w]&bit == 0
						set[w] |= bit
						vals[slot] = e.val
					}
				}
			}
			start := a.Len()
			if !members && prevM >= 0 {
				// The previous record's set with new values: its
				// entries copied, the changed values put in place.
				m := prevM
				a.Key = grow(a.Key, start+m)
				a.Type = grow(a.Type, start+m)
				a.Val = grow(a.Val, start+m)
				copy(a.Key[start:start+m], a.Key[prevStart:prevStart+m])
				copy(a.Type[start:start+m], a.Type[prevStart:prevStart+m])
				av := a.Val[start : start+m]
				copy(av, a.Val[prevStart:prevStart+m])
				for w, word := range rowChg {
					for word != 0 {
						slot := w<<6 | bits.TrailingZeros64(word)
						word &= word - 1
						av[pos[slot]] = vals[slot]
					}
				}
			} else {
				m := 0
				for _, w := range set {
					m += bits.OnesCount64(w)
				}
				a.Key = grow(a.Key, start+m)
				a.Type = grow(a.Type, start+m)
				a.Val = grow(a.Val, start+m)
				ak, at, av := a.Key[start:start+m], a.Type[start:start+m], a.Val[start:start+m]
				j := 0
				for w, word := range set {
					for word != 0 {
						slot := w<<6 | bits.TrailingZeros64(word)
						word &= word - 1
						ak[j], at[j], av[j] = keys[slot], types[slot], vals[slot]
						pos[slot] = int32(j)
						j++
					}
				}
				prevM = m
			}
			prevStart = start
			if ovf != 0 {
				if err := appendOverflowAttrs(c, t.bytes(ovf)); err != nil {
					return err
				}
			}
			rec[r] = signal.Range{Start: uint32(start), End: uint32(a.Len())}
		}
	}
	return nil
}

// recBlockRows is the block of rows recordAttrs sorts changes for at a
// time.
const recBlockRows = 1024
