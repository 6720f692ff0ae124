package prw

import (
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/signal"
)

// A 2.0 start (created) timestamp at or after its point's time is
// ignored, as Prometheus 3 ignores it (ErrSTNewerThanSample): the point
// is written with no start, the others keep theirs, and the decoder, the
// scan and PlainAppender2 agree on what is stored and how many were
// ignored. Before, such a start was stored as sent.
func TestStartNotBeforePointIgnored(t *testing.T) {
	h := &histogram.Histogram{Count: 3, Sum: 1.5, Schema: 0, PositiveSpans: []histogram.Span{{Offset: 0, Length: 1}}, PositiveBuckets: []int64{3}}
	syms := []string{"", "__name__", "a", "b", "c", "d"}
	own := &writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{1, 2}, Samples: []writev2.Sample{
			{Value: 1, Timestamp: t0ms, StartTimestamp: t0ms - 100},         // kept
			{Value: 2, Timestamp: t0ms + 1000, StartTimestamp: t0ms + 1000}, // the same time: ignored
			{Value: 3, Timestamp: t0ms + 2000, StartTimestamp: t0ms + 5000}, // later: ignored
		}},
	}}
	hist := &writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{1, 3}, Histograms: []writev2.Histogram{
			writev2.FromIntHistogram(t0ms-1, t0ms, h),      // kept
			writev2.FromIntHistogram(t0ms+9000, t0ms+1, h), // ignored
		}},
	}}
	// The series-level created_timestamp (field 6), after the samples as
	// encoders write it, for samples without a start of their own; one
	// sample has its own start, later than its time.
	created := &writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{1, 4}, Samples: []writev2.Sample{{Value: 1, Timestamp: t0ms}, {Value: 2, Timestamp: t0ms + 1000}}},
		{LabelsRefs: []uint32{1, 5}, Samples: []writev2.Sample{{Value: 1, Timestamp: t0ms}, {Value: 2, Timestamp: t0ms + 1000, StartTimestamp: t0ms + 2000}}},
	}}
	ms := int64(1e6)
	for _, c := range []struct {
		name    string
		req     *writev2.Request
		created int64
		starts  []int64 // per point, ns
		ignored int
	}{
		{"sample start", own, 0, []int64{(t0ms - 100) * ms, 0, 0}, 2},
		{"histogram start", hist, 0, []int64{(t0ms - 1) * ms, 0}, 1},
		{"created timestamp", created, t0ms + 500, []int64{0, (t0ms + 500) * ms, 0, 0}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, err := c.req.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if c.created != 0 {
				body = appendCreatedToSeries(t, body, c.created)
			}
			var m signal.Metrics
			var d Decoder
			st, err := d.DecodeV2(&m, body)
			if err != nil {
				t.Fatal(err)
			}
			if st.StartsIgnored != c.ignored {
				t.Errorf("decoder: %d starts ignored, want %d", st.StartsIgnored, c.ignored)
			}
			if m.Len() != len(c.starts) {
				t.Fatalf("%d points, want %d", m.Len(), len(c.starts))
			}
			for i, want := range c.starts {
				if m.StartTime[i] != want {
					t.Errorf("decoder: point %d (at %d): start %d, want %d", i, m.Time[i], m.StartTime[i], want)
				}
			}
			if c.req == hist {
				return // the scan and the plain append take float samples only
			}
			var sc Scanner
			if !sc.ScanV2(body) {
				t.Fatal("the scan does not take the request")
			}
			if sc.StartsIgnored != c.ignored {
				t.Errorf("scan: %d starts ignored, want %d", sc.StartsIgnored, c.ignored)
			}
			var pa PlainAppender2
			var direct signal.Metrics
			if !pa.ScanTimesV2(body) || !pa.AppendV2(&direct) {
				t.Fatal("PlainAppender2 does not take the request")
			}
			for i, want := range c.starts {
				if direct.StartTime[i] != want {
					t.Errorf("PlainAppender2: point %d (at %d): start %d, want %d", i, direct.Time[i], direct.StartTime[i], want)
				}
			}
		})
	}
}
