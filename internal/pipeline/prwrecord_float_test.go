package pipeline

import (
	"fmt"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// A remote-write record going to an OTLP exporter: a float histogram
// with fractional counts has no OTLP form and is dropped and counted;
// a whole-number float histogram goes as an exponential histogram with
// its exact counts (and, in sluice's own field that other decoders skip,
// as a float histogram); the rest of the record goes as it is.
func TestOTLPExporterDropsFractionalHistograms(t *testing.T) {
	st := writev2.NewSymbolTable()
	series := func(name string) []uint32 { return st.SymbolizeLabels(labels.FromStrings("__name__", name), nil) }
	frac := &histogram.FloatHistogram{Schema: 0, Count: 0.5, Sum: 1, PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []float64{0.2, 0.3}}
	whole := &histogram.FloatHistogram{Schema: 0, Count: 5, Sum: 1, PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []float64{2, 3}}
	req := &writev2.Request{Timeseries: []writev2.TimeSeries{
		{LabelsRefs: series("rate_hist"), Histograms: []writev2.Histogram{writev2.FromFloatHistogram(0, 1000, frac), writev2.FromFloatHistogram(0, 2000, whole)}},
		{LabelsRefs: series("up"), Samples: []writev2.Sample{{Value: 1, Timestamp: 1000}}},
	}}
	req.Symbols = st.Symbols()
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	rec := appendRecordTo(nil, signal.KindMetrics, encPRW2, "acme", nil, snappy.Encode(nil, body))
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	x, err := prwParser("otlp/x", false, dropped, nil)(rec)
	if err != nil {
		t.Fatal(err)
	}
	if x.RemoteWrite != 0 {
		t.Fatalf("record for an OTLP exporter is remote write %d", x.RemoteWrite)
	}
	var m signal.Metrics
	if err := otlp.DecodeMetrics(&m, x.Body); err != nil {
		t.Fatal(err)
	}
	var cm dto.Metric
	if err := dropped.Write(&cm); err != nil {
		t.Fatal(err)
	}
	if n := cm.GetCounter().GetValue(); n != 1 {
		t.Errorf("dropped %v fractional histograms, want 1", n)
	}
	if m.Len() != 2 {
		t.Fatalf("%d points in the OTLP body, want the sample and the whole-number histogram", m.Len())
	}
	for i := range m.Len() {
		d := m.Descs[m.Desc[i]]
		if d.Type != signal.MetricExponentialHistogram {
			continue
		}
		pr, fc := m.PosCounts[i], m.FloatCounts[i]
		if m.Time[i] != 2000e6 || m.Count[i] != 5 || m.PosOffset[i] != -1 || len(m.U64[pr.Start:pr.End]) != 2 ||
			m.U64[pr.Start] != 2 || m.U64[pr.Start+1] != 3 || fmt.Sprint(m.F64[fc.Start:fc.End]) != "[5 0 2 3]" {
			t.Fatalf("histogram at %d: count %d buckets %v@%d float counts %v", m.Time[i], m.Count[i], m.U64[pr.Start:pr.End], m.PosOffset[i],
				m.F64[fc.Start:fc.End])
		}
		// Another OTLP decoder (the collector's pdata) reads the same
		// integer histogram and skips sluice's float count field.
		req := pmetricotlp.NewExportRequest()
		if err := req.UnmarshalProto(x.Body); err != nil {
			t.Fatal(err)
		}
		var dp pmetric.ExponentialHistogramDataPoint
		rms := req.Metrics().ResourceMetrics()
		for r := range rms.Len() {
			ms := rms.At(r).ScopeMetrics().At(0).Metrics()
			for k := range ms.Len() {
				if ms.At(k).Type() == pmetric.MetricTypeExponentialHistogram {
					dp = ms.At(k).ExponentialHistogram().DataPoints().At(0)
				}
			}
		}
		if dp.Count() != 5 || fmt.Sprint(dp.Positive().BucketCounts().AsRaw()) != "[2 3]" {
			t.Fatalf("pdata reads count %d buckets %v", dp.Count(), dp.Positive().BucketCounts().AsRaw())
		}
		return
	}
	t.Fatal("no histogram in the OTLP body")
}
