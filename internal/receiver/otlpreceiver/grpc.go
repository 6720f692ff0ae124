package otlpreceiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // registers the "gzip" decompressor
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-dev/sluice/internal/signal"
)

// The OTLP collector services, described by hand so that requests reach us
// as bytes: no generated message types, no decode on the transport path.
var serviceDescs = [...]struct {
	kind signal.Kind
	desc grpc.ServiceDesc
}{
	{signal.KindLogs, exportServiceDesc("opentelemetry.proto.collector.logs.v1.LogsService", "opentelemetry/proto/collector/logs/v1/logs_service.proto")},
	{signal.KindMetrics, exportServiceDesc("opentelemetry.proto.collector.metrics.v1.MetricsService", "opentelemetry/proto/collector/metrics/v1/metrics_service.proto")},
	{signal.KindTraces, exportServiceDesc("opentelemetry.proto.collector.trace.v1.TraceService", "opentelemetry/proto/collector/trace/v1/trace_service.proto")},
}

// exporter is the HandlerType of the service descs.
type exporter interface {
	export(ctx context.Context, dec func(any) error) (any, error)
}

func exportServiceDesc(name, file string) grpc.ServiceDesc {
	return grpc.ServiceDesc{
		ServiceName: name,
		HandlerType: (*exporter)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Export",
			Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				return srv.(exporter).export(ctx, dec)
			},
		}},
		Metadata: file,
	}
}

// grpcService serves one signal's Export method.
type grpcService struct {
	r    *Receiver
	kind signal.Kind
}

func (r *Receiver) newGRPCServer() *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(int(r.cfg.MaxRequestBytes)),
		// Streams are not processing slots (those are taken after the
		// message is in); this bounds goroutines per connection.
		grpc.MaxConcurrentStreams(maxStreamsPerConn),
		// Metadata as bounded as OTLP/HTTP's headers: gRPC's default
		// takes 16 MiB per stream, 100 streams a connection.
		grpc.MaxHeaderListSize(maxHeaderBytes),
		// The TLS handshake and HTTP/2 preface must come quickly; a
		// connection that opens and says nothing is closed.
		grpc.ConnectionTimeout(min(r.cfg.ReadTimeout, maxHandshake)),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: r.cfg.IdleTimeout, // no stream for this long: GOAWAY
			Time:              keepaliveTime,     // ping a quiet client to find dead peers
			Timeout:           keepaliveTimeout,
		}),
		// Clients may ping every keepaliveMinTime, also without a stream;
		// more often is a ping flood and gets GOAWAY.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		grpc.InTapHandle(readDeadlineTap),
		grpc.SharedWriteBuffer(true),
	}
	if r.tlsConf != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(r.tlsConf.Clone())))
	}
	s := grpc.NewServer(opts...)
	for _, sd := range serviceDescs {
		s.RegisterService(&sd.desc, &grpcService{r: r, kind: sd.kind})
	}
	return s
}

// gRPC connection limits (not user settings: the defaults of well-run
// OTLP servers, tighter than gRPC's own).
const (
	maxHandshake      = 10 * time.Second
	maxStreamsPerConn = 100 // the HTTP/2 recommended minimum
	keepaliveTime     = time.Minute
	keepaliveTimeout  = 20 * time.Second
	keepaliveMinTime  = 10 * time.Second
)

type cancelKey struct{}

var errReadTimeout = errors.New("request not received within the read timeout")

// readDeadlineTap makes the stream's context cancelable by us, so that a
// client stalling in the middle of a message can be cut off (gRPC itself
// only has the client's deadline). It runs under a transport lock and must
// stay cheap. The child context is released with the stream's.
func readDeadlineTap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	return context.WithValue(ctx, cancelKey{}, cancel), nil
}

func (g *grpcService) export(ctx context.Context, dec func(any) error) (any, error) {
	start := time.Now()
	tenant, o, n, resp, err := g.serve(ctx, dec)
	g.r.metrics.observe(tGRPC, g.kind, tenant, g.r.cfg.TenantLabel, o, n, start)
	return resp, err
}

func (g *grpcService) serve(ctx context.Context, dec func(any) error) (string, outcome, int, any, error) {
	r := g.r
	md, _ := metadata.FromIncomingContext(ctx)
	if !r.authorized(firstMD(md, "authorization")) {
		return "", outcomeUnauthorized, 0, nil, status.Error(codes.Unauthenticated, "missing or invalid bearer token")
	}
	var tenantVals []string
	if r.grpcTenantKey != "" {
		tenantVals = md[r.grpcTenantKey]
	}
	tenant, problem := r.tenant(tenantVals)
	switch problem {
	case tenantInvalid:
		return "", outcomeInvalid, 0, nil, status.Error(codes.InvalidArgument, msgTenantInvalid)
	case tenantTwice:
		return "", outcomeInvalid, 0, nil, status.Error(codes.InvalidArgument, r.msgTenantTwice())
	}
	// The message is received before a slot is taken (gRPC reads it in
	// dec, not before the handler), so a stream that never sends holds a
	// goroutine until read_timeout, never processing capacity.
	msg := rawMessages.Get().(*rawMessage)
	defer msg.free()
	err := recvWithin(ctx, dec, msg, r.cfg.ReadTimeout)
	if err != nil {
		// gRPC has already sent its own status for a failed receive; what
		// is returned here only feeds the metrics and logs.
		if status.Code(err) == codes.ResourceExhausted {
			return tenant, outcomeTooLarge, 0, nil, err
		}
		if cause := context.Cause(ctx); errors.Is(cause, errReadTimeout) {
			r.metrics.slowClients[tGRPC].Inc()
			r.readFailed.warn(slog.String("transport", TransportGRPC), slog.Any("err", cause))
			return tenant, outcomeError, 0, nil, status.Error(codes.DeadlineExceeded, cause.Error())
		}
		if ctx.Err() != nil {
			return tenant, outcomeError, 0, nil, status.FromContextError(ctx.Err()).Err()
		}
		// A corrupt compressed stream or the like.
		return tenant, outcomeInvalid, 0, nil, err
	}
	body := msg.bytes()
	if msg := r.tooManyProto(tGRPC, g.kind, body); msg != "" {
		return tenant, outcomeInvalid, len(body), nil, status.Error(codes.InvalidArgument, msg)
	}
	if !r.budget.acquire(ctx, int64(len(body))) {
		return tenant, outcomeBackpressure, len(body), nil, backpressureStatus(msgBytesBusy, DefaultRetryAfter)
	}
	defer r.budget.release(int64(len(body)))
	if !r.acquireSlot(ctx) {
		return tenant, outcomeBackpressure, len(body), nil, backpressureStatus(msgSlotsBusy, DefaultRetryAfter)
	}
	defer r.releaseSlot()
	req := Request{Tenant: tenant, Kind: g.kind, Body: body, Transport: TransportGRPC}
	res, class, retry, err := r.consume(ctx, &req)
	if err != nil {
		switch class {
		case classInvalid:
			return tenant, outcomeInvalid, len(body), nil, status.Error(codes.InvalidArgument, err.Error())
		case classBackpressure:
			return tenant, outcomeBackpressure, len(body), nil, backpressureStatus("backpressure: retry later", retry)
		}
		return tenant, outcomeError, len(body), nil, status.Error(codes.Unavailable, "temporarily unavailable: retry later")
	}
	// Invariant: OK only now, after Consume returned nil.
	if res.RejectedRecords == 0 && res.Message == "" {
		return tenant, outcomeAccepted, len(body), emptyResponse, nil
	}
	return tenant, outcomeAccepted, len(body), &rawResponse{b: appendExportResponse(nil, res)}, nil
}

// recvWithin receives the request, cancelling the stream if it takes
// longer than timeout.
func recvWithin(ctx context.Context, dec func(any) error, msg *rawMessage, timeout time.Duration) error {
	cancel, ok := ctx.Value(cancelKey{}).(context.CancelCauseFunc)
	if !ok || timeout <= 0 {
		return dec(msg)
	}
	t := time.AfterFunc(timeout, func() { cancel(errReadTimeout) })
	err := dec(msg)
	t.Stop()
	return err
}

func firstMD(md metadata.MD, key string) string {
	if key == "" {
		return ""
	}
	if v := md[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// backpressureStatus is RESOURCE_EXHAUSTED with a RetryInfo detail, which
// OTLP exporters read to pace their retries.
func backpressureStatus(msg string, retry time.Duration) error {
	st := status.New(codes.ResourceExhausted, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)}); err == nil {
		st = d
	}
	return st.Err()
}

// rawMessage receives a request's bytes from rawCodec. It keeps a
// reference to gRPC's pooled buffer rather than copying it.
type rawMessage struct{ buf mem.Buffer }

var rawMessages = sync.Pool{New: func() any { return new(rawMessage) }}

func (m *rawMessage) bytes() []byte {
	if m.buf == nil {
		return nil
	}
	return m.buf.ReadOnlyData()
}

func (m *rawMessage) free() {
	if m.buf != nil {
		m.buf.Free()
		m.buf = nil
	}
	rawMessages.Put(m)
}

// rawResponse is an encoded Export*ServiceResponse.
type rawResponse struct{ b []byte }

var emptyResponse = &rawResponse{}

// rawCodec passes messages through as bytes. It is named "proto" because
// that is the content subtype OTLP clients send and expect back.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*rawResponse)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	if len(m.b) == 0 {
		return nil, nil
	}
	return mem.BufferSlice{mem.SliceBuffer(m.b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*rawMessage)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	if m.buf != nil {
		m.buf.Free()
	}
	// gRPC frees data after Unmarshal; this takes our own reference (or a
	// pooled copy when the message arrived in several buffers).
	m.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
	return nil
}
