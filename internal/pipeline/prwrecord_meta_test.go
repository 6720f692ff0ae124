package pipeline

import (
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/signal"
)

// An OTLP exporter relaying a 1.0 sender: the metadata Prometheus sends in
// requests without series gives the OTLP metrics of later requests their
// description and their prometheus.type and prometheus.unit metadata, per
// tenant and family.
func TestOTLPExporterMetadataSentApart(t *testing.T) {
	parse := prwParser("otlp/x", false, nil, nil)
	v1 := func(tenant string, req *prompb.WriteRequest) []byte {
		body, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return appendRecordTo(nil, signal.KindMetrics, encPRW1, tenant, nil, snappy.Encode(nil, body))
	}
	meta := &prompb.WriteRequest{Metadata: []prompb.MetricMetadata{
		{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "http_requests", Help: "Requests served.", Unit: "requests"},
	}}
	if _, err := parse(v1("acme", meta)); err != exporter.ErrSkip {
		t.Fatalf("metadata without series: %v, want skipped (nothing to send)", err)
	}
	samples := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "http_requests_total"}, {Name: "job", Value: "api"}},
		Samples: []prompb.Sample{{Value: 3, Timestamp: 1_800_000_000_000}},
	}}}
	for tenant, want := range map[string][2]string{"acme": {"Requests served.", "counter/requests"}, "other": {"", "/"}} {
		x, err := parse(v1(tenant, samples))
		if err != nil {
			t.Fatal(err)
		}
		req := pmetricotlp.NewExportRequest()
		if err := req.UnmarshalProto(x.Body); err != nil {
			t.Fatal(err)
		}
		m := req.Metrics().ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
		var typ, unit string
		if v, ok := m.Metadata().Get("prometheus.type"); ok {
			typ = v.AsString()
		}
		if v, ok := m.Metadata().Get("prometheus.unit"); ok {
			unit = v.AsString()
		}
		if m.Name() != "http_requests_total" || m.Description() != want[0] || typ+"/"+unit != want[1] {
			t.Errorf("tenant %s: %s description %q metadata %v, want %q %s", tenant, m.Name(), m.Description(), m.Metadata().AsRaw(), want[0], want[1])
		}
	}
}
