package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/tenant"
)

// Limits bound one query. Zero means the default below.
type Limits struct {
	MaxRowsScanned  int64         // rows whose filter columns are read
	MaxBytesScanned int64         // compressed column bytes read
	MaxLimit        int           // largest accepted limit parameter
	Timeout         time.Duration // whole request, before the first byte
}

// Defaults of Limits and of the limit parameter.
const (
	DefaultMaxRowsScanned  = 200_000_000
	DefaultMaxBytesScanned = 8 << 30
	DefaultMaxLimit        = 10_000
	DefaultLimit           = 100
	DefaultTimeout         = time.Minute
	DefaultRange           = time.Hour
	DefaultFileCache       = 512
)

// Options configure a Handler.
type Options struct {
	// TenantHeader names the request header carrying the tenant (the
	// ingestion setting receivers.otlp.tenant_header); "" or an absent
	// header means DefaultTenant.
	TenantHeader  string
	DefaultTenant string
	Limits        Limits
	Logger        *slog.Logger
	// Registerer gets the counters; nil registers nothing.
	Registerer prometheus.Registerer
	// Tail adds the unflushed tail to the listed segments (tail.go); the
	// handler's store must open its paths.
	Tail lake.TailSource
	// FileCache is how many lake files stay open with their parsed
	// footers between queries; 0 means DefaultFileCache.
	FileCache int
	// Now is the clock for default time ranges; nil is time.Now.
	Now func() time.Time
}

// Handler serves the logs and traces search API.
type Handler struct {
	cat   *catalog.Catalog
	store lake.Store
	o     Options
	files *fileCache
	// traceIdx is keyed by path, which names the tenant; traceIndexOf is
	// only reached after the catalog listed the path for the tenant.
	traceIdx traceIndexes

	requests *prometheus.CounterVec
	rows     *prometheus.CounterVec
	bytes    *prometheus.CounterVec
}

// NewHandler returns the search API over the lake in store, listed by cat.
// Counters already registered (a second handler on one registry) are
// shared; any other refusal by opts.Registerer is a programming error and
// panics.
func NewHandler(cat *catalog.Catalog, store lake.Store, opts Options) http.Handler {
	if opts.DefaultTenant == "" {
		opts.DefaultTenant = "default"
	}
	l := &opts.Limits
	if l.MaxRowsScanned <= 0 {
		l.MaxRowsScanned = DefaultMaxRowsScanned
	}
	if l.MaxBytesScanned <= 0 {
		l.MaxBytesScanned = DefaultMaxBytesScanned
	}
	if l.MaxLimit <= 0 {
		l.MaxLimit = DefaultMaxLimit
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.FileCache <= 0 {
		opts.FileCache = DefaultFileCache
	}
	h := &Handler{cat: cat, store: store, o: opts, files: newFileCache(store, opts.FileCache),
		// Not sluice_query_requests_total: package httpapi registers that
		// name on the same registry, and whichever came second would fail.
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_query_search_requests_total",
			Help: "Logs and traces search API requests by endpoint and HTTP status code."}, []string{"endpoint", "code"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_query_search_rows_scanned_total",
			Help: "Lake rows whose filter columns logs and traces searches read."}, []string{"endpoint"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_query_search_bytes_scanned_total",
			Help: "Compressed column bytes logs and traces searches read."}, []string{"endpoint"}),
	}
	if opts.Registerer != nil {
		h.requests = register(opts.Registerer, h.requests)
		h.rows = register(opts.Registerer, h.rows)
		h.bytes = register(opts.Registerer, h.bytes)
	}
	return h
}

func register(r prometheus.Registerer, c *prometheus.CounterVec) *prometheus.CounterVec {
	err := r.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if ex, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return ex
		}
	}
	panic(fmt.Sprintf("search: register metrics: %v", err))
}

// Endpoint names used in counters.
const (
	epLogs        = "logs_search"
	epSpans       = "traces_search"
	epTrace       = "trace"
	epUnknown     = "unknown"
	logsPath      = "/api/v1/logs/search"
	spansPath     = "/api/v1/traces/search"
	tracePrefix   = "/api/v1/traces/"
	ndjsonType    = "application/x-ndjson"
	jsonType      = "application/json"
	errBadData    = "bad_data"
	errLimit      = "limit_exceeded"
	errTimeout    = "timeout"
	errInternal   = "internal"
	errNotFound   = "not_found"
	errNotAllowed = "method_not_allowed"
)

// apiError is an error with its HTTP status and Prometheus-style type.
type apiError struct {
	code int
	typ  string
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func badData(format string, a ...any) error {
	return &apiError{http.StatusBadRequest, errBadData, fmt.Sprintf(format, a...)}
}

func limitErr(format string, a ...any) error {
	return &apiError{http.StatusUnprocessableEntity, errLimit, fmt.Sprintf(format, a...)}
}

// serveFunc serves one endpoint for one tenant. It reports every error
// before writing the body (invariant 4).
type serveFunc func(ctx context.Context, w http.ResponseWriter, r *http.Request, tenant string) (scanStats, error)

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ep := epUnknown
	var serve serveFunc
	switch p := r.URL.Path; {
	case p == logsPath:
		ep, serve = epLogs, h.serveLogs
	case p == spansPath:
		ep, serve = epSpans, h.serveSpans
	case strings.HasPrefix(p, tracePrefix) && !strings.Contains(p[len(tracePrefix):], "/"):
		ep, serve = epTrace, h.serveTrace
	}
	code := h.serve(w, r, ep, serve)
	h.requests.WithLabelValues(ep, strconv.Itoa(code)).Inc()
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, ep string,
	serve serveFunc) int {
	if serve == nil {
		return writeError(w, &apiError{http.StatusNotFound, errNotFound, fmt.Sprintf("no search endpoint at %s", r.URL.Path)})
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		return writeError(w, &apiError{http.StatusMethodNotAllowed, errNotAllowed, fmt.Sprintf("method %s not allowed; use GET", r.Method)})
	}
	t, err := h.tenantOf(r)
	if err != nil {
		return writeError(w, err)
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Limits.Timeout)
	defer cancel()
	ctx, release := h.holdTail(ctx)
	defer release()
	start := time.Now()
	st, err := serve(ctx, w, r, t)
	h.rows.WithLabelValues(ep).Add(float64(st.rows))
	h.bytes.WithLabelValues(ep).Add(float64(st.bytes))
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				err = &apiError{http.StatusServiceUnavailable, errTimeout,
					fmt.Sprintf("query timed out after %s (limit %s): narrow the time range or the filters", time.Since(start).Round(time.Millisecond), h.o.Limits.Timeout)}
			case errors.Is(err, context.Canceled):
				err = &apiError{499, "canceled", "query canceled by the client"}
			default:
				h.o.Logger.Error("search failed", "endpoint", ep, "tenant", t, "err", err)
				err = &apiError{http.StatusInternalServerError, errInternal, err.Error()}
			}
		}
		return writeError(w, err)
	}
	return http.StatusOK
}

func (h *Handler) tenantOf(r *http.Request) (string, error) {
	// Mounted by package httpapi, the authentication guard has decided
	// the tenant (a token may be bound to one).
	if t, ok := authn.TenantOf(r.Context()); ok {
		return t, nil
	}
	if h.o.TenantHeader == "" {
		return h.o.DefaultTenant, nil
	}
	v := r.Header.Get(h.o.TenantHeader)
	if v == "" {
		return h.o.DefaultTenant, nil
	}
	if !tenant.Valid(v) {
		return "", badData("invalid tenant %q in header %s: a tenant must match [A-Za-z0-9._-]{1,64}", v, h.o.TenantHeader)
	}
	return v, nil
}

// writeError writes err as {"status":"error","errorType":...,"error":...}
// and returns the status code.
func writeError(w http.ResponseWriter, err error) int {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{http.StatusInternalServerError, errInternal, err.Error()}
	}
	b, _ := json.Marshal(struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}{"error", ae.typ, ae.msg})
	w.Header().Set("Content-Type", jsonType)
	w.WriteHeader(ae.code)
	_, _ = w.Write(append(b, '\n'))
	return ae.code
}
