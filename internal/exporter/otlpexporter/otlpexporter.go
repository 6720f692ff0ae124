package otlpexporter

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // registers the gzip compressor
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Config of an OTLP exporter.
type Config struct {
	// Endpoints: for HTTP a base URL (http://host:4318), for gRPC host:port.
	Endpoints    []string
	Protocol     string // "http" or "grpc"
	Compression  string // "gzip", "zstd" (HTTP only) or "none"
	TenantHeader string // header (gRPC metadata) carrying each record's tenant; empty: none
	Headers      map[string]string
	Timeout      time.Duration // per request; default 30s
	MaxRequest   int           // body bytes per request before compression; default 4 MiB
	// TLS is the client TLS of https:// endpoints (nil: the system's
	// roots, no client certificate). Over gRPC it also turns a bare
	// host:port to TLS; an http:// gRPC endpoint is plaintext.
	TLS *tls.Config
	// CAFile is the file TLS.RootCAs came from (tls.ca_file): read again
	// when it changes on disk, for new connections.
	CAFile string
	Policy sending.Policy
}

// Exporter is an exporter.Sender for OTLP.
type Exporter struct {
	cfg   Config
	eps   []*sending.Endpoint
	conns []*grpc.ClientConn
	hc    *http.Client
	zenc  *zstd.Encoder
}

// New validates cfg and sets up the endpoints (gRPC connections are lazy).
func New(cfg Config) (*Exporter, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("otlpexporter: no endpoints")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxRequest <= 0 {
		cfg.MaxRequest = 4 << 20
	}
	rt, ct, err := sending.HTTPTransport(cfg.TLS, cfg.CAFile, func(tc *tls.Config) *http.Transport {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		return tr
	})
	if err != nil {
		return nil, fmt.Errorf("otlpexporter: tls ca_file: %w", err)
	}
	e := &Exporter{cfg: cfg, hc: &http.Client{Timeout: cfg.Timeout, Transport: rt, CheckRedirect: sending.PostRedirect}}
	switch cfg.Compression {
	case "", "none", "gzip":
	case "zstd":
		if cfg.Protocol == "grpc" {
			return nil, errors.New("otlpexporter: zstd is for HTTP; gRPC takes gzip or none")
		}
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return nil, err
		}
		e.zenc = enc
	default:
		return nil, fmt.Errorf("otlpexporter: unknown compression %q", cfg.Compression)
	}
	for _, ep := range cfg.Endpoints {
		e.eps = append(e.eps, sending.NewEndpoint(ep, cfg.Policy))
		switch cfg.Protocol {
		case "grpc":
			target, creds := grpcTarget(ep, cfg.TLS, ct)
			cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
			if err != nil {
				e.Close()
				return nil, fmt.Errorf("otlpexporter: endpoint %q: %w", ep, err)
			}
			e.conns = append(e.conns, cc)
		case "http":
			if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
				return nil, fmt.Errorf("otlpexporter: endpoint %q: want http:// or https:// URL", ep)
			}
		default:
			return nil, fmt.Errorf("otlpexporter: unknown protocol %q (grpc or http)", cfg.Protocol)
		}
	}
	return e, nil
}

// grpcTarget reads a gRPC endpoint: https://host:port is TLS, http://host:port
// plaintext, and a bare host:port TLS when a TLS config is given (plaintext
// without one, as before exporters had TLS settings).
// With ct (a tls.ca_file) the trusted CAs follow the file (caCreds).
func grpcTarget(ep string, tc *tls.Config, ct *sending.ClientTLS) (string, credentials.TransportCredentials) {
	if hp, ok := strings.CutPrefix(ep, "http://"); ok {
		return strings.TrimSuffix(hp, "/"), insecure.NewCredentials()
	}
	hp, secure := strings.CutPrefix(ep, "https://")
	if !secure && tc == nil {
		return ep, insecure.NewCredentials()
	}
	if tc == nil {
		tc = &tls.Config{MinVersion: tls.VersionTLS12} // the system's roots
	}
	creds := credentials.NewTLS(tc.Clone())
	if ct != nil {
		creds = caCreds{TransportCredentials: creds, ct: ct}
	}
	return strings.TrimSuffix(hp, "/"), creds
}

// caCreds are gRPC TLS credentials whose trusted CAs follow the exporter's
// CA file: each handshake (a new connection, as after the backend
// restarted with a rotated certificate) uses the pool the file holds now.
type caCreds struct {
	credentials.TransportCredentials
	ct *sending.ClientTLS
}

func (c caCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(c.ct.Config()).ClientHandshake(ctx, authority, conn)
}

func (c caCreds) Clone() credentials.TransportCredentials {
	return caCreds{TransportCredentials: c.TransportCredentials.Clone(), ct: c.ct}
}

// Close closes gRPC connections.
func (e *Exporter) Close() error {
	var errs []error
	for _, c := range e.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// BatchesInFlight implements exporter.BatchSender: Send is safe for
// concurrent use and OTLP backends take requests in any order, so the
// Runner keeps up to the endpoints' concurrency of batches in flight.
func (e *Exporter) BatchesInFlight() int {
	if c := e.cfg.Policy.Concurrency; c > 0 {
		return c
	}
	return 4 // sending.Policy's default
}

// Endpoints implements exporter.Sender.
func (e *Exporter) Endpoints() []*sending.Endpoint { return e.eps }

// Send implements exporter.Sender: consecutive records of one signal and
// tenant are concatenated into requests of at most MaxRequest bytes, and
// every request goes to every endpoint.
func (e *Exporter) Send(ctx context.Context, recs []exporter.Record) error {
	var buf []byte // the bodies of this call's requests, one after another
	for i := 0; i < len(recs); {
		k, t := recs[i].Kind, recs[i].Tenant
		size := len(recs[i].Body)
		j := i + 1
		for ; j < len(recs) && recs[j].Kind == k && recs[j].Tenant == t && size+len(recs[j].Body) <= e.cfg.MaxRequest; j++ {
			size += len(recs[j].Body)
		}
		var err error
		if buf, err = e.sendAll(ctx, k, t, recs[i:j], buf); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// sendAll sends recs, records of one signal and tenant, as one request to
// every endpoint at once; its body is built in buf, returned for reuse.
func (e *Exporter) sendAll(ctx context.Context, k signal.Kind, tenant string, recs []exporter.Record, buf []byte) ([]byte, error) {
	body, payload, encoding, err := e.request(buf[:0], recs)
	if err != nil {
		return body, err
	}
	errs := make([]error, len(e.eps))
	var wg sync.WaitGroup
	for i := range e.eps {
		wg.Go(func() { errs[i] = e.sendTo(ctx, i, k, tenant, recs, body, payload, encoding) })
	}
	wg.Wait()
	return body, errors.Join(errs...)
}

// request appends the bodies of recs to dst (OTLP requests are messages
// whose repeated fields merge: one request of them all) and compresses it.
func (e *Exporter) request(dst []byte, recs []exporter.Record) (body, payload []byte, encoding string, err error) {
	body = dst
	for _, r := range recs {
		body = append(body, r.Body...)
	}
	payload, encoding, err = e.compress(body)
	return body, payload, encoding, err
}

// sendTo sends the request of recs (body, compressed as payload) to
// endpoint i. An endpoint that refuses it as too large (an HTTP 413)
// gets the records again in two requests of half of them each, the first
// delivered before the second goes; a request of one record still refused
// is dropped and counted. nil: delivered, or dropped and counted.
func (e *Exporter) sendTo(ctx context.Context, i int, k signal.Kind, tenant string, recs []exporter.Record, body, payload []byte, encoding string) error {
	ep := e.eps[i]
	err := ep.DoSplit(ctx, func(ctx context.Context) sending.Outcome {
		var o sending.Outcome
		if e.cfg.Protocol == "grpc" {
			o = e.grpcAttempt(ctx, e.conns[i], k, tenant, body)
		} else {
			o = e.httpAttempt(ctx, ep.Name, k, tenant, payload, encoding)
		}
		if o.OK() && (o.Header == nil || !strings.Contains(o.Header.Get("Content-Type"), "json")) {
			if n, msg := partialSuccess(o.Body); n > 0 || msg != "" {
				ep.PartialRejection(n, msg)
			}
		}
		return o
	})
	if errors.Is(err, sending.ErrTooLarge) {
		if len(recs) == 1 {
			ep.DropTooLarge(err, fmt.Sprintf("one %s record of %d bytes", k, len(body)))
			return nil
		}
		ep.Split()
		h := len(recs) / 2
		for _, half := range [][]exporter.Record{recs[:h], recs[h:]} {
			body, payload, encoding, err := e.request(nil, half)
			if err != nil {
				return err
			}
			if err := e.sendTo(ctx, i, k, tenant, half, body, payload, encoding); err != nil {
				return err
			}
		}
		return nil
	}
	if errors.Is(err, sending.ErrRejected) {
		err = nil // dropped and counted by the endpoint
	}
	return err
}

func (e *Exporter) compress(body []byte) ([]byte, string, error) {
	switch e.cfg.Compression {
	case "gzip":
		if e.cfg.Protocol == "grpc" {
			return body, "", nil // gRPC compresses per message
		}
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(body)
		if err := w.Close(); err != nil {
			return nil, "", err
		}
		return b.Bytes(), "gzip", nil
	case "zstd":
		return e.zenc.EncodeAll(body, nil), "zstd", nil
	}
	return body, "", nil
}

var httpPaths = map[signal.Kind]string{signal.KindLogs: "/v1/logs", signal.KindMetrics: "/v1/metrics", signal.KindTraces: "/v1/traces"}

func (e *Exporter) httpAttempt(ctx context.Context, base string, k signal.Kind, tenant string, payload []byte, encoding string) sending.Outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+httpPaths[k], bytes.NewReader(payload))
	if err != nil {
		return sending.Outcome{Status: 400, Err: err}
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	for h, v := range e.cfg.Headers {
		req.Header.Set(h, v)
	}
	if e.cfg.TenantHeader != "" {
		req.Header.Set(e.cfg.TenantHeader, tenant)
	}
	return sending.Send(e.hc, req)
}

var grpcMethods = map[signal.Kind]string{
	signal.KindLogs:    "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
	signal.KindMetrics: "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
	signal.KindTraces:  "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
}

func (e *Exporter) grpcAttempt(ctx context.Context, cc *grpc.ClientConn, k signal.Kind, tenant string, body []byte) sending.Outcome {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	md := metadata.MD{}
	for h, v := range e.cfg.Headers {
		md.Set(h, v)
	}
	if e.cfg.TenantHeader != "" {
		md.Set(e.cfg.TenantHeader, tenant)
	}
	ctx = metadata.NewOutgoingContext(ctx, md)
	opts := []grpc.CallOption{grpc.ForceCodecV2(rawCodec{})}
	if e.cfg.Compression == "gzip" {
		opts = append(opts, grpc.UseCompressor("gzip"))
	}
	var out []byte
	var trailer metadata.MD
	opts = append(opts, grpc.Trailer(&trailer))
	err := cc.Invoke(ctx, grpcMethods[k], body, &out, opts...)
	if err == nil {
		return sending.Outcome{Status: 200, Body: out}
	}
	st := status.Convert(err)
	o := sending.Outcome{Status: grpcToHTTP(st.Code()), Err: err}
	if st.Code() == codes.ResourceExhausted && messageTooLarge(st.Message()) {
		// A message over the server's (or this client's) size limit:
		// RESOURCE_EXHAUSTED as backpressure is, but retrying the same
		// message cannot succeed, and would hold the exporter's cursor
		// for good; split like an HTTP 413.
		o.Status = http.StatusRequestEntityTooLarge
	}
	// gRPC's Retry-After: the RetryInfo detail (what sluice's own
	// receiver sends with RESOURCE_EXHAUSTED under backpressure).
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			o.RetryAfter = max(0, ri.GetRetryDelay().AsDuration())
		}
	}
	return o
}

// messageTooLarge reports whether a RESOURCE_EXHAUSTED status message is
// gRPC's refusal of a message over a size limit (grpc-go: "received
// message larger than max", "message after decompression larger than
// max", "trying to send message larger than max"; grpc-java: "exceeds
// maximum size").
func messageTooLarge(msg string) bool {
	return strings.Contains(msg, "larger than max") || strings.Contains(msg, "exceeds maximum size")
}

// partialSuccess reads an OTLP export response (logs, metrics and traces
// alike: field 1 is partial_success, whose field 1 is the count of
// rejected items and field 2 the error message). A body that does not
// parse reads as no partial success.
func partialSuccess(b []byte) (rejected int64, msg string) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, ""
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return 0, ""
			}
			b = b[n:]
			continue
		}
		ps, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, ""
		}
		b = b[n:]
		for len(ps) > 0 {
			num, typ, n := protowire.ConsumeTag(ps)
			if n < 0 {
				return 0, ""
			}
			ps = ps[n:]
			switch {
			case num == 1 && typ == protowire.VarintType:
				v, n := protowire.ConsumeVarint(ps)
				if n < 0 {
					return 0, ""
				}
				rejected, ps = int64(v), ps[n:]
			case num == 2 && typ == protowire.BytesType:
				v, n := protowire.ConsumeBytes(ps)
				if n < 0 {
					return 0, ""
				}
				msg, ps = string(v), ps[n:]
			default:
				if n = protowire.ConsumeFieldValue(num, typ, ps); n < 0 {
					return 0, ""
				}
				ps = ps[n:]
			}
		}
	}
	return rejected, msg
}

// grpcToHTTP maps a gRPC code to the HTTP status the retry rule reads, as
// the OTLP specification's retryable codes say.
func grpcToHTTP(c codes.Code) int {
	switch c {
	case codes.OK:
		return 200
	case codes.ResourceExhausted:
		return 429
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange, codes.DataLoss:
		return 503
	case codes.Unauthenticated:
		return 401
	case codes.PermissionDenied:
		return 403
	case codes.Unimplemented:
		return 404
	default:
		return 400
	}
}

// rawCodec sends []byte as the message and reads the reply as bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("otlpexporter: raw codec cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("otlpexporter: raw codec cannot unmarshal into %T", v)
	}
	*p = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }
