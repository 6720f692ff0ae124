package prwexporter

import (
	"fmt"
	"math"
	"testing"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/histogram"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// floatHistograms are what recording rules over native histograms send:
// float counts, fractional (and one whole), with reset hints; one of
// custom buckets.
func floatHistograms() map[string]*histogram.FloatHistogram {
	return map[string]*histogram.FloatHistogram{
		"job:rpc_seconds:rate5m": {CounterResetHint: histogram.NotCounterReset, Schema: 2, ZeroThreshold: 1e-3, ZeroCount: 1.0 / 3,
			Count: 1.0/3 + 0.2 + 0.7 + 1.0/7, Sum: 4.75,
			PositiveSpans: []histogram.Span{{Offset: -1, Length: 2}}, PositiveBuckets: []float64{0.2, 0.7},
			NegativeSpans: []histogram.Span{{Offset: 3, Length: 1}}, NegativeBuckets: []float64{1.0 / 7}},
		"job:queue_seconds:sum": {CounterResetHint: histogram.GaugeType, Schema: 0, Count: 3, Sum: 1.5,
			PositiveSpans: []histogram.Span{{Offset: 1, Length: 1}}, PositiveBuckets: []float64{3}},
		"job:size_bytes:rate5m": {CounterResetHint: histogram.CounterReset, Schema: histogram.CustomBucketsSchema, Count: 0.9, Sum: 2.2,
			CustomValues:  []float64{1, 10, 100},
			PositiveSpans: []histogram.Span{{Offset: 1, Length: 2}}, PositiveBuckets: []float64{0.3, 0.6}},
	}
}

// Float histograms received by remote write leave as float histograms,
// split as received (2.0 in shard mode, split.go) and on the convert path
// (1.0 with send_native_histograms, a 2.0 record to a 1.0 endpoint): the
// reference handler decodes every count bit for bit and the reset hint as
// sent.
func TestConvertedFloatHistograms(t *testing.T) {
	st := writev2.NewSymbolTable()
	req := &writev2.Request{}
	want := floatHistograms()
	for name, h := range want {
		req.Timeseries = append(req.Timeseries, writev2.TimeSeries{
			LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize(name), st.Symbolize("job"), st.Symbolize("api")},
			Histograms: []writev2.Histogram{writev2.FromFloatHistogram(0, 1_800_000_000_000, h)},
			Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_HISTOGRAM}})
	}
	req.Symbols = st.Symbols()
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		proto string
		cfg   Config
	}{
		{"2.0", Config{Protocol: "2.0", Shard: true}},
		{"1.0", Config{Protocol: "1.0", SendNativeHistograms: true}},
	} {
		t.Run(c.proto, func(t *testing.T) {
			typ := remoteapi.WriteV2MessageType
			if c.proto == "1.0" {
				typ = remoteapi.WriteV1MessageType
			}
			s, u := referenceHandler(t, remoteapi.MessageTypes{typ})
			cfg := c.cfg
			cfg.Endpoints = []string{u}
			exp, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := exp.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: snappy.Encode(nil, body), RemoteWrite: 2}}); err != nil {
				t.Fatal(err)
			}
			got := byName(s.got)
			if len(got) != len(want) {
				t.Fatalf("series %s, want %d", names(got), len(want))
			}
			for name, w := range want {
				g := got[name]
				if len(g) != 1 || g[0].fh == nil || g[0].h != nil {
					t.Fatalf("%s: %+v, want one float histogram", name, g)
				}
				if a, b := floatString(g[0].fh), floatString(w.Copy().Compact(0)); a != b {
					t.Errorf("%s:\n got %s\nwant %s", name, a, b)
				}
			}
		})
	}
}

// floatString renders every count of h by its bits, and its hint.
func floatString(h *histogram.FloatHistogram) string {
	s := fmt.Sprintf("hint=%d schema=%d count=%x sum=%x zt=%g zc=%x custom=%v", h.CounterResetHint, h.Schema,
		math.Float64bits(h.Count), math.Float64bits(h.Sum), h.ZeroThreshold, math.Float64bits(h.ZeroCount), h.CustomValues)
	for it := h.AllBucketIterator(); it.Next(); {
		if b := it.At(); b.Count != 0 && !(b.Lower == -h.ZeroThreshold && b.Upper == h.ZeroThreshold) {
			s += fmt.Sprintf(" [%g,%g]:%x", b.Lower, b.Upper, math.Float64bits(b.Count))
		}
	}
	return s
}
