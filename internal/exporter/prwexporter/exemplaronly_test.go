package prwexporter

import (
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// A remote-write series sent with exemplars only (as Prometheus sends
// every exemplar; package prw keeps them on a point without a value) is
// converted back to a series of exemplars without a sample: never a sample
// of value 0. So it is after a round trip through OTLP (a partial write is
// queued as OTLP, the batch then is not remote write).
func TestConvertExemplarOnlySeries(t *testing.T) {
	lbls := []prompb.Label{{Name: "__name__", Value: "rq_total"}, {Name: "job", Value: "a"}}
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: lbls, Samples: []prompb.Sample{{Value: 5, Timestamp: 1000}}},
		{Labels: lbls, Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "t1"}}, Value: 6, Timestamp: 2000}}},
	}}
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var rw signal.Metrics
	if _, err := new(prw.Decoder).DecodeV1(&rw, body); err != nil {
		t.Fatal(err)
	}
	var viaOTLP signal.Metrics
	if err := otlp.DecodeMetrics(&viaOTLP, otlp.AppendMetricsProto(nil, &rw)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		m      *signal.Metrics
		fromRW bool
	}{{"remote write", &rw, true}, {"OTLP", &viaOTLP, false}} {
		cv := converter{fromRW: c.fromRW}
		cv.add(c.m, 0)
		if len(cv.series) != 2 {
			t.Fatalf("%s: %d series, want the sample's and the exemplar's: %+v", c.name, len(cv.series), cv.series)
		}
		s, x := cv.series[0], cv.series[1]
		if len(s.Samples) != 1 || s.Samples[0].Value != 5 || len(s.Exemplars) != 0 {
			t.Fatalf("%s: first series %+v", c.name, s)
		}
		if len(x.Samples) != 0 || len(x.Exemplars) != 1 || x.Exemplars[0].Value != 6 || x.Exemplars[0].Timestamp != 2000 {
			t.Fatalf("%s: exemplar series %+v, want its exemplar and no sample", c.name, x)
		}
	}
}
