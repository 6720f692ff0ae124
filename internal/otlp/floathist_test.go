package otlp

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

// A float histogram's exact counts and a reset hint (remote write's) go
// through sluice's own OTLP fields and come back as they were, next to
// the rounded standard counts; fields that disagree with the buckets are
// refused as malformed.
func TestFloatHistogramFields(t *testing.T) {
	m, p := floatHistogramBatch()
	body := AppendMetricsProto(nil, m)
	var got signal.Metrics
	if err := DecodeMetrics(&got, body); err != nil {
		t.Fatal(err)
	}
	render := func(m *signal.Metrics, i int) string {
		fc, pc, bc := m.FloatCounts[i], m.PosCounts[i], m.BucketCounts[i]
		return fmt.Sprintf("has=%d count=%d float=%v pos=%v buckets=%v bounds=%v", m.Has[i], m.Count[i], m.F64[fc.Start:fc.End],
			m.U64[pc.Start:pc.End], m.U64[bc.Start:bc.End], m.F64[m.Bounds[i].Start:m.Bounds[i].End])
	}
	if got.Len() != 2 {
		t.Fatalf("%d points", got.Len())
	}
	for i := range 2 {
		if a, b := render(&got, i), render(m, i); a != b {
			t.Errorf("point %d:\n got %s\nwant %s", i, a, b)
		}
	}
	// Float counts that do not match the buckets: malformed.
	m.PosCounts[p].End--
	var bad signal.Metrics
	if err := DecodeMetrics(&bad, AppendMetricsProto(nil, m)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("mismatched float counts: %v, want ErrMalformed", err)
	}
}

// floatHistogramBody is floatHistogramBatch encoded.
func floatHistogramBody() []byte {
	m, _ := floatHistogramBatch()
	return AppendMetricsProto(nil, m)
}

// floatHistogramBatch holds a float exponential histogram with the gauge
// hint (point p) and a float explicit one with the reset hint.
func floatHistogramBatch() (*signal.Metrics, int) {
	var m signal.Metrics
	res := uint32(len(m.Resources))
	m.Resources = append(m.Resources, signal.Resource{})
	m.Scopes = append(m.Scopes, signal.Scope{})
	exp := uint32(len(m.Descs))
	m.Descs = append(m.Descs, signal.MetricDesc{Name: m.AppendString("e"), Type: signal.MetricExponentialHistogram, Temporality: signal.TemporalityCumulative})
	m.Descs = append(m.Descs, signal.MetricDesc{Name: m.AppendString("h"), Type: signal.MetricHistogram, Temporality: signal.TemporalityCumulative})
	p := m.AppendPoint(exp, res, 0)
	m.Time[p], m.Scale[p], m.PosOffset[p], m.NegOffset[p], m.Has[p] = 1, 2, -3, 1, signal.HasSum|signal.HintGauge
	m.SetFloatCounts(p, true, 1.0/3+0.6, 1.0/3, []float64{0.1, 0.2, 0, 0.3}, 3)
	q := m.AppendPoint(exp+1, res, 0)
	m.Time[q], m.Has[q] = 2, signal.HintReset
	f := uint32(len(m.F64))
	m.F64 = append(m.F64, 1, 2)
	m.Bounds[q] = signal.Range{Start: f, End: uint32(len(m.F64))}
	m.SetFloatCounts(q, false, 2.5, 0, []float64{0.5, 1.5, 0.5}, 0)
	return &m, p
}
