package prwexporter

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// appended is one sample or histogram the reference handler received,
// decoded as Prometheus's receiver decodes it.
type appended struct {
	lbls labels.Labels
	t    int64
	v    float64
	h    *histogram.Histogram
	fh   *histogram.FloatHistogram
	meta metadata.Metadata
	st   int64               // 2.0 start timestamp
	ex   []exemplar.Exemplar // the series' exemplars (on its first append)
}

// decodingStore is the storage behind the reference handler: it decodes
// 1.0 and 2.0 requests with Prometheus's own codec (prompb and writev2's
// ToLabels, ToIntHistogram/ToFloatHistogram, ToMetadata: what
// storage/remote's write handler hands its appender) and keeps every
// sample and histogram with its series' metadata.
type decodingStore struct {
	mu    sync.Mutex
	got   []appended
	meta1 []prompb.MetricMetadata // 1.0 metadata, in request order
}

func (s *decodingStore) Store(r *http.Request, mt remoteapi.WriteMessageType) (*remoteapi.WriteResponse, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	resp := remoteapi.NewWriteResponse()
	var got []appended
	var sb labels.ScratchBuilder
	switch mt {
	case remoteapi.WriteV2MessageType:
		var req writev2.Request
		if err := req.Unmarshal(b); err != nil {
			resp.SetStatusCode(400)
			return resp, err
		}
		for _, ts := range req.Timeseries {
			ls, err := ts.ToLabels(&sb, req.Symbols)
			if err != nil {
				resp.SetStatusCode(400)
				return resp, err
			}
			md, err := ts.ToMetadata(req.Symbols)
			if err != nil {
				resp.SetStatusCode(400)
				return resp, err
			}
			var exs []exemplar.Exemplar
			for _, e := range ts.Exemplars {
				x, err := e.ToExemplar(&sb, req.Symbols)
				if err != nil {
					resp.SetStatusCode(400)
					return resp, err
				}
				exs = append(exs, x)
			}
			first := len(got)
			for _, x := range ts.Samples {
				got = append(got, appended{lbls: ls, t: x.Timestamp, v: x.Value, meta: md, st: x.StartTimestamp})
			}
			for _, h := range ts.Histograms {
				a := appended{lbls: ls, t: h.Timestamp, meta: md, st: h.StartTimestamp}
				if h.IsFloatHistogram() {
					a.fh = h.ToFloatHistogram()
				} else {
					a.h = h.ToIntHistogram()
				}
				got = append(got, a)
			}
			if len(got) > first {
				got[first].ex = exs
			}
			resp.Add(remoteapi.WriteResponseStats{Samples: len(ts.Samples), Histograms: len(ts.Histograms)})
		}
	default:
		var req prompb.WriteRequest
		if err := req.Unmarshal(b); err != nil {
			resp.SetStatusCode(400)
			return resp, err
		}
		for _, ts := range req.Timeseries {
			ls := ts.ToLabels(&sb, nil)
			first := len(got)
			for _, x := range ts.Samples {
				got = append(got, appended{lbls: ls, t: x.Timestamp, v: x.Value})
			}
			for _, h := range ts.Histograms {
				a := appended{lbls: ls, t: h.Timestamp}
				if h.IsFloatHistogram() {
					a.fh = h.ToFloatHistogram()
				} else {
					a.h = h.ToIntHistogram()
				}
				got = append(got, a)
			}
			if len(got) > first {
				for _, e := range ts.Exemplars {
					got[first].ex = append(got[first].ex, e.ToExemplar(&sb, nil))
				}
			}
		}
		s.mu.Lock()
		s.meta1 = append(s.meta1, req.Metadata...)
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.got = append(s.got, got...)
	s.mu.Unlock()
	return resp, nil
}

// referenceHandler is the reference remote-write handler of
// client_golang/exp/api/remote (the protocol layer of Prometheus's
// storage/remote receiver) on 127.0.0.1:0.
func referenceHandler(t *testing.T, accept remoteapi.MessageTypes) (*decodingStore, string) {
	st := &decodingStore{}
	srv := httptest.NewServer(remoteapi.NewWriteHandler(st, accept))
	t.Cleanup(srv.Close)
	return st, srv.URL
}

// nativeMetrics is an OTLP batch with an exponential histogram (two
// positive spans, a negative bucket, zero bucket), a gauge and a counter,
// each with a unit and a description.
func nativeMetrics(t *testing.T, ts time.Time) []byte {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	rm.Resource().Attributes().PutStr("host.name", "h1")
	sm := rm.ScopeMetrics().AppendEmpty()
	now := pcommon.NewTimestampFromTime(ts)

	h := sm.Metrics().AppendEmpty()
	h.SetName("rpc.duration")
	h.SetUnit("s")
	h.SetDescription("RPC latency.")
	eh := h.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	p := eh.DataPoints().AppendEmpty()
	p.SetTimestamp(now)
	p.SetScale(1)
	p.SetZeroCount(2)
	p.SetZeroThreshold(0.001)
	p.Positive().SetOffset(-1)
	p.Positive().BucketCounts().FromRaw([]uint64{1, 2, 0, 0, 0, 3})
	p.Negative().SetOffset(0)
	p.Negative().BucketCounts().FromRaw([]uint64{1})
	p.SetCount(9)
	p.SetSum(12.5)
	p.Attributes().PutStr("method", "get")

	g := sm.Metrics().AppendEmpty()
	g.SetName("room.temperature")
	g.SetUnit("Cel")
	g.SetDescription("Room temperature.")
	gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	gp.SetTimestamp(now)
	gp.SetDoubleValue(21.5)

	c := sm.Metrics().AppendEmpty()
	c.SetName("http.sent")
	c.SetUnit("By")
	c.SetDescription("Bytes sent.")
	sum := c.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	cp := sum.DataPoints().AppendEmpty()
	cp.SetTimestamp(now)
	cp.SetIntValue(4096)

	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// byName indexes appends by metric name.
func byName(got []appended) map[string][]appended {
	m := map[string][]appended{}
	for _, a := range got {
		n := a.lbls.Get("__name__")
		m[n] = append(m[n], a)
	}
	return m
}

func names(m map[string][]appended) string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, " ")
}

// OTLP -> remote write 2.0 into Prometheus's reference handler: the
// exponential histogram arrives as a native histogram (schema = scale,
// OTLP bucket offset+1 = Prometheus index, zero bucket kept, no
// _sum/_count series), and every series carries its metadata (type, unit,
// help) from the OTLP descriptor. Over 1.0 the same batch is what it was:
// the histogram as _sum/_count, no native histogram.
func TestConvertedV2NativeHistogramsAndMetadata(t *testing.T) {
	ts := time.Unix(1_800_000_000, 0)
	recs := []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: nativeMetrics(t, ts)}}
	both := remoteapi.MessageTypes{remoteapi.WriteV1MessageType, remoteapi.WriteV2MessageType}
	var meta1 []prompb.MetricMetadata
	sendCfg := func(cfg Config, wantDropped uint64) map[string][]appended {
		st, url := referenceHandler(t, both)
		cfg.Endpoints = []string{url}
		exp, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Send(waittest.Context(t), recs); err != nil {
			t.Fatal(err)
		}
		if dropped, bad, _ := exp.Stats(); dropped != wantDropped || bad != 0 {
			t.Fatalf("%+v: dropped %d (want %d), bad bodies %d", cfg, dropped, wantDropped, bad)
		}
		meta1 = st.meta1
		return byName(st.got)
	}
	send := func(protocol string) map[string][]appended { return sendCfg(Config{Protocol: protocol}, 0) }

	v2 := send("2.0")
	want := &histogram.Histogram{Schema: 1, Count: 9, Sum: 12.5, ZeroCount: 2, ZeroThreshold: 0.001,
		PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}, {Offset: 3, Length: 1}}, PositiveBuckets: []int64{1, 1, 1},
		NegativeSpans: []histogram.Span{{Offset: 1, Length: 1}}, NegativeBuckets: []int64{1}}
	hs := v2["rpc_duration_seconds"]
	if len(hs) != 1 || hs[0].h == nil || hs[0].fh != nil {
		t.Fatalf("2.0: want one integer native histogram rpc_duration_seconds, got %+v (series: %s)", hs, names(v2))
	}
	if !hs[0].h.Equals(want) || hs[0].t != ts.UnixMilli() || hs[0].lbls.Get("method") != "get" || hs[0].lbls.Get("job") != "svc" {
		t.Fatalf("2.0 histogram %v @%d %v, want %v @%d", hs[0].h, hs[0].t, hs[0].lbls, want, ts.UnixMilli())
	}
	if err := hs[0].h.Validate(); err != nil {
		t.Fatalf("2.0 histogram invalid: %v", err)
	}
	// The histogram's buckets give back the OTLP ones: (2^(i/2)..] counts.
	var ups []string
	for it := hs[0].h.PositiveBucketIterator(); it.Next(); {
		b := it.At()
		ups = append(ups, fmt.Sprintf("(%.4g,%.4g]=%d", b.Lower, b.Upper, b.Count))
	}
	if got := strings.Join(ups, " "); got != "(0.7071,1]=1 (1,1.414]=2 (4,5.657]=3" {
		t.Fatalf("positive buckets %s", got)
	}
	for _, n := range []string{"rpc_duration_seconds_sum", "rpc_duration_seconds_count"} {
		if len(v2[n]) != 0 {
			t.Fatalf("2.0 sent %s besides the native histogram", n)
		}
	}
	for name, m := range map[string]metadata.Metadata{
		"rpc_duration_seconds":     {Type: model.MetricTypeHistogram, Unit: "seconds", Help: "RPC latency."},
		"room_temperature_celsius": {Type: model.MetricTypeGauge, Unit: "celsius", Help: "Room temperature."},
		"http_sent_bytes_total":    {Type: model.MetricTypeCounter, Unit: "bytes", Help: "Bytes sent."},
		"target_info":              {Type: model.MetricTypeGauge, Help: "Target metadata"},
	} {
		a := v2[name]
		if len(a) != 1 || a[0].meta != m {
			t.Fatalf("2.0 %s: metadata %+v, want %+v (series: %s)", name, a, m, names(v2))
		}
	}
	if a := v2["room_temperature_celsius"]; a[0].v != 21.5 {
		t.Fatalf("gauge value %v", a[0].v)
	}
	if a := v2["http_sent_bytes_total"]; a[0].v != 4096 {
		t.Fatalf("counter value %v", a[0].v)
	}

	// 1.0 without send_native_histograms (the default): the exponential
	// histogram is dropped and counted (the specification's rule for a
	// format without native histograms), the rest arrives with one
	// metadata entry per metric family.
	v1 := sendCfg(Config{Protocol: "1.0"}, 1)
	if names(v1) != "http_sent_bytes_total room_temperature_celsius target_info" {
		t.Fatalf("1.0 series: %s", names(v1))
	}
	wantMeta1 := []prompb.MetricMetadata{
		{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "http_sent_bytes_total", Unit: "bytes", Help: "Bytes sent."},
		{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "room_temperature_celsius", Unit: "celsius", Help: "Room temperature."},
		{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "target_info", Help: "Target metadata"},
	}
	sortMeta := func(m []prompb.MetricMetadata) []prompb.MetricMetadata {
		sort.Slice(m, func(i, j int) bool { return m[i].MetricFamilyName < m[j].MetricFamilyName })
		return m
	}
	if got := fmt.Sprint(sortMeta(meta1)); got != fmt.Sprint(wantMeta1) {
		t.Fatalf("1.0 metadata:\n got %s\nwant %s", got, fmt.Sprint(wantMeta1))
	}

	// send_native_histograms: 1.0 carries the same native histogram as
	// 2.0, and its family's metadata.
	v1n := sendCfg(Config{Protocol: "1.0", SendNativeHistograms: true}, 0)
	if hs := v1n["rpc_duration_seconds"]; len(hs) != 1 || hs[0].h == nil || !hs[0].h.Equals(want) || hs[0].t != ts.UnixMilli() {
		t.Fatalf("1.0 native histogram %+v, want %v", hs, want)
	}
	if names(v1n) != "http_sent_bytes_total room_temperature_celsius rpc_duration_seconds target_info" {
		t.Fatalf("1.0 native series: %s", names(v1n))
	}
	wantMeta1 = append(wantMeta1, prompb.MetricMetadata{Type: prompb.MetricMetadata_HISTOGRAM, MetricFamilyName: "rpc_duration_seconds", Unit: "seconds", Help: "RPC latency."})
	if got := fmt.Sprint(sortMeta(meta1)); got != fmt.Sprint(sortMeta(wantMeta1)) {
		t.Fatalf("1.0 native metadata:\n got %s\nwant %s", got, fmt.Sprint(wantMeta1))
	}

	// send_metadata: false: no metadata on either version.
	if v1 = sendCfg(Config{Protocol: "1.0", NoMetadata: true}, 1); len(meta1) != 0 {
		t.Fatalf("1.0 without metadata sent %v", meta1)
	}
	for name, a := range sendCfg(Config{Protocol: "2.0", NoMetadata: true}, 0) {
		if a[0].meta != (metadata.Metadata{Type: model.MetricTypeUnknown}) {
			t.Fatalf("2.0 without metadata: %s has %+v", name, a[0].meta)
		}
	}
}

// Remote write 2.0 in shard mode is split by series without decoding
// (split.go): a native histogram arrives as the sender wrote it, with the
// sender's metadata (type, unit, help) through the part's own symbols
// table, a gauge histogram keeps its gauge reset hint, and a counter
// keeps its type.
func TestShardV2RemoteWriteKeepsHistogramsAndMetadata(t *testing.T) {
	st := writev2.NewSymbolTable()
	h := &histogram.Histogram{Count: 12, ZeroCount: 2, ZeroThreshold: 0.001, Sum: 18.4, Schema: 1,
		PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}, {Offset: 1, Length: 2}}, PositiveBuckets: []int64{1, 1, -1, 0},
		NegativeSpans: []histogram.Span{{Offset: 0, Length: 2}, {Offset: 1, Length: 2}}, NegativeBuckets: []int64{1, 1, -1, 0}}
	gauge := &histogram.Histogram{CounterResetHint: histogram.GaugeType, Count: 3, Sum: 1.5, Schema: 0,
		PositiveSpans: []histogram.Span{{Offset: -1, Length: 1}}, PositiveBuckets: []int64{3}}
	req := &writev2.Request{Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("rpc_seconds"), st.Symbolize("job"), st.Symbolize("api")},
			Histograms: []writev2.Histogram{writev2.FromIntHistogram(0, 1_800_000_000_000, h)},
			Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_HISTOGRAM, HelpRef: st.Symbolize("RPC latency."), UnitRef: st.Symbolize("seconds")}},
		{LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("requests_total"), st.Symbolize("job"), st.Symbolize("api")},
			Samples:  []writev2.Sample{{Value: 7, Timestamp: 1_800_000_000_000}},
			Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: st.Symbolize("Requests.")}},
		{LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("queue_wait_seconds"), st.Symbolize("job"), st.Symbolize("api")},
			Histograms: []writev2.Histogram{writev2.FromIntHistogram(0, 1_800_000_000_000, gauge)},
			Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGEHISTOGRAM}},
	}}
	req.Symbols = st.Symbols()
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s1, u1 := referenceHandler(t, remoteapi.MessageTypes{remoteapi.WriteV2MessageType})
	s2, u2 := referenceHandler(t, remoteapi.MessageTypes{remoteapi.WriteV2MessageType})
	exp, err := New(Config{Endpoints: []string{u1, u2}, Protocol: "2.0", Shard: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: snappy.Encode(nil, body), RemoteWrite: 2}}); err != nil {
		t.Fatal(err)
	}
	got := byName(append(append([]appended(nil), s1.got...), s2.got...))
	if names(got) != "queue_wait_seconds requests_total rpc_seconds" {
		t.Fatalf("series: %s", names(got))
	}
	hs := got["rpc_seconds"]
	// The sender's buckets and spans, as it wrote them (the convert path
	// would lay gaps of one empty bucket inside a span).
	if len(hs) != 1 || hs[0].h == nil || !hs[0].h.Equals(h) || hs[0].t != 1_800_000_000_000 {
		t.Fatalf("histogram %+v, want %v", hs, h)
	}
	if m := (metadata.Metadata{Type: model.MetricTypeHistogram, Unit: "seconds", Help: "RPC latency."}); hs[0].meta != m {
		t.Fatalf("histogram metadata %+v, want %+v", hs[0].meta, m)
	}
	if c := got["requests_total"]; len(c) != 1 || c[0].v != 7 || c[0].meta != (metadata.Metadata{Type: model.MetricTypeCounter, Help: "Requests."}) {
		t.Fatalf("counter %+v", c)
	}
	if g := got["queue_wait_seconds"]; len(g) != 1 || g[0].h == nil || !g[0].h.Equals(gauge) || g[0].h.CounterResetHint != histogram.GaugeType ||
		g[0].meta.Type != model.MetricTypeGaugeHistogram {
		t.Fatalf("gauge histogram %+v, want %v with the gauge reset hint", g, gauge)
	}
}

// The edges of the exponential -> native mapping over 2.0: a scale above
// 8 is reduced to 8 (buckets merged, count kept), a scale below -4 has no
// native form and goes as _sum/_count, a point flagged "no recorded
// value" is the histogram stale marker. An endpoint that answers 415 to
// 2.0 gets the 1.0 form: _sum/_count, no native histogram.
func TestConvertedV2NativeHistogramEdges(t *testing.T) {
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	now := pcommon.NewTimestampFromTime(time.Unix(1_800_000_000, 0))
	add := func(name string, scale int32, counts []uint64, flags pmetric.DataPointFlags) {
		m := sm.Metrics().AppendEmpty()
		m.SetName(name)
		eh := m.SetEmptyExponentialHistogram()
		eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		p := eh.DataPoints().AppendEmpty()
		p.SetTimestamp(now)
		p.SetScale(scale)
		p.Positive().BucketCounts().FromRaw(counts)
		var n uint64
		for _, c := range counts {
			n += c
		}
		p.SetCount(n)
		p.SetSum(float64(n))
		p.SetFlags(flags)
		e := p.Exemplars().AppendEmpty()
		e.SetTimestamp(now)
		e.SetDoubleValue(0.25)
	}
	add("fine", 10, []uint64{1, 1, 1, 1}, 0)
	add("coarse", -5, []uint64{2}, 0)
	add("gone", 0, []uint64{1}, pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	recs := []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: b}}

	st, url := referenceHandler(t, remoteapi.MessageTypes{remoteapi.WriteV2MessageType})
	exp, err := New(Config{Endpoints: []string{url}, Protocol: "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	got := byName(st.got)
	if names(got) != "coarse_count coarse_sum fine gone" {
		t.Fatalf("2.0 series: %s", names(got))
	}
	fine := got["fine"][0].h
	want := &histogram.Histogram{Schema: 8, Count: 4, Sum: 4, PositiveSpans: []histogram.Span{{Offset: 1, Length: 1}}, PositiveBuckets: []int64{4}}
	if fine == nil || !fine.Equals(want) {
		t.Fatalf("scale 10: got %v, want %v", fine, want)
	}
	if a := got["coarse_count"]; a[0].v != 2 || a[0].h != nil || len(a[0].ex) != 1 || a[0].ex[0].Value != 0.25 {
		t.Fatalf("scale -5 _count: %+v, want 2 with its exemplar", a)
	}
	if g := got["gone"][0].h; g == nil || !value.IsStaleNaN(g.Sum) {
		t.Fatalf("no recorded value: %v, want the stale marker", g)
	}
	if _, _, sent := exp.Stats(); sent != 4 {
		t.Fatalf("2.0 sent series %d, want 4", sent)
	}

	old, url1 := referenceHandler(t, remoteapi.MessageTypes{remoteapi.WriteV1MessageType})
	exp1, err := New(Config{Endpoints: []string{url1}, Protocol: "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp1.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	got1 := byName(old.got)
	if exp1.Fallbacks() != 1 || names(got1) != "coarse_count coarse_sum" {
		t.Fatalf("after a 415: fallbacks %d, series %s", exp1.Fallbacks(), names(got1))
	}
	if dropped, _, sent := exp1.Stats(); sent != 2 || dropped != 2 {
		t.Fatalf("1.0 sent series %d (want 2), dropped %d (want the 2 native histograms)", sent, dropped)
	}

	// With send_native_histograms the 1.0 fallback carries them.
	old, url1 = referenceHandler(t, remoteapi.MessageTypes{remoteapi.WriteV1MessageType})
	exp1, err = New(Config{Endpoints: []string{url1}, Protocol: "2.0", SendNativeHistograms: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp1.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	got1 = byName(old.got)
	if names(got1) != "coarse_count coarse_sum fine gone" || !got1["fine"][0].h.Equals(want) || !value.IsStaleNaN(got1["gone"][0].h.Sum) {
		t.Fatalf("1.0 native after a 415: series %s", names(got1))
	}
	if dropped, _, sent := exp1.Stats(); sent != 4 || dropped != 0 {
		t.Fatalf("1.0 native sent series %d (want 4), dropped %d", sent, dropped)
	}
}
