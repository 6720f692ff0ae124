package prwexporter

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// captureServer is a remote-write endpoint on 127.0.0.1:0 that keeps every
// request's snappy-decoded body and content type, and answers 415 to 2.0
// when v1Only.
type captureServer struct {
	mu     sync.Mutex
	bodies [][]byte
	wire   [][]byte // as sent (snappy)
	types  []string
	v1Only bool
}

// captureServers starts n capture servers, closed when the test ends.
func captureServers(t *testing.T, n int) ([]*captureServer, []string) {
	var css []*captureServer
	var urls []string
	for range n {
		cs := &captureServer{}
		srv := httptest.NewServer(cs)
		t.Cleanup(srv.Close)
		css = append(css, cs)
		urls = append(urls, srv.URL)
	}
	return css, urls
}

func (c *captureServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	ct := r.Header.Get("Content-Type")
	if c.v1Only && ct != "application/x-protobuf" {
		http.Error(w, "1.0 only", http.StatusUnsupportedMediaType)
		return
	}
	body, err := snappy.Decode(nil, raw)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	c.mu.Lock()
	c.bodies = append(c.bodies, body)
	c.wire = append(c.wire, raw)
	c.types = append(c.types, ct)
	c.mu.Unlock()
	if strings.Contains(ct, "io.prometheus.write.v2.Request") {
		// A 2.0 receiver confirms what it wrote; without this header
		// the exporter takes the endpoint for a 1.0 receiver.
		w.Header().Set("X-Prometheus-Remote-Write-Samples-Written", "0")
	}
	w.WriteHeader(http.StatusNoContent)
}

// passRecords are remote-write 1.0 records as the receiver queues them:
// labels unsorted, stale markers, exemplars, histograms and metadata.
func passRecords(t *testing.T, n int) ([]exporter.Record, []prompb.TimeSeries, []prompb.MetricMetadata) {
	var (
		recs   []exporter.Record
		series []prompb.TimeSeries
		meta   []prompb.MetricMetadata
	)
	for r := range n {
		req := &prompb.WriteRequest{}
		for s := range 30 {
			ts := prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "zone", Value: fmt.Sprint(s % 4)}, {Name: "__name__", Value: fmt.Sprintf("m_%d", s%3)}, {Name: "id", Value: fmt.Sprintf("r%d-s%d", r, s)}},
				Samples: []prompb.Sample{{Value: float64(r*100 + s), Timestamp: 1_800_000_000_000 + int64(r)}, {Value: math.Float64frombits(value.StaleNaN), Timestamp: 1_800_000_000_001 + int64(r)}},
			}
			if s == 0 {
				ts.Exemplars = []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "abc"}}, Value: 1, Timestamp: 1_800_000_000_000}}
				ts.Histograms = []prompb.Histogram{{Count: &prompb.Histogram_CountInt{CountInt: 3}, Sum: 2, Schema: 1, ZeroThreshold: 0.001,
					ZeroCount: &prompb.Histogram_ZeroCountInt{ZeroCountInt: 1}, PositiveSpans: []prompb.BucketSpan{{Offset: 0, Length: 2}}, PositiveDeltas: []int64{1, 0}, Timestamp: 1_800_000_000_002}}
			}
			req.Timeseries = append(req.Timeseries, ts)
		}
		req.Metadata = []prompb.MetricMetadata{{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: fmt.Sprintf("m_%d", r%3), Help: "h", Unit: "u"}}
		body, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, exporter.Record{Kind: signal.KindMetrics, Tenant: "acme", Body: snappy.Encode(nil, body), RemoteWrite: 1})
		series = append(series, req.Timeseries...)
		meta = append(meta, req.Metadata...)
	}
	return recs, series, meta
}

// A remote-write 1.0 record goes to a 1.0 exporter as it came: the
// records' series arrive byte for byte (labels in their order, value bits,
// exemplars, histograms, metadata), several records in one request.
func TestPassThroughV1ByteIdentical(t *testing.T) {
	recs, series, meta := passRecords(t, 12)
	cs := &captureServer{}
	srv := httptest.NewServer(cs)
	defer srv.Close()
	exp, err := New(Config{Endpoints: []string{srv.URL}, Protocol: "1.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	if len(cs.bodies) != 1 {
		t.Fatalf("%d requests for 12 small records, want 1 (concatenated)", len(cs.bodies))
	}
	var got prompb.WriteRequest
	if err := got.Unmarshal(cs.bodies[0]); err != nil {
		t.Fatal(err)
	}
	if len(got.Timeseries) != len(series) || len(got.Metadata) != len(meta) {
		t.Fatalf("%d series and %d metadata, want %d and %d", len(got.Timeseries), len(got.Metadata), len(series), len(meta))
	}
	for i := range series {
		a, _ := got.Timeseries[i].Marshal()
		b, _ := series[i].Marshal()
		if !bytes.Equal(a, b) {
			t.Fatalf("series %d differs:\n got %v\nwant %v", i, got.Timeseries[i], series[i])
		}
	}
	for i := range meta {
		if got.Metadata[i].String() != meta[i].String() {
			t.Fatalf("metadata %d: %v, want %v", i, got.Metadata[i], meta[i])
		}
	}
	if _, _, sent := exp.Stats(); sent != uint64(len(series)) {
		t.Errorf("sent series %d, want %d", sent, len(series))
	}
}

// Pass-through keeps per-tenant requests and queue order: records of two
// tenants, interleaved with an OTLP-converted one, arrive as requests of
// one tenant each, in order.
func TestPassThroughTenantsAndOrder(t *testing.T) {
	recs, _, _ := passRecords(t, 6)
	recs[2].Tenant, recs[3].Tenant = "other", "other"
	var mu sync.Mutex
	var tenants []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tenants = append(tenants, r.Header.Get("X-Scope-OrgID"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	exp, err := New(Config{Endpoints: []string{srv.URL}, Protocol: "1.0", TenantHeader: "X-Scope-OrgID"})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tenants) != "[acme other acme]" {
		t.Fatalf("requests by tenant %v, want [acme other acme]", tenants)
	}
}

// A 2.0 record goes to a 2.0 endpoint as it came; an endpoint that answers
// 415 gets it converted to 1.0, with the same series. The same for a record
// that carries the receiver's series count (a scanned request, which the
// exporter does not snappy-decode for the 2.0 endpoint).
func TestPassThroughV2(t *testing.T) {
	for _, counted := range []int{0, 20} {
		t.Run(fmt.Sprintf("series=%d", counted), func(t *testing.T) { testPassThroughV2(t, counted) })
	}
}

func testPassThroughV2(t *testing.T, counted int) {
	var bodies [][]byte
	for k, name := range []string{"up", "down"} {
		st := writev2.NewSymbolTable()
		req := &writev2.Request{}
		for s := range 20 {
			v := k*100 + s
			refs := []uint32{st.Symbolize("__name__"), st.Symbolize(name), st.Symbolize("instance"), st.Symbolize(fmt.Sprint(v))}
			req.Timeseries = append(req.Timeseries, writev2.TimeSeries{LabelsRefs: refs,
				Samples:  []writev2.Sample{{Value: float64(v), Timestamp: 1_800_000_000_000}},
				Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize(name + " help."), UnitRef: st.Symbolize("")}})
		}
		req.Symbols = st.Symbols()
		body, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	v2, v1 := &captureServer{}, &captureServer{v1Only: true}
	s2, s1 := httptest.NewServer(v2), httptest.NewServer(v1)
	defer s2.Close()
	defer s1.Close()
	exp, err := New(Config{Endpoints: []string{s2.URL, s1.URL}, Protocol: "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	recs := []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: snappy.Encode(nil, bodies[0]), RemoteWrite: 2, Series: counted},
		{Kind: signal.KindMetrics, Tenant: "t", Body: snappy.Encode(nil, bodies[1]), RemoteWrite: 2, Series: counted}}
	if err := exp.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	wantReqs := 2
	if counted > 0 {
		// Small scanned records: one request, their symbol tables joined.
		wantReqs = 1
		if len(v2.bodies) != 1 {
			t.Fatalf("the 2.0 endpoint got %d requests, want the 2 records merged into 1", len(v2.bodies))
		}
		if got, want := decodedV2(t, v2.bodies[0]), decodedV2(t, bodies[0])+decodedV2(t, bodies[1]); got != want {
			t.Fatalf("the merged request decodes to\n%s\nwant the records'\n%s", got, want)
		}
	} else if len(v2.bodies) != 2 || !bytes.Equal(v2.bodies[0], bodies[0]) || !bytes.Equal(v2.bodies[1], bodies[1]) {
		t.Fatalf("the 2.0 endpoint got %d requests, not the records' bytes", len(v2.bodies))
	}
	if len(v1.bodies) != wantReqs || exp.Fallbacks() != 1 {
		t.Fatalf("the 1.0 endpoint got %d requests (fallbacks %d), want %d (1)", len(v1.bodies), exp.Fallbacks(), wantReqs)
	}
	n := 0
	for _, b := range v1.bodies {
		var got prompb.WriteRequest
		if err := got.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		for _, ts := range got.Timeseries {
			if len(ts.Labels) != 2 || ts.Labels[0].Name != "__name__" || ts.Labels[1].Name != "instance" ||
				len(ts.Samples) != 1 || ts.Samples[0].Value != mustAtof(t, ts.Labels[1].Value) {
				t.Fatalf("converted series %v", ts)
			}
			n++
		}
	}
	if n != 40 {
		t.Fatalf("%d series converted to 1.0, want 40", n)
	}
	if _, bad, sent := exp.Stats(); sent != 2*2*20 || bad != 0 {
		t.Fatalf("%d series counted as sent (%d bad bodies), want 80", sent, bad)
	}
}

// decodedV2 renders every point of a 2.0 request: name, help, labels,
// value, time.
func decodedV2(t *testing.T, body []byte) string {
	t.Helper()
	return renderV2(t, body, true)
}

// renderV2 is decodedV2, without the help unless help is set.
func renderV2(t *testing.T, body []byte, help bool) string {
	t.Helper()
	var m signal.Metrics
	if _, err := new(prw.Decoder).DecodeV2(&m, body); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for i := range m.Len() {
		d := m.Descs[m.Desc[i]]
		fmt.Fprintf(&sb, "%s {", m.String(d.Name))
		if help {
			fmt.Fprintf(&sb, "(%s) ", m.String(d.Description))
		}
		r := m.Attr[i]
		for a := r.Start; a < r.End; a++ {
			fmt.Fprintf(&sb, "%s=%q ", m.Keys.Name(m.Attrs.Key[a]), m.AttrString(int(a)))
		}
		fmt.Fprintf(&sb, "} %v @%d\n", m.Value(i), m.Time[i])
	}
	return sb.String()
}

func mustAtof(t *testing.T, s string) float64 {
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// Shard mode splits a 1.0 record by series without decoding: each series
// arrives, byte for byte, on exactly one endpoint, and on the same one as
// when the record went the convert path (as OTLP): a series never moves
// between endpoints with the path that carried it.
func TestPassThroughShard(t *testing.T) {
	recs, series, _ := passRecords(t, 3)
	var otlpRecs []exporter.Record
	var dec prw.Decoder
	for _, r := range recs {
		var m signal.Metrics
		raw, err := snappy.Decode(nil, r.Body)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dec.DecodeV1(&m, raw); err != nil {
			t.Fatal(err)
		}
		otlpRecs = append(otlpRecs, exporter.Record{Kind: signal.KindMetrics, Tenant: r.Tenant, Body: otlp.AppendMetricsProto(nil, &m)})
	}
	// One set of endpoints for both paths: the ring is keyed by their URLs.
	css, urls := captureServers(t, 3)
	where := func(recs []exporter.Record) (map[string]int, map[string][]byte) {
		for _, cs := range css {
			cs.bodies = nil
		}
		exp, err := New(Config{Endpoints: urls, Protocol: "1.0", Shard: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Send(waittest.Context(t), recs); err != nil {
			t.Fatal(err)
		}
		at := map[string]int{}
		bytesOf := map[string][]byte{}
		for k, cs := range css {
			for _, b := range cs.bodies {
				var wr prompb.WriteRequest
				if err := wr.Unmarshal(b); err != nil {
					t.Fatal(err)
				}
				for _, ts := range wr.Timeseries {
					lbls := append([]prompb.Label(nil), ts.Labels...)
					slices.SortFunc(lbls, cmpLabel)
					key := fmt.Sprint(lbls)
					if prev, ok := at[key]; ok && prev != k {
						t.Fatalf("series %s on endpoints %d and %d", key, prev, k)
					}
					at[key] = k
					bytesOf[key], _ = ts.Marshal()
				}
			}
		}
		return at, bytesOf
	}
	pass, passBytes := where(recs)
	conv, _ := where(otlpRecs)
	used := map[int]bool{}
	for _, s := range series {
		lbls := append([]prompb.Label(nil), s.Labels...)
		slices.SortFunc(lbls, cmpLabel)
		key := fmt.Sprint(lbls)
		k, ok := pass[key]
		if !ok {
			t.Fatalf("series %s did not arrive", key)
		}
		used[k] = true
		if want, _ := s.Marshal(); !bytes.Equal(passBytes[key], want) {
			t.Fatalf("series %s: bytes differ", key)
		}
		if ck, ok := conv[key]; len(s.Histograms) == 0 && (!ok || ck != k) {
			t.Fatalf("series %s: endpoint %d passed through, %d (found %t) converted", key, k, ck, ok)
		}
	}
	if len(used) != 3 {
		t.Fatalf("series on %d of 3 endpoints", len(used))
	}
}

// v2ReferenceExporter returns a 2.0 exporter into the reference 2.0
// handler (closed when the test ends), and what the handler stores.
func v2ReferenceExporter(t *testing.T) (*rawStore, *Exporter) {
	store := &rawStore{}
	srv := httptest.NewServer(remoteapi.NewWriteHandler(store, remoteapi.MessageTypes{remoteapi.WriteV2MessageType}))
	t.Cleanup(srv.Close)
	exp, err := New(Config{Endpoints: []string{srv.URL}, Protocol: "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	return store, exp
}

// rawStore keeps the bodies the reference handler hands it.
type rawStore struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (s *rawStore) Store(r *http.Request, mt remoteapi.WriteMessageType) (*remoteapi.WriteResponse, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var req writev2.Request
	resp := remoteapi.NewWriteResponse()
	if mt != remoteapi.WriteV2MessageType || req.Unmarshal(b) != nil {
		resp.SetStatusCode(400)
		return resp, fmt.Errorf("not a 2.0 request")
	}
	for _, ts := range req.Timeseries {
		resp.Add(remoteapi.WriteResponseStats{Samples: len(ts.Samples), Histograms: len(ts.Histograms), Exemplars: len(ts.Exemplars)})
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, b)
	s.mu.Unlock()
	return resp, nil
}

// Remote write 2.0 in -> 2.0 out through the reference handler of
// client_golang/exp/api/remote: a record passes through with its native
// histograms, exemplars, metadata and start timestamps, exactly as
// received.
func TestPassThroughV2ReferenceHandler(t *testing.T) {
	st := writev2.NewSymbolTable()
	h := &histogram.Histogram{Count: 12, ZeroCount: 2, ZeroThreshold: 0.001, Sum: 18.4, Schema: 1,
		PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}, {Offset: 1, Length: 2}}, PositiveBuckets: []int64{1, 1, -1, 0},
		NegativeSpans: []histogram.Span{{Offset: 0, Length: 2}, {Offset: 1, Length: 2}}, NegativeBuckets: []int64{1, 1, -1, 0}}
	req := &writev2.Request{Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("rpc_seconds"), st.Symbolize("job"), st.Symbolize("api")},
			Histograms: []writev2.Histogram{writev2.FromIntHistogram(1_700_000_000_000, 1_800_000_000_000, h)},
			Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_HISTOGRAM, HelpRef: st.Symbolize("RPC latency."), UnitRef: st.Symbolize("seconds")}},
		{LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("requests_total"), st.Symbolize("job"), st.Symbolize("api")},
			Samples:   []writev2.Sample{{Value: 7, Timestamp: 1_800_000_000_000, StartTimestamp: 1_700_000_000_000}, {Value: math.Float64frombits(value.StaleNaN), Timestamp: 1_800_000_015_000}},
			Exemplars: []writev2.Exemplar{{LabelsRefs: []uint32{st.Symbolize("trace_id"), st.Symbolize("abc")}, Value: 1, Timestamp: 1_800_000_000_000}},
			Metadata:  writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: st.Symbolize("Requests."), UnitRef: st.Symbolize("")}},
	}}
	req.Symbols = st.Symbols()
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	store, exp := v2ReferenceExporter(t)
	if err := exp.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: snappy.Encode(nil, body), RemoteWrite: 2}}); err != nil {
		t.Fatal(err)
	}
	if len(store.bodies) != 1 || !bytes.Equal(store.bodies[0], body) {
		t.Fatalf("the reference handler got %d requests, not the record's bytes", len(store.bodies))
	}
	var got writev2.Request
	if err := got.Unmarshal(store.bodies[0]); err != nil {
		t.Fatal(err)
	}
	if len(got.Timeseries[0].Histograms) != 1 || got.Timeseries[0].Metadata.Type != writev2.Metadata_METRIC_TYPE_HISTOGRAM ||
		len(got.Timeseries[1].Exemplars) != 1 || got.Timeseries[1].Samples[0].StartTimestamp != 1_700_000_000_000 {
		t.Fatalf("histogram, metadata, exemplar or start timestamp lost: %v", got.Timeseries)
	}
	if _, _, sent := exp.Stats(); sent != 2 {
		t.Errorf("sent series %d, want 2", sent)
	}
}

// Large 1.0 records are joined with the records around them (their snappy
// blocks concatenated) up to maxRawBytes; a record of maxRawBytes or more
// goes alone with the bytes the client sent (no compression of the
// exporter's own); queue order is kept.
func TestPassThroughLargeRecordAsReceived(t *testing.T) {
	small, _, _ := passRecords(t, 3)
	mk := func(name string, n int) []byte {
		req := &prompb.WriteRequest{}
		for s := range n {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: name}, {Name: "id", Value: fmt.Sprint(s)}, {Name: "pad", Value: "some-label-value-of-a-realistic-length"}},
				Samples: []prompb.Sample{{Value: float64(s), Timestamp: 1_800_000_000_000}}})
		}
		raw, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	medium, big := mk("medium", 2000), mk("big", 15000)
	if len(medium) < minAloneBytes || len(medium) > maxRawBytes/2 {
		t.Fatalf("the medium record is %d bytes: not a 1,000-series-and-up request", len(medium))
	}
	if len(big) < maxRawBytes {
		t.Fatalf("the big record is %d bytes: not big", len(big))
	}
	// Series 0: the exporter counts the series itself; a scanned record
	// carries the receiver's count, which the exporter then takes as it is
	// (it does not decode the body: a count one short shows in the stats).
	for _, counted := range []bool{false, true} {
		t.Run(fmt.Sprintf("counted=%v", counted), func(t *testing.T) {
			largeRecordAsReceived(t, small, snappy.Encode(nil, medium), snappy.Encode(nil, big), counted)
		})
	}
}

func largeRecordAsReceived(t *testing.T, small []exporter.Record, medium, big []byte, counted bool) {
	small = slices.Clone(small)
	mediumSeries, bigSeries := 0, 0
	if counted {
		for k := range small {
			small[k].Series = 29 // the small ones merged, not decoded either
		}
		mediumSeries, bigSeries = 1999, 14999
	}
	recs := []exporter.Record{small[0], {Kind: signal.KindMetrics, Tenant: "acme", Body: medium, RemoteWrite: 1, Series: mediumSeries}, small[1],
		{Kind: signal.KindMetrics, Tenant: "acme", Body: big, RemoteWrite: 1, Series: bigSeries}, small[2]}
	cs := &captureServer{}
	srv := httptest.NewServer(cs)
	defer srv.Close()
	exp, err := New(Config{Endpoints: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	if len(cs.bodies) != 3 {
		t.Fatalf("%d requests, want 3 (small, medium and small joined; big alone; small)", len(cs.bodies))
	}
	if !bytes.Equal(cs.wire[1], big) {
		t.Fatal("the big record was not sent with the bytes it was received with")
	}
	for i, want := range [][]string{{"small", "medium", "small"}, {"big"}, {"small"}} {
		var wr prompb.WriteRequest
		if err := wr.Unmarshal(cs.bodies[i]); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		// The records in queue order: runs of series of one record kind.
		var runs []string
		for _, ts := range wr.Timeseries {
			kind := "small"
			for _, l := range ts.Labels {
				if l.Name == "__name__" && !strings.HasPrefix(l.Value, "m_") {
					kind = l.Value
				}
			}
			if len(runs) == 0 || runs[len(runs)-1] != kind {
				runs = append(runs, kind)
			}
		}
		if fmt.Sprint(runs) != fmt.Sprint(want) {
			t.Fatalf("request %d: records %v, want %v", i, runs, want)
		}
		if n := []int{30 + 2000 + 30, 15000, 30}[i]; len(wr.Timeseries) != n {
			t.Fatalf("request %d: %d series, want %d", i, len(wr.Timeseries), n)
		}
	}
	want := uint64(30 + 2000 + 30 + 15000 + 30)
	if counted {
		want = uint64(3*29 + 1999 + 14999)
	}
	if _, _, sent := exp.Stats(); sent != want {
		t.Errorf("sent series %d, want %d", sent, want)
	}
}

// Merged 2.0 records whose references grow past one varint byte when
// shifted decode as the records do; a counted record that is not the
// scanned shape (an exemplar) is not merged into the records before it
// (its references would need exemplars rewritten), but may start the next
// request, whose first record keeps its references.
func TestPassThroughV2MergeShifts(t *testing.T) {
	mk := func(k int, exemplar bool) []byte {
		st := writev2.NewSymbolTable()
		req := &writev2.Request{}
		for s := range 150 {
			refs := []uint32{st.Symbolize("__name__"), st.Symbolize(fmt.Sprintf("m%d_%d", k, s%3)), st.Symbolize("instance"), st.Symbolize(fmt.Sprint(k*1000 + s))}
			ts := writev2.TimeSeries{LabelsRefs: refs, Samples: []writev2.Sample{{Value: float64(k*1000 + s), Timestamp: 1_800_000_000_000, StartTimestamp: 1_799_000_000_000}},
				Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: st.Symbolize(fmt.Sprintf("help %d", s%3)), UnitRef: st.Symbolize("seconds")}}
			if exemplar && s == 0 {
				ts.Exemplars = []writev2.Exemplar{{LabelsRefs: []uint32{st.Symbolize("trace_id"), st.Symbolize("abc")}, Value: 1, Timestamp: 1_800_000_000_000}}
			}
			req.Timeseries = append(req.Timeseries, ts)
		}
		req.Symbols = st.Symbols()
		b, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bodies := [][]byte{mk(0, false), mk(1, false), mk(2, true), mk(3, false), mk(4, false)}
	var recs []exporter.Record
	for _, b := range bodies {
		recs = append(recs, exporter.Record{Kind: signal.KindMetrics, Tenant: "t", Body: snappy.Encode(nil, b), RemoteWrite: 2, Series: 150})
	}
	cs := &captureServer{}
	srv := httptest.NewServer(cs)
	defer srv.Close()
	exp, err := New(Config{Endpoints: []string{srv.URL}, Protocol: "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	if len(cs.bodies) != 2 {
		t.Fatalf("%d requests, want 2: records 0-1 merged, then 2-4", len(cs.bodies))
	}
	want := []string{decodedV2(t, bodies[0]) + decodedV2(t, bodies[1]), decodedV2(t, bodies[2]) + decodedV2(t, bodies[3]) + decodedV2(t, bodies[4])}
	for i, b := range cs.bodies {
		if got := decodedV2(t, b); got != want[i] {
			t.Fatalf("request %d decodes differently from its records", i)
		}
	}
	if !bytes.HasPrefix(cs.bodies[1][bytes.IndexByte(cs.bodies[1], 5<<3|2):], bodies[2][bytes.IndexByte(bodies[2], 5<<3|2):]) {
		t.Fatal("the first record of a request did not keep its series bytes")
	}
}

// send_metadata: false holds for remote-write records too: a 1.0 record
// that may carry metadata (not counted by the receiver's scan) and a 2.0
// record with metadata on every series arrive with their samples and
// without metadata; a counted 1.0 record (samples only) still passes
// through as its bytes.
func TestPassThroughNoMetadata(t *testing.T) {
	recs, series, _ := passRecords(t, 3)
	plain := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "plain"}},
		Samples: []prompb.Sample{{Value: 7, Timestamp: 1_800_000_000_000}}}}}
	pb, err := plain.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	recs = append(recs, exporter.Record{Kind: signal.KindMetrics, Tenant: "acme", Body: snappy.Encode(nil, pb), RemoteWrite: 1, Series: 1})
	cs := &captureServer{}
	srv := httptest.NewServer(cs)
	defer srv.Close()
	exp, err := New(Config{Endpoints: []string{srv.URL}, Protocol: "1.0", NoMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	samples, floats := 0, 0
	for _, s := range series {
		floats += len(s.Samples)
	}
	sawPlain := false
	for _, b := range cs.bodies {
		var got prompb.WriteRequest
		if err := got.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if len(got.Metadata) != 0 {
			t.Fatalf("send_metadata false, 1.0: %d metadata entries arrived: %v", len(got.Metadata), got.Metadata)
		}
		for _, ts := range got.Timeseries {
			samples += len(ts.Samples)
		}
		sawPlain = sawPlain || bytes.Contains(b, pb[2:])
	}
	if samples != floats+1 {
		t.Fatalf("1.0: %d float samples arrived, want %d", samples, floats+1)
	}
	if !sawPlain {
		t.Fatal("the counted plain record did not arrive as its bytes")
	}

	st := writev2.NewSymbolTable()
	req := &writev2.Request{}
	for s := range 5 {
		req.Timeseries = append(req.Timeseries, writev2.TimeSeries{
			LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("g"), st.Symbolize("i"), st.Symbolize(fmt.Sprint(s))},
			Samples:    []writev2.Sample{{Value: float64(s), Timestamp: 1_800_000_000_000}},
			Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize("g help."), UnitRef: st.Symbolize("bytes")}})
	}
	req.Symbols = st.Symbols()
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	cs2 := &captureServer{}
	srv2 := httptest.NewServer(cs2)
	defer srv2.Close()
	exp2, err := New(Config{Endpoints: []string{srv2.URL}, Protocol: "2.0", NoMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, counted := range []int{0, 5} {
		if err := exp2.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: snappy.Encode(nil, body), RemoteWrite: 2, Series: counted}}); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for _, b := range cs2.bodies {
		var r writev2.Request
		if err := r.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		for _, ts := range r.Timeseries {
			if ts.Metadata.Type != writev2.Metadata_METRIC_TYPE_UNSPECIFIED || ts.Metadata.HelpRef != 0 || ts.Metadata.UnitRef != 0 {
				t.Fatalf("send_metadata false, 2.0: series arrived with metadata %+v", ts.Metadata)
			}
			got += len(ts.Samples)
		}
	}
	if got != 10 {
		t.Fatalf("2.0: %d samples arrived, want 10", got)
	}
}
