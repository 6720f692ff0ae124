package prwreceiver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/signal"
)

// recorder is a Consumer that decodes what it is given, as the pipeline's
// consumer does, and can be told to refuse.
type recorder struct {
	mu      sync.Mutex
	tenants []string
	points  int
	names   map[string]bool
	encs    []int    // req.RemoteWrite of each request
	labels  []string // every point's attributes, key=value in the batch's order
	err     error
	scan    bool // TakesScanned
	scanned int  // requests handed over without a batch
}

func (r *recorder) TakesScanned() bool { return r.scan }

func (r *recorder) Consume(_ context.Context, req *otlpreceiver.Request) (otlpreceiver.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return otlpreceiver.Result{}, r.err
	}
	var m signal.Metrics
	var err error
	switch req.RemoteWrite {
	case 0: // a partial write: its good series as OTLP
		err = otlp.DecodeMetrics(&m, req.Body)
	case 1, 2: // as received: snappy
		var raw []byte
		if raw, err = prw.Unsnappy(nil, req.Body); err != nil {
			break
		}
		if req.RemoteWrite == 1 {
			_, err = new(prw.Decoder).DecodeV1(&m, raw)
		} else {
			_, err = new(prw.Decoder).DecodeV2(&m, raw)
		}
	}
	if err != nil {
		return otlpreceiver.Result{}, err
	}
	switch {
	case req.Scanned != nil:
		if req.Metrics != nil || req.RemoteWrite != 1 && req.RemoteWrite != 2 || !r.scan {
			panic("a scanned request with a batch, not remote write, or to a consumer that did not take it")
		}
		// 2.0: Attrs bounds the metadata's attributes from above.
		if m.Len() != req.Scanned.Points || req.Scanned.Series.Len() != m.Len() ||
			req.Scanned.Attrs != m.Attrs.Len() && (req.RemoteWrite == 1 || req.Scanned.Attrs < m.Attrs.Len()) {
			panic("the body and the scan differ")
		}
		for i := range m.Len() {
			if req.Scanned.Series.ID[i] != labelsKey(&m, i) {
				panic("the scan's label-set keys differ from the batch's labels'")
			}
		}
		r.scanned++
	case m.Len() != req.Metrics.Len():
		panic("the body and the decoded batch differ")
	}
	if req.Kind != signal.KindMetrics || req.Transport != Transport {
		panic("wrong kind or transport")
	}
	r.tenants = append(r.tenants, req.Tenant)
	r.encs = append(r.encs, int(req.RemoteWrite))
	for i := range m.Len() {
		var kv []string
		for a := m.Attr[i].Start; a < m.Attr[i].End; a++ {
			kv = append(kv, m.Keys.Name(m.Attrs.Key[a])+"="+m.AttrString(int(a)))
		}
		r.labels = append(r.labels, strings.Join(kv, ","))
	}
	r.points += m.Len()
	if r.names == nil {
		r.names = map[string]bool{}
	}
	for _, d := range m.Descs {
		r.names[m.String(d.Name)] = true
	}
	return otlpreceiver.Result{}, nil
}

func newServer(t *testing.T, rec *recorder) *httptest.Server {
	h, err := New(Config{MaxRequestBytes: 1 << 20}, rec)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t := r.Header.Get("X-Tenant"); t != "" {
			r = r.WithContext(authn.WithTenant(r.Context(), t))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, ct, enc string, body []byte, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+Path, bytes.NewReader(body))
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if enc != "" {
		req.Header.Set("Content-Encoding", enc)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func v1Body(series ...prompb.TimeSeries) []byte {
	b, _ := (&prompb.WriteRequest{Timeseries: series}).Marshal()
	return snappy.Encode(nil, b)
}

func good(name string) prompb.TimeSeries {
	return prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}, {Name: "job", Value: "j"}},
		Samples: []prompb.Sample{{Value: 1, Timestamp: 1000}, {Value: 2, Timestamp: 2000}}}
}

const ctV1 = "application/x-protobuf"
const ctV2 = "application/x-protobuf;proto=io.prometheus.write.v2.Request"

// TestVersion: the Content-Type Prometheus's senders write and the other
// spellings of the same media type answer the same version.
func TestVersion(t *testing.T) {
	for ct, want := range map[string]string{
		"": "1.0", ctV1: "1.0", ctV1 + ";proto=prometheus.WriteRequest": "1.0", "application/x-protobuf; proto=prometheus.WriteRequest": "1.0",
		contentTypeV2: "2.0", "application/x-protobuf; proto=io.prometheus.write.v2.Request": "2.0",
		"APPLICATION/X-PROTOBUF;proto=io.prometheus.write.v2.Request": "2.0",
		"application/x-protobuf;proto=foo":                            "", "application/json": "", "application/x-protobuf;proto": "",
	} {
		if got := version(ct); got != want {
			t.Errorf("version(%q) = %q, want %q", ct, got, want)
		}
	}
}

func TestNegotiationAndHeaders(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, rec)
	st := writev2.NewSymbolTable()
	r2 := &writev2.Request{Timeseries: []writev2.TimeSeries{{
		LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize("up"), st.Symbolize("job"), st.Symbolize("x")},
		Samples:    []writev2.Sample{{Value: 1, Timestamp: 5}},
		Exemplars:  []writev2.Exemplar{{LabelsRefs: []uint32{st.Symbolize("trace_id"), st.Symbolize("t")}, Value: 1, Timestamp: 5}},
	}}}
	r2.Symbols = st.Symbols()
	b2, _ := r2.Marshal()
	v2 := snappy.Encode(nil, b2)

	cases := []struct {
		name, ct, enc string
		body          []byte
		code          int
		v2Headers     bool
	}{
		{"1.0", ctV1, "snappy", v1Body(good("a")), 204, false},
		{"1.0 explicit proto", ctV1 + ";proto=prometheus.WriteRequest", "snappy", v1Body(good("b")), 204, false},
		{"1.0 without headers", "", "", v1Body(good("c")), 204, false},
		{"2.0", ctV2, "snappy", v2, 204, true},
		{"2.0 spelled otherwise", "Application/X-Protobuf; proto=\"io.prometheus.write.v2.Request\"", "snappy", v2, 204, true},
		{"gzip", ctV1, "gzip", v1Body(good("d")), 415, false},
		{"json", "application/json", "snappy", v1Body(good("e")), 415, false},
		{"unknown proto", ctV1 + ";proto=foo.Bar", "snappy", v1Body(good("f")), 415, false},
		{"not snappy", ctV1, "snappy", []byte("\xff\xff\xff\xff\xff\xff"), 400, false},
		{"2.0 body as 1.0 garbage", ctV2, "snappy", snappy.Encode(nil, []byte{0x2a, 0x05}), 400, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := post(t, srv.URL, c.ct, c.enc, c.body)
			msg, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.code {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, msg, c.code)
			}
			has := resp.Header.Get(HeaderSamples) != ""
			if c.code == 204 && has != c.v2Headers {
				t.Fatalf("written headers present = %v, want %v", has, c.v2Headers)
			}
			if c.code == 204 && c.v2Headers {
				if resp.Header.Get(HeaderSamples) != "1" || resp.Header.Get(HeaderHistograms) != "0" || resp.Header.Get(HeaderExemplars) != "1" {
					t.Fatalf("headers %v", resp.Header)
				}
			}
		})
	}
	if rec.points != 2+2+2+1+1 {
		t.Fatalf("consumer got %d points", rec.points)
	}
}

func TestPartialWriteKeepsGoodSeriesAndAnswers400(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, rec)
	bad := prompb.TimeSeries{Labels: []prompb.Label{{Name: "job", Value: "x"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1}}}
	resp := post(t, srv.URL, ctV1, "snappy", v1Body(good("kept"), bad), "X-Tenant", "team-a")
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(msg), "no __name__ label") || !strings.Contains(string(msg), "1 invalid series") {
		t.Fatalf("status %d: %s", resp.StatusCode, msg)
	}
	if rec.points != 2 || !rec.names["kept"] || rec.tenants[0] != "team-a" {
		t.Fatalf("consumer got %d points %v tenants %v", rec.points, rec.names, rec.tenants)
	}
}

// A request whose series are sorted is handed over as received (the relay
// forwards its bytes); one with labels out of order is handed over as
// OTLP of the sorted batch, so that what is queued, stored and forwarded
// has its labels sorted.
func TestUnsortedLabelsAreSortedBeforeQueueing(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, rec)
	sorted := good("in_order")
	unsorted := prompb.TimeSeries{Labels: []prompb.Label{{Name: "zone", Value: "z"}, {Name: "__name__", Value: "out_of_order"}, {Name: "app", Value: "a"}},
		Samples: []prompb.Sample{{Value: 1, Timestamp: 1000}}}
	for _, body := range [][]byte{v1Body(sorted), v1Body(sorted, unsorted)} {
		if resp := post(t, srv.URL, ctV1, "snappy", body); resp.StatusCode != 204 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if len(rec.encs) != 2 || rec.encs[0] != 1 || rec.encs[1] != 0 {
		t.Fatalf("encodings handed over %v, want [1 0] (as received, then OTLP)", rec.encs)
	}
	if last := rec.labels[len(rec.labels)-1]; last != "app=a,zone=z" {
		t.Fatalf("unsorted series stored with attributes %q, want them sorted", last)
	}
}

func TestBackpressureAndFailures(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
		ra   string
	}{
		// 503, not 429: Prometheus drops a batch answered 429 unless
		// retry_on_http_429 is set (off by default), and retries 5xx
		// after Retry-After (storage/remote/client.go, Client.Store).
		{otlpreceiver.Backpressure(3*time.Second, nil), 503, "3"},
		{otlpreceiver.ErrInvalid, 400, ""},
		{io.ErrUnexpectedEOF, 503, "1"},
	} {
		rec := &recorder{err: c.err}
		srv := newServer(t, rec)
		resp := post(t, srv.URL, ctV1, "snappy", v1Body(good("x")))
		if resp.StatusCode != c.code || resp.Header.Get("Retry-After") != c.ra {
			t.Fatalf("%v: status %d Retry-After %q, want %d %q", c.err, resp.StatusCode, resp.Header.Get("Retry-After"), c.code, c.ra)
		}
	}
}

func TestTooLarge(t *testing.T) {
	rec := &recorder{}
	h, _ := New(Config{MaxRequestBytes: 100}, rec)
	srv := httptest.NewServer(h)
	defer srv.Close()
	var ts []prompb.TimeSeries
	for range 50 {
		ts = append(ts, good("a_rather_long_metric_name"))
	}
	resp := post(t, srv.URL, ctV1, "snappy", v1Body(ts...))
	if resp.StatusCode != 413 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// TestScanAnswersAsTheDecoder: with a consumer that takes scanned
// requests, a plain 1.0 request goes without its batch, and every request
// (plain, partial, unsorted, histograms, 2.0, malformed) is answered
// exactly as without the scan (status, body, headers) and hands over the
// same points and labels.
func TestScanAnswersAsTheDecoder(t *testing.T) {
	hist := prompb.FromIntHistogram(1000, &histogram.Histogram{Count: 1, ZeroCount: 1, Sum: 1, ZeroThreshold: 0.001})
	unsorted := prompb.TimeSeries{Labels: []prompb.Label{{Name: "job", Value: "j"}, {Name: "__name__", Value: "u"}}, Samples: good("u").Samples}
	noName := prompb.TimeSeries{Labels: []prompb.Label{{Name: "job", Value: "j"}}, Samples: good("x").Samples}
	v2, _ := (&writev2.Request{Symbols: []string{"", "__name__", "v2"}, Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{1, 2}, Samples: []writev2.Sample{{Value: 1, Timestamp: 1}}}}}).Marshal()
	syms := []string{"", "__name__", "a", "job", "j", "b", "help", "s"}
	good2 := writev2.TimeSeries{LabelsRefs: []uint32{1, 2, 3, 4}, Samples: []writev2.Sample{{Value: 1, Timestamp: 1000}, {Value: 2, Timestamp: 2000, StartTimestamp: 500}},
		Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: 6, UnitRef: 7}}
	v2Body := func(series ...writev2.TimeSeries) []byte {
		b, _ := (&writev2.Request{Symbols: syms, Timeseries: series}).Marshal()
		return snappy.Encode(nil, b)
	}
	with2 := func(f func(*writev2.TimeSeries)) writev2.TimeSeries {
		ts := good2
		ts.LabelsRefs = append([]uint32(nil), good2.LabelsRefs...)
		f(&ts)
		return ts
	}
	hist2 := writev2.FromIntHistogram(0, 1000, &histogram.Histogram{Count: 1, ZeroCount: 1, Sum: 1, ZeroThreshold: 0.001})
	cases := []struct {
		name, ct string
		body     []byte
		scanned  int
	}{
		{"plain", ctV1, v1Body(good("a"), good("b"), good("a")), 1},
		{"partial", ctV1, v1Body(good("a"), noName), 0},
		{"unsorted", ctV1, v1Body(good("a"), unsorted), 0},
		{"histogram", ctV1, v1Body(good("a"), prompb.TimeSeries{Labels: good("h").Labels, Histograms: []prompb.Histogram{hist}}), 0},
		{"only invalid", ctV1, v1Body(noName), 0},
		{"empty", ctV1, v1Body(), 1},
		{"2.0", ctV2, snappy.Encode(nil, v2), 1},
		{"2.0 plain", ctV2, v2Body(good2, with2(func(s *writev2.TimeSeries) { s.LabelsRefs[1] = 5 }), good2), 1},
		{"2.0 partial", ctV2, v2Body(good2, with2(func(s *writev2.TimeSeries) { s.LabelsRefs = []uint32{3, 4} })), 0},
		{"2.0 unsorted", ctV2, v2Body(good2, with2(func(s *writev2.TimeSeries) { s.LabelsRefs = []uint32{3, 4, 1, 2} })), 0},
		{"2.0 histogram", ctV2, v2Body(good2, with2(func(s *writev2.TimeSeries) { s.Samples, s.Histograms = nil, []writev2.Histogram{hist2} })), 0},
		{"2.0 exemplar", ctV2, v2Body(with2(func(s *writev2.TimeSeries) {
			s.Exemplars = []writev2.Exemplar{{LabelsRefs: []uint32{3, 4}, Timestamp: 1000}}
		})), 0},
		{"2.0 only invalid", ctV2, v2Body(with2(func(s *writev2.TimeSeries) { s.LabelsRefs = []uint32{1, 99} })), 0},
		{"2.0 empty", ctV2, v2Body(), 1},
		{"2.0 malformed", ctV2, snappy.Encode(nil, []byte{0x22, 0x00, 0x2a, 0x05, 0x0a}), 0},
		{"malformed", ctV1, snappy.Encode(nil, []byte{0x0a, 0x05, 0x0a}), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var answers [2]string
			var recs [2]*recorder
			for k, scan := range []bool{false, true} {
				rec := &recorder{scan: scan}
				srv := newServer(t, rec)
				resp := post(t, srv.URL, c.ct, "snappy", c.body)
				body, _ := io.ReadAll(resp.Body)
				answers[k] = fmt.Sprintf("%d %q samples=%q histograms=%q exemplars=%q", resp.StatusCode, body,
					resp.Header.Get(HeaderSamples), resp.Header.Get(HeaderHistograms), resp.Header.Get(HeaderExemplars))
				recs[k] = rec
			}
			if answers[0] != answers[1] {
				t.Fatalf("answers differ:\ndecoder %s\nscan    %s", answers[0], answers[1])
			}
			a, b := recs[0], recs[1]
			if a.points != b.points || fmt.Sprint(a.labels) != fmt.Sprint(b.labels) || fmt.Sprint(a.names) != fmt.Sprint(b.names) || fmt.Sprint(a.encs) != fmt.Sprint(b.encs) {
				t.Fatalf("handed over differently:\ndecoder %d %v %v %v\nscan    %d %v %v %v", a.points, a.labels, a.names, a.encs, b.points, b.labels, b.names, b.encs)
			}
			if want := min(c.scanned, len(b.encs)); b.scanned != want || a.scanned != 0 {
				t.Fatalf("%d requests went scanned, want %d", b.scanned, want)
			}
		})
	}
}

// TestNotRefused: the written counts after the rules refused points take
// the refused from the samples first, and never go below zero.
func TestNotRefused(t *testing.T) {
	for _, c := range []struct {
		s, h    int
		refused int64
		ws, wh  int
	}{
		{5, 2, 0, 5, 2}, {5, 2, 3, 2, 2}, {5, 2, 6, 0, 1}, {5, 2, 9, 0, 0}, {0, 3, 1, 0, 2},
	} {
		if ws, wh := notRefused(c.s, c.h, c.refused); ws != c.ws || wh != c.wh {
			t.Errorf("notRefused(%d, %d, %d) = %d, %d; want %d, %d", c.s, c.h, c.refused, ws, wh, c.ws, c.wh)
		}
	}
}

// labelsKey is the prw.LabelsKey of point i of a decoded remote-write
// batch: its labels (attributes, sorted by name, and its name as
// __name__) in canonical encoding.
func labelsKey(m *signal.Metrics, i int) uint64 {
	name := m.String(m.Descs[m.Desc[i]].Name)
	var f []byte
	named := false
	for a := m.Attr[i].Start; a < m.Attr[i].End; a++ {
		k := m.Keys.Name(m.Attrs.Key[a])
		if !named && k > "__name__" {
			f, named = prw.AppendLabelField(f, "__name__", name), true
		}
		f = prw.AppendLabelField(f, k, m.AttrString(int(a)))
	}
	if !named {
		f = prw.AppendLabelField(f, "__name__", name)
	}
	return prw.LabelsKey(f)
}
