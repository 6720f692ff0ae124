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
// (t.recSegs: where each starts), rows ascending in each; they are sorted
// by row a block of rows at a time, so that the block's changes stay in
// cache (sorting them all at once was a cache miss per change).
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
	set := resize(t.recSet, (f.nattr+63)/64)
	t.recSet = set
	vals := t.lastVal
	a := &c.Attrs
	for r0 := 0; r0 < n; r0 += recBlockRows {
		r1 := min(n, r0+recBlockRows)
		// The block's changes, counted by row, then placed.
		starts := resize(t.starts, r1-r0+1)
		t.starts = starts
		total := 0
		for k := range cur {
			i, end := int(cur[k]), segEnd(k)
			for ; i < end && int(ents[i].row) < r1; i++ {
				starts[int(ents[i].row)-r0+1]++
			}
			total += i - int(cur[k])
		}
		for r := range r1 - r0 {
			starts[r+1] += starts[r]
		}
		sorted := grow(t.sorted[:0], total)
		t.sorted = sorted
		cursor := grow(t.cursor[:0], r1-r0)
		t.cursor = cursor
		copy(cursor, starts[:r1-r0])
		for k := range cur {
			i, end := int(cur[k]), segEnd(k)
			for ; i < end && int(ents[i].row) < r1; i++ {
				e := ents[i]
				sorted[cursor[int(e.row)-r0]] = e
				cursor[int(e.row)-r0]++
			}
			cur[k] = int32(i)
		}
		for r := r0; r < r1; r++ {
			chg := sorted[starts[r-r0]:starts[r-r0+1]]
			ovf := t.ovfAt(ScopeRecord, r)
			if r > 0 && len(chg) == 0 && ovf == t.ovfAt(ScopeRecord, r-1) {
				rec[r] = rec[r-1]
				continue
			}
			for _, e := range chg {
				slot := e.slot &^ absentSlot
				if e.slot&absentSlot != 0 {
					set[slot>>6] &^= 1 << (slot & 63)
				} else {
					set[slot>>6] |= 1 << (slot & 63)
					vals[slot] = e.val
				}
			}
			m := 0
			for _, w := range set {
				m += bits.OnesCount64(w)
			}
			start := a.Len()
			a.Key = grow(a.Key, start+m)
			a.Type = grow(a.Type, start+m)
			a.Val = grow(a.Val, start+m)
			ak, at, av := a.Key[start:], a.Type[start:], a.Val[start:]
			j := 0
			for w, word := range set {
				for word != 0 {
					slot := w<<6 | bits.TrailingZeros64(word)
					word &= word - 1
					ak[j], at[j], av[j] = keys[slot], types[slot], vals[slot]
					j++
				}
			}
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
