package prwexporter

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
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
		if err := exp.Send(waittest.Context(t), recs); err != nil {
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

// A remote-write 2.0 custom-bucket histogram (schema -53) on the convert
// path (a 1.0 exporter), or split as received (2.0 in shard mode,
// split.go), goes as it came to requests
// that carry native histograms (2.0; 1.0 with send_native_histograms),
// with its exemplar and (2.0) start timestamp, and as its classic
// _bucket/_sum/_count to 1.0 without them (not dropped: it has a classic
// form); a counter's start timestamp and exemplar pass through too.
func TestConvertedCustomBucketsExemplarsStart(t *testing.T) {
	st := writev2.NewSymbolTable()
	cb := &histogram.Histogram{Schema: histogram.CustomBucketsSchema, Count: 7, Sum: 4.5,
		PositiveSpans: []histogram.Span{{Offset: 0, Length: 3}}, PositiveBuckets: []int64{1, 1, 2}, CustomValues: []float64{0.25, 1}}
	const ts = 1_800_000_000_000
	req := &writev2.Request{Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("size_bytes"), st.Symbolize("job"), st.Symbolize("api")},
			Histograms: []writev2.Histogram{writev2.FromIntHistogram(ts-60_000, ts, cb)},
			Exemplars:  []writev2.Exemplar{{LabelsRefs: []uint32{st.Symbolize("trace_id"), st.Symbolize("00000000000000000000000000000abc")}, Value: 0.5, Timestamp: ts - 7}},
			Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_HISTOGRAM, HelpRef: st.Symbolize("Sizes."), UnitRef: st.Symbolize("bytes")}},
		{LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("requests_total"), st.Symbolize("job"), st.Symbolize("api")},
			Samples:   []writev2.Sample{{Value: 7, Timestamp: ts, StartTimestamp: ts - 30_000}},
			Exemplars: []writev2.Exemplar{{LabelsRefs: []uint32{st.Symbolize("trace_id"), st.Symbolize("00000000000000000000000000000def")}, Value: 1, Timestamp: ts - 9}},
			Metadata:  writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: st.Symbolize("Requests.")}},
	}}
	req.Symbols = st.Symbols()
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	recs := []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: snappy.Encode(nil, body), RemoteWrite: 2}}
	send := func(cfg Config, n int) (map[string][]appended, *Exporter) {
		var all []appended
		var stores []*decodingStore
		for range n {
			s, u := referenceHandler(t, remoteapi.MessageTypes{remoteapi.WriteV1MessageType, remoteapi.WriteV2MessageType})
			stores = append(stores, s)
			cfg.Endpoints = append(cfg.Endpoints, u)
		}
		exp, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Send(waittest.Context(t), recs); err != nil {
			t.Fatal(err)
		}
		for _, s := range stores {
			all = append(all, s.got...)
		}
		return byName(all), exp
	}
	const exCB = `{trace_id="00000000000000000000000000000abc"} 0.5 @1799999999993`
	const exCtr = `{trace_id="00000000000000000000000000000def"} 1 @1799999999991`
	for _, tc := range []struct {
		name  string
		cfg   Config
		n     int
		start bool
	}{
		{"2.0 shard", Config{Protocol: "2.0", Shard: true}, 2, true},
		{"1.0 native", Config{Protocol: "1.0", SendNativeHistograms: true}, 1, false},
	} {
		got, exp := send(tc.cfg, tc.n)
		if names(got) != "requests_total size_bytes" {
			t.Fatalf("%s: series %s", tc.name, names(got))
		}
		h := got["size_bytes"][0]
		if h.h == nil || !h.h.Equals(cb) || exString(h.ex) != exCB {
			t.Fatalf("%s: custom-bucket histogram %v (exemplars %s), want %v with %s", tc.name, h.h, exString(h.ex), cb, exCB)
		}
		c := got["requests_total"][0]
		if c.v != 7 || exString(c.ex) != exCtr {
			t.Fatalf("%s: counter %+v", tc.name, c)
		}
		if tc.start && (h.st != ts-60_000 || c.st != ts-30_000) {
			t.Fatalf("%s: start timestamps %d, %d; want %d, %d", tc.name, h.st, c.st, ts-60_000, ts-30_000)
		}
		if dropped, bad, sent := exp.Stats(); dropped != 0 || bad != 0 || sent != 2 {
			t.Fatalf("%s: dropped %d, bad %d, sent %d", tc.name, dropped, bad, sent)
		}
	}
	got, exp := send(Config{Protocol: "1.0"}, 1)
	if names(got) != "requests_total size_bytes_bucket size_bytes_count size_bytes_sum" {
		t.Fatalf("1.0 classic: series %s", names(got))
	}
	var les []string
	for _, a := range got["size_bytes_bucket"] {
		les = append(les, fmt.Sprintf("%s=%g %s", a.lbls.Get("le"), a.v, exString(a.ex)))
	}
	sort.Strings(les)
	if w := "+Inf=7 ; 0.25=1 ; 1=3 " + exCB; strings.Join(les, "; ") != w {
		t.Fatalf("1.0 classic buckets %q, want %q", strings.Join(les, "; "), w)
	}
	if dropped, _, sent := exp.Stats(); dropped != 0 || sent != 6 {
		t.Fatalf("1.0 classic: dropped %d, sent %d", dropped, sent)
	}
}

// A 2.0 record passed through to an endpoint that falls back to 1.0 is
// converted with the exporter's options: its native histogram is dropped
// and counted without send_native_histograms and arrives with it, and the
// 1.0 metadata is the sender's (type, help, unit per family).
func TestPassThroughFallbackNativeAndMetadata(t *testing.T) {
	st := writev2.NewSymbolTable()
	h := &histogram.Histogram{Count: 3, Sum: 1.5, Schema: 0, PositiveSpans: []histogram.Span{{Offset: -1, Length: 1}}, PositiveBuckets: []int64{3}}
	req := &writev2.Request{Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("wait_seconds"), st.Symbolize("job"), st.Symbolize("api")},
			Histograms: []writev2.Histogram{writev2.FromIntHistogram(0, 1_800_000_000_000, h)},
			Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_HISTOGRAM, HelpRef: st.Symbolize("Wait."), UnitRef: st.Symbolize("seconds")}},
		{LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("up"), st.Symbolize("job"), st.Symbolize("api")},
			Samples:  []writev2.Sample{{Value: 1, Timestamp: 1_800_000_000_000}},
			Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize("Up.")}},
	}}
	req.Symbols = st.Symbols()
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	recs := []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: snappy.Encode(nil, body), RemoteWrite: 2}}
	for _, native := range []bool{false, true} {
		s, u := referenceHandler(t, remoteapi.MessageTypes{remoteapi.WriteV1MessageType})
		exp, err := New(Config{Endpoints: []string{u}, Protocol: "2.0", SendNativeHistograms: native})
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Send(waittest.Context(t), recs); err != nil {
			t.Fatal(err)
		}
		got := byName(s.got)
		dropped, _, _ := exp.Stats()
		var ms []string
		for _, m := range s.meta1 {
			ms = append(ms, fmt.Sprintf("%s %s %q %q", m.Type, m.MetricFamilyName, m.Help, m.Unit))
		}
		sort.Strings(ms)
		meta := strings.Join(ms, "; ")
		if !native {
			if exp.Fallbacks() != 1 || names(got) != "up" || dropped != 1 || meta != `GAUGE up "Up." ""` {
				t.Fatalf("without native histograms: fallbacks %d, series %s, dropped %d, metadata %s", exp.Fallbacks(), names(got), dropped, meta)
			}
			continue
		}
		if names(got) != "up wait_seconds" || got["wait_seconds"][0].h == nil || !got["wait_seconds"][0].h.Equals(h) || dropped != 0 {
			t.Fatalf("with native histograms: series %s, dropped %d", names(got), dropped)
		}
		if meta != `GAUGE up "Up." ""; HISTOGRAM wait_seconds "Wait." "seconds"` {
			t.Fatalf("with native histograms: metadata %s", meta)
		}
	}
}

// An exemplar whose labels pass OpenMetrics' 128 runes (which Prometheus
// and other receivers refuse) goes with its trace_id and span_id only,
// counted; one within the limit keeps its attributes.
func TestConvertedExemplarLabelsTrimmed(t *testing.T) {
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	now := pcommon.NewTimestampFromTime(time.Unix(1_800_000_000, 0))
	for _, attr := range []string{strings.Repeat("x", 60), strings.Repeat("y", 70)} {
		g := sm.Metrics().AppendEmpty()
		g.SetName("g" + attr[:1])
		p := g.SetEmptyGauge().DataPoints().AppendEmpty()
		p.SetTimestamp(now)
		p.SetDoubleValue(1)
		e := p.Exemplars().AppendEmpty()
		e.SetTimestamp(now)
		e.SetDoubleValue(1)
		e.SetTraceID(exTrace)
		e.SetSpanID(exSpan)
		e.FilteredAttributes().PutStr("a", attr) // ids 63 runes + 1 + 60 = 124; + 1 + 70 = 134
	}
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	st, url := referenceHandler(t, remoteapi.MessageTypes{remoteapi.WriteV2MessageType})
	exp, err := New(Config{Endpoints: []string{url}, Protocol: "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: b}}); err != nil {
		t.Fatal(err)
	}
	got := byName(st.got)
	if l := got["gx"][0].ex[0].Labels; l.Get("a") == "" || l.Len() != 3 {
		t.Fatalf("124 runes: %v, want kept whole", l)
	}
	if l := got["gy"][0].ex[0].Labels; l.Get("a") != "" || l.Get("trace_id") == "" || l.Get("span_id") == "" || l.Len() != 2 {
		t.Fatalf("134 runes: %v, want trace_id and span_id only", l)
	}
	if exp.TrimmedExemplars() != 1 {
		t.Fatalf("trimmed %d, want 1", exp.TrimmedExemplars())
	}
}
