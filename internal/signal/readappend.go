package signal

// Bulk appends of empty rows, for readers that fill a batch column by
// column (the lake's File): one call per row group instead of one
// AppendRecord, AppendPoint or AppendSpan per row, which was a tenth of
// reading a metrics file. Each appends exactly what n calls of its
// one-row counterpart would (TestAppendRowsMatch compares every column).

// zeros extends s by k zero elements.
func zeros[T any](s []T, k int) []T {
	n := len(s)
	s = grown(s, k)
	clear(s[n:])
	return s
}

// filled extends s by k copies of v.
func filled[T any](s []T, k int, v T) []T {
	n := len(s)
	s = grown(s, k)
	for i := n; i < len(s); i++ {
		s[i] = v
	}
	return s
}

// AppendRecords appends n records as n calls of AppendRecord(resource,
// scope) would, and returns the index of the first.
func (l *Logs) AppendRecords(n int, resource, scope uint32) int {
	first := l.Len()
	a := uint32(l.Attrs.Len())
	l.Resource = filled(l.Resource, n, resource)
	l.Scope = filled(l.Scope, n, scope)
	l.Time = zeros(l.Time, n)
	l.ObservedTime = zeros(l.ObservedTime, n)
	l.SeverityNum = zeros(l.SeverityNum, n)
	l.SeverityText = zeros(l.SeverityText, n)
	l.BodyType = filled(l.BodyType, n, ValueEmpty)
	l.Body = zeros(l.Body, n)
	l.Attr = filled(l.Attr, n, Range{a, a})
	l.DroppedAttrs = zeros(l.DroppedAttrs, n)
	l.Flags = zeros(l.Flags, n)
	l.TraceID = zeros(l.TraceID, n)
	l.SpanID = zeros(l.SpanID, n)
	l.EventName = zeros(l.EventName, n)
	return first
}

// AppendPoints appends n data points as n calls of AppendPoint(desc,
// resource, scope) would, and returns the index of the first.
func (m *Metrics) AppendPoints(n int, desc, resource, scope uint32) int {
	first := m.Len()
	a := uint32(m.Attrs.Len())
	e := uint32(len(m.Msgs))
	u := uint32(len(m.U64))
	f := uint32(len(m.F64))
	m.Desc = filled(m.Desc, n, desc)
	m.Resource = filled(m.Resource, n, resource)
	m.Scope = filled(m.Scope, n, scope)
	m.StartTime = zeros(m.StartTime, n)
	m.Time = zeros(m.Time, n)
	m.Attr = filled(m.Attr, n, Range{a, a})
	m.Flags = zeros(m.Flags, n)
	m.Exemplars = filled(m.Exemplars, n, Range{e, e})
	m.SeriesID = zeros(m.SeriesID, n)
	m.NumberType = filled(m.NumberType, n, ValueEmpty)
	m.Number = zeros(m.Number, n)
	m.Count = zeros(m.Count, n)
	m.Sum = zeros(m.Sum, n)
	m.Min = zeros(m.Min, n)
	m.Max = zeros(m.Max, n)
	m.Has = zeros(m.Has, n)
	m.BucketCounts = filled(m.BucketCounts, n, Range{u, u})
	m.Bounds = filled(m.Bounds, n, Range{f, f})
	m.Scale = zeros(m.Scale, n)
	m.ZeroCount = zeros(m.ZeroCount, n)
	m.ZeroThreshold = zeros(m.ZeroThreshold, n)
	m.PosOffset = zeros(m.PosOffset, n)
	m.PosCounts = filled(m.PosCounts, n, Range{u, u})
	m.NegOffset = zeros(m.NegOffset, n)
	m.NegCounts = filled(m.NegCounts, n, Range{u, u})
	m.Quantiles = filled(m.Quantiles, n, Range{f, f})
	m.FloatCounts = filled(m.FloatCounts, n, Range{f, f})
	return first
}

// AppendSpans appends n spans as n calls of AppendSpan(resource, scope)
// would, and returns the index of the first.
func (s *Spans) AppendSpans(n int, resource, scope uint32) int {
	first := s.Len()
	a := uint32(s.Attrs.Len())
	e := uint32(len(s.Msgs))
	s.Resource = filled(s.Resource, n, resource)
	s.Scope = filled(s.Scope, n, scope)
	s.TraceID = zeros(s.TraceID, n)
	s.SpanID = zeros(s.SpanID, n)
	s.ParentSpanID = zeros(s.ParentSpanID, n)
	s.TraceState = zeros(s.TraceState, n)
	s.Flags = zeros(s.Flags, n)
	s.Name = zeros(s.Name, n)
	s.Kind = zeros(s.Kind, n)
	s.StartTime = zeros(s.StartTime, n)
	s.EndTime = zeros(s.EndTime, n)
	s.Attr = filled(s.Attr, n, Range{a, a})
	s.DroppedAttrs = zeros(s.DroppedAttrs, n)
	s.Events = filled(s.Events, n, Range{e, e})
	s.DroppedEvents = zeros(s.DroppedEvents, n)
	s.Links = filled(s.Links, n, Range{e, e})
	s.DroppedLinks = zeros(s.DroppedLinks, n)
	s.StatusCode = zeros(s.StatusCode, n)
	s.StatusMessage = zeros(s.StatusMessage, n)
	return first
}
