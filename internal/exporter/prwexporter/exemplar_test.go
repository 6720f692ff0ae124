package prwexporter

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/exemplar"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/signal"
)

var (
	exTrace = pcommon.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	exSpan  = pcommon.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
)

// exemplarMetrics: a cumulative counter, an explicit histogram and an
// exponential histogram, each with a start time 10 minutes before the
// point and exemplars; a gauge with a start time (not a cumulative point:
// no start timestamp) and an exemplar.
func exemplarMetrics(t *testing.T, ts, start time.Time) []byte {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	sm := rm.ScopeMetrics().AppendEmpty()
	now, st := pcommon.NewTimestampFromTime(ts), pcommon.NewTimestampFromTime(start)
	ex := func(es pmetric.ExemplarSlice, v float64, ids bool, attr string) {
		e := es.AppendEmpty()
		e.SetTimestamp(now - 1e6)
		e.SetDoubleValue(v)
		if ids {
			e.SetTraceID(exTrace)
			e.SetSpanID(exSpan)
		}
		if attr != "" {
			e.FilteredAttributes().PutStr("http.route", attr)
		}
	}

	c := sm.Metrics().AppendEmpty()
	c.SetName("requests")
	sum := c.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	cp := sum.DataPoints().AppendEmpty()
	cp.SetStartTimestamp(st)
	cp.SetTimestamp(now)
	cp.SetIntValue(42)
	ex(cp.Exemplars(), 1, true, "/api")
	ie := cp.Exemplars().AppendEmpty()
	ie.SetTimestamp(now - 2e6)
	ie.SetIntValue(3)

	h := sm.Metrics().AppendEmpty()
	h.SetName("latency")
	h.SetUnit("s")
	hist := h.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hp := hist.DataPoints().AppendEmpty()
	hp.SetStartTimestamp(st)
	hp.SetTimestamp(now)
	hp.ExplicitBounds().FromRaw([]float64{0.1, 1})
	hp.BucketCounts().FromRaw([]uint64{1, 1, 1})
	hp.SetCount(3)
	hp.SetSum(5.55)
	ex(hp.Exemplars(), 0.05, true, "")
	ex(hp.Exemplars(), 0.5, true, "")
	ex(hp.Exemplars(), 5, false, "/slow")

	e := sm.Metrics().AppendEmpty()
	e.SetName("size")
	e.SetUnit("By")
	eh := e.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	ep := eh.DataPoints().AppendEmpty()
	ep.SetStartTimestamp(st)
	ep.SetTimestamp(now)
	ep.SetScale(0)
	ep.Positive().BucketCounts().FromRaw([]uint64{2})
	ep.SetCount(2)
	ep.SetSum(3)
	ex(ep.Exemplars(), 1.5, true, "")

	g := sm.Metrics().AppendEmpty()
	g.SetName("temp")
	gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	gp.SetStartTimestamp(st)
	gp.SetTimestamp(now)
	gp.SetDoubleValue(20)
	ex(gp.Exemplars(), 20, true, "")

	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func exString(es []exemplar.Exemplar) string {
	var s []string
	for _, e := range es {
		s = append(s, fmt.Sprintf("%s %g @%d", e.Labels, e.Value, e.Ts))
	}
	return strings.Join(s, "; ")
}

// Exemplars and start timestamps on the convert path, checked by the
// reference handler: each OTLP exemplar arrives with its value, time and
// trace_id/span_id (lowercase hex) and filtered attributes as labels, on
// the series otlptranslator puts it on (a counter's series; the _bucket
// series of its value's bucket; the native histogram), over 2.0 and 1.0;
// over 2.0 a cumulative point's start time is its sample's or
// histogram's start_timestamp, a gauge has none.
func TestConvertedExemplarsAndStartTimestamps(t *testing.T) {
	ts := time.Unix(1_800_000_000, 0)
	start := ts.Add(-10 * time.Minute)
	recs := []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: exemplarMetrics(t, ts, start)}}
	tms := ts.UnixMilli() - 1
	want := map[string]string{
		"requests_total":              fmt.Sprintf(`{"http.route"="/api", span_id="00f067aa0ba902b7", trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 1 @%d; {} 3 @%d`, tms, tms-1),
		`latency_seconds_bucket/0.1`:  fmt.Sprintf(`{span_id="00f067aa0ba902b7", trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 0.05 @%d`, tms),
		`latency_seconds_bucket/1`:    fmt.Sprintf(`{span_id="00f067aa0ba902b7", trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 0.5 @%d`, tms),
		`latency_seconds_bucket/+Inf`: fmt.Sprintf(`{"http.route"="/slow"} 5 @%d`, tms),
		"size_bytes":                  fmt.Sprintf(`{span_id="00f067aa0ba902b7", trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 1.5 @%d`, tms),
		"temp":                        fmt.Sprintf(`{span_id="00f067aa0ba902b7", trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 20 @%d`, tms),
	}
	both := remoteapi.MessageTypes{remoteapi.WriteV1MessageType, remoteapi.WriteV2MessageType}
	for _, protocol := range []string{"2.0", "1.0"} {
		st, url := referenceHandler(t, both)
		exp, err := New(Config{Endpoints: []string{url}, Protocol: protocol, SendNativeHistograms: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Send(context.Background(), recs); err != nil {
			t.Fatal(err)
		}
		if dropped, bad, _ := exp.Stats(); dropped != 0 || bad != 0 {
			t.Fatalf("%s: dropped %d, bad %d", protocol, dropped, bad)
		}
		got := map[string]string{}
		starts := map[string]int64{}
		for _, a := range st.got {
			key := a.lbls.Get("__name__")
			if le := a.lbls.Get("le"); le != "" {
				key += "/" + le
			}
			if len(a.ex) > 0 {
				got[key] = exString(a.ex)
			}
			starts[key] = a.st
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s %s exemplars:\n got %s\nwant %s", protocol, k, got[k], w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: exemplars on %v, want on %d series", protocol, got, len(want))
		}
		wantStart := start.UnixMilli()
		if protocol == "1.0" {
			wantStart = 0 // 1.0 has no start timestamps
		}
		for _, k := range []string{"requests_total", "latency_seconds_bucket/0.1", "latency_seconds_bucket/+Inf", "latency_seconds_sum", "latency_seconds_count", "size_bytes"} {
			if starts[k] != wantStart {
				t.Errorf("%s %s start timestamp %d, want %d", protocol, k, starts[k], wantStart)
			}
		}
		if s, ok := starts["temp"]; !ok || s != 0 {
			t.Errorf("%s gauge start timestamp %d (present %v), want none", protocol, s, ok)
		}
	}
}
