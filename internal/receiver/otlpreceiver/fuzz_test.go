package otlpreceiver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// fuzzConsumer answers by the body's length so that every error path is
// reached, and checks that it never gets a body it should not.
type fuzzConsumer struct{ t *testing.T }

func (c fuzzConsumer) Consume(_ context.Context, req *Request) (Result, error) {
	if req.Tenant == "" || req.Kind.String() == "unknown" {
		c.t.Fatalf("consumer got tenant %q kind %v", req.Tenant, req.Kind)
	}
	switch len(req.Body) % 5 {
	case 1:
		return Result{RejectedRecords: 1, Message: "one bad"}, nil
	case 2:
		return Result{}, Backpressure(3*time.Second, nil)
	case 3:
		return Result{}, fmt.Errorf("x: %w", ErrInvalid)
	case 4:
		return Result{}, fmt.Errorf("disk full")
	}
	return Result{}, nil
}

func FuzzHTTPHandler(f *testing.F) {
	p := samplePayloads(f, 3)
	for i, pl := range p {
		f.Add(uint8(i), "application/x-protobuf", "", pl.proto)
		f.Add(uint8(i), "application/json", "", pl.json)
		f.Add(uint8(i), "application/x-protobuf", "gzip", gzipBytes(pl.proto))
		f.Add(uint8(i), "application/json; charset=utf-8", "zstd", zstdBytes(pl.json))
	}
	f.Add(uint8(0), "application/json", "", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"}}]}]}]}`))
	f.Add(uint8(1), "application/json", "", []byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"asDouble":"NaN"}]}}]}]}]}`))
	f.Add(uint8(2), "application/x-protobuf", "zstd", []byte{0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff})
	f.Add(uint8(3), "text/plain", "br", []byte("hello"))
	f.Add(uint8(4), "", "", []byte{})
	f.Add(uint8(0), "application/x-protobuf", "gzip", []byte{0x1f, 0x8b, 0x08})

	r, err := New(Config{HTTPAddr: "127.0.0.1:0", MaxRequestBytes: 1 << 20, BearerToken: "", TenantHeader: "X-Tenant"},
		nopConsumer{}, nil, quietLogger())
	if err != nil {
		f.Fatal(err)
	}
	paths := []string{"/v1/logs", "/v1/metrics", "/v1/traces", "/v1/other", "/"}
	f.Fuzz(func(t *testing.T, path uint8, contentType, encoding string, body []byte) {
		r.consumer = fuzzConsumer{t}
		req := httptest.NewRequest(http.MethodPost, paths[int(path)%len(paths)], bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Content-Encoding", encoding)
		if path&0x80 != 0 {
			req.Header.Set("X-Tenant", contentType)
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		code := w.Result().StatusCode
		if code < 200 || code >= 600 || (code >= 300 && code < 400) {
			t.Fatalf("status %d", code)
		}
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			if w.Header().Get("Retry-After") == "" {
				t.Fatalf("status %d without Retry-After", code)
			}
		}
	})
}
