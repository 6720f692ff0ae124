package otlpreceiver

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/internal/waittest"
)

// TestMaxRecordsPerRequest: a request with more records than the limit is
// refused before the consumer sees it, over both transports and in both
// encodings, naming the limit and counted; one at the limit passes. The
// default bounds the decode: 16 MiB of empty records would decode into
// gigabytes of columns (measured: 8M empty spans, +2.4 GB RSS).
func TestMaxRecordsPerRequest(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRecordsPerRequest = 10
	rec := &recorder{}
	r, reg := startReceiver(t, cfg, rec)
	cc := grpcConn(t, r)
	names := map[string]string{"/v1/logs": "log records", "/v1/metrics": "data points", "/v1/traces": "spans"}
	for _, n := range []int{10, 11} {
		for _, p := range samplePayloads(t, n) {
			want := ""
			if n > 10 {
				want = fmt.Sprintf("request has 11 %s, past the limit max_records_per_request of 10 (receivers.otlp.max_records_per_request)", names[p.path])
			}
			for _, ct := range []string{"application/x-protobuf", "application/json"} {
				body := p.proto
				if ct == "application/json" {
					body = p.json
				}
				resp, got := post(t, nil, httpURL(r, p.path), ct, "", body, nil)
				if want == "" {
					if resp.StatusCode != 200 {
						t.Errorf("%s %s %d records: status %d: %q", p.path, ct, n, resp.StatusCode, got)
					}
					continue
				}
				code, msg := rpcStatus(t, ct, got)
				if resp.StatusCode != 400 || code != codes.InvalidArgument || !strings.Contains(msg, want) {
					t.Errorf("%s %s: %d %v %q, want 400 with %q", p.path, ct, resp.StatusCode, code, msg, want)
				}
			}
			_, _, err := p.export(waittest.Context(t), cc)
			if want == "" && err != nil {
				t.Errorf("grpc %s %d records: %v", p.path, n, err)
			}
			if st := status.Convert(err); want != "" && (st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), want)) {
				t.Errorf("grpc %s: %v, want InvalidArgument with %q", p.path, err, want)
			}
		}
	}
	if got := len(rec.requests()); got != 9 {
		t.Errorf("consumer saw %d requests, want the 9 at the limit", got)
	}
	for _, tr := range []string{"http", "grpc"} {
		for _, sig := range []string{"logs", "metrics", "traces"} {
			want := 2.0
			if tr == "grpc" {
				want = 1
			}
			if got := counterValue(t, reg, "sluice_receiver_limited_requests_total",
				map[string]string{"transport": tr, "signal": sig, "limit": LimitRecordsPerRequest}); got != want {
				t.Errorf("limited %s %s = %v, want %v", tr, sig, got, want)
			}
		}
	}
}

// TestMaxRecordsPerRequestEmptyRecords: records of 2 bytes each count
// like any others, so do the resources, scopes and metrics holding them,
// and a body that does not parse is left to the consumer's decoder, which
// names the problem.
func TestMaxRecordsPerRequestEmptyRecords(t *testing.T) {
	rec := &recorder{}
	r, _ := startReceiver(t, testConfig(), rec)
	n := DefaultMaxRecordsPerRequest + 1
	body := []byte{0x0a}
	scope := append([]byte{0x12}, uvarintBytes(uint64(2*n))...)
	res := append(scope, strings.Repeat("\x12\x00", n)...)
	body = append(append(body, uvarintBytes(uint64(len(res)))...), res...)
	resp, got := post(t, nil, httpURL(r, "/v1/logs"), "application/x-protobuf", "", body, nil)
	if _, msg := rpcStatus(t, "application/x-protobuf", got); resp.StatusCode != 400 || !strings.Contains(msg, "request has 200001 log records") {
		t.Errorf("status %d %q", resp.StatusCode, msg)
	}
	// 16 MiB of empty resources hold no record, and decoded into 700 MB.
	resp, got = post(t, nil, httpURL(r, "/v1/logs"), "application/x-protobuf", "", bytes.Repeat([]byte{0x0a, 0x00}, n), nil)
	if _, msg := rpcStatus(t, "application/x-protobuf", got); resp.StatusCode != 400 || !strings.Contains(msg, "request has 200001 resources, scopes and metrics") {
		t.Errorf("empty resources: status %d %q", resp.StatusCode, msg)
	}
	js := `{"resourceMetrics":[{"scopeMetrics":[` + strings.Repeat(`{},`, n-1) + `{}]}]}`
	resp, got = post(t, nil, httpURL(r, "/v1/metrics"), "application/json", "", []byte(js), nil)
	if _, msg := rpcStatus(t, "application/json", got); resp.StatusCode != 400 || !strings.Contains(msg, "request has 200002 resources, scopes and metrics") {
		t.Errorf("empty JSON scopes: status %d %q", resp.StatusCode, msg)
	}
	resp, _ = post(t, nil, httpURL(r, "/v1/logs"), "application/x-protobuf", "", []byte{0x0a, 0x05, 0x12}, nil)
	if resp.StatusCode != 200 || len(rec.requests()) != 1 {
		t.Errorf("truncated body: status %d, consumer saw %d requests; want it passed on", resp.StatusCode, len(rec.requests()))
	}
}

func uvarintBytes(v uint64) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
