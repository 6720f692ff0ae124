package signal

import (
	"reflect"
	"testing"
)

// TestKnownSeries: what AddKnownSeries remembers is found by KnownSeries
// and KnownSeriesBlock alike (key 0 too, across the table's growth, an
// entry replaced under its key), and a Reset or Truncate forgets all of
// it: an entry must never name a set or descriptor the batch cut away.
func TestKnownSeries(t *testing.T) {
	var m Metrics
	const n = 5000
	key := func(i int) uint64 { return uint64(i) * 0x9E3779B97F4A7C15 } // key(0) == 0
	ks := func(i int) KnownSeries {
		return KnownSeries{Attr: Range{uint32(i), uint32(i + 3)}, ID: uint64(i) << 20, Desc: uint32(i % 50), Len: uint32(i % 300)}
	}
	for i := range n {
		m.AddKnownSeries(key(i), ks(i+1))
	}
	m.AddKnownSeries(key(7), ks(7)) // replaced
	// The table is memory of the batch's: the lake writer's memory bound
	// counts it (32-byte slots, at most half full).
	if got := m.CopyTableBytes(); got < 2*n*32 {
		t.Fatalf("CopyTableBytes %d with %d known series, want at least %d", got, n, 2*n*32)
	}
	check := func(want func(int) (KnownSeries, bool)) {
		t.Helper()
		keys := make([]uint64, 0, 64)
		out := make([]KnownSeries, 64)
		for i := 0; i < n+100; i += 64 {
			keys = keys[:0]
			for j := i; j < min(i+64, n+100); j++ {
				keys = append(keys, key(j))
			}
			found := m.KnownSeriesBlock(keys, out)
			for j := range keys {
				w, wok := want(i + j)
				g, ok := m.KnownSeries(keys[j])
				if ok != wok || ok && g != w {
					t.Fatalf("key %d: KnownSeries %+v %v, want %+v %v", i+j, g, ok, w, wok)
				}
				if bok := found&(1<<j) != 0; bok != wok || bok && out[j] != w {
					t.Fatalf("key %d: KnownSeriesBlock %+v %v, want %+v %v", i+j, out[j], bok, w, wok)
				}
			}
		}
	}
	check(func(i int) (KnownSeries, bool) {
		switch {
		case i >= n:
			return KnownSeries{}, false
		case i == 7:
			return ks(7), true
		}
		return ks(i + 1), true
	})
	none := func(int) (KnownSeries, bool) { return KnownSeries{}, false }
	m.Truncate(0)
	check(none)
	m.AddKnownSeries(key(1), ks(1))
	if _, ok := m.KnownSeries(key(1)); !ok {
		t.Fatal("added after a Truncate: not found")
	}
	m.Reset()
	check(none)
}

// TestAppendDoublePointsIsAppendSeriesPoints: the column-by-column append
// of many series' points gives the batch that AppendSeriesPoints of each
// point gives, every column (and the ranges into Msgs, U64 and F64 of a
// batch that holds some already).
func TestAppendDoublePointsIsAppendSeriesPoints(t *testing.T) {
	var a, b Metrics
	for _, m := range []*Metrics{&a, &b} {
		m.Msgs = append(m.Msgs, Str(0))
		m.U64 = append(m.U64, 1, 2)
		m.F64 = append(m.F64, 3)
		m.AppendPoint(0, 0, 0)
	}
	const n = 100
	desc, attr, sid, times, vals := make([]uint32, n), make([]Range, n), make([]uint64, n), make([]int64, n), make([]uint64, n)
	for i := range n {
		desc[i], attr[i], sid[i], times[i], vals[i] = uint32(i%7), Range{uint32(i), uint32(i + i%3)}, uint64(i)*0x9E3779B97F4A7C15, int64(i)*1e9, uint64(i)<<40
		a.AppendSeriesPoints(desc[i], 3, 4, attr[i], sid[i], times[i:i+1], nil, vals[i:i+1])
	}
	if p := b.AppendDoublePoints(3, 4, desc, attr, sid, times, vals); p != 1 {
		t.Fatalf("first point %d, want 1", p)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("AppendDoublePoints differs from AppendSeriesPoints")
	}
	b.Number[5]++
	if reflect.DeepEqual(a, b) {
		t.Fatal("the compare does not see a column")
	}
}
