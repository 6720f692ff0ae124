package prw

import (
	"testing"

	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Prometheus sends every exemplar in a TimeSeries of its own, without
// samples (queue_manager's populateTimeSeries and populateV2TimeSeries), in
// 1.0 and in 2.0, often in a request apart from its series' samples. Such
// exemplars are kept on a point without a value (no sample for PromQL) at
// the time of the series' last exemplar, and counted as written.
func TestExemplarOnlySeriesAreKept(t *testing.T) {
	lbls := []prompb.Label{{Name: "__name__", Value: "rq_total"}, {Name: "job", Value: "a"}}
	ex := func(trace string, v float64, ts int64) prompb.Exemplar {
		return prompb.Exemplar{Labels: []prompb.Label{{Name: "trace_id", Value: trace}}, Value: v, Timestamp: ts}
	}
	v1 := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: lbls, Samples: []prompb.Sample{{Value: 5, Timestamp: 1000}}},
		{Labels: lbls, Exemplars: []prompb.Exemplar{ex("t1", 5, 1000), ex("t2", 6, 3000)}},
	}}
	b1, err := v1.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	v2 := &writev2.Request{Symbols: []string{"", "__name__", "rq_total", "job", "a", "trace_id", "t1", "t2"}, Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{1, 2, 3, 4}, Samples: []writev2.Sample{{Value: 5, Timestamp: 1000}}},
		{LabelsRefs: []uint32{1, 2, 3, 4}, Exemplars: []writev2.Exemplar{{LabelsRefs: []uint32{5, 6}, Value: 5, Timestamp: 1000}, {LabelsRefs: []uint32{5, 7}, Value: 6, Timestamp: 3000}}},
	}}
	b2, err := v2.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		body []byte
		dec  func(*Decoder, *signal.Metrics, []byte) (Stats, error)
	}{{"1.0", b1, (*Decoder).DecodeV1}, {"2.0", b2, (*Decoder).DecodeV2}} {
		var m signal.Metrics
		st, err := c.dec(new(Decoder), &m, c.body)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if st.Samples != 1 || st.Exemplars != 2 {
			t.Fatalf("%s: stats %+v, want 1 sample and 2 exemplars kept", c.name, st)
		}
		if m.Len() != 2 {
			t.Fatalf("%s: %d points, want the sample and one point for the exemplars", c.name, m.Len())
		}
		if m.NumberType[0] != signal.ValueDouble || m.Exemplars[0].Len() != 0 {
			t.Fatalf("%s: the sample's point: type %v, %d exemplars", c.name, m.NumberType[0], m.Exemplars[0].Len())
		}
		if m.NumberType[1] != signal.ValueEmpty || m.Exemplars[1].Len() != 2 || m.Time[1] != 3000*1e6 || m.Flags[1] != 0 {
			t.Fatalf("%s: the exemplars' point: type %v (want empty), %d exemplars, time %d, flags %d", c.name, m.NumberType[1], m.Exemplars[1].Len(), m.Time[1], m.Flags[1])
		}
		if got := readBack(t, &m); m.SeriesID[0] != m.SeriesID[1] || len(got[`{__name__="rq_total", job="a"}`]) != 2 {
			t.Fatalf("%s: the exemplars' point is not on the sample's series: %v", c.name, keys(got))
		}
	}
}
