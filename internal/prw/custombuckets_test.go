package prw

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/signal"
)

// A custom-bucket histogram (schema -53) that Prometheus's
// histogram.Validate refuses is refused here too, naming the problem, and
// the request's good series are kept: a bound that is not finite (+Inf is
// implied, never sent), a zero bucket or zero threshold (a custom-bucket
// histogram has none, and its lake form, an explicit-bucket histogram, no
// place for one).
func TestCustomBucketHistogramsValidated(t *testing.T) {
	ci := func(n uint64) *writev2.Histogram_CountInt { return &writev2.Histogram_CountInt{CountInt: n} }
	sp := []writev2.BucketSpan{{Offset: 0, Length: 3}}
	ok := writev2.Histogram{Count: ci(6), Sum: 10, Schema: -53, CustomValues: []float64{1, 5}, PositiveSpans: sp, PositiveDeltas: []int64{1, 1, 1}, Timestamp: 1}
	for _, c := range []struct {
		name string
		edit func(h *writev2.Histogram)
		want string
	}{
		{"+Inf bound", func(h *writev2.Histogram) { h.CustomValues = []float64{1, math.Inf(1)} }, "custom-bucket histogram bound +Inf is not finite"},
		{"-Inf bound", func(h *writev2.Histogram) { h.CustomValues = []float64{math.Inf(-1), 1} }, "custom-bucket histogram bound -Inf is not finite"},
		{"one NaN bound", func(h *writev2.Histogram) {
			h.CustomValues, h.PositiveSpans, h.PositiveDeltas, h.Count = []float64{math.NaN()}, []writev2.BucketSpan{{Offset: 0, Length: 2}}, []int64{1, 1}, ci(3)
		}, "custom-bucket histogram bound NaN is not finite"},
		{"zero count", func(h *writev2.Histogram) {
			h.ZeroCount, h.Count = &writev2.Histogram_ZeroCountInt{ZeroCountInt: 1}, ci(7)
		}, "custom-bucket histogram has a zero bucket"},
		{"zero threshold", func(h *writev2.Histogram) { h.ZeroThreshold = 0.1 }, "custom-bucket histogram has a zero bucket"},
	} {
		bad := ok
		bad.CustomValues = append([]float64(nil), ok.CustomValues...)
		c.edit(&bad)
		req := &writev2.Request{Symbols: []string{"", "__name__", "good", "bad"}, Timeseries: []writev2.TimeSeries{
			{LabelsRefs: []uint32{1, 2}, Histograms: []writev2.Histogram{ok}},
			{LabelsRefs: []uint32{1, 3}, Histograms: []writev2.Histogram{bad}},
		}}
		body, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var m signal.Metrics
		st, err := new(Decoder).DecodeV2(&m, body)
		var pe *PartialError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `__name__="bad"`) {
			t.Errorf("%s: err = %v, want a partial write naming %q", c.name, err, c.want)
		}
		if st.Histograms != 1 || m.Len() != 1 {
			t.Errorf("%s: %d histograms kept, want the good one", c.name, st.Histograms)
		}
	}
}

// A 2.0 series with samples and no __name__ is named as such: every
// encoder sends its (empty) metadata, which is not what is wrong with it.
func TestV2InvalidLabelsNamedAsSuch(t *testing.T) {
	req := &writev2.Request{Symbols: []string{"", "a", "b"}, Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{1, 2}, Samples: []writev2.Sample{{Value: 1, Timestamp: 1}}}}}
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var m signal.Metrics
	_, err = new(Decoder).DecodeV2(&m, body)
	if err == nil || !strings.Contains(err.Error(), `series {a="b"}: no __name__ label`) {
		t.Fatalf("err = %v, want the series named with no __name__ label", err)
	}
}

// A label with an empty value is no label, as in Prometheus (its TSDB
// drops them, labels.WithoutEmpty): {a="", b="1"} is the series {b="1"},
// in 1.0 and 2.0; the scan leaves such a request to the decoder.
func TestEmptyLabelValuesAreNoLabels(t *testing.T) {
	v1 := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "x"}, {Name: "a", Value: ""}, {Name: "b", Value: "1"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "x"}, {Name: "b", Value: "1"}}, Samples: []prompb.Sample{{Value: 2, Timestamp: 2}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "x"}, {Name: "b", Value: "1"}, {Name: "c", Value: ""}}, Samples: []prompb.Sample{{Value: 3, Timestamp: 3}}},
	}}
	b1, err := v1.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	v2 := &writev2.Request{Symbols: []string{"", "__name__", "x", "a", "b", "1", "c"}, Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{1, 2, 3, 0, 4, 5}, Samples: []writev2.Sample{{Value: 1, Timestamp: 1}}},
		{LabelsRefs: []uint32{1, 2, 4, 5}, Samples: []writev2.Sample{{Value: 2, Timestamp: 2}}},
		{LabelsRefs: []uint32{1, 2, 4, 5, 6, 0}, Samples: []writev2.Sample{{Value: 3, Timestamp: 3}}},
	}}
	b2, err := v2.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var sc Scanner
	if sc.ScanV1(b1) || sc.ScanV2(b2) {
		t.Fatal("the scan took a request with an empty label value")
	}
	for name, dec := range map[string]func() (*signal.Metrics, error){
		"1.0": func() (*signal.Metrics, error) {
			var m signal.Metrics
			_, err := new(Decoder).DecodeV1(&m, b1)
			return &m, err
		},
		"2.0": func() (*signal.Metrics, error) {
			var m signal.Metrics
			_, err := new(Decoder).DecodeV2(&m, b2)
			return &m, err
		},
	} {
		m, err := dec()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := readBack(t, m)
		if k := keys(got); k != `{__name__="x", b="1"}` || len(got[k]) != 3 {
			t.Fatalf("%s: series %s, want the one series {b=\"1\"} with 3 points", name, k)
		}
		if m.SeriesID[0] != m.SeriesID[1] || m.SeriesID[1] != m.SeriesID[2] {
			t.Fatalf("%s: series ids %x, want one", name, m.SeriesID)
		}
	}
	// A duplicate name is refused even when one of the two values is
	// empty, as Prometheus refuses it.
	v1.Timeseries[1].Labels = []prompb.Label{{Name: "__name__", Value: "x"}, {Name: "a", Value: "1"}, {Name: "a", Value: ""}}
	b1, _ = v1.Marshal()
	if _, err := new(Decoder).DecodeV1(new(signal.Metrics), b1); err == nil || !strings.Contains(err.Error(), `duplicate label name "a"`) {
		t.Fatalf("a=1, a=\"\": %v", err)
	}
	// An empty __name__ is still refused, by name.
	v1.Timeseries[1].Labels = []prompb.Label{{Name: "__name__", Value: ""}, {Name: "b", Value: "1"}}
	b1, _ = v1.Marshal()
	var m signal.Metrics
	if _, err := new(Decoder).DecodeV1(&m, b1); err == nil || !strings.Contains(err.Error(), "empty __name__") {
		t.Fatalf("empty __name__: %v", err)
	}
}

// A timestamp before 1970 (remote write allows it, the lake does not: its
// times are nanoseconds since the epoch, OTLP's unsigned) drops its series
// with a message saying so, and the request's other series are kept: the
// pipeline would refuse the whole request for one such point.
func TestTimestampsBefore1970DropTheirSeries(t *testing.T) {
	good := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "ok"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1}}}
	h := prompb.FromIntHistogram(-5, &histogram.Histogram{Schema: 0})
	for name, bad := range map[string]prompb.TimeSeries{
		"sample":    {Labels: []prompb.Label{{Name: "__name__", Value: "old"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: -1000}}},
		"histogram": {Labels: []prompb.Label{{Name: "__name__", Value: "old"}}, Histograms: []prompb.Histogram{h}},
		"exemplar": {Labels: []prompb.Label{{Name: "__name__", Value: "old"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1}},
			Exemplars: []prompb.Exemplar{{Value: 1, Timestamp: -1}}},
	} {
		body, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{good, bad}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var m signal.Metrics
		_, err = new(Decoder).DecodeV1(&m, body)
		var pe *PartialError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "out of range (sluice stores times from 1970-01-01") || m.Len() != 1 {
			t.Errorf("%s: err %v, %d points; want the good series and the old one dropped, named", name, err, m.Len())
		}
	}
}

// Schemas 9..52 are reduced to 8, as Prometheus's remote-write handler
// reduces them (histogram.ReduceResolution): integer and float counts,
// both sides, buckets of either sign of index; the result is the one
// Prometheus stores.
func TestHighSchemasReducedTo8(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	for n := range 200 {
		schema := int32(9 + r.IntN(6))
		if n == 0 {
			schema = 52
		}
		side := func() ([]histogram.Span, []int64, uint64) {
			var spans []histogram.Span
			var deltas []int64
			var total, prev int64
			for k := range 1 + r.IntN(3) {
				off := int32(r.IntN(40))
				if k == 0 {
					off -= 20
				}
				l := uint32(1 + r.IntN(5))
				spans = append(spans, histogram.Span{Offset: off, Length: l})
				for range l {
					c := int64(r.IntN(10))
					deltas = append(deltas, c-prev)
					prev = c
					total += c
				}
			}
			return spans, deltas, uint64(total)
		}
		h := &histogram.Histogram{Schema: schema, ZeroThreshold: 1e-9, ZeroCount: 2, Sum: 12.5}
		var pc, nc uint64
		h.PositiveSpans, h.PositiveBuckets, pc = side()
		h.NegativeSpans, h.NegativeBuckets, nc = side()
		h.Count = pc + nc + 2
		for _, float := range []bool{false, true} {
			var hp prompb.Histogram
			if float {
				hp = prompb.FromFloatHistogram(1000, h.ToFloat(nil))
			} else {
				hp = prompb.FromIntHistogram(1000, h)
			}
			body, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "hs"}}, Histograms: []prompb.Histogram{hp}}}}).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			var m signal.Metrics
			if _, err := new(Decoder).DecodeV1(&m, body); err != nil {
				t.Fatalf("schema %d: %v", schema, err)
			}
			got := readBack(t, &m)[`{__name__="hs"}`]
			want := h.Copy()
			if err := want.ReduceResolution(8); err != nil {
				t.Fatal(err)
			}
			if float {
				wf := want.ToFloat(nil).Compact(0)
				if len(got) != 1 || got[0].fh == nil || got[0].fh.String() != wf.String() || got[0].fh.Schema != 8 {
					t.Fatalf("float schema %d: got %v, want %v", schema, got, wf)
				}
				continue
			}
			want = want.Compact(0)
			if len(got) != 1 || got[0].h == nil || histString(got[0].h) != histString(want) || got[0].h.Schema != 8 {
				t.Fatalf("schema %d %v: got %v, want %v", schema, h, histString(got[0].h), histString(want))
			}
		}
	}
	// Past 52 (and below -4) stays refused, by name.
	hp := prompb.FromIntHistogram(1000, &histogram.Histogram{Schema: 53})
	body, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "hs"}}, Histograms: []prompb.Histogram{hp}}}}).Marshal()
	if _, err := new(Decoder).DecodeV1(new(signal.Metrics), body); err == nil || !strings.Contains(err.Error(), "histogram schema 53 is not supported") {
		t.Fatalf("schema 53: %v", err)
	}
}
