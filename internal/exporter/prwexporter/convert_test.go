package prwexporter

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

func convert(t *testing.T, md pmetric.Metrics) []string {
	t.Helper()
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	var m signal.Metrics
	if err := otlp.DecodeMetrics(&m, b); err != nil {
		t.Fatal(err)
	}
	var cv converter
	cv.add(&m, 0)
	var out []string
	for _, s := range cv.series {
		var kv []string
		for _, l := range s.Labels {
			kv = append(kv, l.Name+"="+l.Value)
		}
		out = append(out, strings.Join(kv, ","))
	}
	return out
}

// A series that came in over remote write (no resource; job, instance and
// le as plain attributes on a gauge) goes out with exactly its labels, as
// the query API shows it; with service.name set, sluice's job wins and the
// attribute stays exported_job.
func TestConvertReclaimsRemoteWriteLabels(t *testing.T) {
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	g := sm.Metrics().AppendEmpty()
	g.SetName("http_request_duration_seconds_bucket")
	p := g.SetEmptyGauge().DataPoints().AppendEmpty()
	p.SetTimestamp(pcommon.NewTimestampFromTime(time.Unix(1700000000, 0)))
	p.SetDoubleValue(3)
	p.Attributes().PutStr("job", "api")
	p.Attributes().PutStr("instance", "h:9090")
	p.Attributes().PutStr("le", "0.5")
	got := convert(t, md)
	if len(got) != 1 || got[0] != "__name__=http_request_duration_seconds_bucket,instance=h:9090,job=api,le=0.5" {
		t.Fatalf("remote-write series relayed as %v", got)
	}

	md2 := pmetric.NewMetrics()
	rm := md2.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	g = rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("x")
	p = g.SetEmptyGauge().DataPoints().AppendEmpty()
	p.SetTimestamp(pcommon.NewTimestampFromTime(time.Unix(1700000000, 0)))
	p.SetDoubleValue(1)
	p.Attributes().PutStr("job", "other")
	got = convert(t, md2)
	if len(got) != 1 || got[0] != "__name__=x,exported_job=other,job=svc" {
		t.Fatalf("OTLP series with service.name relayed as %v", got)
	}
}
