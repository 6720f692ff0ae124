package signal

import "math"

// MetricDesc describes one OTLP Metric; its data points reference it.
type MetricDesc struct {
	Name, Description, Unit Str
	Type                    MetricType
	Temporality             Temporality // sums, histograms, exponential histograms
	Monotonic               bool        // sums
	Metadata                Range       // Metric.metadata, into Attrs
}

// Bits of Metrics.Has.
const (
	HasSum uint8 = 1 << iota
	HasMin
	HasMax
)

// Bits 3 and 4 of Metrics.Has: a native histogram's counter reset hint as
// Prometheus remote write sends it (0: unknown, as OTLP points have).
const (
	HintMask    uint8 = 3 << 3
	HintReset   uint8 = 1 << 3 // a counter reset happened
	HintNoReset uint8 = 2 << 3 // no counter reset happened
	HintGauge   uint8 = 3 << 3 // a gauge histogram: never a counter
)

// Metrics is a batch of metric data points, one row per point of any type.
// Fields that do not apply to a point's type hold zero values.
type Metrics struct {
	Common
	Descs []MetricDesc

	Desc       []uint32 // index into Descs
	Resource   []uint32
	Scope      []uint32
	StartTime  []int64
	Time       []int64
	Attr       []Range
	Flags      []uint32
	Exemplars  []Range  // into Msgs: raw Exemplar messages
	SeriesID   []uint64 // see ComputeSeriesIDs
	NumberType []ValueType
	Number     []uint64 // gauge and sum value: int64 or float64 bits per NumberType

	// Histogram, exponential histogram and summary fields.
	Count         []uint64
	Sum           []float64
	Min           []float64
	Max           []float64
	Has           []uint8 // HasSum | HasMin | HasMax
	BucketCounts  []Range // into U64
	Bounds        []Range // into F64
	Scale         []int32
	ZeroCount     []uint64
	ZeroThreshold []float64
	PosOffset     []int32
	PosCounts     []Range // into U64
	NegOffset     []int32
	NegCounts     []Range // into U64
	Quantiles     []Range // into F64 as (quantile, value) pairs
	// FloatCounts is a float histogram's exact counts (Prometheus native
	// histograms with float counts), into F64: count, then for an
	// exponential histogram the zero count, the positive and the negative
	// buckets, for an explicit one the buckets (as many as PosCounts,
	// NegCounts or BucketCounts hold). Empty for integer counts. Count,
	// ZeroCount and the U64 buckets of a float histogram hold the counts
	// rounded (RoundCount), for readers that know only integer counts.
	FloatCounts []Range

	U64 []uint64
	F64 []float64

	cp      copier
	descSrc *Common // source whose descriptors descMap maps
	descGen uint64
	descMap []uint32   // src desc -> dst desc + 1
	descTab descTable  // with ShareAttrSets: descriptors by content
	known   knownTable // series appended straight into the batch (knownseries.go)

	seriesScratch seriesScratch
}

// Len is the number of data points.
func (m *Metrics) Len() int { return len(m.Time) }

// Reset empties the batch, keeping capacity.
func (m *Metrics) Reset() {
	m.Common.Reset()
	m.cp.forget()
	m.descSrc = nil
	m.Descs = m.Descs[:0]
	m.Desc = m.Desc[:0]
	m.Resource = m.Resource[:0]
	m.Scope = m.Scope[:0]
	m.StartTime = m.StartTime[:0]
	m.Time = m.Time[:0]
	m.Attr = m.Attr[:0]
	m.Flags = m.Flags[:0]
	m.Exemplars = m.Exemplars[:0]
	m.SeriesID = m.SeriesID[:0]
	m.NumberType = m.NumberType[:0]
	m.Number = m.Number[:0]
	m.Count = m.Count[:0]
	m.Sum = m.Sum[:0]
	m.Min = m.Min[:0]
	m.Max = m.Max[:0]
	m.Has = m.Has[:0]
	m.BucketCounts = m.BucketCounts[:0]
	m.Bounds = m.Bounds[:0]
	m.Scale = m.Scale[:0]
	m.ZeroCount = m.ZeroCount[:0]
	m.ZeroThreshold = m.ZeroThreshold[:0]
	m.PosOffset = m.PosOffset[:0]
	m.PosCounts = m.PosCounts[:0]
	m.NegOffset = m.NegOffset[:0]
	m.NegCounts = m.NegCounts[:0]
	m.Quantiles = m.Quantiles[:0]
	m.FloatCounts = m.FloatCounts[:0]
	m.U64 = m.U64[:0]
	m.F64 = m.F64[:0]
}

// AppendPoint appends a data point with zero values for every field and
// returns its index. Decoders fill the fields in place.
func (m *Metrics) AppendPoint(desc, resource, scope uint32) int {
	m.Desc = append(m.Desc, desc)
	m.Resource = append(m.Resource, resource)
	m.Scope = append(m.Scope, scope)
	m.StartTime = append(m.StartTime, 0)
	m.Time = append(m.Time, 0)
	a := uint32(m.Attrs.Len())
	m.Attr = append(m.Attr, Range{a, a})
	m.Flags = append(m.Flags, 0)
	e := uint32(len(m.Msgs))
	m.Exemplars = append(m.Exemplars, Range{e, e})
	m.SeriesID = append(m.SeriesID, 0)
	m.NumberType = append(m.NumberType, ValueEmpty)
	m.Number = append(m.Number, 0)
	m.Count = append(m.Count, 0)
	m.Sum = append(m.Sum, 0)
	m.Min = append(m.Min, 0)
	m.Max = append(m.Max, 0)
	m.Has = append(m.Has, 0)
	u := uint32(len(m.U64))
	f := uint32(len(m.F64))
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
	return len(m.Time) - 1
}

// IsFloatHist says point i is a histogram with float counts.
func (m *Metrics) IsFloatHist(i int) bool { return m.FloatCounts[i].Len() > 0 }

// RoundCount is a float count as an integer count: rounded to the
// nearest, NaN and negative counts 0, at most 2^63.
func RoundCount(f float64) uint64 {
	if !(f > 0) {
		return 0
	}
	if f >= 1<<63 {
		return 1 << 63
	}
	return uint64(math.Round(f))
}

// SetFloatCounts makes point i a float histogram: it appends count, zero
// (exponential histograms only, exp) and the bucket counts buckets (the
// positive then negative ones of an exponential histogram, split at
// npos, or the explicit buckets) to F64 as FloatCounts[i], and sets the
// integer fields to the rounded counts (RoundCount): the buckets into
// U64, Count to the rounded buckets' sum plus the rounded zero count when
// the histogram has buckets (so that integer readers see a consistent
// histogram), else the rounded count.
func (m *Metrics) SetFloatCounts(i int, exp bool, count, zero float64, buckets []float64, npos int) {
	f := uint32(len(m.F64))
	m.F64 = append(m.F64, count)
	if exp {
		m.F64 = append(m.F64, zero)
	}
	m.F64 = append(m.F64, buckets...)
	m.FloatCounts[i] = Range{f, uint32(len(m.F64))}
	var total uint64
	u := uint32(len(m.U64))
	for _, b := range buckets {
		c := RoundCount(b)
		total += c
		m.U64 = append(m.U64, c)
	}
	switch {
	case exp:
		m.PosCounts[i] = Range{u, u + uint32(npos)}
		m.NegCounts[i] = Range{u + uint32(npos), uint32(len(m.U64))}
		m.ZeroCount[i] = RoundCount(zero)
		total += m.ZeroCount[i]
	default:
		m.BucketCounts[i] = Range{u, uint32(len(m.U64))}
	}
	if len(buckets) == 0 && (!exp || zero == 0) {
		total = RoundCount(count)
	}
	m.Count[i] = total
}

// Value returns the numeric value of a gauge or sum point as a float64 (an
// int value is converted; use Number and NumberType for the exact int).
func (m *Metrics) Value(i int) float64 {
	if m.NumberType[i] == ValueInt {
		return float64(int64(m.Number[i]))
	}
	return math.Float64frombits(m.Number[i])
}

// CopyFrom appends data point i of src to m, copying what it references.
func (m *Metrics) CopyFrom(src *Metrics, i int) {
	m.cp.bind(&src.Common)
	cp := &m.cp
	d := &m.Common
	m.Desc = append(m.Desc, m.copyDesc(src, src.Desc[i]))
	m.Resource = append(m.Resource, cp.resource(d, src.Resource[i]))
	m.Scope = append(m.Scope, cp.scope(d, src.Scope[i]))
	m.StartTime = append(m.StartTime, src.StartTime[i])
	m.Time = append(m.Time, src.Time[i])
	m.Attr = append(m.Attr, cp.attrs(d, src.Attr[i]))
	m.Flags = append(m.Flags, src.Flags[i])
	m.Exemplars = append(m.Exemplars, cp.msgs(d, src.Exemplars[i]))
	m.SeriesID = append(m.SeriesID, src.SeriesID[i])
	m.NumberType = append(m.NumberType, src.NumberType[i])
	m.Number = append(m.Number, src.Number[i])
	m.Count = append(m.Count, src.Count[i])
	m.Sum = append(m.Sum, src.Sum[i])
	m.Min = append(m.Min, src.Min[i])
	m.Max = append(m.Max, src.Max[i])
	m.Has = append(m.Has, src.Has[i])
	m.BucketCounts = append(m.BucketCounts, m.copyU64(src, src.BucketCounts[i]))
	m.Bounds = append(m.Bounds, m.copyF64(src, src.Bounds[i]))
	m.Scale = append(m.Scale, src.Scale[i])
	m.ZeroCount = append(m.ZeroCount, src.ZeroCount[i])
	m.ZeroThreshold = append(m.ZeroThreshold, src.ZeroThreshold[i])
	m.PosOffset = append(m.PosOffset, src.PosOffset[i])
	m.PosCounts = append(m.PosCounts, m.copyU64(src, src.PosCounts[i]))
	m.NegOffset = append(m.NegOffset, src.NegOffset[i])
	m.NegCounts = append(m.NegCounts, m.copyU64(src, src.NegCounts[i]))
	m.Quantiles = append(m.Quantiles, m.copyF64(src, src.Quantiles[i]))
	m.FloatCounts = append(m.FloatCounts, m.copyF64(src, src.FloatCounts[i]))
}

func (m *Metrics) copyU64(src *Metrics, r Range) Range {
	s := uint32(len(m.U64))
	m.U64 = append(m.U64, src.U64[r.Start:r.End]...)
	return Range{s, uint32(len(m.U64))}
}

func (m *Metrics) copyF64(src *Metrics, r Range) Range {
	s := uint32(len(m.F64))
	m.F64 = append(m.F64, src.F64[r.Start:r.End]...)
	return Range{s, uint32(len(m.F64))}
}

// copyDesc copies descriptor di of src once per source batch.
func (m *Metrics) copyDesc(src *Metrics, di uint32) uint32 {
	if m.descSrc != &src.Common || m.descGen != src.gen {
		m.descSrc, m.descGen = &src.Common, src.gen
		m.descMap = resize(m.descMap, len(src.Descs))
	}
	m.descMap = grow(m.descMap, int(di))
	if v := m.descMap[di]; v != 0 {
		return v - 1
	}
	sd := src.Descs[di]
	if m.ShareAttrSets {
		id := m.sharedDesc(src, &sd)
		m.descMap[di] = id + 1
		return id
	}
	cp := &m.cp
	d := &m.Common
	m.Descs = append(m.Descs, MetricDesc{
		Name:        cp.str(d, sd.Name),
		Description: cp.str(d, sd.Description),
		Unit:        cp.str(d, sd.Unit),
		Type:        sd.Type,
		Temporality: sd.Temporality,
		Monotonic:   sd.Monotonic,
		Metadata:    cp.attrs(d, sd.Metadata),
	})
	id := uint32(len(m.Descs) - 1)
	m.descMap[di] = id + 1
	return id
}
