package processor

// idSet is a set of 64-bit ids in one flat open-addressing table (linear
// probing, load at most 1/2): 16 bytes or less a member, no pointers for
// the collector to scan, no allocation per insert. Ids are hashes already
// (series ids are xxhash), mixed once more so that sequential test ids
// spread too. Id 0 is stored as a flag beside the table.
type idSet struct {
	slots []uint64
	n     int
	zero  bool
}

const minSetSlots = 16

func (s *idSet) len() int { return s.n }

// has reports whether id is in the set.
func (s *idSet) has(id uint64) bool {
	if id == 0 {
		return s.zero
	}
	if len(s.slots) == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	for i := mix(id) & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case id:
			return true
		case 0:
			return false
		}
	}
}

// add inserts id and reports whether it was new.
func (s *idSet) add(id uint64) bool {
	if id == 0 {
		if s.zero {
			return false
		}
		s.zero = true
		s.n++
		return true
	}
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := mix(id) & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case id:
			return false
		case 0:
			s.slots[i] = id
			s.n++
			return true
		}
	}
}

func (s *idSet) grow() {
	old := s.slots
	n := 2 * len(old)
	if n < minSetSlots {
		n = minSetSlots
	}
	s.slots = make([]uint64, n)
	mask := uint64(n - 1)
	for _, id := range old {
		if id == 0 {
			continue
		}
		i := mix(id) & mask
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = id
	}
}

// reset empties the set; a table much larger than needed last time is
// given back, so one burst does not pin its memory for every window.
func (s *idSet) reset() {
	if len(s.slots) > 8*minSetSlots && 8*s.n < len(s.slots) {
		s.slots = nil
	} else {
		clear(s.slots)
	}
	s.n, s.zero = 0, false
}
