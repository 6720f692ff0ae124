package otlpreceiver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sluice-dev/sluice/internal/signal"
)

type contentType uint8

const (
	ctUnknown contentType = iota
	ctProto
	ctJSON
)

type contentEncoding uint8

const (
	encIdentity contentEncoding = iota
	encGzip
	encZstd
	encUnknown
)

// Shared header values: net/http never mutates them, and reusing them saves
// an allocation per response.
var (
	hdrProto = []string{"application/x-protobuf"}
	hdrJSON  = []string{"application/json"}
	hdrPost  = []string{http.MethodPost}
	hdrOne   = []string{"1"}
	hdrClose = []string{"close"}
)

var errBodyTooLarge = errors.New("request body too large")

const (
	firstRead       = 64 << 10 // the first reservation of a body
	maxPooledBody   = 4 << 20  // bigger buffers go to the GC, not back to the pool
	maxBodySizeHint = 4 << 20
)

// exchange is the per-request state of an HTTP export, pooled so that the
// protobuf path allocates next to nothing of its own.
type exchange struct {
	buf []byte
	out []byte
	src sourceReader
	req Request
	res reservation
}

var exchanges = sync.Pool{New: func() any { return new(exchange) }}

func getExchange() *exchange { return exchanges.Get().(*exchange) }

func putExchange(x *exchange) {
	if cap(x.buf) > maxPooledBody {
		x.buf = nil
	}
	x.buf, x.out = x.buf[:0], x.out[:0]
	x.src = sourceReader{}
	x.req = Request{}
	x.res = reservation{}
	exchanges.Put(x)
}

// sourceReader remembers the error of the underlying body, so that a
// failure can be told apart: I/O (or MaxBytesReader) versus a corrupt
// compressed stream. It also enforces the minimum body rate on the wire
// bytes (compressed, if the body is).
type sourceReader struct {
	r    io.Reader
	err  error
	rate rateLimit
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	s.rate.advance(n)
	return n, err
}

// reservation is what one body holds of the receiver's byte budget.
type reservation struct {
	b   *byteBudget
	ctx context.Context
	n   int64
}

// grow makes the reservation at least n bytes.
func (v *reservation) grow(n int64) bool {
	if v.b == nil || n <= v.n {
		return true
	}
	if !v.b.acquire(v.ctx, n-v.n) {
		return false
	}
	v.n = n
	return true
}

func (v *reservation) release() {
	if v.b != nil {
		v.b.release(v.n)
		v.n = 0
	}
}

func kindOfPath(p string) signal.Kind {
	switch p {
	case "/v1/logs":
		return signal.KindLogs
	case "/v1/metrics":
		return signal.KindMetrics
	case "/v1/traces":
		return signal.KindTraces
	}
	return signal.KindUnknown
}

func parseContentType(v string) contentType {
	if i := strings.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	v = strings.TrimSpace(v)
	switch {
	case strings.EqualFold(v, "application/x-protobuf"), strings.EqualFold(v, "application/protobuf"):
		return ctProto
	case strings.EqualFold(v, "application/json"):
		return ctJSON
	}
	return ctUnknown
}

func parseContentEncoding(v string) contentEncoding {
	v = strings.TrimSpace(v)
	switch {
	case v == "", strings.EqualFold(v, "identity"):
		return encIdentity
	case strings.EqualFold(v, "gzip"), strings.EqualFold(v, "x-gzip"):
		return encGzip
	case strings.EqualFold(v, "zstd"):
		return encZstd
	}
	return encUnknown
}

// ServeHTTP serves OTLP/HTTP: POST /v1/{logs,metrics,traces}. It is usable
// without Start, e.g. mounted on another server or in tests.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	kind := kindOfPath(req.URL.Path)
	tenant, o, n := r.serveExport(w, req, kind)
	r.metrics.observe(tHTTP, kind, tenant, r.cfg.TenantLabel, o, n, start)
}

// serveExport answers one request and returns the tenant label, outcome
// and decompressed body size for the metrics.
func (r *Receiver) serveExport(w http.ResponseWriter, req *http.Request, kind signal.Kind) (string, outcome, int) {
	ct := parseContentType(req.Header.Get("Content-Type"))
	if kind == signal.KindUnknown {
		writeHTTPError(w, ct, http.StatusNotFound, codes.NotFound, "unknown path: use /v1/logs, /v1/metrics or /v1/traces", 0)
		return "", outcomeInvalid, 0
	}
	if req.Method != http.MethodPost {
		w.Header()["Allow"] = hdrPost
		writeHTTPError(w, ct, http.StatusMethodNotAllowed, codes.Unimplemented, "method not allowed: use POST", 0)
		return "", outcomeInvalid, 0
	}
	if !r.authorized(req.Header.Get("Authorization")) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="otlp"`)
		writeHTTPError(w, ct, http.StatusUnauthorized, codes.Unauthenticated, "missing or invalid bearer token", 0)
		return "", outcomeUnauthorized, 0
	}
	var tenantVals []string
	if r.httpTenantKey != "" {
		tenantVals = req.Header[r.httpTenantKey]
	}
	tenant, problem := r.tenant(tenantVals)
	switch problem {
	case tenantInvalid:
		writeHTTPError(w, ct, http.StatusBadRequest, codes.InvalidArgument, msgTenantInvalid, 0)
		return "", outcomeInvalid, 0
	case tenantTwice:
		writeHTTPError(w, ct, http.StatusBadRequest, codes.InvalidArgument, r.msgTenantTwice(), 0)
		return "", outcomeInvalid, 0
	}
	if ct == ctUnknown {
		writeHTTPError(w, ct, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			"unsupported content type: use application/x-protobuf or application/json", 0)
		return tenant, outcomeInvalid, 0
	}
	enc := parseContentEncoding(req.Header.Get("Content-Encoding"))
	if enc == encUnknown {
		writeHTTPError(w, ct, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			"unsupported content encoding: use gzip, zstd or none", 0)
		return tenant, outcomeInvalid, 0
	}
	limit := r.cfg.MaxRequestBytes
	if req.ContentLength > limit {
		writeHTTPError(w, ct, http.StatusRequestEntityTooLarge, codes.ResourceExhausted, tooLargeMsg(limit), 0)
		return tenant, outcomeTooLarge, 0
	}
	// The body is read before a processing slot is taken, so a client
	// trickling its body holds only the bytes it sent (reserved in the
	// byte budget) and its connection, never a slot that fast clients need.
	x := getExchange()
	defer putExchange(x)
	x.res = reservation{b: r.budget, ctx: req.Context()}
	defer x.res.release()
	err := r.readBody(x, w, req, enc)
	n := len(x.buf)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.Is(err, errBodyTooLarge), errors.As(err, &mbe):
			writeHTTPError(w, ct, http.StatusRequestEntityTooLarge, codes.ResourceExhausted, tooLargeMsg(limit), 0)
			return tenant, outcomeTooLarge, n
		case errors.Is(err, errNoBudget):
			writeHTTPError(w, ct, http.StatusTooManyRequests, codes.ResourceExhausted, msgBytesBusy, DefaultRetryAfter)
			return tenant, outcomeBackpressure, n
		case x.src.err != nil:
			// The client went away or was too slow; it may not read this.
			status := http.StatusBadRequest
			msg := "read request body failed"
			// HTTP/2 wraps the stream's deadline error: look inside.
			if ne := net.Error(nil); errors.As(x.src.err, &ne) && ne.Timeout() {
				status = http.StatusRequestTimeout
				msg = r.slowBodyMsg
				r.metrics.slowClients[tHTTP].Inc()
				w.Header()["Connection"] = hdrClose
			} else {
				r.readFailed.warn(slog.String("transport", TransportHTTP), slog.String("remote", req.RemoteAddr), slog.Any("err", err))
			}
			writeHTTPError(w, ct, status, codes.Unavailable, msg, 0)
			return tenant, outcomeError, n
		default:
			writeHTTPError(w, ct, http.StatusBadRequest, codes.InvalidArgument, "decompress request body: "+err.Error(), 0)
			return tenant, outcomeInvalid, n
		}
	}
	body := x.buf
	if ct == ctJSON {
		if body, err = jsonToProto(kind, body, func(records, holders int) string { return r.tooManyRecords(tHTTP, kind, records, holders) }); err != nil {
			writeHTTPError(w, ct, http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0)
			return tenant, outcomeInvalid, n
		}
		if !x.res.grow(x.res.n + int64(len(body))) {
			writeHTTPError(w, ct, http.StatusTooManyRequests, codes.ResourceExhausted, msgBytesBusy, DefaultRetryAfter)
			return tenant, outcomeBackpressure, n
		}
	} else if msg := r.tooManyProto(tHTTP, kind, body); msg != "" {
		writeHTTPError(w, ct, http.StatusBadRequest, codes.InvalidArgument, msg, 0)
		return tenant, outcomeInvalid, n
	}
	if !r.acquireSlot(req.Context()) {
		writeHTTPError(w, ct, http.StatusTooManyRequests, codes.ResourceExhausted, msgSlotsBusy, DefaultRetryAfter)
		return tenant, outcomeBackpressure, n
	}
	defer r.releaseSlot()

	x.req = Request{Tenant: tenant, Kind: kind, Body: body, Transport: TransportHTTP}
	res, class, retry, err := r.consume(req.Context(), &x.req)
	if err != nil {
		switch class {
		case classInvalid:
			writeHTTPError(w, ct, http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0)
		case classBackpressure:
			writeHTTPError(w, ct, http.StatusTooManyRequests, codes.ResourceExhausted, "backpressure: retry later", retry)
		default:
			writeHTTPError(w, ct, http.StatusServiceUnavailable, codes.Unavailable, "temporarily unavailable: retry later", retry)
		}
		return tenant, outcomeOf(class), n
	}

	// Invariant: 200 only now, after Consume returned nil.
	h := w.Header()
	if ct == ctJSON {
		out, err := exportResponseJSON(kind, res)
		if err != nil {
			// The data is durable; an unrenderable partial success must not
			// turn into a retry that duplicates it.
			out = []byte("{}")
		}
		h["Content-Type"] = hdrJSON
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
	} else {
		x.out = appendExportResponse(x.out[:0], res)
		h["Content-Type"] = hdrProto
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(x.out)
	}
	return tenant, outcomeAccepted, n
}

// readBody reads the decompressed body into x.buf, at most MaxRequestBytes
// on the wire and after decompression (so a zip bomb stops at the limit).
func (r *Receiver) readBody(x *exchange, w http.ResponseWriter, req *http.Request, enc contentEncoding) error {
	limit := r.cfg.MaxRequestBytes
	x.src = sourceReader{r: http.MaxBytesReader(w, req.Body, limit)}
	x.src.rate.arm(w, r.cfg.BodyRateGrace, r.cfg.MinBodyRate, r.cfg.ReadTimeout)
	defer x.src.rate.disarm()
	hint := 0
	if req.ContentLength > 0 {
		hint = int(min(req.ContentLength, maxBodySizeHint))
		if enc != encIdentity {
			hint = min(hint*4, maxBodySizeHint)
		}
	}
	var err error
	switch enc {
	case encGzip:
		z, zerr := newGzipReader(&x.src)
		if zerr != nil {
			return zerr
		}
		x.buf, err = readAtMost(x.buf[:0], z, limit, hint, &x.res)
		putGzipReader(z)
	case encZstd:
		z, zerr := newZstdReader(&x.src)
		if zerr != nil {
			return zerr
		}
		x.buf, err = readAtMost(x.buf[:0], z, limit, hint, &x.res)
		putZstdReader(z)
	default:
		x.buf, err = readAtMost(x.buf[:0], &x.src, limit, hint, &x.res)
	}
	return err
}

// readAtMost appends all of r to dst, failing with errBodyTooLarge as soon
// as more than limit bytes arrive. It reads only into room reserved in res
// (errNoBudget when the budget has none left in time), so a pooled buffer's
// spare capacity is never counted and a slow body holds what it sent.
func readAtMost(dst []byte, r io.Reader, limit int64, hint int, res *reservation) ([]byte, error) {
	// A declared length is only a hint: memory is reserved and allocated as
	// bytes arrive, so a client declaring 1 MB and trickling holds what it
	// sent. The hint (one byte more, to see EOF without growing) only
	// stops the last step from overshooting.
	if hint > 0 {
		hint++
	}
	for {
		room := cap(dst)
		if res.b != nil {
			room = int(min(int64(room), res.n))
		}
		if len(dst) == room {
			// Grow geometrically, but never past limit+1: one byte over is
			// enough to know the body is too large.
			grow := max(len(dst), firstRead)
			if hint > len(dst) && len(dst)+grow > hint {
				grow = hint - len(dst)
			}
			if left := limit + 1 - int64(len(dst)); int64(grow) > left {
				grow = int(left)
			}
			if grow <= 0 {
				return dst, errBodyTooLarge
			}
			if !res.grow(int64(len(dst) + grow)) {
				return dst, errNoBudget
			}
			if len(dst)+grow > cap(dst) {
				dst = slices.Grow(dst, grow)
			}
			room = len(dst) + grow
		}
		n, err := r.Read(dst[len(dst):room])
		dst = dst[:len(dst)+n]
		if int64(len(dst)) > limit {
			return dst, errBodyTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

func tooLargeMsg(limit int64) string {
	return "request body larger than " + strconv.FormatInt(limit, 10) + " bytes"
}

// writeHTTPError answers with a google.rpc.Status body in the request's
// encoding (protobuf unless the request was JSON), per OTLP/HTTP.
func writeHTTPError(w http.ResponseWriter, ct contentType, httpStatus int, code codes.Code, msg string, retryAfter time.Duration) {
	h := w.Header()
	if retryAfter > 0 {
		if retryAfter <= time.Second {
			h["Retry-After"] = hdrOne
		} else {
			// Whole seconds, rounded up: retrying early would fail again.
			h.Set("Retry-After", strconv.FormatInt(int64((retryAfter+time.Second-1)/time.Second), 10))
		}
	}
	var body []byte
	if ct == ctJSON {
		h["Content-Type"] = hdrJSON
		body = statusJSON(code, msg)
	} else {
		h["Content-Type"] = hdrProto
		body = appendStatus(nil, code, msg)
	}
	w.WriteHeader(httpStatus)
	_, _ = w.Write(body)
}

func (r *Receiver) newHTTPServer() *http.Server {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true) // h2c with prior knowledge, as some OTLP clients use
	return &http.Server{
		Handler:           r,
		ReadHeaderTimeout: min(r.cfg.ReadTimeout, 10*time.Second),
		ReadTimeout:       r.cfg.ReadTimeout,
		// net/http counts WriteTimeout from the end of the headers, so it
		// must also cover reading the body.
		WriteTimeout:   r.cfg.ReadTimeout + r.cfg.WriteTimeout,
		IdleTimeout:    r.cfg.IdleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		TLSConfig:      r.tlsConf.Clone(),
		Protocols:      protocols,
		// TLS handshake failures and the like are client noise, not ours.
		ErrorLog: slog.NewLogLogger(r.log.Handler(), slog.LevelDebug),
	}
}
