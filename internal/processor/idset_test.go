package processor

import "testing"

func TestIDSetAgainstMap(t *testing.T) {
	var s idSet
	ref := map[uint64]bool{}
	for i := uint64(0); i < 50000; i++ {
		id := mix(i%20000) & 0xFFFFF // collisions and duplicates, and id 0
		if i%7 == 0 {
			id = i % 13
		}
		if got, want := s.add(id), !ref[id]; got != want {
			t.Fatalf("add(%d) = %v, want %v", id, got, want)
		}
		ref[id] = true
	}
	if s.len() != len(ref) {
		t.Fatalf("len %d, want %d", s.len(), len(ref))
	}
	for id := range ref {
		if !s.has(id) {
			t.Fatalf("lost %d", id)
		}
	}
	if s.has(0xFFFFFFFFF) {
		t.Fatal("has an id never added")
	}
	s.reset()
	if s.len() != 0 || s.has(0) || s.has(mix(1)&0xFFFFF) {
		t.Fatal("reset kept members")
	}
}
