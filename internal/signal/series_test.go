package signal

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// pointColumns are the per-point columns of m plus the pools they index,
// by field name, for comparing two batches value by value.
func pointColumns(m *Metrics) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.IsExported() && f.Type.Kind() == reflect.Slice {
			out[f.Name] = v.Field(i)
		}
	}
	out["Msgs"] = reflect.ValueOf(m.Msgs)
	out["Attrs.Key"] = reflect.ValueOf(m.Attrs.Key)
	out["Attrs.Type"] = reflect.ValueOf(m.Attrs.Type)
	out["Attrs.Val"] = reflect.ValueOf(m.Attrs.Val)
	return out
}

// sameColumns fails unless a and b hold the same values in every column
// (nil and empty alike; floats compared by their bits, so NaN is NaN).
func sameColumns(t *testing.T, a, b *Metrics) {
	t.Helper()
	ca, cb := pointColumns(a), pointColumns(b)
	if len(ca) < 30 {
		t.Fatalf("only %d columns found", len(ca))
	}
	for name, x := range ca {
		y := cb[name]
		if x.Len() != y.Len() {
			t.Fatalf("%s: %d values, want %d", name, x.Len(), y.Len())
		}
		for i := range x.Len() {
			xi, yi := x.Index(i).Interface(), y.Index(i).Interface()
			if xf, ok := xi.(float64); ok {
				xi, yi = math.Float64bits(xf), math.Float64bits(yi.(float64))
			}
			if xi != yi {
				t.Fatalf("%s[%d] = %v, want %v", name, i, xi, yi)
			}
		}
	}
}

// TestAppendSeriesPointsMatchesAppendPoint: on random interleavings of
// float series (NaN, stale markers and infinities among the values, with
// and without start times, 0 to 6 points), histogram points, exemplars and
// attributes, the series-level append gives the same batch value by value
// as AppendPoint filled row by row.
func TestAppendSeriesPointsMatchesAppendPoint(t *testing.T) {
	const staleNaN = 0x7ff0000000000002
	specials := []uint64{staleNaN, math.Float64bits(math.NaN()), math.Float64bits(math.Inf(1)), math.Float64bits(math.Inf(-1)), 0, 1 << 63}
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 7))
		var a, b Metrics
		for range 200 {
			switch r.IntN(6) {
			case 0: // a histogram point, row by row in both
				for _, m := range []*Metrics{&a, &b} {
					p := m.AppendPoint(1, 0, 0)
					m.Time[p], m.Count[p], m.Sum[p], m.Has[p] = 5, 3, 1.5, HasSum|HintGauge
					m.Scale[p], m.PosOffset[p] = 2, -1
					u := uint32(len(m.U64))
					m.U64 = append(m.U64, 1, 2)
					m.PosCounts[p] = Range{u, uint32(len(m.U64))}
					m.SetFloatCounts(p, true, 3, 0, []float64{1, 2}, 2)
				}
			case 1: // an exemplar message
				for _, m := range []*Metrics{&a, &b} {
					m.Msgs = append(m.Msgs, m.AppendString("ex"))
				}
			case 2: // attributes: Extend on a, Append on b
				n := r.IntN(4)
				keys, types, vals := a.Attrs.Extend(n)
				for i := range n {
					k, v := KeyID(r.IntN(9)), r.Uint64()
					keys[i], types[i], vals[i] = k, ValueString, v
					b.Attrs.Append(k, ValueString, v)
				}
			default: // a float series
				n := r.IntN(7)
				times := make([]int64, n)
				values := make([]uint64, n)
				var starts []int64
				if r.IntN(2) == 0 {
					starts = make([]int64, n)
				}
				for i := range n {
					times[i] = r.Int64()
					values[i] = math.Float64bits(r.NormFloat64())
					if r.IntN(3) == 0 {
						values[i] = specials[r.IntN(len(specials))]
					}
					if starts != nil {
						starts[i] = r.Int64N(1000)
					}
				}
				desc, res, sc := uint32(r.IntN(5)), uint32(r.IntN(3)), uint32(r.IntN(3))
				attr := Range{uint32(r.IntN(10)), uint32(10 + r.IntN(10))}
				sid := r.Uint64()
				p := a.AppendSeriesPoints(desc, res, sc, attr, sid, times, starts, values)
				if p != b.Len() {
					t.Fatalf("seed %d: first point %d, want %d", seed, p, b.Len())
				}
				for i := range n {
					q := b.AppendPoint(desc, res, sc)
					b.Time[q], b.Attr[q], b.SeriesID[q] = times[i], attr, sid
					if starts != nil {
						b.StartTime[q] = starts[i]
					}
					b.NumberType[q], b.Number[q] = ValueDouble, values[i]
				}
			}
		}
		sameColumns(t, &a, &b)
	}
}

// TestAppendSeriesPointsAllocatesNothingOnceGrown: a batch reset and
// refilled allocates nothing for its points and attributes.
func TestAppendSeriesPointsAllocatesNothingOnceGrown(t *testing.T) {
	var m Metrics
	times, values := []int64{1, 2, 3}, []uint64{4, 5, 6}
	fill := func() {
		m.Reset()
		for range 100 {
			keys, types, vals := m.Attrs.Extend(3)
			for i := range keys {
				keys[i], types[i], vals[i] = 1, ValueString, 2
			}
			m.AppendSeriesPoints(0, 0, 0, Range{}, 9, times[:1], nil, values[:1])
			m.AppendSeriesPoints(0, 0, 0, Range{}, 9, times, times, values)
		}
	}
	fill()
	if allocs := testing.AllocsPerRun(20, fill); allocs != 0 {
		t.Fatalf("%v allocations per run, want 0", allocs)
	}
	if m.Len() != 400 || m.Number[399] != 6 || m.StartTime[399] != 3 || m.StartTime[0] != 0 || m.Attrs.Len() != 300 {
		t.Fatalf("len %d, last value %d, last start %d, %d attributes", m.Len(), m.Number[399], m.StartTime[399], m.Attrs.Len())
	}
}
