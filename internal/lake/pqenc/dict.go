package pqenc

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
)

// dictTable is a chunk's dictionary: its PLAIN page bytes and an open
// addressing index over them, so that adding a value allocates nothing.
type dictTable struct {
	seed  maphash.Seed
	slots []int32  // value index + 1; 0 is empty
	vals  []byte   // PLAIN dictionary page: 4-byte length, bytes
	ends  []uint32 // end of each value in vals
}

func (d *dictTable) reset() {
	if len(d.ends) == 0 && d.slots != nil {
		return
	}
	if d.slots == nil {
		d.seed = maphash.MakeSeed()
	}
	clear(d.slots)
	d.vals, d.ends = d.vals[:0], d.ends[:0]
}

func (d *dictTable) len() int { return len(d.ends) }

// value is value x; it stays valid (and unchanged) until reset.
func (d *dictTable) value(x int32) []byte {
	end := d.ends[x]
	start := uint32(4)
	if x > 0 {
		start += d.ends[x-1]
	}
	return d.vals[start:end:end]
}

// index returns v's index, adding it when new.
func (d *dictTable) index(v []byte) int32 {
	if 2*(len(d.ends)+1) > len(d.slots) {
		d.grow()
	}
	mask := uint64(len(d.slots) - 1)
	for i := maphash.Bytes(d.seed, v) & mask; ; i = (i + 1) & mask {
		s := d.slots[i]
		if s == 0 {
			x := int32(len(d.ends))
			d.vals = binary.LittleEndian.AppendUint32(d.vals, uint32(len(v)))
			d.vals = append(d.vals, v...)
			d.ends = append(d.ends, uint32(len(d.vals)))
			d.slots[i] = x + 1
			return x
		}
		if bytes.Equal(d.value(s-1), v) {
			return s - 1
		}
	}
}

func (d *dictTable) grow() {
	n := max(64, 2*len(d.slots))
	if d.slots == nil {
		d.seed = maphash.MakeSeed()
	}
	d.slots = make([]int32, n)
	mask := uint64(n - 1)
	for x := range int32(len(d.ends)) {
		i := maphash.Bytes(d.seed, d.value(x)) & mask
		for d.slots[i] != 0 {
			i = (i + 1) & mask
		}
		d.slots[i] = x + 1
	}
}
