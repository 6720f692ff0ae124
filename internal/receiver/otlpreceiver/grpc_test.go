package otlpreceiver

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/internal/waittest"
)

func TestGRPCExportEachSignal(t *testing.T) {
	rec := &recorder{}
	r, _ := startReceiver(t, testConfig(), rec)
	cc := grpcConn(t, r)
	for _, p := range samplePayloads(t, 25) {
		for _, comp := range []string{"", "gzip", "zstd"} {
			t.Run(fmt.Sprintf("%v/%s", p.kind, comp), func(t *testing.T) {
				var opts []grpc.CallOption
				if comp != "" {
					opts = append(opts, grpc.UseCompressor(comp))
				}
				rejected, msg, err := p.export(waittest.Context(t), cc, opts...)
				if err != nil {
					t.Fatalf("export: %v", err)
				}
				if rejected != 0 || msg != "" {
					t.Fatalf("partial success %d %q, want none", rejected, msg)
				}
				got := rec.last(t)
				if got.Kind != p.kind || got.Transport != TransportGRPC || got.Tenant != DefaultTenantName {
					t.Fatalf("request = kind %v transport %q tenant %q", got.Kind, got.Transport, got.Tenant)
				}
				if !bytes.Equal(canonical(t, p.kind, got.Body), canonical(t, p.kind, p.proto)) {
					t.Fatal("consumer received different data than was sent")
				}
			})
		}
	}
}

func TestGRPCPartialSuccess(t *testing.T) {
	rec := &recorder{respond: func(*Request) (Result, error) {
		return Result{RejectedRecords: 3, Message: "3 records too old"}, nil
	}}
	r, _ := startReceiver(t, testConfig(), rec)
	cc := grpcConn(t, r)
	for _, p := range samplePayloads(t, 5) {
		// With compression the response comes back compressed the same way.
		for _, comp := range []string{"", "gzip", "zstd"} {
			var opts []grpc.CallOption
			if comp != "" {
				opts = append(opts, grpc.UseCompressor(comp))
			}
			rejected, msg, err := p.export(waittest.Context(t), cc, opts...)
			if err != nil {
				t.Fatalf("%v %q: export: %v", p.kind, comp, err)
			}
			if rejected != 3 || msg != "3 records too old" {
				t.Fatalf("%v %q: partial success = %d %q", p.kind, comp, rejected, msg)
			}
		}
	}
}

func TestGRPCConsumerErrors(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		code      codes.Code
		retryInfo time.Duration
	}{
		{"backpressure hint", Backpressure(7*time.Second, nil), codes.ResourceExhausted, 7 * time.Second},
		{"bare backpressure", fmt.Errorf("queue: %w", ErrBackpressure), codes.ResourceExhausted, DefaultRetryAfter},
		{"invalid", fmt.Errorf("decode: %w", ErrInvalid), codes.InvalidArgument, 0},
		{"other", fmt.Errorf("fsync: disk on fire"), codes.Unavailable, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{respond: func(*Request) (Result, error) { return Result{}, tc.err }}
			r, _ := startReceiver(t, testConfig(), rec)
			p := samplePayloads(t, 3)[0]
			_, _, err := p.export(waittest.Context(t), grpcConn(t, r))
			st := status.Convert(err)
			if st.Code() != tc.code {
				t.Fatalf("code = %v (%v), want %v", st.Code(), err, tc.code)
			}
			if tc.retryInfo == 0 {
				return
			}
			if got := retryDelay(st); got != tc.retryInfo {
				t.Fatalf("RetryInfo delay = %v, want %v", got, tc.retryInfo)
			}
		})
	}
}

func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return -1
}

func TestGRPCAuth(t *testing.T) {
	cfg := testConfig()
	cfg.BearerToken = "s3cret"
	rec := &recorder{}
	r, _ := startReceiver(t, cfg, rec)
	cc := grpcConn(t, r)
	p := samplePayloads(t, 2)[2]
	for _, tc := range []struct {
		auth string
		code codes.Code
	}{
		{"", codes.Unauthenticated},
		{"Bearer wrong!", codes.Unauthenticated},
		{"Basic s3cret", codes.Unauthenticated},
		{"Bearer s3cret", codes.OK},
		{"bearer s3cret", codes.OK},
	} {
		ctx := context.Background()
		if tc.auth != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tc.auth)
		}
		_, _, err := p.export(ctx, cc)
		if got := status.Code(err); got != tc.code {
			t.Errorf("authorization %q: code %v, want %v", tc.auth, got, tc.code)
		}
	}
	if n := len(rec.requests()); n != 2 {
		t.Fatalf("consumer saw %d requests, want only the 2 authorized", n)
	}
}

func TestGRPCTenant(t *testing.T) {
	cfg := testConfig()
	cfg.TenantHeader = "X-Scope-OrgID"
	rec := &recorder{}
	r, _ := startReceiver(t, cfg, rec)
	cc := grpcConn(t, r)
	p := samplePayloads(t, 2)[0]

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "team-a")
	if _, _, err := p.export(ctx, cc); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(t).Tenant; got != "team-a" {
		t.Fatalf("tenant = %q, want team-a", got)
	}
	if _, _, err := p.export(waittest.Context(t), cc); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(t).Tenant; got != "default" {
		t.Fatalf("tenant = %q, want default", got)
	}
	ctx = metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "team-a", "X-Scope-OrgID", "team-b")
	before := len(rec.requests())
	_, _, err := p.export(ctx, cc)
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "more than one X-Scope-OrgID header") {
		t.Errorf("two tenant values: %v, want InvalidArgument naming the header", err)
	}
	if len(rec.requests()) != before {
		t.Errorf("two tenant values: the consumer got the request")
	}
	for _, bad := range []string{"a/b", "..", "x y", string(bytes.Repeat([]byte("a"), 65))} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", bad)
		if _, _, err := p.export(ctx, cc); status.Code(err) != codes.InvalidArgument {
			t.Errorf("tenant %q: %v, want InvalidArgument", bad, err)
		}
	}
}

func TestGRPCTooLarge(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRequestBytes = 2048
	rec := &recorder{}
	r, reg := startReceiver(t, cfg, rec)
	cc := grpcConn(t, r)
	p := samplePayloads(t, 200)[0]
	if len(p.proto) <= 2048 {
		t.Fatalf("sample too small: %d bytes", len(p.proto))
	}
	for _, comp := range []string{"", "gzip", "zstd"} {
		var opts []grpc.CallOption
		if comp != "" {
			opts = append(opts, grpc.UseCompressor(comp))
		}
		if _, _, err := p.export(waittest.Context(t), cc, opts...); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("compression %q: %v, want ResourceExhausted", comp, err)
		}
	}
	if n := len(rec.requests()); n != 0 {
		t.Fatalf("consumer saw %d oversized requests", n)
	}
	// gRPC answers a message past its size before the handler returns, so
	// the handler may count the last refusal just after the client saw it.
	want := map[string]string{"transport": "grpc", "signal": "logs", "outcome": "rejected_too_large"}
	deadline := time.Now().Add(30 * time.Second)
	for counterValue(t, reg, "sluice_receiver_requests_total", want) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := counterValue(t, reg, "sluice_receiver_requests_total", want); got != 3 {
		t.Fatalf("rejected_too_large = %v, want 3", got)
	}
}

func TestGRPCConcurrencyLimit(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConcurrentRequests = 1
	entered, unblock := make(chan struct{}, 1), make(chan struct{})
	rec := &recorder{respond: func(*Request) (Result, error) {
		entered <- struct{}{}
		<-unblock
		return Result{}, nil
	}}
	r, _ := startReceiver(t, cfg, rec)
	cc := grpcConn(t, r)
	p := samplePayloads(t, 2)[0]
	done := make(chan error, 1)
	go func() { _, _, err := p.export(waittest.Context(t), cc); done <- err }()
	waittest.Recv(t, entered, "the first request to reach the consumer")
	// A second connection: on the first, MaxConcurrentStreams makes the
	// client wait for a stream instead.
	_, _, err := p.export(waittest.Context(t), grpcConn(t, r))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || retryDelay(st) <= 0 {
		t.Fatalf("second request: %v, want ResourceExhausted with RetryInfo", err)
	}
	close(unblock)
	if err := waittest.Recv(t, done, "the first request"); err != nil {
		t.Fatalf("first request: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	r, reg := startReceiver(t, testConfig(), &recorder{})
	p := samplePayloads(t, 10)[1]
	if _, _, err := p.export(waittest.Context(t), grpcConn(t, r)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"transport": "grpc", "signal": "metrics", "tenant": "default", "outcome": "accepted"}
	if got := counterValue(t, reg, "sluice_receiver_requests_total", want); got != 1 {
		t.Fatalf("accepted = %v, want 1", got)
	}
	if got := counterValue(t, reg, "sluice_receiver_request_bytes_total", map[string]string{"transport": "grpc", "signal": "metrics"}); got != float64(len(p.proto)) {
		t.Fatalf("request bytes = %v, want %d", got, len(p.proto))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var observed uint64
	for _, mf := range mfs {
		if mf.GetName() == "sluice_receiver_request_duration_seconds" {
			for _, m := range mf.GetMetric() {
				observed += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if observed != 1 {
		t.Fatalf("latency observations = %d, want 1", observed)
	}
}
