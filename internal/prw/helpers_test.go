package prw

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/sluice-dev/sluice/internal/signal"
)

// point is one decoded sample or histogram read back from a batch.
type point struct {
	t, start int64 // ms
	v        uint64
	h        *histogram.Histogram
	fh       *histogram.FloatHistogram // a float histogram (FloatCounts), h nil then
	hint     histogram.CounterResetHint
	nEx      int
}

// readBack groups the batch's points by their Prometheus label set.
func readBack(t testing.TB, m *signal.Metrics) map[string][]point {
	t.Helper()
	out := map[string][]point{}
	for i := range m.Len() {
		d := m.Descs[m.Desc[i]]
		var sb labels.ScratchBuilder
		sb.Add("__name__", m.String(d.Name))
		r := m.Attr[i]
		prev := ""
		for a := r.Start; a < r.End; a++ {
			k := m.Keys.Name(m.Attrs.Key[a])
			if k <= prev && a > r.Start {
				t.Fatalf("point %d: attributes not sorted: %q after %q", i, k, prev)
			}
			prev = k
			sb.Add(k, m.AttrString(int(a)))
		}
		sb.Sort()
		key := sb.Labels().String()
		p := point{t: m.Time[i] / 1e6, start: m.StartTime[i] / 1e6, nEx: m.Exemplars[i].Len()}
		switch d.Type {
		case signal.MetricGauge:
			p.v = m.Number[i]
		case signal.MetricExponentialHistogram:
			h := &histogram.Histogram{Schema: m.Scale[i], Count: m.Count[i], Sum: m.Sum[i],
				ZeroCount: m.ZeroCount[i], ZeroThreshold: m.ZeroThreshold[i]}
			h.PositiveSpans, h.PositiveBuckets = denseToProm(m.PosOffset[i]+1, m.U64[m.PosCounts[i].Start:m.PosCounts[i].End])
			h.NegativeSpans, h.NegativeBuckets = denseToProm(m.NegOffset[i]+1, m.U64[m.NegCounts[i].Start:m.NegCounts[i].End])
			p.h = h.Compact(0)
		case signal.MetricHistogram:
			h := &histogram.Histogram{Schema: -53, Count: m.Count[i], Sum: m.Sum[i],
				CustomValues: append([]float64(nil), m.F64[m.Bounds[i].Start:m.Bounds[i].End]...)}
			h.PositiveSpans, h.PositiveBuckets = denseToProm(0, m.U64[m.BucketCounts[i].Start:m.BucketCounts[i].End])
			p.h = h.Compact(0)
		default:
			t.Fatalf("point %d: unexpected type %v", i, d.Type)
		}
		p.hint = [4]histogram.CounterResetHint{histogram.UnknownCounterReset, histogram.CounterReset,
			histogram.NotCounterReset, histogram.GaugeType}[m.Has[i]&signal.HintMask>>3]
		if fc := m.FloatCounts[i]; fc.Len() > 0 {
			f := m.F64[fc.Start:fc.End]
			fh := &histogram.FloatHistogram{Schema: p.h.Schema, Count: f[0], Sum: m.Sum[i], CustomValues: p.h.CustomValues}
			if d.Type == signal.MetricExponentialHistogram {
				np := int(m.PosCounts[i].Len())
				fh.ZeroThreshold, fh.ZeroCount = m.ZeroThreshold[i], f[1]
				fh.PositiveSpans, fh.PositiveBuckets = denseFloat(m.PosOffset[i]+1, f[2:2+np])
				fh.NegativeSpans, fh.NegativeBuckets = denseFloat(m.NegOffset[i]+1, f[2+np:])
			} else {
				fh.PositiveSpans, fh.PositiveBuckets = denseFloat(0, f[1:])
			}
			p.h, p.fh = nil, fh.Compact(0)
		}
		out[key] = append(out[key], p)
	}
	return out
}

func denseToProm(off int32, counts []uint64) ([]histogram.Span, []int64) {
	if len(counts) == 0 {
		return nil, nil
	}
	deltas := make([]int64, len(counts))
	var prev int64
	for i, c := range counts {
		deltas[i] = int64(c) - prev
		prev = int64(c)
	}
	return []histogram.Span{{Offset: off, Length: uint32(len(counts))}}, deltas
}

func denseFloat(off int32, counts []float64) ([]histogram.Span, []float64) {
	if len(counts) == 0 {
		return nil, nil
	}
	return []histogram.Span{{Offset: off, Length: uint32(len(counts))}}, slices.Clone(counts) // Compact works in place
}

func keys(m map[string][]point) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, "\n")
}

func sameBits(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

func histString(h *histogram.Histogram) string {
	if h == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s custom=%v", h.String(), h.CustomValues)
}
