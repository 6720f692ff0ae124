package otlpreceiver

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/sluice-dev/sluice/internal/httpserve"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/stats"
	"github.com/sluice-dev/sluice/internal/tenant"
)

// Request is one OTLP export request handed to a Consumer.
type Request struct {
	Tenant string
	Kind   signal.Kind
	// Body is an Export{Logs,Metrics,Trace}ServiceRequest protobuf,
	// decompressed (and converted from OTLP/JSON when sent as JSON). It is
	// only valid until Consume returns: the buffer is reused afterwards.
	Body      []byte
	Transport string // TransportGRPC or TransportHTTP
	// Metrics, when set, is Body already decoded (the remote-write
	// receiver decodes remote write into it and encodes Body from it), so
	// the consumer need not decode Body again; the consumer may take its
	// buffers (swap them for others). Valid until Consume returns.
	Metrics *signal.Metrics
	// RemoteWrite, when 1 or 2, says Body is not OTLP but a remote-write
	// request of that protocol version as received (snappy block encoded),
	// and Metrics holds it decoded; the consumer may queue Body as it is.
	RemoteWrite uint8
	// Scanned, set by the remote-write receiver instead of Metrics when
	// the consumer said it needs no batch (prwreceiver.ScanTaker), is what
	// the consumer still needs of a request it queues as received. Valid
	// until Consume returns.
	Scanned *Scanned
}

// Scanned is a remote-write request checked by a scan (package prw's
// Scanner) instead of decoded: valid, plain (float samples only), and
// these counts. A consumer that cannot take it after all (a rule loaded
// since) decodes Body itself.
type Scanned struct {
	// Points is the number of samples; Attrs the attributes the decoded
	// batch would hold and MaxAttrs the most of one point (the consumer's
	// attribute limits).
	Points, Attrs, MaxAttrs int
	// NumSeries is the number of series (TimeSeries messages).
	NumSeries int
	// Series is the samples as the live statistics count them.
	Series stats.Series
	// Decoded is the request snappy-decoded (nil when not given), the
	// receiver's buffer, lent: the consumer may keep it (the lake loop
	// then need not decode the request again; nobody writes it) and put
	// another buffer, or nil, in its place. After Consume the receiver
	// takes whatever Decoded holds as its decode buffer.
	Decoded []byte
}

// Result is an OTLP partial success; the zero Result is full success.
type Result struct {
	RejectedRecords int64
	Message         string
}

// Consumer takes ownership of a request's data. It returns only once the
// data is durable (or rejected); its error is classified by classify:
// *BackpressureError / ErrBackpressure, ErrInvalid, or anything else
// (retryable). Consume is called concurrently.
type Consumer interface {
	Consume(ctx context.Context, req *Request) (Result, error)
}

// Receiver serves OTLP over gRPC and HTTP. Create it with New.
type Receiver struct {
	cfg      Config
	consumer Consumer
	log      *slog.Logger
	metrics  *metrics
	tlsConf  *tls.Config

	// sem bounds requests being consumed; a slot is taken only once the
	// body is read. budget bounds body bytes held, read or being consumed.
	sem         chan struct{}
	budget      *byteBudget
	slowBodyMsg string

	grpcTenantKey string // TenantHeader lowercased, as gRPC metadata keys are
	httpTenantKey string // TenantHeader canonicalized, as net/http keys headers
	bearer        []byte // "Bearer <token>", nil when auth is off

	consumeFailed, readFailed, serveFailed throttledLog

	mu       sync.Mutex
	started  bool
	stopped  bool
	grpcSrv  *grpc.Server
	httpSrv  *http.Server
	grpcAddr net.Addr
	httpAddr net.Addr
	serving  sync.WaitGroup

	shutdownOnce sync.Once
	shutdownErr  error
}

// New validates cfg and builds a Receiver; nothing listens until Start.
// reg may be nil (no metrics are exported), log may be nil (slog.Default).
func New(cfg Config, c Consumer, reg prometheus.Registerer, log *slog.Logger) (*Receiver, error) {
	if c == nil {
		return nil, errors.New("otlp receiver: nil consumer")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "otlpreceiver")
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("otlp receiver: register metrics: %w", err)
	}
	r := &Receiver{
		cfg:      cfg,
		consumer: c,
		log:      log,
		metrics:  m,
		sem:      make(chan struct{}, cfg.MaxConcurrentRequests),
		budget:   newByteBudget(cfg.MaxInflightBytes),
		slowBodyMsg: fmt.Sprintf("request body arrived slower than %d bytes/s after %s (receivers.otlp.min_body_rate) or not within %s (read_timeout)",
			cfg.MinBodyRate, cfg.BodyRateGrace, cfg.ReadTimeout),
		grpcTenantKey: strings.ToLower(cfg.TenantHeader),
		httpTenantKey: textproto.CanonicalMIMEHeaderKey(cfg.TenantHeader),
	}
	if cfg.BearerToken != "" {
		r.bearer = []byte("Bearer " + cfg.BearerToken)
	}
	if cfg.TLS != nil {
		if r.tlsConf, err = cfg.TLS.load(); err != nil {
			return nil, fmt.Errorf("otlp receiver: %w", err)
		}
	}
	r.consumeFailed = throttledLog{log: log, msg: "otlp consume failed"}
	r.readFailed = throttledLog{log: log, msg: "otlp request body unreadable"}
	r.serveFailed = throttledLog{log: log, msg: "otlp server error"}
	return r, nil
}

// Start binds the enabled listeners, failing fast if one cannot bind, and
// serves in the background until Shutdown. ctx bounds start-up only.
func (r *Receiver) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errors.New("otlp receiver: already started")
	}
	if r.stopped {
		return errors.New("otlp receiver: shut down")
	}
	var lc net.ListenConfig
	var grpcLn, httpLn net.Listener
	var err error
	if r.cfg.GRPCAddr != "" {
		if grpcLn, err = lc.Listen(ctx, "tcp", r.cfg.GRPCAddr); err != nil {
			return fmt.Errorf("otlp receiver: listen grpc on %q: %w", r.cfg.GRPCAddr, err)
		}
	}
	if r.cfg.HTTPAddr != "" {
		if httpLn, err = lc.Listen(ctx, "tcp", r.cfg.HTTPAddr); err != nil {
			if grpcLn != nil {
				_ = grpcLn.Close()
			}
			return fmt.Errorf("otlp receiver: listen http on %q: %w", r.cfg.HTTPAddr, err)
		}
	}
	r.started = true
	if grpcLn != nil {
		grpcLn = r.limit(grpcLn, tGRPC)
		r.grpcSrv = r.newGRPCServer()
		r.grpcAddr = grpcLn.Addr()
		r.serving.Go(func() {
			if err := r.grpcSrv.Serve(grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				r.log.Error("otlp grpc server stopped", "addr", r.grpcAddr.String(), "err", err)
			}
		})
		r.log.Info("otlp grpc listening", "addr", r.grpcAddr.String(), "tls", r.tlsConf != nil)
	}
	if httpLn != nil {
		httpLn = r.limit(httpLn, tHTTP)
		r.httpSrv = r.newHTTPServer()
		r.httpAddr = httpLn.Addr()
		r.serving.Go(func() {
			var err error
			if r.tlsConf != nil {
				err = r.httpSrv.ServeTLS(httpLn, "", "")
			} else {
				err = r.httpSrv.Serve(httpLn)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				r.log.Error("otlp http server stopped", "addr", r.httpAddr.String(), "err", err)
			}
		})
		r.log.Info("otlp http listening", "addr", r.httpAddr.String(), "tls", r.tlsConf != nil)
	}
	return nil
}

func (r *Receiver) limit(ln net.Listener, t transportID) net.Listener {
	return httpserve.Limit(ln, r.cfg.MaxConnections, r.metrics.connsRefused[t], r.metrics.connsOpen[t])
}

// GRPCAddr is the bound gRPC address, nil before Start or when disabled.
func (r *Receiver) GRPCAddr() net.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.grpcAddr
}

// HTTPAddr is the bound HTTP address, nil before Start or when disabled.
func (r *Receiver) HTTPAddr() net.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.httpAddr
}

// Shutdown stops accepting, then waits for in-flight requests to finish
// until ctx is done, after which connections are closed (their contexts,
// and so Consume's, are cancelled). It is idempotent; later calls wait for
// the first and return its result.
func (r *Receiver) Shutdown(ctx context.Context) error {
	r.shutdownOnce.Do(func() { r.shutdownErr = r.shutdown(ctx) })
	return r.shutdownErr
}

func (r *Receiver) shutdown(ctx context.Context) error {
	r.mu.Lock()
	r.stopped = true
	grpcSrv, httpSrv := r.grpcSrv, r.httpSrv
	r.mu.Unlock()

	var errs []error
	grpcDone := make(chan struct{})
	if grpcSrv != nil {
		go func() {
			grpcSrv.GracefulStop()
			close(grpcDone)
		}()
	} else {
		close(grpcDone)
	}
	if httpSrv != nil {
		if err := httpSrv.Shutdown(ctx); err != nil {
			_ = httpSrv.Close()
			errs = append(errs, fmt.Errorf("drain http: %w", err))
		}
	}
	select {
	case <-grpcDone:
	case <-ctx.Done():
		grpcSrv.Stop()
		<-grpcDone
		errs = append(errs, fmt.Errorf("drain grpc: %w", ctx.Err()))
	}
	r.serving.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("otlp receiver: shutdown: %w", err)
	}
	return nil
}

// authorized compares in constant time so the token cannot be guessed
// byte by byte from response latency.
func (r *Receiver) authorized(header string) bool {
	if r.bearer == nil {
		return true
	}
	// The scheme is case-insensitive (RFC 9110), the token is not.
	if len(header) != len(r.bearer) || !strings.EqualFold(header[:7], "Bearer ") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(header[7:]), r.bearer[7:]) == 1
}

// tenantProblem is why a request's tenant header was refused.
type tenantProblem uint8

const (
	tenantOK tenantProblem = iota
	tenantInvalid
	tenantTwice
)

// Messages of the refusals; the header name is the configured one.
const msgTenantInvalid = "invalid tenant: must match [A-Za-z0-9._-]{1,64}"

func (r *Receiver) msgTenantTwice() string {
	return "more than one " + r.cfg.TenantHeader + " header: send exactly one tenant"
}

// tenant resolves the tenant from the values of the tenant header (nil =
// absent). Two values are refused rather than one picked: a proxy that
// appends its own header must not silently move data to another tenant.
func (r *Receiver) tenant(vals []string) (string, tenantProblem) {
	if r.cfg.TenantHeader == "" || len(vals) == 0 {
		return r.cfg.DefaultTenant, tenantOK
	}
	if len(vals) > 1 {
		return "", tenantTwice
	}
	v := vals[0]
	if !tenant.Valid(v) { // an empty header too: tenant.FromHeader
		return "", tenantInvalid
	}
	return v, tenantOK
}

// LimitRecordsPerRequest names Config.MaxRecordsPerRequest in errors and
// in the limit label of sluice_receiver_limited_requests_total.
const LimitRecordsPerRequest = "max_records_per_request"

// tooManyRecords is the refusal of a request of kind with records
// records and holders resources, scopes and metrics past
// Config.MaxRecordsPerRequest ("" when within it or the limit is off).
func (r *Receiver) tooManyRecords(t transportID, kind signal.Kind, records, holders int) string {
	max := r.cfg.MaxRecordsPerRequest
	if max < 0 || records <= max && holders <= max {
		return ""
	}
	r.metrics.tooManyRecords[t][kind].Inc()
	n, what := records, recordsName(kind)
	if records <= max {
		n, what = holders, "resources, scopes and metrics"
	}
	return fmt.Sprintf("request has %d %s, past the limit %s of %d (receivers.otlp.%[3]s): send smaller batches",
		n, what, LimitRecordsPerRequest, max)
}

// tooManyProto is tooManyRecords for a protobuf body, counted by
// otlp.CountRecords; a body that does not parse counts what it parsed and
// is left to the decoder, which names the problem.
func (r *Receiver) tooManyProto(t transportID, kind signal.Kind, body []byte) string {
	// A record, resource, scope or metric takes at least 2 bytes (tag
	// and length), so a body of at most 2×max bytes holds at most max of
	// each: most requests need no count at all.
	if max := r.cfg.MaxRecordsPerRequest; max < 0 || len(body) <= 2*max {
		return ""
	}
	records, holders, _ := otlp.CountRecords(kind, body)
	return r.tooManyRecords(t, kind, records, holders)
}

func recordsName(kind signal.Kind) string {
	switch kind {
	case signal.KindLogs:
		return "log records"
	case signal.KindMetrics:
		return "data points"
	}
	return "spans"
}

// consume calls the consumer and logs failures that are the server's
// problem (not the client's), rate-limited.
func (r *Receiver) consume(ctx context.Context, req *Request) (Result, errorClass, time.Duration, error) {
	res, err := r.consumer.Consume(ctx, req)
	if err == nil {
		return res, 0, 0, nil
	}
	class, retry := classify(err)
	if class == classRetryable && ctx.Err() == nil {
		r.consumeFailed.warn(slog.String("transport", req.Transport), slog.String("signal", req.Kind.String()),
			slog.String("tenant", req.Tenant), slog.Any("err", err))
	}
	return res, class, retry, err
}

func outcomeOf(class errorClass) outcome {
	switch class {
	case classInvalid:
		return outcomeInvalid
	case classBackpressure:
		return outcomeBackpressure
	}
	return outcomeError
}
