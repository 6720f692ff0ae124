package signal

// MovePoint copies the per-point columns of point src to point dst of the
// same batch (dst <= src when compacting in place). What the point
// references (attributes, strings, buckets, exemplars) stays where it is in
// the batch's stores; only the references move.
func (m *Metrics) MovePoint(dst, src int) {
	m.Desc[dst] = m.Desc[src]
	m.Resource[dst] = m.Resource[src]
	m.Scope[dst] = m.Scope[src]
	m.StartTime[dst] = m.StartTime[src]
	m.Time[dst] = m.Time[src]
	m.Attr[dst] = m.Attr[src]
	m.Flags[dst] = m.Flags[src]
	m.Exemplars[dst] = m.Exemplars[src]
	m.SeriesID[dst] = m.SeriesID[src]
	m.NumberType[dst] = m.NumberType[src]
	m.Number[dst] = m.Number[src]
	m.Count[dst] = m.Count[src]
	m.Sum[dst] = m.Sum[src]
	m.Min[dst] = m.Min[src]
	m.Max[dst] = m.Max[src]
	m.Has[dst] = m.Has[src]
	m.BucketCounts[dst] = m.BucketCounts[src]
	m.Bounds[dst] = m.Bounds[src]
	m.Scale[dst] = m.Scale[src]
	m.ZeroCount[dst] = m.ZeroCount[src]
	m.ZeroThreshold[dst] = m.ZeroThreshold[src]
	m.PosOffset[dst] = m.PosOffset[src]
	m.PosCounts[dst] = m.PosCounts[src]
	m.NegOffset[dst] = m.NegOffset[src]
	m.NegCounts[dst] = m.NegCounts[src]
	m.Quantiles[dst] = m.Quantiles[src]
	m.FloatCounts[dst] = m.FloatCounts[src]
}

// Truncate keeps the first n points (after MovePoint compacted the kept
// ones to the front). The stores keep what the dropped points referenced:
// an encoder writes only what the kept points reference. Copiers reading
// from m start over (its descriptors or attributes may have changed in
// place).
func (m *Metrics) Truncate(n int) {
	m.gen++
	m.Desc = m.Desc[:n]
	m.Resource = m.Resource[:n]
	m.Scope = m.Scope[:n]
	m.StartTime = m.StartTime[:n]
	m.Time = m.Time[:n]
	m.Attr = m.Attr[:n]
	m.Flags = m.Flags[:n]
	m.Exemplars = m.Exemplars[:n]
	m.SeriesID = m.SeriesID[:n]
	m.NumberType = m.NumberType[:n]
	m.Number = m.Number[:n]
	m.Count = m.Count[:n]
	m.Sum = m.Sum[:n]
	m.Min = m.Min[:n]
	m.Max = m.Max[:n]
	m.Has = m.Has[:n]
	m.BucketCounts = m.BucketCounts[:n]
	m.Bounds = m.Bounds[:n]
	m.Scale = m.Scale[:n]
	m.ZeroCount = m.ZeroCount[:n]
	m.ZeroThreshold = m.ZeroThreshold[:n]
	m.PosOffset = m.PosOffset[:n]
	m.PosCounts = m.PosCounts[:n]
	m.NegOffset = m.NegOffset[:n]
	m.NegCounts = m.NegCounts[:n]
	m.Quantiles = m.Quantiles[:n]
	m.FloatCounts = m.FloatCounts[:n]
}
