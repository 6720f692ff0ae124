package rollup

import "time"

// tierOut collects one tier's windows of the hour in output order,
// column by column: the encoder reads each output column from one
// contiguous array instead of striding through wide rows.
type tierOut struct {
	tier time.Duration

	ser                                  []int32 // index into hour.ser
	start, firstT, lastT                 []int64
	points, count, resets                []uint64
	sum, min, max, first, last, increase []float64
	countF                               []float64
	flags                                []uint8 // has* bits below
	flags2                               []uint8 // float histogram bits (wCountF, wFloatBuckets)
	bk, bd, bf, sk                       []rng   // buckets, bounds, float buckets and sketch in the arenas
	u64                                  []uint64
	f64                                  []float64
	bytes                                []byte
}

// Bits of tierOut.flags.
const (
	wCount = 1 << iota
	wSum
	wMin
	wMax
	wFirst
	wIncrease
	wBuckets
	wMismatch
)

// Bits of tierOut.flags2.
const (
	wCountF = 1 << iota
	wFloatBuckets
)

func (o *tierOut) len() int { return len(o.ser) }

// reserve sizes the columns for n windows.
func (o *tierOut) reserve(n int) {
	o.ser = make([]int32, 0, n)
	for _, c := range [...]*[]int64{&o.start, &o.firstT, &o.lastT} {
		*c = make([]int64, 0, n)
	}
	for _, c := range [...]*[]uint64{&o.points, &o.count, &o.resets} {
		*c = make([]uint64, 0, n)
	}
	for _, c := range [...]*[]float64{&o.sum, &o.min, &o.max, &o.first, &o.last, &o.increase, &o.countF} {
		*c = make([]float64, 0, n)
	}
	o.flags = make([]uint8, 0, n)
	o.flags2 = make([]uint8, 0, n)
	for _, c := range [...]*[]rng{&o.bk, &o.bd, &o.bf, &o.sk} {
		*c = make([]rng, 0, n)
	}
}

func flag(ok bool, bit uint8) uint8 {
	if ok {
		return bit
	}
	return 0
}

// add appends window w of series si, copying its slices into the arenas.
func (o *tierOut) add(si int32, w *Window) {
	o.ser = append(o.ser, si)
	o.start = append(o.start, w.Start)
	o.firstT = append(o.firstT, w.FirstT)
	o.lastT = append(o.lastT, w.LastT)
	o.points = append(o.points, w.Points)
	o.count = append(o.count, w.Count)
	o.resets = append(o.resets, w.Resets)
	o.sum = append(o.sum, w.Sum)
	o.min = append(o.min, w.Min)
	o.max = append(o.max, w.Max)
	o.first = append(o.first, w.First)
	o.last = append(o.last, w.Last)
	o.increase = append(o.increase, w.Increase)
	o.flags = append(o.flags, flag(w.HasCount, wCount)|flag(w.HasSum, wSum)|flag(w.HasMin, wMin)|
		flag(w.HasMax, wMax)|flag(w.HasFirst, wFirst)|flag(w.HasIncrease, wIncrease)|
		flag(w.HasBuckets, wBuckets)|flag(w.Mismatch, wMismatch))
	o.countF = append(o.countF, w.CountF)
	o.flags2 = append(o.flags2, flag(w.HasCountF, wCountF)|flag(w.FloatBuckets, wFloatBuckets))
	bk := rng{int32(len(o.u64)), 0}
	bd := rng{int32(len(o.f64)), 0}
	if w.HasBuckets && !w.FloatBuckets {
		o.u64 = append(o.u64, w.Buckets...)
	}
	if w.HasBuckets {
		o.f64 = append(o.f64, w.Bounds...)
	}
	bk.end, bd.end = int32(len(o.u64)), int32(len(o.f64))
	bf := rng{int32(len(o.f64)), 0}
	if w.HasBuckets && w.FloatBuckets {
		o.f64 = append(o.f64, w.BucketsF...)
	}
	bf.end = int32(len(o.f64))
	o.bf = append(o.bf, bf)
	sk := rng{int32(len(o.bytes)), 0}
	o.bytes = append(o.bytes, w.Sketch...)
	sk.end = int32(len(o.bytes))
	o.bk, o.bd, o.sk = append(o.bk, bk), append(o.bd, bd), append(o.sk, sk)
}

// outRow is one window as a row, for writeRows.
type outRow struct {
	ser            int32
	w              Window
	bk, bd, bf, sk rng
}

// appendRows appends windows [i, j) as rows to dst.
func (o *tierOut) appendRows(dst []outRow, i, j int) []outRow {
	for k := i; k < j; k++ {
		f, f2 := o.flags[k], o.flags2[k]
		dst = append(dst, outRow{ser: o.ser[k], bk: o.bk[k], bd: o.bd[k], bf: o.bf[k], sk: o.sk[k], w: Window{
			Start: o.start[k], Points: o.points[k], FirstT: o.firstT[k], LastT: o.lastT[k],
			Count: o.count[k], HasCount: f&wCount != 0, Sum: o.sum[k], HasSum: f&wSum != 0,
			Min: o.min[k], Max: o.max[k], HasMin: f&wMin != 0, HasMax: f&wMax != 0,
			First: o.first[k], Last: o.last[k], HasFirst: f&wFirst != 0,
			Increase: o.increase[k], Resets: o.resets[k], HasIncrease: f&wIncrease != 0,
			HasBuckets: f&wBuckets != 0, Mismatch: f&wMismatch != 0,
			CountF: o.countF[k], HasCountF: f2&wCountF != 0, FloatBuckets: f2&wFloatBuckets != 0,
		}})
	}
	return dst
}
