package signal

// Bulk copies: CopyRows appends many records of a source batch at once,
// column by column, with the same result as CopyFrom for each of them in
// turn (the same resources, scopes and descriptors in the same order, the
// same values), for less: the lake writer copies every record it buffers,
// and one call per record was a fifth of its CPU.
//
// Strings are still copied one by one. Appending the source's arena whole
// and shifting every Str was 6% faster on the corpus logs but buffered
// 1.5x the bytes: a decoded request's arena is its whole protobuf
// message, of which the strings are about 60%.

// Rows selects records of a source batch: the index list Idx when it is
// not nil, else the range [From, To).
type Rows struct {
	Idx      []int32
	From, To int
}

// Len is the number of rows selected.
func (r Rows) Len() int {
	if r.Idx != nil {
		return len(r.Idx)
	}
	return r.To - r.From
}

// gather appends src[i] for each selected row i to dst.
func gather[T any](dst, src []T, r Rows) []T {
	if r.Idx == nil {
		return append(dst, src[r.From:r.To]...)
	}
	n := len(dst)
	dst = grown(dst, len(r.Idx))
	out := dst[n:]
	for j, i := range r.Idx {
		out[j] = src[i]
	}
	return dst
}

// grown extends s by k elements (to be overwritten).
func grown[T any](s []T, k int) []T {
	n := len(s)
	if cap(s)-n < k {
		s = append(s[:cap(s)], make([]T, n+k-cap(s))...)
	}
	return s[:n+k]
}

// strs appends the copies of src[i] for each selected row i.
func (cp *copier) strs(d *Common, dst, src []Str, r Rows) []Str {
	n := len(dst)
	dst = grown(dst, r.Len())
	out := dst[n:]
	if r.Idx == nil {
		for j, s := range src[r.From:r.To] {
			out[j] = cp.str(d, s)
		}
		return dst
	}
	for j, i := range r.Idx {
		out[j] = cp.str(d, src[i])
	}
	return dst
}

// resources appends the copied resource (or scope) index of each selected
// row, copying each resource the first time a row names it, in row order
// as CopyFrom does.
func (cp *copier) refs(d *Common, dst, src []uint32, r Rows, one func(*copier, *Common, uint32) uint32) []uint32 {
	n := len(dst)
	dst = grown(dst, r.Len())
	out := dst[n:]
	prev, prevOut := uint32(0), uint32(0)
	have := false
	put := func(j int, v uint32) {
		if !have || v != prev {
			prev, prevOut, have = v, one(cp, d, v), true
		}
		out[j] = prevOut
	}
	if r.Idx == nil {
		for j, v := range src[r.From:r.To] {
			put(j, v)
		}
		return dst
	}
	for j, i := range r.Idx {
		put(j, src[i])
	}
	return dst
}

// attrRanges copies the attribute set of each selected row, in row order.
// With ShareAttrSets, rows that share a Range in the source (the samples
// of one series in a decoded remote-write request) get one copy, found or
// made once per run of them, and the sets are looked up in blocks
// (sharedAttrRanges).
func (cp *copier) attrRanges(d *Common, dst, src []Range, r Rows) []Range {
	total := 0
	each(r, func(i int) { total += src[i].Len() })
	d.Attrs.Key = growCap(d.Attrs.Key, total)
	d.Attrs.Type = growCap(d.Attrs.Type, total)
	d.Attrs.Val = growCap(d.Attrs.Val, total)
	n := len(dst)
	dst = grown(dst, r.Len())
	out := dst[n:]
	if d.ShareAttrSets {
		cp.sharedAttrRanges(d, out, src, r)
		return dst
	}
	j := 0
	each(r, func(i int) {
		out[j] = cp.attrs(d, src[i])
		j++
	})
	return dst
}

// setBlock is how many rows sharedAttrRanges looks up at once.
const setBlock = 32

// sharedAttrRanges is attrRanges into a batch with ShareAttrSets, out the
// Ranges to fill. The rows go in blocks of setBlock: their sets are
// hashed first (reading the source in order), then the set table's slots
// they fall on and the destination sets those name are read in passes of
// independent loads (touchSets), and only then is each set found or
// copied, in row order. The table and a partition's sets are larger
// than the cache (60K sets for the corpus metrics): a lookup was a cache
// miss on the slot and another on the set, one after the other; read
// together, a block's misses overlap. The result is that of attrs row by
// row: the touches only read, and a slot that changed in between (an add,
// a grow) is looked up as usual.
func (cp *copier) sharedAttrRanges(d *Common, out, src []Range, r Rows) {
	var hs [setBlock]uint64
	var buf [setBlock]int
	var prev, prevOut Range
	have := false
	total := r.Len()
	for b0 := 0; b0 < total; b0 += setBlock {
		b1 := min(b0+setBlock, total)
		rows := r.block(&buf, b0, b1)
		sa := &cp.src.Attrs
		pp, ph := prev, have
		nh := 0
		for _, i := range rows {
			s := src[i]
			if !(ph && s == pp) && s.Len() > 0 {
				hs[nh] = cp.sourceSetHash(d, sa.Key[s.Start:s.End], sa.Type[s.Start:s.End], sa.Val[s.Start:s.End])
				nh++
			}
			pp, ph = s, s.Len() > 0
		}
		cp.touchSets(d, hs[:nh])
		k := 0
		for j, i := range rows {
			s := src[i]
			if have && s == prev {
				out[b0+j] = prevOut
				continue
			}
			if s.Len() == 0 {
				out[b0+j] = cp.attrsShared(d, s, true)
			} else {
				out[b0+j] = cp.attrsHashed(d, s, hs[k])
				k++
			}
			prev, prevOut, have = s, out[b0+j], s.Len() > 0
		}
	}
}

// block returns the source row indexes of selected rows [b0, b1), in buf.
func (r Rows) block(buf *[setBlock]int, b0, b1 int) []int {
	rows := buf[:b1-b0]
	if r.Idx == nil {
		for j := range rows {
			rows[j] = r.From + b0 + j
		}
		return rows
	}
	for j, i := range r.Idx[b0:b1] {
		rows[j] = int(i)
	}
	return rows
}

// msgRanges copies the message ranges of each selected row.
func (cp *copier) msgRanges(d *Common, dst, src []Range, r Rows) []Range {
	n := len(dst)
	dst = grown(dst, r.Len())
	out := dst[n:]
	if r.Idx == nil {
		m := uint32(len(d.Msgs))
		if fillEmpty(out, src[r.From:r.To], Range{m, m}) {
			return dst
		}
	}
	j := 0
	each(r, func(i int) {
		out[j] = cp.msgs(d, src[i])
		j++
	})
	return dst
}

// growCap makes room for k more elements without changing the length.
func growCap[T any](s []T, k int) []T {
	if cap(s)-len(s) < k {
		s = append(s[:cap(s)], make([]T, len(s)+k-cap(s))...)[:len(s)]
	}
	return s
}

// fillEmpty sets out[j] to e for each range of rs while they are empty and
// reports whether all were: the copy of a range column of a contiguous
// run of rows that hold none (exemplars, buckets, quantiles of gauges and
// sums: every remote-write sample) is one loop, not a call per row. When
// it reports false the caller copies every row again.
func fillEmpty(out, rs []Range, e Range) bool {
	out = out[:len(rs)]
	for j, rg := range rs {
		if rg.Start != rg.End {
			return false
		}
		out[j] = e
	}
	return true
}

// each calls fn with each selected row index, in order.
func each(r Rows, fn func(i int)) {
	if r.Idx == nil {
		for i := r.From; i < r.To; i++ {
			fn(i)
		}
		return
	}
	for _, i := range r.Idx {
		fn(int(i))
	}
}

func copyResource(cp *copier, d *Common, r uint32) uint32 { return cp.resource(d, r) }
func copyScope(cp *copier, d *Common, s uint32) uint32    { return cp.scope(d, s) }

// CopyRows appends the selected records of src to l; the result is what
// CopyFrom of each would give, in order.
func (l *Logs) CopyRows(src *Logs, r Rows) {
	if r.Len() == 0 {
		return
	}
	cp := &l.cp
	d := &l.Common
	cp.bind(&src.Common)
	l.Resource = cp.refs(d, l.Resource, src.Resource, r, copyResource)
	l.Scope = cp.refs(d, l.Scope, src.Scope, r, copyScope)
	l.Time = gather(l.Time, src.Time, r)
	l.ObservedTime = gather(l.ObservedTime, src.ObservedTime, r)
	l.SeverityNum = gather(l.SeverityNum, src.SeverityNum, r)
	l.SeverityText = cp.strs(d, l.SeverityText, src.SeverityText, r)
	n := len(l.Body)
	l.BodyType = gather(l.BodyType, src.BodyType, r)
	l.Body = gather(l.Body, src.Body, r)
	for j := n; j < len(l.Body); j++ {
		switch l.BodyType[j] {
		case ValueString, ValueBytes, ValueArray, ValueMap:
			l.Body[j] = uint64(cp.str(d, Str(l.Body[j])))
		}
	}
	l.Attr = cp.attrRanges(d, l.Attr, src.Attr, r)
	l.DroppedAttrs = gather(l.DroppedAttrs, src.DroppedAttrs, r)
	l.Flags = gather(l.Flags, src.Flags, r)
	l.TraceID = gather(l.TraceID, src.TraceID, r)
	l.SpanID = gather(l.SpanID, src.SpanID, r)
	l.EventName = cp.strs(d, l.EventName, src.EventName, r)
}

// CopyRows appends the selected spans of src to s; see Logs.CopyRows.
func (s *Spans) CopyRows(src *Spans, r Rows) {
	if r.Len() == 0 {
		return
	}
	cp := &s.cp
	d := &s.Common
	cp.bind(&src.Common)
	s.Resource = cp.refs(d, s.Resource, src.Resource, r, copyResource)
	s.Scope = cp.refs(d, s.Scope, src.Scope, r, copyScope)
	s.TraceID = gather(s.TraceID, src.TraceID, r)
	s.SpanID = gather(s.SpanID, src.SpanID, r)
	s.ParentSpanID = gather(s.ParentSpanID, src.ParentSpanID, r)
	s.TraceState = cp.strs(d, s.TraceState, src.TraceState, r)
	s.Flags = gather(s.Flags, src.Flags, r)
	s.Name = cp.strs(d, s.Name, src.Name, r)
	s.Kind = gather(s.Kind, src.Kind, r)
	s.StartTime = gather(s.StartTime, src.StartTime, r)
	s.EndTime = gather(s.EndTime, src.EndTime, r)
	s.Attr = cp.attrRanges(d, s.Attr, src.Attr, r)
	s.DroppedAttrs = gather(s.DroppedAttrs, src.DroppedAttrs, r)
	s.Events = cp.msgRanges(d, s.Events, src.Events, r)
	s.DroppedEvents = gather(s.DroppedEvents, src.DroppedEvents, r)
	s.Links = cp.msgRanges(d, s.Links, src.Links, r)
	s.DroppedLinks = gather(s.DroppedLinks, src.DroppedLinks, r)
	s.StatusCode = gather(s.StatusCode, src.StatusCode, r)
	s.StatusMessage = cp.strs(d, s.StatusMessage, src.StatusMessage, r)
}

// CopyRows appends the selected data points of src to m; see
// Logs.CopyRows.
func (m *Metrics) CopyRows(src *Metrics, r Rows) {
	if r.Len() == 0 {
		return
	}
	cp := &m.cp
	d := &m.Common
	cp.bind(&src.Common)
	// Descriptors first, in row order (copyDesc binds its own map).
	n := len(m.Desc)
	m.Desc = grown(m.Desc, r.Len())
	out := m.Desc[n:]
	j := 0
	prev, prevOut, have := uint32(0), uint32(0), false
	each(r, func(i int) {
		if di := src.Desc[i]; !have || di != prev {
			prev, prevOut, have = di, m.copyDesc(src, di), true
		}
		out[j] = prevOut
		j++
	})
	m.Resource = cp.refs(d, m.Resource, src.Resource, r, copyResource)
	m.Scope = cp.refs(d, m.Scope, src.Scope, r, copyScope)
	m.StartTime = gather(m.StartTime, src.StartTime, r)
	m.Time = gather(m.Time, src.Time, r)
	m.Attr = cp.attrRanges(d, m.Attr, src.Attr, r)
	m.Flags = gather(m.Flags, src.Flags, r)
	m.Exemplars = cp.msgRanges(d, m.Exemplars, src.Exemplars, r)
	m.SeriesID = gather(m.SeriesID, src.SeriesID, r)
	m.NumberType = gather(m.NumberType, src.NumberType, r)
	m.Number = gather(m.Number, src.Number, r)
	m.Count = gather(m.Count, src.Count, r)
	m.Sum = gather(m.Sum, src.Sum, r)
	m.Min = gather(m.Min, src.Min, r)
	m.Max = gather(m.Max, src.Max, r)
	m.Has = gather(m.Has, src.Has, r)
	m.BucketCounts = m.u64Ranges(m.BucketCounts, src, src.BucketCounts, r)
	m.Bounds = m.f64Ranges(m.Bounds, src, src.Bounds, r)
	m.Scale = gather(m.Scale, src.Scale, r)
	m.ZeroCount = gather(m.ZeroCount, src.ZeroCount, r)
	m.ZeroThreshold = gather(m.ZeroThreshold, src.ZeroThreshold, r)
	m.PosOffset = gather(m.PosOffset, src.PosOffset, r)
	m.PosCounts = m.u64Ranges(m.PosCounts, src, src.PosCounts, r)
	m.NegOffset = gather(m.NegOffset, src.NegOffset, r)
	m.NegCounts = m.u64Ranges(m.NegCounts, src, src.NegCounts, r)
	m.Quantiles = m.f64Ranges(m.Quantiles, src, src.Quantiles, r)
	m.FloatCounts = m.f64Ranges(m.FloatCounts, src, src.FloatCounts, r)
}

func (m *Metrics) u64Ranges(dst []Range, src *Metrics, rs []Range, r Rows) []Range {
	n := len(dst)
	dst = grown(dst, r.Len())
	out := dst[n:]
	if r.Idx == nil {
		u := uint32(len(m.U64))
		if fillEmpty(out, rs[r.From:r.To], Range{u, u}) {
			return dst
		}
	}
	j := 0
	each(r, func(i int) {
		if rg := rs[i]; rg.Len() == 0 {
			u := uint32(len(m.U64))
			out[j] = Range{u, u}
		} else {
			out[j] = m.copyU64(src, rg)
		}
		j++
	})
	return dst
}

func (m *Metrics) f64Ranges(dst []Range, src *Metrics, rs []Range, r Rows) []Range {
	n := len(dst)
	dst = grown(dst, r.Len())
	out := dst[n:]
	if r.Idx == nil {
		f := uint32(len(m.F64))
		if fillEmpty(out, rs[r.From:r.To], Range{f, f}) {
			return dst
		}
	}
	j := 0
	each(r, func(i int) {
		if rg := rs[i]; rg.Len() == 0 {
			f := uint32(len(m.F64))
			out[j] = Range{f, f}
		} else {
			out[j] = m.copyF64(src, rg)
		}
		j++
	})
	return dst
}
