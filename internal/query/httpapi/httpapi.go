package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
	promstats "github.com/prometheus/prometheus/util/stats"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/query/prom"
	"github.com/sluice-dev/sluice/internal/query/search"
	"github.com/sluice-dev/sluice/internal/stats"
	"github.com/sluice-dev/sluice/internal/tenant"
	"github.com/sluice-dev/sluice/internal/version"
)

// Config configures the query HTTP server.
type Config struct {
	Adapter *prom.Adapter
	// TenantHeader names the request header carrying the tenant; "" (or an
	// empty header value) means DefaultTenant.
	TenantHeader  string
	DefaultTenant string
	// Limits bound each query's reads from the lake.
	Limits prom.Limits
	// MaxSamples is the engine's limit on samples in memory at once.
	MaxSamples int
	// Timeout bounds each query; a request's timeout parameter may lower it.
	Timeout time.Duration
	// MaxPoints bounds (end-start)/step of range queries (Prometheus: 11000).
	MaxPoints int
	// LookbackDelta is how far back an instant selector looks (default 5m).
	LookbackDelta time.Duration
	// Rollups lets Start's adapter serve range queries from metrics_rollup.
	Rollups bool
	// Search, when set, serves /api/v1/logs/... and /api/v1/traces/...
	// (the logs and traces search API).
	Search http.Handler
	// SearchOptions configure the search handler Start builds when Search
	// is nil; Start sets their tenancy, Logger and Registerer.
	SearchOptions search.Options
	// MaxConcurrency queries run at once (query.max_concurrency); 0 means
	// DerivedConcurrency. MaxQueued more wait (query.max_queued); past
	// that a query gets 429 at once. A negative MaxQueued means none wait.
	MaxConcurrency int
	MaxQueued      int
	// MaxConnections bounds the connections open at once on the
	// listener (query.max_connections); 0: httpserve's default.
	MaxConnections int
	// MaxQueryBytes and MaxTotalBytes are the memory budget of one query
	// and of all running queries (query.max_query_bytes,
	// query.max_total_bytes); 0 means derived: DerivedTotalBytes, and the
	// total divided by the concurrency.
	MaxQueryBytes int64
	MaxTotalBytes int64
	// MaxQueryLength bounds the bytes of a PromQL expression or match[]
	// selector, MaxQueryDepth its nesting of (), [] and {}.
	MaxQueryLength int
	MaxQueryDepth  int
	// Tokens, when any, are required on every endpoint (query.auth.tokens).
	Tokens []authn.Token
	// TLS, when set, makes Start serve HTTPS (query.tls).
	TLS        authn.TLSFiles
	Logger     *slog.Logger
	Registerer prometheus.Registerer

	// RemoteWrite, when set, serves Prometheus remote write on
	// /api/v1/write behind the guard with the write scope (package
	// prwreceiver); the guard puts the tenant in the request's context.
	RemoteWrite http.Handler

	// Stats, when set, answers /api/v1/status/tsdb and the statistics of
	// /api/v1/status/sluice; Gatherer (the process's metrics) the rest of
	// /api/v1/status/sluice (status.go).
	Stats    *stats.Stats
	Gatherer prometheus.Gatherer
	// StatusFromLake, when Stats is nil, answers /api/v1/status/tsdb from
	// the lake: the tenant's series with a point in the last StatusWindow
	// (`sluice query-server`, which does not see data arrive). Otherwise
	// a nil Stats answers empty lists.
	StatusFromLake bool
	StatusWindow   time.Duration
	// RuleEffects, when set, gives the processing rules' effects per
	// tenant and metric for /api/v1/status/sluice (stats.CollectStatus).
	RuleEffects func(tenant string) []stats.RuleEffect

	// Tail, when set, adds the unflushed tail of `sluice run` to what
	// Start's adapter and search handler list (lake.TailSource); the store
	// given to Start must open its paths.
	Tail lake.TailSource
}

// Defaults of Config.
const (
	DefaultMaxPoints  = 11000
	DefaultMaxSamples = 50_000_000
	DefaultTimeout    = 2 * time.Minute
	// DefaultSubqueryStep is the step of a subquery that names none:
	// Prometheus's default global evaluation_interval, which it uses there.
	DefaultSubqueryStep = time.Minute
)

// Handler serves the Prometheus HTTP API.
type Handler struct {
	cfg      Config
	engine   *promql.Engine
	parser   parser.Parser
	mux      *http.ServeMux
	guarded  http.Handler // mux behind the authn.Guard
	routes   []Route
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	limits   *limiter
	// engineSamplesFromBytes: the engine's MaxSamples came from
	// MaxQueryBytes rather than MaxSamples (for the error message).
	engineSamplesFromBytes bool
	engineSamples          int // the engine's MaxSamples
}

// Route is one endpoint of the API. Every route is registered through
// Handler.route, and every request, routed or not, passes the guard
// first, so an endpoint added later cannot bypass authentication.
type Route struct {
	Pattern string      // http.ServeMux pattern
	Example string      // a path that reaches the route
	Scope   authn.Scope // what a token needs to use it
}

// New returns the API handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Adapter == nil {
		return nil, errors.New("httpapi: no adapter")
	}
	if cfg.DefaultTenant == "" {
		cfg.DefaultTenant = "default"
	}
	if !tenant.Valid(cfg.DefaultTenant) {
		return nil, fmt.Errorf("httpapi: invalid default tenant %q", cfg.DefaultTenant)
	}
	if cfg.MaxPoints <= 0 {
		cfg.MaxPoints = DefaultMaxPoints
	}
	if cfg.MaxSamples <= 0 {
		cfg.MaxSamples = DefaultMaxSamples
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.LookbackDelta <= 0 {
		cfg.LookbackDelta = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = DerivedConcurrency()
	}
	switch {
	case cfg.MaxQueued == 0:
		cfg.MaxQueued = DefaultMaxQueued
	case cfg.MaxQueued < 0:
		cfg.MaxQueued = 0
	}
	if cfg.MaxTotalBytes <= 0 {
		cfg.MaxTotalBytes = DerivedTotalBytes()
	}
	if cfg.MaxQueryBytes <= 0 {
		cfg.MaxQueryBytes = cfg.MaxTotalBytes / int64(cfg.MaxConcurrency)
	}
	cfg.MaxQueryBytes = min(cfg.MaxQueryBytes, cfg.MaxTotalBytes)
	if cfg.MaxQueryLength <= 0 {
		cfg.MaxQueryLength = DefaultMaxQueryLength
	}
	if cfg.MaxQueryDepth <= 0 {
		cfg.MaxQueryDepth = DefaultMaxQueryDepth
	}
	// The engine counts samples, not bytes: its limit is the smaller of
	// query.max_samples and what query.max_query_bytes holds.
	engineSamples := cfg.MaxSamples
	fromBytes := false
	if n := cfg.MaxQueryBytes / engineSampleBytes; n < int64(engineSamples) {
		engineSamples, fromBytes = int(max(n, 1)), true
	}
	h := &Handler{
		cfg:    cfg,
		parser: parser.NewParser(parser.Options{}),
		engine: promql.NewEngine(promql.EngineOpts{
			Logger: cfg.Logger, MaxSamples: engineSamples, Timeout: cfg.Timeout,
			LookbackDelta: cfg.LookbackDelta, EnableAtModifier: true, EnableNegativeOffset: true,
			// Counted only for a query that asks (stats=all, queryOpts).
			EnablePerStepStats: true,
			// A subquery without a step (x[20m:]) steps by this; the engine
			// dereferences it unset, a panic that broke the connection.
			NoStepSubqueryIntervalFn: func(int64) int64 { return DefaultSubqueryStep.Milliseconds() },
		}),
		limits:                 newLimiter(cfg.MaxConcurrency, cfg.MaxQueued, cfg.MaxQueryBytes, cfg.MaxTotalBytes),
		engineSamplesFromBytes: fromBytes,
		engineSamples:          engineSamples,
		mux:                    http.NewServeMux(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_query_requests_total",
			Help: "Query API requests by endpoint and HTTP status code."}, []string{"endpoint", "code"}),
		// From the handler's start to the answer written (queueing for a
		// slot included), like prometheus_http_request_duration_seconds.
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_query_request_duration_seconds",
			Help:    "Time to answer a query API request, by endpoint (waiting for a query slot included).",
			Buckets: []float64{0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 30, 120}}, []string{"endpoint"}),
	}
	failures := authn.NewFailureCounter("query")
	if cfg.Registerer != nil {
		for _, c := range append([]prometheus.Collector{h.requests, h.duration, failures}, h.limits.collectors()...) {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("httpapi: register metrics: %w", err)
			}
		}
	}
	guard, err := authn.New(authn.Config{Tokens: cfg.Tokens, TenantHeader: cfg.TenantHeader,
		DefaultTenant: cfg.DefaultTenant, Realm: "sluice query"}, failures)
	if err != nil {
		return nil, fmt.Errorf("httpapi: query.auth: %w", err)
	}
	h.handle("/api/v1/query", "query", h.limited(h.query))
	h.handle("/api/v1/query_range", "query_range", h.limited(h.queryRange))
	h.handle("/api/v1/series", "series", h.limited(h.series))
	h.handle("/api/v1/labels", "labels", h.limited(h.labelNames))
	h.handle("/api/v1/label/{name}/values", "label_values", h.limited(h.labelValues))
	h.handle("/api/v1/metadata", "metadata", h.limited(h.metadata))
	// Behind the guard too: Grafana sends the data source's
	// Authorization header with its buildinfo probe, as with any request.
	h.handle("/api/v1/status/buildinfo", "buildinfo", func(*http.Request, string) (any, error) {
		// version is the Prometheus API Grafana's data source checks;
		// sluice's own version is beside it. The other fields are
		// Prometheus's, which clients decode.
		return map[string]string{"version": version.Prometheus, "application": "sluice",
			"sluice_version": version.String(), "revision": version.Revision(), "branch": "",
			"buildUser": "", "buildDate": version.BuildDate(), "goVersion": runtime.Version()}, nil
	})
	h.handle("/api/v1/format_query", "format_query", h.formatQuery)
	h.handle("/api/v1/parse_query", "parse_query", h.parseQuery)
	// sluice evaluates no recording or alerting rules (processing rules,
	// docs/rules.md, are another thing): Grafana's alerting views list
	// none for the data source rather than an error.
	h.handle("/api/v1/rules", "rules", func(*http.Request, string) (any, error) { return map[string][]any{"groups": {}}, nil })
	h.handle("/api/v1/alerts", "alerts", func(*http.Request, string) (any, error) { return map[string][]any{"alerts": {}}, nil })
	h.handle("/api/v1/query_exemplars", "query_exemplars", h.limited(h.queryExemplars))
	h.statusRoutes()
	if cfg.Search != nil {
		search := h.limitedHandler(cfg.Search)
		h.route(Route{Pattern: "/api/v1/logs/", Example: "/api/v1/logs/search", Scope: authn.Read}, search)
		h.route(Route{Pattern: "/api/v1/traces/", Example: "/api/v1/traces/search", Scope: authn.Read}, search)
		h.routes = append(h.routes, Route{Pattern: "/api/v1/traces/", Example: "/api/v1/traces/0af7651916cd43dd8448eb211c80319c", Scope: authn.Read})
	}
	if cfg.RemoteWrite != nil {
		h.route(Route{Pattern: "/api/v1/write", Scope: authn.Write}, cfg.RemoteWrite)
	}
	scopes := map[string]authn.Scope{}
	for _, rt := range h.routes {
		scopes[rt.Pattern] = rt.Scope
	}
	h.guarded = guard.Wrap(h.mux, func(r *http.Request) authn.Scope {
		if _, p := h.mux.Handler(r); scopes[p] != 0 {
			return scopes[p]
		}
		return authn.Read // unrouted paths need a token as well
	})
	return h, nil
}

// Routes lists every endpoint with the scope it needs.
func (h *Handler) Routes() []Route { return slices.Clone(h.routes) }

func (h *Handler) route(rt Route, hd http.Handler) {
	if rt.Example == "" {
		rt.Example = strings.ReplaceAll(rt.Pattern, "{name}", "job")
	}
	h.routes = append(h.routes, rt)
	h.mux.Handle(rt.Pattern, hd)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.guarded.ServeHTTP(w, r) }

// apiError is an error with its Prometheus errorType.
type apiError struct {
	typ string
	err error
}

func (e *apiError) Error() string { return e.err.Error() }

func (e *apiError) Unwrap() error { return e.err }

func badData(format string, a ...any) error {
	return &apiError{"bad_data", fmt.Errorf(format, a...)}
}

func statusOf(typ string) int {
	switch typ {
	case "bad_data":
		return http.StatusBadRequest
	case "execution", "cost_limit":
		return http.StatusUnprocessableEntity
	case "too_many_requests":
		return http.StatusTooManyRequests
	case "canceled":
		return 499
	case "timeout":
		return http.StatusServiceUnavailable
	case "not_found":
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// classify maps an execution error to Prometheus's error types.
func classify(err error) *apiError {
	var ae *apiError
	var eqc promql.ErrQueryCanceled
	var eqt promql.ErrQueryTimeout
	var es promql.ErrStorage
	var tms promql.ErrTooManySamples
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, prom.ErrLimit):
		return &apiError{"cost_limit", err}
	case errors.As(err, &tms):
		return &apiError{"cost_limit", err}
	case errors.As(err, &eqt), errors.Is(err, context.DeadlineExceeded):
		return &apiError{"timeout", err}
	case errors.As(err, &eqc), errors.Is(err, context.Canceled):
		return &apiError{"canceled", err}
	case errors.As(err, &es):
		return &apiError{"internal", err}
	}
	return &apiError{"execution", err}
}

// apiFunc serves one endpoint. It may return a *promResult, which serve
// streams and then closes.
type apiFunc func(r *http.Request, tenant string) (any, error)

type budgetKey struct{}

func budgetOf(ctx context.Context) *budget {
	b, _ := ctx.Value(budgetKey{}).(*budget)
	return b
}

// limited runs f in a query slot with a memory budget, both under the
// request's deadline (serve set it), so waiting in the queue counts
// against query.timeout as parsing, evaluation and encoding do.
func (h *Handler) limited(f apiFunc) apiFunc {
	return func(r *http.Request, t string) (any, error) {
		b, err := h.limits.acquire(r.Context(), t)
		if err != nil {
			return nil, err
		}
		// Released here on every path but a streamed result's, even when f
		// panics (net/http recovers the handler): a slot lost per panic
		// would leave every later query waiting out its timeout.
		streamed := false
		defer func() {
			if !streamed {
				b.release()
			}
		}()
		data, err := f(r.WithContext(context.WithValue(r.Context(), budgetKey{}, b)), t)
		if pr, ok := data.(*promResult); ok && err == nil {
			// Released after streaming: the result holds its memory until then.
			inner := pr.close
			pr.close = func() { inner(); b.release() }
			streamed = true
			if err := b.charge(pr.size()); err != nil {
				pr.close()
				return nil, err
			}
			return pr, nil
		}
		return data, err
	}
}

// limitedHandler runs the search API in a query slot, under query.timeout.
func (h *Handler) limitedHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
		defer cancel()
		// An invalid tenant waits as "" and is refused by the search
		// handler itself.
		t, _ := h.tenantOf(r)
		b, err := h.limits.acquire(ctx, t)
		if err != nil {
			ae := classify(err)
			writeJSON(w, statusOf(ae.typ), errorBody(ae.typ, ae.err.Error()))
			return
		}
		defer b.release()
		next.ServeHTTP(w, r)
	})
}

func (h *Handler) handle(pattern, name string, f apiFunc) {
	took := h.duration.WithLabelValues(name)
	h.route(Route{Pattern: pattern, Scope: authn.Read}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		code, abort := h.serve(w, r, f)
		took.Observe(time.Since(start).Seconds())
		h.requests.WithLabelValues(name, strconv.Itoa(code)).Inc()
		if abort {
			// The status line is out: only a broken connection tells the
			// client that the body is incomplete.
			panic(http.ErrAbortHandler)
		}
	}))
}

// serve answers one request; abort means the answer broke off after its
// status line and the connection must be dropped.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, f apiFunc) (code int, abort bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		return writeJSON(w, http.StatusMethodNotAllowed, errorBody("bad_data", "method "+r.Method+" not allowed")), false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		msg := "error parsing form values: " + err.Error()
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			msg = fmt.Sprintf("request body is more than %s, the query API's limit for a form", byteString(maxFormBody))
		}
		return writeJSON(w, http.StatusBadRequest, errorBody("bad_data", msg)), false
	}
	t, err := h.tenantOf(r)
	if err != nil {
		return writeJSON(w, http.StatusBadRequest, errorBody("bad_data", err.Error())), false
	}
	// One deadline from here on: queueing, parsing, evaluation, encoding.
	ctx, cancel, deadline, err := h.requestContext(r)
	if err != nil {
		return writeJSON(w, http.StatusBadRequest, errorBody("bad_data", err.Error())), false
	}
	defer cancel()
	r = r.WithContext(ctx)
	data, err := f(r, t)
	if err != nil {
		ae := classify(err)
		code := statusOf(ae.typ)
		if code >= 500 {
			h.cfg.Logger.Warn("query failed", "path", r.URL.Path, "tenant", t, "err", err)
		}
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		msg := ae.err.Error()
		if ae.typ == "timeout" && !strings.HasPrefix(msg, "query timed out") {
			// The engine's own text is Prometheus's; a timeout elsewhere
			// (reading series, labels, the catalog) says what ran out.
			msg = fmt.Sprintf("query timed out (%s): %s", deadline, msg)
		}
		return writeJSON(w, code, errorBody(ae.typ, msg)), false
	}
	if pr, ok := data.(*promResult); ok {
		defer pr.close()
		if err := writeResult(ctx, w, pr); err != nil {
			h.cfg.Logger.Warn("query answer broke off", "path", r.URL.Path, "tenant", t, "err", err)
			return statusOf(classify(err).typ), true
		}
		return http.StatusOK, false
	}
	body := apiBody{Status: "success", Data: data}
	if lr, ok := data.(listResult); ok {
		body.Data = lr.data
		if lr.truncated {
			body.Warnings = []string{errTruncated.Error()}
		}
	}
	return writeJSON(w, http.StatusOK, body), false
}

// maxFormBody bounds a POST form: far above any PromQL expression or
// match[] list a client sends (query.max_query_length bounds each), far
// below what would cost the server memory.
const maxFormBody = 1 << 20

// apiBody is the API's envelope, its fields in Prometheus's order.
type apiBody struct {
	Status    string   `json:"status"`
	Data      any      `json:"data,omitempty"`
	ErrorType string   `json:"errorType,omitempty"`
	Error     string   `json:"error,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
}

func errorBody(typ, msg string) apiBody {
	return apiBody{Status: "error", ErrorType: typ, Error: msg}
}

func writeJSON(w http.ResponseWriter, code int, body any) int {
	b, err := json.Marshal(body)
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody("internal", "encode response: "+err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
	return code
}

// tenantOf is the tenant the guard resolved (invariant 3 of package
// authn), or, for a request that did not pass it, the header's.
func (h *Handler) tenantOf(r *http.Request) (string, error) {
	if t, ok := authn.TenantOf(r.Context()); ok {
		return t, nil
	}
	if h.cfg.TenantHeader == "" {
		return h.cfg.DefaultTenant, nil
	}
	v := r.Header.Get(h.cfg.TenantHeader)
	if v == "" {
		return h.cfg.DefaultTenant, nil
	}
	if !tenant.Valid(v) {
		return "", fmt.Errorf("invalid tenant %q in header %s: a tenant must match [A-Za-z0-9._-]{1,64}", v, h.cfg.TenantHeader)
	}
	return v, nil
}

// Prometheus's bounds for open time ranges.
var (
	minTime = time.Unix(math.MinInt64/1000+62135596801, 0).UTC()
	maxTime = time.Unix(math.MaxInt64/1000-62135596801, 999999999).UTC()
)

func parseTime(s string) (time.Time, error) {
	if t, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(t) && !math.IsInf(t, 0) {
		sec, frac := math.Modf(t)
		frac = math.Round(frac*1000) / 1000
		return time.Unix(int64(sec), int64(frac*float64(time.Second))).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	switch s {
	case minTime.Format(time.RFC3339Nano):
		return minTime, nil
	case maxTime.Format(time.RFC3339Nano):
		return maxTime, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
}

func parseTimeParam(r *http.Request, name string, def time.Time) (time.Time, error) {
	v := r.Form.Get(name)
	if v == "" {
		return def, nil
	}
	t, err := parseTime(v)
	if err != nil {
		return time.Time{}, badData("invalid parameter %q: %v", name, err)
	}
	return t, nil
}

func parseDuration(s string) (time.Duration, error) {
	if d, err := strconv.ParseFloat(s, 64); err == nil {
		ts := d * float64(time.Second)
		if math.IsNaN(ts) || ts >= float64(math.MaxInt64) || ts < float64(math.MinInt64) {
			return 0, fmt.Errorf("cannot parse %q to a valid duration. It overflows int64", s)
		}
		return time.Duration(ts), nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("cannot parse %q to a valid duration", s)
}

// requestContext applies the server timeout and a lower timeout
// parameter; deadline says which bounds the request, for its error.
func (h *Handler) requestContext(r *http.Request) (ctx context.Context, cancel context.CancelFunc, deadline string, err error) {
	to, deadline := h.cfg.Timeout, "query.timeout"
	if v := r.Form.Get("timeout"); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			return nil, nil, "", fmt.Errorf("invalid parameter \"timeout\": %v", err)
		}
		if d <= 0 {
			// Prometheus 3 refuses it too: it could only be a deadline
			// already past.
			return nil, nil, "", fmt.Errorf("invalid parameter \"timeout\": timeout must be positive, got %s", v)
		}
		if d < to {
			to, deadline = d, "the timeout parameter"
		}
	}
	ctx, cancel = context.WithTimeout(r.Context(), to)
	return ctx, cancel, fmt.Sprintf("%s, %s", to, deadline), nil
}

// queryOpts are the engine options a query request asks for, as
// Prometheus reads them: lookback_delta replaces the server's lookback
// (query.lookback_delta) for this query; 0 or none keeps it. stats=all
// also counts the samples of each step (statsOf).
func queryOpts(r *http.Request) (promql.QueryOpts, error) {
	perStep := r.Form.Get("stats") == statsAll
	v := r.Form.Get("lookback_delta")
	if v == "" && !perStep {
		return nil, nil
	}
	var d time.Duration
	if v != "" {
		var err error
		if d, err = parseDuration(v); err != nil {
			return nil, badData("invalid parameter \"lookback_delta\": %v", err)
		}
		if d < 0 {
			return nil, badData("invalid parameter \"lookback_delta\": %s is negative", v)
		}
	}
	return promql.NewPrometheusQueryOpts(perStep, d, nil), nil
}

// The values of the stats parameter Prometheus 3 knows: any non-empty
// one asks for the query's statistics, "all" adds the samples per step.
const (
	statsTrue = "true"
	statsAll  = "all"
)

// statsOf is the "stats" of a query answer as Prometheus renders it
// (util/stats of the engine: timings, samples), or nil when the request
// has no stats parameter; a value other than "true" or "all" gets
// Prometheus 3's deprecation warning.
func statsOf(r *http.Request, qry promql.Query, ws annotations.Annotations) (promstats.QueryStats, annotations.Annotations) {
	v := r.Form.Get("stats")
	if v == "" {
		return nil, ws
	}
	if v != statsTrue && v != statsAll {
		ws = ws.Add(fmt.Errorf("value %q for parameter \"stats\" is deprecated and will be rejected in the next major release, use %q or %q", v, statsTrue, statsAll))
	}
	return promstats.NewQueryStats(qry.Stats()), ws
}

// queryContext is the request's context (serve set its deadline).
func (h *Handler) queryContext(r *http.Request) (context.Context, context.CancelFunc, error) {
	return r.Context(), func() {}, nil
}

// queryable reads tenant t's lake, charging loaded samples to the
// request's memory budget.
func (h *Handler) queryable(ctx context.Context, t string) storage.Queryable {
	return h.cfg.Adapter.Queryable(t, h.limitsOf(ctx))
}

// limitsOf is the lake limits of a query, charging loaded samples to the
// request's memory budget.
func (h *Handler) limitsOf(ctx context.Context) prom.Limits {
	lim := h.cfg.Limits
	if b := budgetOf(ctx); b != nil {
		lim.Charge = b.charge
	}
	return lim
}

// checkExpr refuses a PromQL expression or selector longer or deeper than
// the limits before the parser sees it.
func (h *Handler) checkExpr(param, q string) error {
	if len(q) > h.cfg.MaxQueryLength {
		h.limits.refused.WithLabelValues("max_query_length").Inc()
		return &apiError{"cost_limit", fmt.Errorf("parameter %q is %d bytes, more than query.max_query_length (%d)", param, len(q), h.cfg.MaxQueryLength)}
	}
	if d := queryDepth(q); d > h.cfg.MaxQueryDepth {
		h.limits.refused.WithLabelValues("max_query_depth").Inc()
		return &apiError{"cost_limit", fmt.Errorf("parameter %q is %d deep (nesting of (), [] and {} plus binary operators), more than query.max_query_depth (%d)", param, d, h.cfg.MaxQueryDepth)}
	}
	return nil
}

func (h *Handler) query(r *http.Request, t string) (any, error) {
	qs := r.Form.Get("query")
	if qs == "" {
		return nil, badData("invalid parameter \"query\": empty query")
	}
	if err := h.checkExpr("query", qs); err != nil {
		return nil, err
	}
	ts, err := parseTimeParam(r, "time", time.Now())
	if err != nil {
		return nil, err
	}
	limit, err := parseLimit(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel, err := h.queryContext(r)
	if err != nil {
		return nil, err
	}
	defer cancel()
	opts, err := queryOpts(r)
	if err != nil {
		return nil, err
	}
	qry, err := h.engine.NewInstantQuery(ctx, h.queryable(ctx, t), opts, qs, ts)
	if err != nil {
		return nil, badData("invalid parameter \"query\": %v", err)
	}
	return h.exec(r, ctx, qry, qs, limit)
}

func (h *Handler) queryRange(r *http.Request, t string) (any, error) {
	qs := r.Form.Get("query")
	if qs == "" {
		return nil, badData("invalid parameter \"query\": empty query")
	}
	if err := h.checkExpr("query", qs); err != nil {
		return nil, err
	}
	for _, p := range []string{"start", "end", "step"} {
		if r.Form.Get(p) == "" {
			return nil, badData("invalid parameter %q: missing", p)
		}
	}
	start, err := parseTimeParam(r, "start", time.Time{})
	if err != nil {
		return nil, err
	}
	end, err := parseTimeParam(r, "end", time.Time{})
	if err != nil {
		return nil, err
	}
	if end.Before(start) {
		return nil, badData("invalid parameter \"end\": end timestamp must not be before start time")
	}
	step, err := parseDuration(r.Form.Get("step"))
	if err != nil {
		return nil, badData("invalid parameter \"step\": %v", err)
	}
	if step <= 0 {
		return nil, badData("invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer")
	}
	if end.Sub(start)/step > time.Duration(h.cfg.MaxPoints) {
		// Prometheus's text, its number grouped as there ("11,000").
		return nil, badData("exceeded maximum resolution of %s points per timeseries. Try decreasing the query resolution (?step=XX)", groupThousands(h.cfg.MaxPoints))
	}
	limit, err := parseLimit(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel, err := h.queryContext(r)
	if err != nil {
		return nil, err
	}
	defer cancel()
	opts, err := queryOpts(r)
	if err != nil {
		return nil, err
	}
	qry, err := h.engine.NewRangeQuery(ctx, h.queryable(ctx, t), opts, qs, start, end, step)
	if err != nil {
		return nil, badData("invalid parameter \"query\": %v", err)
	}
	return h.exec(r, ctx, qry, qs, limit)
}

// formatQuery answers the expression pretty-printed, as Prometheus's
// /api/v1/format_query (Grafana's "Format query"). It parses but reads
// nothing, so it takes no query slot.
func (h *Handler) formatQuery(r *http.Request, _ string) (any, error) {
	qs := r.Form.Get("query")
	if err := h.checkExpr("query", qs); err != nil {
		return nil, err
	}
	expr, err := h.parser.ParseExpr(qs)
	if err != nil {
		return nil, badData("invalid parameter \"query\": %v", err)
	}
	return expr.Pretty(0), nil
}

// exec runs the query; a limit above 0 keeps that many series of a
// vector or matrix, with Prometheus 3's warning when it cuts.
func (h *Handler) exec(r *http.Request, ctx context.Context, qry promql.Query, qs string, limit int) (any, error) {
	// The statement lets the adapter see when selectors are evaluated,
	// which it needs to read rollups (prom.WithStatement).
	res := qry.Exec(prom.WithStatement(ctx, qry.Statement()))
	if res.Err != nil {
		qry.Close()
		var tms promql.ErrTooManySamples
		if errors.As(res.Err, &tms) {
			setting, limit := "query.max_samples", "max_samples"
			if h.engineSamplesFromBytes {
				setting, limit = fmt.Sprintf("query.max_query_bytes %s at %d bytes a sample", byteString(h.cfg.MaxQueryBytes), engineSampleBytes), "max_query_bytes"
			}
			h.limits.refused.WithLabelValues(limit).Inc()
			return nil, &apiError{"cost_limit", fmt.Errorf("%w: the query would hold more samples in memory at once than %s allows; narrow the time range, raise the step or aggregate", res.Err, setting)}
		}
		return nil, res.Err
	}
	if err := ctx.Err(); err != nil {
		qry.Close()
		return nil, err
	}
	cut := false
	switch v := res.Value.(type) {
	case promql.Vector:
		v, cut = truncate(v, limit)
		res.Value = v
	case promql.Matrix:
		v, cut = truncate(v, limit)
		res.Value = v
	}
	if cut {
		res.Warnings = res.Warnings.Add(errTruncated)
	}
	st, ws := statsOf(r, qry, res.Warnings)
	return &promResult{value: res.Value, warnings: ws, stats: st, query: qs, close: qry.Close}, nil
}

func (h *Handler) matcherSets(r *http.Request, required bool) ([][]*labels.Matcher, error) {
	ms := r.Form["match[]"]
	if len(ms) == 0 {
		if required {
			return nil, badData("no match[] parameter provided")
		}
		return [][]*labels.Matcher{nil}, nil
	}
	for _, m := range ms {
		if err := h.checkExpr("match[]", m); err != nil {
			return nil, err
		}
	}
	sets, err := h.parser.ParseMetricSelectors(ms)
	if err != nil {
		return nil, badData("invalid parameter \"match[]\": %v", err)
	}
	for _, s := range sets {
		empty := true
		for _, m := range s {
			if !m.Matches("") {
				empty = false
				break
			}
		}
		if empty {
			return nil, badData("match[] must contain at least one non-empty matcher")
		}
	}
	return sets, nil
}

// timeRange reads start and end (default: everything) as milliseconds.
// An end before start is an empty range, not an error: Prometheus's
// series, labels and label values answer it with an empty list.
func timeRange(r *http.Request) (int64, int64, error) {
	start, err := parseTimeParam(r, "start", minTime)
	if err != nil {
		return 0, 0, err
	}
	end, err := parseTimeParam(r, "end", maxTime)
	if err != nil {
		return 0, 0, err
	}
	return start.UnixMilli(), end.UnixMilli(), nil
}

// groupThousands writes n with a comma between groups of three digits.
func groupThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func parseLimit(r *http.Request) (int, error) {
	v := r.Form.Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badData("invalid parameter \"limit\": %q is not a non-negative integer", v)
	}
	return n, nil
}

func (h *Handler) series(r *http.Request, t string) (any, error) {
	m, err := h.openMeta(r, t, true)
	if err != nil {
		return nil, err
	}
	defer m.close()
	// One scan for all match[] sets: their union, in label order (as
	// Prometheus merges them), so that a limit keeps the same series.
	all, err := m.q.SeriesOf(m.ctx, m.sets)
	if err != nil {
		return nil, err
	}
	if b := budgetOf(m.ctx); b != nil {
		for _, l := range all {
			// A label map and its JSON: about three times the strings.
			if err := b.charge(3 * int64(l.ByteSize()+64)); err != nil {
				return nil, err
			}
		}
	}
	all, truncated := truncate(all, m.limit)
	out := make([]map[string]string, len(all))
	for i, l := range all {
		out[i] = l.Map()
	}
	return listResult{out, truncated}, nil
}

// listResult is a list answer and whether the request's limit cut it:
// then it carries Prometheus's warning "results truncated due to limit".
type listResult struct {
	data      any
	truncated bool
}

var errTruncated = errors.New("results truncated due to limit")

func truncate[T any](s []T, limit int) ([]T, bool) {
	if limit > 0 && len(s) > limit {
		return s[:limit], true
	}
	return s, false
}

// metaQuery is what the series and label endpoints share: their match[]
// sets, time range and limit, and a querier under the request's context.
type metaQuery struct {
	sets       [][]*labels.Matcher
	mint, maxt int64
	limit      int
	ctx        context.Context
	q          *prom.Querier
	cancel     context.CancelFunc
}

func (m *metaQuery) close() {
	m.q.Close()
	m.cancel()
}

// openMeta parses the request's match[] (required when needMatch), start,
// end and limit, and opens a querier of tenant t over that range.
func (h *Handler) openMeta(r *http.Request, t string, needMatch bool) (*metaQuery, error) {
	m := &metaQuery{}
	var err error
	if m.sets, err = h.matcherSets(r, needMatch); err != nil {
		return nil, err
	}
	if m.mint, m.maxt, err = timeRange(r); err != nil {
		return nil, err
	}
	if m.maxt < m.mint {
		m.sets = nil // an empty range selects nothing
	}
	if m.limit, err = parseLimit(r); err != nil {
		return nil, err
	}
	if m.ctx, m.cancel, err = h.queryContext(r); err != nil {
		return nil, err
	}
	m.q = h.cfg.Adapter.Querier(t, h.limitsOf(m.ctx), m.mint, m.maxt)
	return m, nil
}

func (h *Handler) labelNames(r *http.Request, t string) (any, error) {
	return h.labelQuery(r, t, func(m *metaQuery) ([]string, error) { return m.q.LabelNamesOf(m.ctx, m.sets) })
}

func (h *Handler) labelValues(r *http.Request, t string) (any, error) {
	name := r.PathValue("name")
	if strings.HasPrefix(name, "U__") {
		name = model.UnescapeName(name, model.ValueEncodingEscaping)
	}
	if !model.UTF8Validation.IsValidLabelName(name) {
		return nil, badData("invalid label name: %q", name)
	}
	return h.labelQuery(r, t, func(m *metaQuery) ([]string, error) { return m.q.LabelValuesOf(m.ctx, name, m.sets) })
}

// labelQuery answers labels or label values: f reads the names or values
// (sorted) of the union of the request's match[] sets in one scan.
func (h *Handler) labelQuery(r *http.Request, t string, f func(*metaQuery) ([]string, error)) (any, error) {
	m, err := h.openMeta(r, t, false)
	if err != nil {
		return nil, err
	}
	defer m.close()
	out, err := f(m)
	if err != nil {
		return nil, err
	}
	out, truncated := truncate(out, m.limit)
	return listResult{out, truncated}, nil
}

// metadata answers /api/v1/metadata with Prometheus's parameters and
// their meaning there: limit caps the metrics (0 lists none, a negative
// one or none at all every one), limit_per_metric the entries of each
// (0 or negative: all).
func (h *Handler) metadata(r *http.Request, t string) (any, error) {
	limit, perMetric := -1, -1
	for _, p := range []struct {
		name string
		v    *int
	}{{"limit", &limit}, {"limit_per_metric", &perMetric}} {
		if s := r.Form.Get(p.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return nil, badData("invalid parameter %q: %q is not a number", p.name, s)
			}
			*p.v = n
		}
	}
	ctx, cancel, err := h.queryContext(r)
	if err != nil {
		return nil, err
	}
	defer cancel()
	md, err := h.cfg.Adapter.Metadata(ctx, t, r.Form.Get("metric"))
	if err != nil {
		return nil, err
	}
	out := map[string][]map[string]string{}
	for _, m := range md {
		es, listed := out[m.Name]
		if !listed && limit >= 0 && len(out) >= limit || perMetric > 0 && len(es) >= perMetric {
			continue
		}
		out[m.Name] = append(es, map[string]string{"type": m.Type, "help": m.Help, "unit": m.Unit})
	}
	return out, nil
}
