package otlpreceiver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-dev/sluice/internal/signal"
)

// recorder is a Consumer that keeps a copy of every request and answers
// with whatever respond says (full success when nil).
type recorder struct {
	mu      sync.Mutex
	reqs    []Request
	respond func(*Request) (Result, error)
}

func (c *recorder) Consume(_ context.Context, req *Request) (Result, error) {
	cp := *req
	cp.Body = bytes.Clone(req.Body) // Body is only valid during Consume
	c.mu.Lock()
	c.reqs = append(c.reqs, cp)
	respond := c.respond
	c.mu.Unlock()
	if respond != nil {
		return respond(req)
	}
	return Result{}, nil
}

func (c *recorder) requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Request(nil), c.reqs...)
}

func (c *recorder) last(t *testing.T) Request {
	t.Helper()
	reqs := c.requests()
	if len(reqs) == 0 {
		t.Fatal("consumer received no request")
	}
	return reqs[len(reqs)-1]
}

type nopConsumer struct{}

func (nopConsumer) Consume(context.Context, *Request) (Result, error) { return Result{}, nil }

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// testConfig listens on loopback ports chosen by the kernel.
func testConfig() Config {
	return Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"}
}

// startReceiver starts a receiver and shuts it down when the test ends.
func startReceiver(t testing.TB, cfg Config, c Consumer) (*Receiver, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	r, err := New(cfg, c, reg, quietLogger())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return r, reg
}

func grpcConn(t testing.TB, r *Receiver, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cc, err := grpc.NewClient(r.GRPCAddr().String(), opts...)
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// payload is one signal's sample request in every form the tests need.
type payload struct {
	kind    signal.Kind
	path    string
	proto   []byte
	json    []byte
	records int
	// export sends the request with pdata's gRPC client and returns the
	// partial success.
	export func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (int64, string, error)
}

func samplePayloads(t testing.TB, n int) []payload {
	t.Helper()
	lr := plogotlp.NewExportRequestFromLogs(sampleLogs(n))
	mr := pmetricotlp.NewExportRequestFromMetrics(sampleMetrics(n))
	tr := ptraceotlp.NewExportRequestFromTraces(sampleTraces(n))
	return []payload{
		{
			kind: signal.KindLogs, path: "/v1/logs", proto: must(lr.MarshalProto()), json: must(lr.MarshalJSON()), records: n,
			export: func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (int64, string, error) {
				resp, err := plogotlp.NewGRPCClient(cc).Export(ctx, lr, opts...)
				if err != nil {
					return 0, "", err
				}
				return resp.PartialSuccess().RejectedLogRecords(), resp.PartialSuccess().ErrorMessage(), err
			},
		},
		{
			kind: signal.KindMetrics, path: "/v1/metrics", proto: must(mr.MarshalProto()), json: must(mr.MarshalJSON()), records: n,
			export: func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (int64, string, error) {
				resp, err := pmetricotlp.NewGRPCClient(cc).Export(ctx, mr, opts...)
				if err != nil {
					return 0, "", err
				}
				return resp.PartialSuccess().RejectedDataPoints(), resp.PartialSuccess().ErrorMessage(), err
			},
		},
		{
			kind: signal.KindTraces, path: "/v1/traces", proto: must(tr.MarshalProto()), json: must(tr.MarshalJSON()), records: n,
			export: func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (int64, string, error) {
				resp, err := ptraceotlp.NewGRPCClient(cc).Export(ctx, tr, opts...)
				if err != nil {
					return 0, "", err
				}
				return resp.PartialSuccess().RejectedSpans(), resp.PartialSuccess().ErrorMessage(), err
			},
		},
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func sampleLogs(n int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "checkout")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("test")
	ts := pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0))
	for i := range n {
		r := sl.LogRecords().AppendEmpty()
		r.SetTimestamp(ts + pcommon.Timestamp(i))
		r.SetSeverityNumber(plog.SeverityNumberInfo)
		r.SetSeverityText("INFO")
		r.Body().SetStr(fmt.Sprintf("request %d served", i))
		r.Attributes().PutInt("http.status_code", 200)
	}
	return ld
}

func sampleMetrics(n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "checkout")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("requests")
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	ts := pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0))
	for i := range n {
		dp := sum.DataPoints().AppendEmpty()
		dp.SetTimestamp(ts + pcommon.Timestamp(i))
		dp.SetIntValue(int64(i))
		dp.Attributes().PutStr("route", fmt.Sprintf("/r/%d", i%7))
	}
	return md
}

func sampleTraces(n int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	ss := rs.ScopeSpans().AppendEmpty()
	ts := pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0))
	for i := range n {
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(pcommon.TraceID{1, 2, 3, byte(i)})
		s.SetSpanID(pcommon.SpanID{4, 5, byte(i)})
		s.SetName("GET /")
		s.SetStartTimestamp(ts)
		s.SetEndTimestamp(ts + 1000)
	}
	return td
}

// canonical decodes an export request with pdata and re-encodes it, so that
// two encodings of the same data compare equal.
func canonical(t testing.TB, kind signal.Kind, body []byte) []byte {
	t.Helper()
	var out []byte
	var err error
	switch kind {
	case signal.KindLogs:
		r := plogotlp.NewExportRequest()
		if err = r.UnmarshalProto(body); err == nil {
			out, err = r.MarshalProto()
		}
	case signal.KindMetrics:
		r := pmetricotlp.NewExportRequest()
		if err = r.UnmarshalProto(body); err == nil {
			out, err = r.MarshalProto()
		}
	case signal.KindTraces:
		r := ptraceotlp.NewExportRequest()
		if err = r.UnmarshalProto(body); err == nil {
			out, err = r.MarshalProto()
		}
	default:
		t.Fatalf("canonical: kind %v", kind)
	}
	if err != nil {
		t.Fatalf("decode %v request: %v", kind, err)
	}
	return out
}

// countRecords counts log records, metric data points or spans.
func countRecords(t testing.TB, kind signal.Kind, body []byte) int {
	t.Helper()
	switch kind {
	case signal.KindLogs:
		r := plogotlp.NewExportRequest()
		if err := r.UnmarshalProto(body); err != nil {
			t.Fatalf("decode logs: %v", err)
		}
		return r.Logs().LogRecordCount()
	case signal.KindMetrics:
		r := pmetricotlp.NewExportRequest()
		if err := r.UnmarshalProto(body); err != nil {
			t.Fatalf("decode metrics: %v", err)
		}
		return r.Metrics().DataPointCount()
	case signal.KindTraces:
		r := ptraceotlp.NewExportRequest()
		if err := r.UnmarshalProto(body); err != nil {
			t.Fatalf("decode traces: %v", err)
		}
		return r.Traces().SpanCount()
	}
	t.Fatalf("countRecords: kind %v", kind)
	return 0
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func zstdBytes(b []byte) []byte {
	e := must(zstd.NewWriter(nil))
	defer e.Close()
	return e.EncodeAll(b, nil)
}

func encodeBody(enc string, b []byte) []byte {
	switch enc {
	case "gzip":
		return gzipBytes(b)
	case "zstd":
		return zstdBytes(b)
	}
	return b
}

// post sends one OTLP/HTTP request and returns the response and its body.
func post(t testing.TB, client *http.Client, url, contentType, encoding string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	return resp, b
}

func httpURL(r *Receiver, path string) string { return "http://" + r.HTTPAddr().String() + path }
