package otlpreceiver

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// discardWriter is a ResponseWriter that reuses its header map, so that the
// benchmark measures the handler, not httptest.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }

// SetReadDeadline is what ResponseController finds on a real connection;
// without it the receiver's body-rate deadlines would take the error path.
func (w *discardWriter) SetReadDeadline(time.Time) error { return nil }

func (w *discardWriter) reset() {
	clear(w.h)
	w.status = 0
}

// reusableRequest rewinds one request's body for every iteration.
type reusableRequest struct {
	req  *http.Request
	body *bytes.Reader
	raw  []byte
}

func newReusableRequest(path, contentType string, body []byte) *reusableRequest {
	rr := &reusableRequest{raw: body, body: bytes.NewReader(body)}
	rr.req = &http.Request{
		Method:        http.MethodPost,
		URL:           &url.URL{Path: path},
		Header:        http.Header{"Content-Type": {contentType}},
		Body:          io.NopCloser(rr.body),
		ContentLength: int64(len(body)),
		RemoteAddr:    "127.0.0.1:1",
	}
	return rr
}

func (rr *reusableRequest) rewind() { rr.body.Reset(rr.raw) }

func BenchmarkHTTPExportLogs(b *testing.B) {
	p := samplePayloads(b, 1000)[0]
	r, err := New(Config{HTTPAddr: "127.0.0.1:0"}, nopConsumer{}, prometheus.NewRegistry(), quietLogger())
	if err != nil {
		b.Fatal(err)
	}
	rr := newReusableRequest("/v1/logs", "application/x-protobuf", p.proto)
	w := &discardWriter{h: http.Header{}}
	b.SetBytes(int64(len(p.proto)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rr.rewind()
		w.reset()
		r.ServeHTTP(w, rr.req)
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(b.N*p.records)/b.Elapsed().Seconds(), "records/s")
}

// TestHTTPExportAllocs keeps the protobuf path from growing per-request
// allocations unnoticed.
func TestHTTPExportAllocs(t *testing.T) {
	p := samplePayloads(t, 1000)[0]
	r, err := New(Config{HTTPAddr: "127.0.0.1:0"}, nopConsumer{}, prometheus.NewRegistry(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	rr := newReusableRequest("/v1/logs", "application/x-protobuf", p.proto)
	w := &discardWriter{h: http.Header{}}
	allocs := testing.AllocsPerRun(200, func() {
		rr.rewind()
		w.reset()
		r.ServeHTTP(w, rr.req)
	})
	if w.status != http.StatusOK {
		t.Fatalf("status %d", w.status)
	}
	t.Logf("allocs per request: %v", allocs)
	if allocs > 2 {
		t.Fatalf("%v allocations per request, want at most 2", allocs)
	}
}
