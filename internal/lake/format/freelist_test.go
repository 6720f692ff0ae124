package format

import "testing"

func TestFreeList(t *testing.T) {
	l := FreeList[*int]{Max: 2}
	if _, ok := l.Get(); ok {
		t.Fatal("an empty list gave an item")
	}
	a, b, c := new(int), new(int), new(int)
	if !l.Put(a) || !l.Put(b) {
		t.Fatal("refused below Max")
	}
	if l.Put(c) {
		t.Fatal("kept more than Max: the caller would not release it")
	}
	if x, ok := l.Get(); !ok || x != b {
		t.Fatal("not the last item put")
	}
	if x, ok := l.Get(); !ok || x != a {
		t.Fatal("lost an item")
	}
	if _, ok := l.Get(); ok {
		t.Fatal("gave more than it kept")
	}
	var zero FreeList[[]byte]
	if zero.Put([]byte{1}) {
		t.Fatal("the zero value kept an item")
	}
}
