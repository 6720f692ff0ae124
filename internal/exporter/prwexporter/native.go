package prwexporter

import (
	"math"

	"github.com/prometheus/otlptranslator"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/promname"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// metaUnknown marks a descriptor whose metadata is not computed yet.
const metaUnknown writev2.Metadata_MetricType = 255

// Native histogram schemas Prometheus accepts for exponential buckets.
const (
	minSchema = -4
	maxSchema = 8
)

// rwTypes are the Prometheus type names package prw stores in
// prometheus.type, in the order of writev2.Metadata_MetricType (and of
// prometheus.MetricMetadata's enum): index = enum value.
var rwTypes = [...]string{"unknown", "counter", "gauge", "histogram", "gaugehistogram", "summary", "info", "stateset"}

// descMeta is the remote write 2.0 metadata of a descriptor's series, as
// Prometheus's 2.0 sender puts it on each series. For OTLP: the type from
// the OTLP metric type (a non-monotonic sum is a gauge), the unit as
// otlptranslator names it (the same words the metric name's suffix uses),
// the description as help. For remote write converted here: the type and
// unit the sender gave (package prw keeps them as the prometheus.type and
// prometheus.unit metadata attributes) and its help; unspecified when it
// sent none.
func (cv *converter) descMeta(m *signal.Metrics, d *signal.MetricDesc) seriesMeta {
	md := seriesMeta{help: m.String(d.Description)}
	if cv.fromRW {
		for a := int(d.Metadata.Start); a < int(d.Metadata.End); a++ {
			switch m.Keys.Name(m.Attrs.Key[a]) {
			case prw.AttrType:
				v := promname.AttrValue(&m.Common, a)
				for t, name := range rwTypes {
					if name == v {
						md.typ = writev2.Metadata_MetricType(t)
					}
				}
			case prw.AttrUnit:
				md.unit = promname.AttrValue(&m.Common, a)
			}
		}
		return md
	}
	switch d.Type {
	case signal.MetricGauge:
		md.typ = writev2.Metadata_METRIC_TYPE_GAUGE
	case signal.MetricSum:
		md.typ = writev2.Metadata_METRIC_TYPE_GAUGE
		if d.Monotonic {
			md.typ = writev2.Metadata_METRIC_TYPE_COUNTER
		}
	case signal.MetricHistogram, signal.MetricExponentialHistogram:
		md.typ = writev2.Metadata_METRIC_TYPE_HISTOGRAM
	case signal.MetricSummary:
		md.typ = writev2.Metadata_METRIC_TYPE_SUMMARY
	}
	un := otlptranslator.UnitNamer{}
	md.unit = un.Build(m.String(d.Unit))
	return md
}

// nativeHistogram is point i of an exponential histogram as a Prometheus
// native histogram, with the mapping the query API uses
// (internal/query/prom/histogram.go, histogramAt; package prw decodes the
// other way): schema = OTLP scale, OTLP bucket j of offset o is Prometheus
// bucket index o+j+1, zero count and threshold as they are; a scale above
// 8 is reduced to 8. A float histogram (remote write's, FloatCounts) goes
// as a float histogram with its exact counts, any other as an integer
// one; the reset hint is the one remote write sent (resetHint). ok is
// false when the point has no Prometheus form (a scale below -4, bucket
// indexes past int32). A stale point is the histogram stale marker (sum =
// the stale NaN).
func (cv *converter) nativeHistogram(m *signal.Metrics, i int, ts int64, stale bool) (ph prompb.Histogram, ok bool) {
	scale := m.Scale[i]
	if scale < minSchema {
		return ph, false
	}
	if fb, ok := floatCounts(m, i); ok {
		h := &histogram.FloatHistogram{CounterResetHint: cv.resetHint(m, i), Schema: scale, Count: fb[0], ZeroCount: fb[1],
			ZeroThreshold: m.ZeroThreshold[i]}
		if m.Has[i]&signal.HasSum != 0 {
			h.Sum = m.Sum[i]
		}
		np := int(m.PosCounts[i].Len())
		for _, side := range [2]struct {
			counts []float64
			off    int32
			spans  *[]histogram.Span
			bkts   *[]float64
		}{
			{fb[2 : 2+np], m.PosOffset[i], &h.PositiveSpans, &h.PositiveBuckets},
			{fb[2+np:], m.NegOffset[i], &h.NegativeSpans, &h.NegativeBuckets},
		} {
			if len(side.counts) == 0 {
				continue
			}
			if int64(side.off)+1+int64(len(side.counts)) > math.MaxInt32 {
				return ph, false
			}
			*side.spans, *side.bkts = denseSideFloats(side.counts, side.off+1)
		}
		if scale > maxSchema {
			if err := h.ReduceResolution(maxSchema); err != nil {
				return ph, false
			}
		}
		if stale {
			h = &histogram.FloatHistogram{Schema: h.Schema, CounterResetHint: h.CounterResetHint, Sum: math.Float64frombits(value.StaleNaN)}
		}
		return prompb.FromFloatHistogram(ts, h), true
	}
	h := &histogram.Histogram{CounterResetHint: cv.resetHint(m, i), Schema: scale, Count: m.Count[i], ZeroCount: m.ZeroCount[i],
		ZeroThreshold: m.ZeroThreshold[i]}
	if m.Has[i]&signal.HasSum != 0 {
		h.Sum = m.Sum[i]
	}
	for _, side := range [2]struct {
		r     signal.Range
		off   int32
		spans *[]histogram.Span
		bkts  *[]int64
	}{
		{m.PosCounts[i], m.PosOffset[i], &h.PositiveSpans, &h.PositiveBuckets},
		{m.NegCounts[i], m.NegOffset[i], &h.NegativeSpans, &h.NegativeBuckets},
	} {
		counts := m.U64[side.r.Start:side.r.End]
		if len(counts) == 0 {
			continue
		}
		if int64(side.off)+1+int64(len(counts)) > math.MaxInt32 {
			return ph, false
		}
		*side.spans, *side.bkts = denseSideDeltas(counts, side.off+1)
	}
	if scale > maxSchema {
		if err := h.ReduceResolution(maxSchema); err != nil {
			return ph, false
		}
	}
	if stale {
		h = &histogram.Histogram{Schema: h.Schema, CounterResetHint: h.CounterResetHint, Sum: math.Float64frombits(value.StaleNaN)}
	}
	return prompb.FromIntHistogram(ts, h), true
}

// resetHint is point i's counter reset hint: the one remote write sent
// (signal.Metrics.Has), else the gauge hint for a series whose metadata
// type is gaugehistogram, else unknown.
func (cv *converter) resetHint(m *signal.Metrics, i int) histogram.CounterResetHint {
	switch m.Has[i] & signal.HintMask {
	case signal.HintReset:
		return histogram.CounterReset
	case signal.HintNoReset:
		return histogram.NotCounterReset
	case signal.HintGauge:
		return histogram.GaugeType
	}
	if cv.cur.typ == writev2.Metadata_METRIC_TYPE_GAUGEHISTOGRAM {
		return histogram.GaugeType
	}
	return histogram.UnknownCounterReset
}

// floatCounts is point i's FloatCounts (count, for an exponential
// histogram the zero count, then the buckets); ok is false for an
// integer histogram.
func floatCounts(m *signal.Metrics, i int) ([]float64, bool) {
	fc := m.FloatCounts[i]
	return m.F64[fc.Start:fc.End], fc.Len() > 0
}

// denseSideDeltas turns dense counts starting at Prometheus bucket index
// first into spans and delta-encoded buckets, laid out by
// promname.NativeSpans as the query API lays them out.
func denseSideDeltas(counts []uint64, first int32) ([]histogram.Span, []int64) {
	b := make([]int64, 0, len(counts))
	var prev int64 // deltas run across spans
	spans := promname.NativeSpans(counts, first, func(c uint64) { b = append(b, int64(c)-prev); prev = int64(c) })
	return spans, b
}

// denseSideFloats is denseSideDeltas for a float histogram's counts
// (absolute, not deltas).
func denseSideFloats(counts []float64, first int32) ([]histogram.Span, []float64) {
	b := make([]float64, 0, len(counts))
	spans := promname.NativeSpans(counts, first, func(c float64) { b = append(b, c) })
	return spans, b
}

// customHistogram is point i of an explicit histogram as a custom-bucket
// native histogram (schema -53: custom values = the bounds, bucket k =
// the k-th count, spans laid out as the query API lays them out), as
// package prw decoded it from one: a float histogram with its exact
// counts, or an integer one. ok is false when the point is not one
// Prometheus would accept (counts not over all bounds + 1 buckets, or a
// count that does not match them).
func (cv *converter) customHistogram(m *signal.Metrics, i int, bounds []float64, counts []uint64, ts int64, stale bool) (ph prompb.Histogram, ok bool) {
	if len(counts) != len(bounds)+1 {
		return ph, false
	}
	if fb, ok := floatCounts(m, i); ok {
		h := &histogram.FloatHistogram{CounterResetHint: cv.resetHint(m, i), Schema: histogram.CustomBucketsSchema, Count: fb[0], CustomValues: bounds}
		if m.Has[i]&signal.HasSum != 0 {
			h.Sum = m.Sum[i]
		}
		h.PositiveSpans, h.PositiveBuckets = denseSideFloats(fb[1:], 0)
		if stale {
			h = &histogram.FloatHistogram{Schema: h.Schema, CounterResetHint: h.CounterResetHint, CustomValues: bounds, Sum: math.Float64frombits(value.StaleNaN)}
		} else if h.Validate() != nil {
			return ph, false
		}
		return prompb.FromFloatHistogram(ts, h), true
	}
	h := &histogram.Histogram{CounterResetHint: cv.resetHint(m, i), Schema: histogram.CustomBucketsSchema, Count: m.Count[i], CustomValues: bounds}
	if m.Has[i]&signal.HasSum != 0 {
		h.Sum = m.Sum[i]
	}
	h.PositiveSpans, h.PositiveBuckets = denseSideDeltas(counts, 0)
	if stale {
		return prompb.FromIntHistogram(ts, &histogram.Histogram{Schema: h.Schema, CounterResetHint: h.CounterResetHint, CustomValues: bounds,
			Sum: math.Float64frombits(value.StaleNaN)}), true
	}
	if h.Validate() != nil {
		return ph, false
	}
	return prompb.FromIntHistogram(ts, h), true
}
