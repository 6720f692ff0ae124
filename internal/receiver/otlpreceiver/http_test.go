package otlpreceiver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

func TestHTTPExportEachSignal(t *testing.T) {
	rec := &recorder{}
	r, _ := startReceiver(t, testConfig(), rec)
	for _, p := range samplePayloads(t, 25) {
		for _, ct := range []string{"application/x-protobuf", "application/json"} {
			for _, enc := range []string{"", "gzip", "zstd"} {
				t.Run(fmt.Sprintf("%v/%s/%s", p.kind, ct, enc), func(t *testing.T) {
					raw := p.proto
					if ct == "application/json" {
						raw = p.json
					}
					resp, body := post(t, nil, httpURL(r, p.path), ct, enc, encodeBody(enc, raw), nil)
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("status %d: %q", resp.StatusCode, body)
					}
					if got := resp.Header.Get("Content-Type"); got != ct {
						t.Fatalf("response content type %q, want %q", got, ct)
					}
					if rejected, _ := partialSuccess(t, p.kind, ct, body); rejected != 0 {
						t.Fatalf("rejected %d, want 0", rejected)
					}
					got := rec.last(t)
					if got.Kind != p.kind || got.Transport != TransportHTTP || got.Tenant != DefaultTenantName {
						t.Fatalf("request = kind %v transport %q tenant %q", got.Kind, got.Transport, got.Tenant)
					}
					if !bytes.Equal(canonical(t, p.kind, got.Body), canonical(t, p.kind, p.proto)) {
						t.Fatal("consumer received different data than was sent")
					}
				})
			}
		}
	}
}

// partialSuccess parses an Export*ServiceResponse body with pdata.
func partialSuccess(t *testing.T, kind signal.Kind, ct string, body []byte) (int64, string) {
	t.Helper()
	isJSON := ct == "application/json"
	var err error
	switch kind {
	case signal.KindLogs:
		r := plogotlp.NewExportResponse()
		if isJSON {
			err = r.UnmarshalJSON(body)
		} else {
			err = r.UnmarshalProto(body)
		}
		if err == nil {
			return r.PartialSuccess().RejectedLogRecords(), r.PartialSuccess().ErrorMessage()
		}
	case signal.KindMetrics:
		r := pmetricotlp.NewExportResponse()
		if isJSON {
			err = r.UnmarshalJSON(body)
		} else {
			err = r.UnmarshalProto(body)
		}
		if err == nil {
			return r.PartialSuccess().RejectedDataPoints(), r.PartialSuccess().ErrorMessage()
		}
	case signal.KindTraces:
		r := ptraceotlp.NewExportResponse()
		if isJSON {
			err = r.UnmarshalJSON(body)
		} else {
			err = r.UnmarshalProto(body)
		}
		if err == nil {
			return r.PartialSuccess().RejectedSpans(), r.PartialSuccess().ErrorMessage()
		}
	}
	t.Fatalf("parse %v response %q: %v", kind, body, err)
	return 0, ""
}

// rpcStatus parses a google.rpc.Status error body in either encoding.
func rpcStatus(t *testing.T, ct string, body []byte) (codes.Code, string) {
	t.Helper()
	if ct == "application/json" {
		var s struct {
			Code    int32  `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatalf("parse json status %q: %v", body, err)
		}
		return codes.Code(s.Code), s.Message
	}
	var s spb.Status
	if err := proto.Unmarshal(body, &s); err != nil {
		t.Fatalf("parse status %q: %v", body, err)
	}
	return codes.Code(s.Code), s.Message
}

func TestHTTPPartialSuccess(t *testing.T) {
	rec := &recorder{respond: func(*Request) (Result, error) {
		return Result{RejectedRecords: 4, Message: "4 records too old"}, nil
	}}
	r, _ := startReceiver(t, testConfig(), rec)
	for _, p := range samplePayloads(t, 5) {
		for _, ct := range []string{"application/x-protobuf", "application/json"} {
			raw := p.proto
			if ct == "application/json" {
				raw = p.json
			}
			resp, body := post(t, nil, httpURL(r, p.path), ct, "", raw, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%v %s: status %d", p.kind, ct, resp.StatusCode)
			}
			if n, msg := partialSuccess(t, p.kind, ct, body); n != 4 || msg != "4 records too old" {
				t.Fatalf("%v %s: partial success %d %q", p.kind, ct, n, msg)
			}
		}
	}
}

func TestHTTPConsumerErrors(t *testing.T) {
	cases := []struct {
		name       string
		err        error
		status     int
		code       codes.Code
		retryAfter string
	}{
		{"backpressure hint", Backpressure(2500*time.Millisecond, nil), 429, codes.ResourceExhausted, "3"},
		{"bare backpressure", fmt.Errorf("queue: %w", ErrBackpressure), 429, codes.ResourceExhausted, "1"},
		{"invalid", fmt.Errorf("decode: %w", ErrInvalid), 400, codes.InvalidArgument, ""},
		{"other", fmt.Errorf("fsync: disk on fire"), 503, codes.Unavailable, "1"},
	}
	p := samplePayloads(t, 3)[1]
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{respond: func(*Request) (Result, error) { return Result{}, tc.err }}
			r, _ := startReceiver(t, testConfig(), rec)
			for _, ct := range []string{"application/x-protobuf", "application/json"} {
				raw := p.proto
				if ct == "application/json" {
					raw = p.json
				}
				resp, body := post(t, nil, httpURL(r, p.path), ct, "", raw, nil)
				if resp.StatusCode != tc.status {
					t.Fatalf("%s: status %d, want %d", ct, resp.StatusCode, tc.status)
				}
				if got := resp.Header.Get("Retry-After"); got != tc.retryAfter {
					t.Fatalf("%s: Retry-After %q, want %q", ct, got, tc.retryAfter)
				}
				if code, _ := rpcStatus(t, ct, body); code != tc.code {
					t.Fatalf("%s: status code %v, want %v", ct, code, tc.code)
				}
			}
		})
	}
}

func TestHTTPAuth(t *testing.T) {
	cfg := testConfig()
	cfg.BearerToken = "s3cret"
	rec := &recorder{}
	r, _ := startReceiver(t, cfg, rec)
	p := samplePayloads(t, 2)[0]
	for _, tc := range []struct {
		auth   string
		status int
	}{
		{"", 401},
		{"Bearer nope", 401},
		{"Bearer s3cret2", 401},
		{"Bearer s3cret", 200},
	} {
		hdr := map[string]string{}
		if tc.auth != "" {
			hdr["Authorization"] = tc.auth
		}
		resp, body := post(t, nil, httpURL(r, p.path), "application/x-protobuf", "", p.proto, hdr)
		if resp.StatusCode != tc.status {
			t.Errorf("authorization %q: status %d, want %d", tc.auth, resp.StatusCode, tc.status)
		}
		if tc.status == 401 {
			if code, _ := rpcStatus(t, "application/x-protobuf", body); code != codes.Unauthenticated {
				t.Errorf("authorization %q: code %v", tc.auth, code)
			}
		}
	}
	if n := len(rec.requests()); n != 1 {
		t.Fatalf("consumer saw %d requests, want 1", n)
	}
}

func TestHTTPTenant(t *testing.T) {
	cfg := testConfig()
	cfg.TenantHeader = "X-Scope-OrgID"
	rec := &recorder{}
	r, reg := startReceiver(t, cfg, rec)
	p := samplePayloads(t, 2)[2]
	url := httpURL(r, p.path)
	resp, _ := post(t, nil, url, "application/x-protobuf", "", p.proto, map[string]string{"X-Scope-OrgID": "team_b.prod-1"})
	if resp.StatusCode != 200 || rec.last(t).Tenant != "team_b.prod-1" {
		t.Fatalf("status %d tenant %q", resp.StatusCode, rec.last(t).Tenant)
	}
	resp, _ = post(t, nil, url, "application/x-protobuf", "", p.proto, nil)
	if resp.StatusCode != 200 || rec.last(t).Tenant != "default" {
		t.Fatalf("status %d tenant %q", resp.StatusCode, rec.last(t).Tenant)
	}
	for _, bad := range []string{"a/b", "..", "ü", strings.Repeat("x", 65), "a%2Fb"} {
		resp, body := post(t, nil, url, "application/json", "", p.json, map[string]string{"X-Scope-OrgID": bad})
		if resp.StatusCode != 400 {
			t.Errorf("tenant %q: status %d, want 400", bad, resp.StatusCode)
		}
		if code, _ := rpcStatus(t, "application/json", body); code != codes.InvalidArgument {
			t.Errorf("tenant %q: code %v", bad, code)
		}
	}
	// Two tenant headers: refused, never "the first one wins".
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(p.proto))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Add("X-Scope-OrgID", "team-a")
	req.Header.Add("x-scope-orgid", "team-b")
	before := len(rec.requests())
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if code, msg := rpcStatus(t, "application/x-protobuf", body); resp.StatusCode != 400 || code != codes.InvalidArgument ||
		!strings.Contains(msg, "more than one X-Scope-OrgID header") {
		t.Errorf("two tenant headers: status %d, code %v, message %q; want 400 naming the header", resp.StatusCode, code, msg)
	}
	if n := len(rec.requests()); n != before {
		t.Errorf("two tenant headers: the consumer got the request")
	}
	if got := counterValue(t, reg, "sluice_receiver_requests_total", map[string]string{
		"transport": "http", "signal": "traces", "tenant": "team_b.prod-1", "outcome": "accepted"}); got != 1 {
		t.Fatalf("accepted for team_b.prod-1 = %v, want 1", got)
	}
	if got := counterValue(t, reg, "sluice_receiver_requests_total", map[string]string{
		"transport": "http", "tenant": "", "outcome": "rejected_invalid"}); got != 6 {
		t.Fatalf("rejected_invalid with empty tenant label = %v, want 6", got)
	}
}

func TestHTTPRejections(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRequestBytes = 4096
	rec := &recorder{}
	r, _ := startReceiver(t, cfg, rec)
	small := samplePayloads(t, 3)[0]
	big := samplePayloads(t, 500)[0] // far above 4 KiB raw, well below it gzipped
	if len(big.proto) < 4*4096 || len(gzipBytes(big.proto)) > 4096 {
		t.Fatalf("sample sizes: raw %d, gzip %d", len(big.proto), len(gzipBytes(big.proto)))
	}
	bomb := gzipBytes(make([]byte, 64<<20)) // 64 MiB of zeros in ~64 KiB

	cases := []struct {
		name, method, path, ct, enc string
		body                        []byte
		status                      int
	}{
		{"unknown path", "POST", "/v1/profiles", "application/x-protobuf", "", small.proto, 404},
		{"root path", "POST", "/", "application/x-protobuf", "", small.proto, 404},
		{"wrong method", "GET", "/v1/logs", "application/x-protobuf", "", nil, 405},
		{"bad content type", "POST", "/v1/logs", "text/plain", "", small.proto, 415},
		{"no content type", "POST", "/v1/logs", "", "", small.proto, 415},
		{"bad encoding", "POST", "/v1/logs", "application/x-protobuf", "br", small.proto, 415},
		{"too large raw", "POST", "/v1/logs", "application/x-protobuf", "", big.proto, 413},
		{"too large after gzip", "POST", "/v1/logs", "application/x-protobuf", "gzip", gzipBytes(big.proto), 413},
		{"too large after zstd", "POST", "/v1/logs", "application/x-protobuf", "zstd", zstdBytes(big.proto), 413},
		{"gzip bomb", "POST", "/v1/logs", "application/x-protobuf", "gzip", bomb, 413},
		{"corrupt gzip", "POST", "/v1/logs", "application/x-protobuf", "gzip", []byte("not gzip at all"), 400},
		{"corrupt zstd", "POST", "/v1/logs", "application/x-protobuf", "zstd", []byte("not zstd at all"), 400},
		{"bad json", "POST", "/v1/logs", "application/json", "", []byte(`{"resourceLogs": [`), 400},
		{"ok with charset", "POST", "/v1/logs", "application/json; charset=utf-8", "", small.json, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, httpURL(r, tc.path), bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			if tc.enc != "" {
				req.Header.Set("Content-Encoding", tc.enc)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == 405 && resp.Header.Get("Allow") != "POST" {
				t.Fatalf("Allow = %q", resp.Header.Get("Allow"))
			}
		})
	}
	if n := len(rec.requests()); n != 1 {
		t.Fatalf("consumer saw %d requests, want only the valid one", n)
	}
}

func TestHTTPConcurrencyLimit(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConcurrentRequests = 1
	entered, unblock := make(chan struct{}, 1), make(chan struct{})
	rec := &recorder{respond: func(*Request) (Result, error) {
		entered <- struct{}{}
		<-unblock
		return Result{}, nil
	}}
	r, _ := startReceiver(t, cfg, rec)
	p := samplePayloads(t, 2)[0]
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(httpURL(r, p.path), "application/x-protobuf", bytes.NewReader(p.proto))
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	waittest.Recv(t, entered, "the first request to reach the consumer")
	resp, _ := post(t, nil, httpURL(r, p.path), "application/x-protobuf", "", p.proto, nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second request: status %d Retry-After %q, want 429 with a hint", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	close(unblock)
	if got := waittest.Recv(t, done, "the first request"); got != 200 {
		t.Fatalf("first request: status %d", got)
	}
}

// counterValue sums the counter samples of name whose labels include want.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
