package signal

// Series-level appends: a decoder that holds a whole series (one label set,
// one descriptor, n float samples) appends its points column by column
// instead of row by row through AppendPoint, and its attributes into slots
// reserved at once. The rows are the same as AppendPoint's filled in place
// (TestAppendSeriesPointsMatchesAppendPoint), so every consumer of Metrics
// reads them as before.

// reserve returns s with room for n more elements, grown as append grows.
func reserve[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	return append(s, make([]T, n)...)[:len(s)]
}

// Extend appends n pairs and returns their slots for the caller to fill
// (every one: their contents are unspecified).
func (a *Attrs) Extend(n int) (keys []KeyID, types []ValueType, vals []uint64) {
	l := len(a.Key)
	if cap(a.Key)-l < n || cap(a.Type)-l < n || cap(a.Val)-l < n {
		a.Key, a.Type, a.Val = reserve(a.Key, n), reserve(a.Type, n), reserve(a.Val, n)
	}
	a.Key, a.Type, a.Val = a.Key[:l+n], a.Type[:l+n], a.Val[:l+n]
	return a.Key[l:], a.Type[l:], a.Val[l:]
}

// AppendSeriesPoints appends len(times) double-valued gauge or sum points
// of one series: descriptor desc, resource, scope, attributes attr and
// series id sid shared, time, value (float64 bits) and start time per
// point (starts nil: 0; else as long as times). Every other field is zero
// and the exemplar ranges are empty, as AppendPoint leaves them; it
// returns the index of the first point. A single point is appended with
// its values (no zero written first); more are filled column by column.
func (m *Metrics) AppendSeriesPoints(desc, resource, scope uint32, attr Range, sid uint64, times, starts []int64, values []uint64) int {
	n := len(times)
	p := len(m.Time)
	if cap(m.Time)-p < n {
		m.growPoints(n)
	}
	values = values[:n]
	if starts != nil {
		starts = starts[:n]
	}
	e := uint32(len(m.Msgs))
	u := uint32(len(m.U64))
	f := uint32(len(m.F64))
	if n == 1 {
		var st int64
		if starts != nil {
			st = starts[0]
		}
		m.Desc = append(m.Desc, desc)
		m.Resource = append(m.Resource, resource)
		m.Scope = append(m.Scope, scope)
		m.StartTime = append(m.StartTime, st)
		m.Time = append(m.Time, times[0])
		m.Attr = append(m.Attr, attr)
		m.Flags = append(m.Flags, 0)
		m.Exemplars = append(m.Exemplars, Range{e, e})
		m.SeriesID = append(m.SeriesID, sid)
		m.NumberType = append(m.NumberType, ValueDouble)
		m.Number = append(m.Number, values[0])
		m.Count = append(m.Count, 0)
		m.Sum = append(m.Sum, 0)
		m.Min = append(m.Min, 0)
		m.Max = append(m.Max, 0)
		m.Has = append(m.Has, 0)
		m.BucketCounts = append(m.BucketCounts, Range{u, u})
		m.Bounds = append(m.Bounds, Range{f, f})
		m.Scale = append(m.Scale, 0)
		m.ZeroCount = append(m.ZeroCount, 0)
		m.ZeroThreshold = append(m.ZeroThreshold, 0)
		m.PosOffset = append(m.PosOffset, 0)
		m.PosCounts = append(m.PosCounts, Range{u, u})
		m.NegOffset = append(m.NegOffset, 0)
		m.NegCounts = append(m.NegCounts, Range{u, u})
		m.Quantiles = append(m.Quantiles, Range{f, f})
		m.FloatCounts = append(m.FloatCounts, Range{f, f})
		return p
	}
	// append(s, make([]T, n)...) grows once and clears, without a
	// temporary; the columns with a shared value are then filled.
	m.Desc = append(m.Desc, make([]uint32, n)...)
	for i, c := p, m.Desc; i < len(c); i++ {
		c[i] = desc
	}
	m.Resource = append(m.Resource, make([]uint32, n)...)
	for i, c := p, m.Resource; i < len(c); i++ {
		c[i] = resource
	}
	m.Scope = append(m.Scope, make([]uint32, n)...)
	for i, c := p, m.Scope; i < len(c); i++ {
		c[i] = scope
	}
	if starts != nil {
		m.StartTime = append(m.StartTime, starts...)
	} else {
		m.StartTime = append(m.StartTime, make([]int64, n)...)
	}
	m.Time = append(m.Time, times...)
	m.Attr = append(m.Attr, make([]Range, n)...)
	for i, c := p, m.Attr; i < len(c); i++ {
		c[i] = attr
	}
	m.Flags = append(m.Flags, make([]uint32, n)...)
	m.Exemplars = appendRanges(m.Exemplars, n, Range{e, e})
	m.SeriesID = append(m.SeriesID, make([]uint64, n)...)
	for i, c := p, m.SeriesID; i < len(c); i++ {
		c[i] = sid
	}
	m.NumberType = append(m.NumberType, make([]ValueType, n)...)
	for i, c := p, m.NumberType; i < len(c); i++ {
		c[i] = ValueDouble
	}
	m.Number = append(m.Number, values...)
	m.appendValueless(n, u, f)
	return p
}

// appendValueless appends to the columns a double point leaves empty
// (counts, sums, buckets, bounds, quantiles) n points' zeros and empty
// ranges at u (U64) and f (F64).
func (m *Metrics) appendValueless(n int, u, f uint32) {
	m.Count = append(m.Count, make([]uint64, n)...)
	m.Sum = append(m.Sum, make([]float64, n)...)
	m.Min = append(m.Min, make([]float64, n)...)
	m.Max = append(m.Max, make([]float64, n)...)
	m.Has = append(m.Has, make([]uint8, n)...)
	m.BucketCounts = appendRanges(m.BucketCounts, n, Range{u, u})
	m.Bounds = appendRanges(m.Bounds, n, Range{f, f})
	m.Scale = append(m.Scale, make([]int32, n)...)
	m.ZeroCount = append(m.ZeroCount, make([]uint64, n)...)
	m.ZeroThreshold = append(m.ZeroThreshold, make([]float64, n)...)
	m.PosOffset = append(m.PosOffset, make([]int32, n)...)
	m.PosCounts = appendRanges(m.PosCounts, n, Range{u, u})
	m.NegOffset = append(m.NegOffset, make([]int32, n)...)
	m.NegCounts = appendRanges(m.NegCounts, n, Range{u, u})
	m.Quantiles = appendRanges(m.Quantiles, n, Range{f, f})
	m.FloatCounts = appendRanges(m.FloatCounts, n, Range{f, f})
}

// appendRanges appends n copies of r.
func appendRanges(s []Range, n int, r Range) []Range {
	p := len(s)
	s = append(s, make([]Range, n)...)
	for i := p; i < len(s); i++ {
		s[i] = r
	}
	return s
}

// staggerBytes is how far apart growPoints starts the arrays of the point
// columns, modulo a page. Arrays of 8, 12, 16 KB, ... start on a page, so that
// without it element p of every 8-byte column falls in one L1 cache set
// (the set is the address's bits 6-11) and a point's writes to its 28
// columns evict each other: cachegrind, remote-write decode of 2,000
// series, 17.7 L1 write misses a point; staggered, each column misses
// once per line, as a stream should.
const staggerBytes = 128

// growPoints makes room for n more points in each point column that has
// less, growing it as append would (doubling); an array of a page or more
// starts col*staggerBytes past its allocation, col being the column's
// place, so that the columns' arrays start in different cache sets.
func (m *Metrics) growPoints(n int) {
	m.Desc = growCol(m.Desc, n, 0, 4)
	m.Resource = growCol(m.Resource, n, 1, 4)
	m.Scope = growCol(m.Scope, n, 2, 4)
	m.StartTime = growCol(m.StartTime, n, 3, 8)
	m.Time = growCol(m.Time, n, 4, 8)
	m.Attr = growCol(m.Attr, n, 5, 8)
	m.Flags = growCol(m.Flags, n, 6, 4)
	m.Exemplars = growCol(m.Exemplars, n, 7, 8)
	m.SeriesID = growCol(m.SeriesID, n, 8, 8)
	m.NumberType = growCol(m.NumberType, n, 9, 1)
	m.Number = growCol(m.Number, n, 10, 8)
	m.Count = growCol(m.Count, n, 11, 8)
	m.Sum = growCol(m.Sum, n, 12, 8)
	m.Min = growCol(m.Min, n, 13, 8)
	m.Max = growCol(m.Max, n, 14, 8)
	m.Has = growCol(m.Has, n, 15, 1)
	m.BucketCounts = growCol(m.BucketCounts, n, 16, 8)
	m.Bounds = growCol(m.Bounds, n, 17, 8)
	m.Scale = growCol(m.Scale, n, 18, 4)
	m.ZeroCount = growCol(m.ZeroCount, n, 19, 8)
	m.ZeroThreshold = growCol(m.ZeroThreshold, n, 20, 8)
	m.PosOffset = growCol(m.PosOffset, n, 21, 4)
	m.PosCounts = growCol(m.PosCounts, n, 22, 8)
	m.NegOffset = growCol(m.NegOffset, n, 23, 4)
	m.NegCounts = growCol(m.NegCounts, n, 24, 8)
	m.Quantiles = growCol(m.Quantiles, n, 25, 8)
	m.FloatCounts = growCol(m.FloatCounts, n, 26, 8)
}

// growCol returns s with room for n more elements of size bytes: s itself
// when it has it, else a copy in an array of twice the capacity (at least
// len+n), started col*staggerBytes in when it is of a page or more.
func growCol[T any](s []T, n, col, size int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	c := max(2*cap(s), len(s)+n)
	if c*size < 4096 {
		return reserve(s, n)
	}
	skip := (col * staggerBytes % 4096) / size
	buf := make([]T, skip+c)
	copy(buf[skip:], s)
	return buf[skip : skip+len(s) : skip+c]
}

// AppendDoublePoints appends len(times) double-valued points of one
// resource and scope, point i with descriptor desc[i], attributes attr[i],
// series id sid[i], time times[i] and value values[i] (float64 bits), as
// AppendSeriesPoints of each point would (start time 0, every other field
// zero, empty exemplar and bucket ranges), and returns the index of the
// first. Column by column: a request's points of many series written one
// column at a time, instead of some 30 column appends per point.
func (m *Metrics) AppendDoublePoints(resource, scope uint32, desc []uint32, attr []Range, sid []uint64, times []int64, values []uint64) int {
	n := len(times)
	p := len(m.Time)
	if cap(m.Time)-p < n {
		m.growPoints(n) // doubling, the arrays staggered, as AppendSeriesPoints
	}
	desc, attr, sid, values = desc[:n], attr[:n], sid[:n], values[:n]
	e := uint32(len(m.Msgs))
	u := uint32(len(m.U64))
	f := uint32(len(m.F64))
	m.Desc = append(m.Desc, desc...)
	m.Resource = append(m.Resource, make([]uint32, n)...)
	for i, c := p, m.Resource; i < len(c); i++ {
		c[i] = resource
	}
	m.Scope = append(m.Scope, make([]uint32, n)...)
	for i, c := p, m.Scope; i < len(c); i++ {
		c[i] = scope
	}
	m.StartTime = append(m.StartTime, make([]int64, n)...)
	m.Time = append(m.Time, times...)
	m.Attr = append(m.Attr, attr...)
	m.Flags = append(m.Flags, make([]uint32, n)...)
	m.Exemplars = appendRanges(m.Exemplars, n, Range{e, e})
	m.SeriesID = append(m.SeriesID, sid...)
	m.NumberType = append(m.NumberType, make([]ValueType, n)...)
	for i, c := p, m.NumberType; i < len(c); i++ {
		c[i] = ValueDouble
	}
	m.Number = append(m.Number, values...)
	m.appendValueless(n, u, f)
	return p
}
