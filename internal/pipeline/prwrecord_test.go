package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/processor"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/signal"
)

// canonMetrics renders every point of m with every field resolved (strings
// out of the arena, ranges as their values, descriptors, resources and
// scopes by content), so that two batches holding the same data in
// different layouts render the same.
func canonMetrics(m *signal.Metrics) string {
	var sb strings.Builder
	attrs := func(r signal.Range) string {
		var s []string
		for a := r.Start; a < r.End; a++ {
			s = append(s, fmt.Sprintf("%s:%d:%x", m.Keys.Name(m.Attrs.Key[a]), m.Attrs.Type[a], valueOf(m, int(a))))
		}
		return strings.Join(s, ",")
	}
	u64 := func(r signal.Range) []uint64 { return m.U64[r.Start:r.End] }
	f64 := func(r signal.Range) string {
		var s []string
		for _, f := range m.F64[r.Start:r.End] {
			s = append(s, fmt.Sprintf("%x", math.Float64bits(f)))
		}
		return strings.Join(s, ",")
	}
	for i := range m.Len() {
		d := m.Descs[m.Desc[i]]
		res, sc := m.Resources[m.Resource[i]], m.Scopes[m.Scope[i]]
		fmt.Fprintf(&sb, "desc{%q %q %q %d %d %t [%s]} ", m.String(d.Name), m.String(d.Description), m.String(d.Unit), d.Type, d.Temporality, d.Monotonic, attrs(d.Metadata))
		fmt.Fprintf(&sb, "res{[%s] %d %q} scope{%q %q [%s] %d %q} ", attrs(res.Attrs), res.DroppedAttrs, m.String(res.SchemaURL),
			m.String(sc.Name), m.String(sc.Version), attrs(sc.Attrs), sc.DroppedAttrs, m.String(sc.SchemaURL))
		fmt.Fprintf(&sb, "st=%d t=%d attrs=[%s] flags=%d ", m.StartTime[i], m.Time[i], attrs(m.Attr[i]), m.Flags[i])
		sb.WriteString("ex=[")
		for e := m.Exemplars[i].Start; e < m.Exemplars[i].End; e++ {
			fmt.Fprintf(&sb, "%x;", m.Bytes(m.Msgs[e]))
		}
		fmt.Fprintf(&sb, "] sid=%x num=%d:%x count=%d sum=%x min=%x max=%x has=%d ", m.SeriesID[i], m.NumberType[i], m.Number[i], m.Count[i],
			math.Float64bits(m.Sum[i]), math.Float64bits(m.Min[i]), math.Float64bits(m.Max[i]), m.Has[i])
		fmt.Fprintf(&sb, "buckets=%v bounds=[%s] scale=%d zc=%d zt=%x pos=%d%v neg=%d%v q=[%s] fc=[%s]\n", u64(m.BucketCounts[i]), f64(m.Bounds[i]), m.Scale[i],
			m.ZeroCount[i], math.Float64bits(m.ZeroThreshold[i]), m.PosOffset[i], u64(m.PosCounts[i]), m.NegOffset[i], u64(m.NegCounts[i]), f64(m.Quantiles[i]),
			f64(m.FloatCounts[i]))
	}
	return sb.String()
}

func sortedLines(s string) string {
	l := strings.Split(s, "\n")
	slices.Sort(l)
	return strings.Join(l, "\n")
}

func valueOf(m *signal.Metrics, a int) []byte {
	if m.Attrs.Type[a] == signal.ValueString || m.Attrs.Type[a] == signal.ValueBytes {
		return m.Bytes(signal.Str(m.Attrs.Val[a]))
	}
	return fmt.Appendf(nil, "%x", m.Attrs.Val[a])
}

var staleNaN = math.Float64frombits(value.StaleNaN)

// nastyV1 is a 1.0 request with what the OTLP mapping must carry exactly:
// unsorted labels, stale markers and other NaN bits, infinities, integer,
// float and custom-bucket native histograms, exemplars with labels, and
// metadata.
func nastyV1() *prompb.WriteRequest {
	req := &prompb.WriteRequest{
		Timeseries: []prompb.TimeSeries{
			{Labels: []prompb.Label{{Name: "job", Value: "api"}, {Name: "__name__", Value: "http_requests_total"}, {Name: "code", Value: "200"}, {Name: "instance", Value: "a:9090"}},
				Samples:   []prompb.Sample{{Value: 1, Timestamp: 1700000000000}, {Value: staleNaN, Timestamp: 1700000015000}, {Value: math.Float64frombits(0x7ff8000000000001), Timestamp: 1700000030000}},
				Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "abc"}, {Name: "span_id", Value: "01"}}, Value: 0.5, Timestamp: 1700000000001}}},
			{Labels: []prompb.Label{{Name: "zone", Value: "ü-1"}, {Name: "__name__", Value: "temp:celsius"}, {Name: "le", Value: "weird"}},
				Samples: []prompb.Sample{{Value: math.Inf(-1), Timestamp: 1}, {Value: math.Inf(1), Timestamp: 2}, {Value: -0.0, Timestamp: 3}}},
			{Labels: []prompb.Label{{Name: "__name__", Value: "rpc_latency_seconds"}, {Name: "service_name", Value: "x"}},
				Histograms: []prompb.Histogram{prompb.FromIntHistogram(1000, testHistogram(3)), prompb.FromFloatHistogram(1001, testHistogram(4).ToFloat(nil))}},
			{Labels: []prompb.Label{{Name: "__name__", Value: "req_custom"}, {Name: "a", Value: "b"}},
				Histograms: []prompb.Histogram{prompb.FromIntHistogram(2000, testCustomHistogram(2))}},
			// Float histograms with fractional counts and reset hints
			// (recording rules over native histograms).
			{Labels: []prompb.Label{{Name: "__name__", Value: "job:rpc_latency_seconds:rate5m"}},
				Histograms: []prompb.Histogram{prompb.FromFloatHistogram(3000, fractional(histogram.NotCounterReset, 3)),
					prompb.FromFloatHistogram(3015, fractional(histogram.GaugeType, 3))}},
			{Labels: []prompb.Label{{Name: "__name__", Value: "job:req_custom:rate5m"}},
				Histograms: []prompb.Histogram{prompb.FromFloatHistogram(3000, fractional(histogram.CounterReset, histogram.CustomBucketsSchema))}},
		},
		Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "http_requests_total", Help: "Requests.", Unit: "requests"}},
	}
	// A corpus-like bulk: many series sharing names and label names.
	for i := range 300 {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			Labels:  []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("node_metric_%d", i%7)}, {Name: "instance", Value: fmt.Sprintf("host-%d", i%13)}, {Name: "cpu", Value: fmt.Sprint(i)}},
			Samples: []prompb.Sample{{Value: float64(i) / 3, Timestamp: 1700000000000 + int64(i)}},
		})
	}
	return req
}

// fractional is a float histogram with fractional counts and a reset
// hint, of exponential schema or custom buckets.
func fractional(hint histogram.CounterResetHint, schema int32) *histogram.FloatHistogram {
	h := &histogram.FloatHistogram{CounterResetHint: hint, Schema: schema, ZeroThreshold: 1e-3, ZeroCount: 1.0 / 3,
		Count: 1.0/3 + 0.1 + 2.0/7 + 0.05, Sum: -1.0 / 9,
		PositiveSpans: []histogram.Span{{Offset: -1, Length: 2}}, PositiveBuckets: []float64{0.1, 2.0 / 7},
		NegativeSpans: []histogram.Span{{Offset: 4, Length: 1}}, NegativeBuckets: []float64{0.05}}
	if schema == histogram.CustomBucketsSchema {
		h.ZeroThreshold, h.ZeroCount, h.Count, h.CustomValues = 0, 0, 0.1+2.0/7, []float64{0.5, 1}
		h.PositiveSpans[0].Offset, h.NegativeSpans, h.NegativeBuckets = 1, nil, nil
	}
	return h
}

// nastyV2 is nastyV1's content as a 2.0 request, with created timestamps
// and per-series metadata.
func nastyV2() *writev2.Request {
	st := writev2.NewSymbolTable()
	req := &writev2.Request{}
	for i, s := range nastyV1().Timeseries {
		var refs []uint32
		for _, l := range s.Labels {
			refs = append(refs, st.Symbolize(l.Name), st.Symbolize(l.Value))
		}
		ts := writev2.TimeSeries{LabelsRefs: refs}
		for _, x := range s.Samples {
			ts.Samples = append(ts.Samples, writev2.Sample{Value: x.Value, Timestamp: x.Timestamp, StartTimestamp: int64(i % 2 * 1600000000000)})
		}
		for _, h := range s.Histograms {
			if h.IsFloatHistogram() {
				ts.Histograms = append(ts.Histograms, writev2.FromFloatHistogram(1600000000000, h.Timestamp, h.ToFloatHistogram()))
			} else {
				ts.Histograms = append(ts.Histograms, writev2.FromIntHistogram(0, h.Timestamp, h.ToIntHistogram()))
			}
		}
		for _, e := range s.Exemplars {
			var er []uint32
			for _, l := range e.Labels {
				er = append(er, st.Symbolize(l.Name), st.Symbolize(l.Value))
			}
			ts.Exemplars = append(ts.Exemplars, writev2.Exemplar{LabelsRefs: er, Value: e.Value, Timestamp: e.Timestamp})
		}
		if i == 0 {
			ts.Metadata = writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: st.Symbolize("Requests."), UnitRef: st.Symbolize("requests")}
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	req.Symbols = st.Symbols()
	return req
}

func nastyBodies(t testing.TB) map[bodyEnc][]byte {
	b1, err := nastyV1().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b2, err := nastyV2().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return map[bodyEnc][]byte{encPRW1: b1, encPRW2: b2}
}

// The lake and the tail get from a remote-write record exactly the batch
// they got from the OTLP record the receiver used to queue for the same
// request: every field of every point, stale markers, histograms,
// exemplars and metadata included.
func TestRemoteWriteRecordMatchesOTLP(t *testing.T) {
	for enc, body := range nastyBodies(t) {
		t.Run(fmt.Sprintf("enc=%d", enc), func(t *testing.T) {
			// What the receiver decodes, and the OTLP record it queued.
			var recv signal.Metrics
			var d prw.Decoder
			var err error
			if enc == encPRW1 {
				_, err = d.DecodeV1(&recv, body)
			} else {
				_, err = d.DecodeV2(&recv, body)
			}
			if err != nil {
				t.Fatal(err)
			}
			var viaOTLP signal.Metrics
			if err := otlp.DecodeMetrics(&viaOTLP, otlp.AppendMetricsProto(nil, &recv)); err != nil {
				t.Fatal(err)
			}
			// The record as queued now (the request as received, snappy),
			// read back as the lake loop reads it.
			wire := snappy.Encode(nil, body)
			rec := appendRecordTo(nil, signal.KindMetrics, enc, "acme", nil, wire)
			r, err := parseRecord(rec)
			if err != nil || r.Enc != enc || !bytes.Equal(r.Body, wire) {
				t.Fatalf("parse: %v, enc %d", err, r.Enc)
			}
			var direct signal.Metrics
			direct.AppendString("something already in the arena") // batches are reused
			if err := decodeMetricsRecord(&direct, r.Enc, r.Body); err != nil {
				t.Fatal(err)
			}
			// OTLP groups points by metric, remote write by series: the
			// rows are the same, in another order (the lake sorts them by
			// its sort key when it writes a file).
			want, got := sortedLines(canonMetrics(&viaOTLP)), sortedLines(canonMetrics(&direct))
			if got != want {
				gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
				for i := range min(len(gl), len(wl)) {
					if gl[i] != wl[i] {
						t.Fatalf("point %d differs:\n got %s\nwant %s", i, gl[i], wl[i])
					}
				}
				t.Fatalf("%d points, want %d", len(gl), len(wl))
			}
			for _, w := range []string{fmt.Sprintf("num=%d:%x", signal.ValueDouble, value.StaleNaN), "ex=[3a", "scale=", `"Requests."`} {
				if !strings.Contains(got, w) {
					t.Errorf("the batch lacks %q: the test load is not what it claims", w)
				}
			}
			// The exporters' OTLP view of the record is the same OTLP.
			var m signal.Metrics
			ob, err := otlpMetricsBody(nil, &m, r.Enc, r.Body)
			if err != nil {
				t.Fatal(err)
			}
			var back signal.Metrics
			if err := otlp.DecodeMetrics(&back, ob); err != nil || sortedLines(canonMetrics(&back)) != want {
				t.Fatalf("otlpMetricsBody: %v, differs: %t", err, sortedLines(canonMetrics(&back)) != want)
			}
		})
	}
}

func TestRemoteWriteRecordRoundTrip(t *testing.T) {
	for enc, body := range nastyBodies(t) {
		for _, to := range []dest{nil, {lakeDest, "prometheus_remote_write/x"}} {
			rec := appendRecordTo(nil, signal.KindMetrics, enc, "t-1", to, body)
			r, err := parseRecord(rec)
			if err != nil || r.Kind != signal.KindMetrics || r.Enc != enc || string(r.Tenant) != "t-1" || !bytes.Equal(r.Body, body) || fmt.Sprint(r.destinations()) != fmt.Sprint(to) {
				t.Fatalf("enc %d to %v: %+v, %v", enc, to, r, err)
			}
		}
		// Remote write is metrics only.
		for _, k := range []signal.Kind{signal.KindLogs, signal.KindTraces, signal.KindIOEvents} {
			if _, err := parseRecord(appendRecordTo(nil, k, enc, "t", nil, body)); err == nil {
				t.Errorf("enc %d accepted for %s", enc, k)
			}
		}
		// A damaged body is an error, not a panic or a silent empty batch.
		wire := snappy.Encode(nil, body)
		for _, bad := range [][]byte{wire[:len(wire)/2], body, snappy.Encode(nil, body[:len(body)/2+1])} {
			var m signal.Metrics
			if err := decodeMetricsRecord(&m, enc, bad); err == nil && m.Len() == 0 {
				t.Errorf("enc %d: a damaged body decoded to nothing without an error", enc)
			}
		}
	}
	if _, err := parseRecord(appendRecordTo(nil, signal.KindMetrics, encPRW2N+1, "t", nil, []byte{1})); err == nil {
		t.Error("unknown encoding accepted")
	}
	// A counted 1.0 record: the series count, then the body as received.
	wire := snappy.Encode(nil, nastyBodies(t)[encPRW1])
	s := &scratch{enc: encPRW1N, series: 7}
	r, err := parseRecord(appendRecordBody(nil, s, signal.KindMetrics, "t-1", wire))
	if err != nil || r.Enc != encPRW1N {
		t.Fatalf("counted record: %+v, %v", r, err)
	}
	var want, got signal.Metrics
	if err := decodeMetricsRecord(&want, encPRW1, wire); err != nil {
		t.Fatal(err)
	}
	if n, body, err := splitCounted(r.Body); err != nil || n != 7 || !bytes.Equal(body, wire) {
		t.Fatalf("counted record: %d series, %v", n, err)
	}
	if err := decodeMetricsRecord(&got, encPRW1N, r.Body); err != nil || got.Len() != want.Len() || got.Len() == 0 {
		t.Fatalf("counted record decodes to %d points (%v), want %d", got.Len(), err, want.Len())
	}
	for _, bad := range [][]byte{nil, {0x80}} {
		if err := decodeMetricsRecord(&got, encPRW1N, bad); err == nil {
			t.Errorf("counted record %x without a count decoded", bad)
		}
		if err := decodeMetricsRecord(&got, encPRW2N, bad); err == nil {
			t.Errorf("counted 2.0 record %x without a count decoded", bad)
		}
	}
	// A counted 2.0 record, the same way.
	wire2 := snappy.Encode(nil, nastyBodies(t)[encPRW2])
	s = &scratch{enc: encPRW2N, series: 9}
	r, err = parseRecord(appendRecordBody(nil, s, signal.KindMetrics, "t-1", wire2))
	if err != nil || r.Enc != encPRW2N {
		t.Fatalf("counted 2.0 record: %+v, %v", r, err)
	}
	want.Reset()
	got.Reset()
	if err := decodeMetricsRecord(&want, encPRW2, wire2); err != nil {
		t.Fatal(err)
	}
	if n, body, err := splitCounted(r.Body); err != nil || n != 9 || !bytes.Equal(body, wire2) {
		t.Fatalf("counted 2.0 record: %d series, %v", n, err)
	}
	if err := decodeMetricsRecord(&got, encPRW2N, r.Body); err != nil || got.Len() != want.Len() || got.Len() == 0 {
		t.Fatalf("counted 2.0 record decodes to %d points (%v), want %d", got.Len(), err, want.Len())
	}
}

// Histograms in the shape of Prometheus's tsdbutil test generators (that
// package pulls dependencies sluice does not have).
func testHistogram(i int64) *histogram.Histogram {
	return &histogram.Histogram{
		Count: 12 + uint64(i*9), ZeroCount: 2 + uint64(i), ZeroThreshold: 0.001, Sum: 18.4 * float64(i+1), Schema: 1,
		PositiveSpans:   []histogram.Span{{Offset: 0, Length: 2}, {Offset: 1, Length: 2}},
		PositiveBuckets: []int64{i + 1, 1, -1, 0},
		NegativeSpans:   []histogram.Span{{Offset: 0, Length: 2}, {Offset: 1, Length: 2}},
		NegativeBuckets: []int64{i + 1, 1, -1, 0},
	}
}

func testCustomHistogram(i int64) *histogram.Histogram {
	return &histogram.Histogram{
		Count: 5 + uint64(i*4), Sum: 18.4 * float64(i+1), Schema: histogram.CustomBucketsSchema,
		PositiveSpans:   []histogram.Span{{Offset: 0, Length: 2}, {Offset: 1, Length: 2}},
		PositiveBuckets: []int64{i + 1, 1, -1, 0},
		CustomValues:    []float64{0, 1, 2, 3, 4},
	}
}

// The consumer queues a remote-write request as it came when no rule
// changed it (no rules, or rules that hit nothing), and as OTLP of the
// kept points when a rule changed it.
func TestConsumeQueuesRemoteWriteAsReceived(t *testing.T) {
	body := nastyBodies(t)[encPRW1]
	wire := snappy.Encode(nil, body) // as the client sent it
	q, err := queue.Open(queue.Options{Dir: t.TempDir(), SegmentBytes: 64 << 20, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	c := newConsumer(q, time.Second, newMetrics())
	consume := func() {
		t.Helper()
		var m signal.Metrics
		var d prw.Decoder
		if _, err := d.DecodeV1(&m, body); err != nil {
			t.Fatal(err)
		}
		req := &otlpreceiver.Request{Tenant: "acme", Kind: signal.KindMetrics, Body: wire, Transport: "prometheus_remote_write", Metrics: &m, RemoteWrite: 1}
		if _, err := c.Consume(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	consume() // no rules
	miss, err := processor.Parse([]byte("metrics:\n  - {name: miss, match: 'no_such_metric', action: drop}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.rules.Store(miss)
	consume() // rules that change nothing
	hit, err := processor.Parse([]byte("metrics:\n  - {name: hit, match: 'temp:celsius', action: drop}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.rules.Store(hit)
	consume() // a rule drops a series

	r := q.NewReader(0)
	defer r.Close()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	var encs []bodyEnc
	var last signal.Metrics
	for {
		rec, _, err := r.Next(done)
		if err != nil {
			break
		}
		pr, err := parseRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		encs = append(encs, pr.Enc)
		if pr.Enc == encPRW1 && !bytes.Equal(pr.Body, wire) {
			t.Fatal("the queued remote-write body is not the request's")
		}
		last.Reset()
		if err := decodeMetricsRecord(&last, pr.Enc, pr.Body); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(encs) != fmt.Sprint([]bodyEnc{encPRW1, encPRW1, encOTLP}) {
		t.Fatalf("record encodings %v, want [prw1 prw1 otlp]", encs)
	}
	for i := range last.Len() {
		if last.String(last.Descs[last.Desc[i]].Name) == "temp:celsius" {
			t.Fatal("the dropped series was queued")
		}
	}
}

// sluice as a relay, end to end: remote write 1.0 in on its own listener,
// through the durable queue, out through a prometheus_remote_write exporter
// to a real HTTP server on 127.0.0.1:0, beside the lake. A request of
// 1 MiB or more (snappy-decoded) arrives with the very bytes the client
// sent; the series of smaller ones arrive byte for byte (merged into fewer
// requests).
func TestPipelineRelaysRemoteWriteAsReceived(t *testing.T) {
	type got struct{ wire, body []byte }
	var (
		mu   sync.Mutex
		reqs []got
	)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wire, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body, err := snappy.Decode(nil, wire)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		mu.Lock()
		reqs = append(reqs, got{wire, body})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()

	cfg := testConfig(t)
	cfg.Receivers.PrometheusRemoteWrite.Listen = "127.0.0.1:0"
	cfg.Exporters = map[string]config.Exporter{
		"prometheus_remote_write/sink": {Endpoints: []string{sink.URL + "/api/v1/write"}, BatchDelay: config.Duration(20 * time.Millisecond)},
	}
	cfg.Pipelines = map[string]config.Pipeline{
		"logs":    {Receivers: []string{"otlp"}, Exporters: []string{"lake"}},
		"metrics": {Receivers: []string{"otlp", "prometheus_remote_write"}, Exporters: []string{"lake", "prometheus_remote_write/sink"}},
		"traces":  {Receivers: []string{"otlp"}, Exporters: []string{"lake"}},
	}
	p := start(t, cfg)

	t0 := time.Now().Add(-time.Hour).UnixMilli()
	request := func(n int, name string) *prompb.WriteRequest {
		req := &prompb.WriteRequest{}
		for i := range n {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: name}, {Name: "id", Value: fmt.Sprint(i)}, {Name: "pad", Value: "a-label-value-of-a-realistic-length"}},
				Samples: []prompb.Sample{{Value: float64(i), Timestamp: t0}, {Value: math.Float64frombits(value.StaleNaN), Timestamp: t0 + 15_000}}})
		}
		return req
	}
	big := request(15000, "big") // 1.3 MB: goes alone (prwexporter's maxRawBytes)
	smalls := []*prompb.WriteRequest{request(10, "small_a"), request(10, "small_b")}
	var wantSeries [][]byte
	var bigWire []byte
	for i, req := range append([]*prompb.WriteRequest{big}, smalls...) {
		raw, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		wire := snappy.Encode(nil, raw)
		if i == 0 {
			bigWire = wire
		}
		for _, ts := range req.Timeseries {
			b, _ := ts.Marshal()
			wantSeries = append(wantSeries, b)
		}
		resp, err := http.Post("http://"+p.Addrs().RemoteWrite.String()+"/api/v1/write", "application/x-protobuf", bytes.NewReader(wire))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	var gotSeries [][]byte
	sawBig := false
	for deadline := time.Now().Add(60 * time.Second); ; {
		mu.Lock()
		gotSeries, sawBig = gotSeries[:0], false
		for _, r := range reqs {
			sawBig = sawBig || bytes.Equal(r.wire, bigWire)
			var wr prompb.WriteRequest
			if err := wr.Unmarshal(r.body); err != nil {
				t.Fatal(err)
			}
			for _, ts := range wr.Timeseries {
				b, _ := ts.Marshal()
				gotSeries = append(gotSeries, b)
			}
		}
		mu.Unlock()
		if len(gotSeries) >= len(wantSeries) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(gotSeries) != len(wantSeries) {
		t.Fatalf("the sink got %d series, want %d", len(gotSeries), len(wantSeries))
	}
	for i := range wantSeries {
		if !bytes.Equal(gotSeries[i], wantSeries[i]) {
			t.Fatalf("series %d differs", i)
		}
	}
	if !sawBig {
		t.Fatal("the large request was not forwarded with the bytes it was received with")
	}
}
