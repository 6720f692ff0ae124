package prwreceiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/stats"
)

// Path is where remote write is served, as Prometheus serves it.
const Path = "/api/v1/write"

// Transport names remote write in otlpreceiver.Request.Transport.
const Transport = "prometheus_remote_write"

// Content types of the two protocol versions.
const (
	ProtoV1 = "prometheus.WriteRequest"
	ProtoV2 = "io.prometheus.write.v2.Request"
)

// contentTypeV2 is the Content-Type of Prometheus's 2.0 sender.
const contentTypeV2 = "application/x-protobuf;proto=" + ProtoV2

// Response headers of 2.0.
const (
	HeaderSamples    = "X-Prometheus-Remote-Write-Samples-Written"
	HeaderHistograms = "X-Prometheus-Remote-Write-Histograms-Written"
	HeaderExemplars  = "X-Prometheus-Remote-Write-Exemplars-Written"
)

// Config of the handler.
type Config struct {
	// MaxRequestBytes bounds the body, compressed and snappy-decoded
	// (receivers.prometheus_remote_write.max_request_bytes).
	MaxRequestBytes int64
	// MaxConcurrentRequests bounds requests read and processed at once.
	MaxConcurrentRequests int
	// DefaultTenant is used when no guard put a tenant in the context.
	DefaultTenant string
	// LakeFutureSkew, when above 0, says the requests go to the lake,
	// whose max_future_skew it is: a series with a sample or histogram
	// further ahead of the clock than this is refused (prw.LakeMaxTime;
	// 400 naming it, the other series written), since the lake would file
	// it by its arrival, where queries do not find it. 0 (a forward-only
	// relay) takes every time the lake could store.
	LakeFutureSkew time.Duration
	Logger         *slog.Logger
	Registerer     prometheus.Registerer
}

// Defaults of Config.
const (
	DefaultMaxRequestBytes       = 16 << 20
	DefaultMaxConcurrentRequests = 8
)

// Handler serves remote write. Create it with New.
type Handler struct {
	cfg   Config
	cons  otlpreceiver.Consumer
	slots chan struct{}
	pool  sync.Pool // *exchange
	m     metrics
	// scanner is cons when it can take a request without its batch.
	scanner ScanTaker
	// meta is cons when it keeps metadata sent without series.
	meta MetadataTaker
}

// ScanTaker is a Consumer that can take a remote-write request without
// its batch (otlpreceiver.Request.Scanned). TakesScanned reports whether
// it does now: nothing it would run on the request (processing rules)
// needs the batch. The receiver asks before each request; a consumer that
// changed its mind since decodes the body itself.
type ScanTaker interface {
	TakesScanned() bool
}

// MetadataTaker is a Consumer that keeps (and forwards) the metric family
// metadata of remote write 1.0 requests without samples: Prometheus sends
// its targets' metadata (type, help, unit) on its own, apart from their
// series. The metadata of 2.0 series without a sample, histogram or
// exemplar comes the same way, as a 1.0 request of it
// (prw.Decoder.MetadataOnlyV1). TakeMetadata gets such a request, raw as received (snappy) and
// body snappy-decoded and valid (it decoded without error), before the
// answer; an error fails the request as a Consume error would.
type MetadataTaker interface {
	TakeMetadata(ctx context.Context, tenant string, raw, body []byte) error
}

// exchange is the per-request state, pooled.
type exchange struct {
	raw, body, rec []byte
	mraw           []byte // 2.0 metadata without points, as a 1.0 request (snappy)
	batch          signal.Metrics
	dec            prw.Decoder
	req            otlpreceiver.Request
	scan           prw.Scanner
	scanned        otlpreceiver.Scanned
	labels         []prw.Label
}

// seriesLabels is the statistics' view of the scanned series' labels.
func (x *exchange) seriesLabels(i int, dst []stats.Label) []stats.Label {
	x.labels = x.scan.Labels(i, x.labels[:0])
	for _, l := range x.labels {
		dst = append(dst, stats.Label{Name: l.Name, Value: l.Value})
	}
	return dst
}

// maxPooled keeps one huge request from pinning its buffers in the pool.
const maxPooled = 8 << 20

type metrics struct {
	requests *prometheus.CounterVec // version, code
	written  *prometheus.CounterVec // version, what
	invalid  *prometheus.CounterVec // version
	// 2.0 start (created) timestamps at or after their sample's time,
	// stored as none (prw.Stats.StartsIgnored)
	startsIgnored prometheus.Counter
	collectors    []prometheus.Collector
	// Resolved once: requests{1.0|2.0, 204} and written{1.0|2.0, samples}.
	ok1, samples1, ok2, samples2 prometheus.Counter
}

func newMetrics() metrics {
	m := metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_prw_requests_total",
			Help: "Remote-write requests by protocol version (1.0, 2.0, unknown) and HTTP status code."}, []string{"version", "code"}),
		written: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_prw_written_total",
			Help: "Remote-write samples, histograms and exemplars acknowledged (durable in the queue), by protocol version."}, []string{"version", "what"}),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_prw_invalid_series_total",
			Help: "Remote-write series dropped for invalid data (no __name__, empty or duplicate label name, histogram count not matching its buckets, ...); the request is answered 400."}, []string{"version"}),
		startsIgnored: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_prw_start_timestamps_ignored_total",
			Help: "Remote-write 2.0 start (created) timestamps at or after their sample's or histogram's time, in acknowledged requests: the point is written without a start time, as Prometheus ignores them."}),
	}
	m.collectors = []prometheus.Collector{m.requests, m.written, m.invalid, m.startsIgnored}
	m.ok1 = m.requests.WithLabelValues("1.0", strconv.Itoa(http.StatusNoContent))
	m.samples1 = m.written.WithLabelValues("1.0", "samples")
	m.ok2 = m.requests.WithLabelValues("2.0", strconv.Itoa(http.StatusNoContent))
	m.samples2 = m.written.WithLabelValues("2.0", "samples")
	// The scan's answers count no histograms or exemplars: the series
	// exist from the start, at 0, as after a decoded request.
	for _, v := range []string{"1.0", "2.0"} {
		m.written.WithLabelValues(v, "histograms")
		m.written.WithLabelValues(v, "exemplars")
	}
	return m
}

// New returns a handler handing decoded batches to c.
func New(cfg Config, c otlpreceiver.Consumer) (*Handler, error) {
	if c == nil {
		return nil, errors.New("prwreceiver: no consumer")
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxConcurrentRequests <= 0 {
		cfg.MaxConcurrentRequests = DefaultMaxConcurrentRequests
	}
	if cfg.DefaultTenant == "" {
		cfg.DefaultTenant = otlpreceiver.DefaultTenantName
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{cfg: cfg, cons: c, slots: make(chan struct{}, cfg.MaxConcurrentRequests), m: newMetrics()}
	h.scanner, _ = c.(ScanTaker)
	h.meta, _ = c.(MetadataTaker)
	h.pool.New = func() any {
		x := new(exchange)
		x.scanned.Series.Labels = x.seriesLabels
		// The scan's ids go to the live statistics only (the lake loop
		// scans the body it is handed itself): label-set keys suffice.
		x.scan.LabelKeys = true
		return x
	}
	if cfg.Registerer != nil {
		for _, col := range h.m.collectors {
			if err := cfg.Registerer.Register(col); err != nil {
				return nil, fmt.Errorf("prwreceiver: register metrics: %w", err)
			}
		}
	}
	return h, nil
}

// version parses Content-Type; "" means unsupported.
func version(ct string) string {
	if ct == "" || ct == "application/x-protobuf" {
		return "1.0" // as Prometheus's own handler: 1.0 senders may omit it
	}
	if ct == contentTypeV2 {
		return "2.0" // as Prometheus's 2.0 sender writes it: no media type parse (a map) per request
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/x-protobuf" {
		return ""
	}
	switch params["proto"] {
	case "", ProtoV1:
		return "1.0"
	case ProtoV2:
		return "2.0"
	}
	return ""
}

// ServeHTTP implements http.Handler. The tenant is the one a guard put in
// the request's context (authn.TenantOf), else Config.DefaultTenant.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tenant, ok := authn.TenantOf(r.Context())
	if !ok {
		tenant = h.cfg.DefaultTenant
	}
	h.serveTenant(w, r, tenant)
}

// serveTenant serves r for tenant.
func (h *Handler) serveTenant(w http.ResponseWriter, r *http.Request, tenant string) {
	ver := version(r.Header.Get("Content-Type"))
	code := h.serve(w, r, ver, tenant)
	if code == http.StatusNoContent {
		switch ver { // the usual answer, without the label lookup
		case "1.0":
			h.m.ok1.Inc()
			return
		case "2.0":
			h.m.ok2.Inc()
			return
		}
	}
	if ver == "" {
		ver = "unknown"
	}
	h.m.requests.WithLabelValues(ver, strconv.Itoa(code)).Inc()
}

func fail(w http.ResponseWriter, code int, retryAfter time.Duration, format string, a ...any) int {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((retryAfter+time.Second-1)/time.Second)))
	}
	http.Error(w, fmt.Sprintf(format, a...), code)
	return code
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, ver, tenant string) int {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return fail(w, http.StatusMethodNotAllowed, 0, "remote write takes POST")
	}
	if ver == "" {
		return fail(w, http.StatusUnsupportedMediaType, 0, "unsupported Content-Type %q: want application/x-protobuf (remote write 1.0) or application/x-protobuf;proto=%s (2.0)",
			r.Header.Get("Content-Type"), ProtoV2)
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "snappy") {
		return fail(w, http.StatusUnsupportedMediaType, 0, "unsupported Content-Encoding %q: remote write is snappy-encoded", enc)
	}
	if ver == "2.0" {
		// Every 2.0 answer from here on counts what was written, "with
		// success or failure" (the specification): 0 until a write, so
		// a malformed, too large or refused request says so too.
		hd := w.Header()
		hd[HeaderSamples], hd[HeaderHistograms], hd[HeaderExemplars] = zeroHeader, zeroHeader, zeroHeader
	}
	select {
	case h.slots <- struct{}{}:
	case <-r.Context().Done():
		return fail(w, http.StatusServiceUnavailable, time.Second, "request cancelled while waiting for a slot")
	}
	defer func() { <-h.slots }()
	x := h.pool.Get().(*exchange)
	defer h.put(x)

	limit := h.cfg.MaxRequestBytes
	if n := r.ContentLength; n > int64(cap(x.raw)) && n <= limit {
		// One buffer of the announced size rather than doubling up to it
		// (a pooled exchange is new again after the collector emptied
		// the pool); the limit still bounds what is read.
		x.raw = make([]byte, 0, n)
	}
	var err error
	x.raw, err = readAtMost(x.raw[:0], r.Body, limit)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return fail(w, http.StatusRequestEntityTooLarge, 0, "request body larger than %d bytes (receivers.prometheus_remote_write.max_request_bytes)", limit)
		}
		return fail(w, http.StatusBadRequest, 0, "read body: %v", err)
	}
	if len(x.raw) == 0 {
		return fail(w, http.StatusBadRequest, 0, "empty body: want a snappy-encoded remote-write request")
	}
	n, err := snappy.DecodedLen(x.raw)
	if err != nil {
		return fail(w, http.StatusBadRequest, 0, "snappy: %v", err)
	}
	if int64(n) > limit {
		return fail(w, http.StatusRequestEntityTooLarge, 0, "decoded body of %d bytes is larger than %d bytes (receivers.prometheus_remote_write.max_request_bytes)", n, limit)
	}
	if cap(x.body) < n {
		x.body = make([]byte, n)
	}
	if x.body, err = snappy.Decode(x.body[:n], x.raw); err != nil {
		return fail(w, http.StatusBadRequest, 0, "snappy: %v", err)
	}

	if h.cfg.LakeFutureSkew > 0 {
		x.scan.MaxTime = prw.LakeMaxTime(time.Now(), h.cfg.LakeFutureSkew)
		x.dec.MaxTime = x.scan.MaxTime
	}
	if h.scanner != nil && h.scanner.TakesScanned() {
		if ver == "1.0" && x.scan.ScanV1(x.body) {
			return h.consumeScanned(w, r, x, tenant, 1)
		}
		if ver == "2.0" && x.scan.ScanV2(x.body) {
			return h.consumeScanned(w, r, x, tenant, 2)
		}
	}
	x.batch.Reset()
	var st prw.Stats
	if ver == "1.0" {
		st, err = x.dec.DecodeV1(&x.batch, x.body)
	} else {
		st, err = x.dec.DecodeV2(&x.batch, x.body)
	}
	var partial *prw.PartialError
	if err != nil && !errors.As(err, &partial) {
		h.m.invalid.WithLabelValues(ver).Inc()
		return fail(w, http.StatusBadRequest, 0, "%v", err)
	}
	if ver == "2.0" && h.meta != nil {
		// Series with metadata and no point: the batch cannot carry it,
		// so it is kept as 1.0 metadata sent on its own is (before the
		// series, which it may describe).
		if mo := x.dec.MetadataOnlyV1(); len(mo) > 0 {
			x.mraw = snappy.Encode(x.mraw[:cap(x.mraw)], mo)
			if err := h.meta.TakeMetadata(r.Context(), tenant, x.mraw, mo); err != nil {
				return h.consumeFailed(w, err)
			}
		}
	}
	if x.batch.Len() > 0 {
		req := &x.req // pooled: a Request on the stack would escape through the interface call
		*req = otlpreceiver.Request{Tenant: tenant, Kind: signal.KindMetrics, Body: x.raw, Transport: Transport, Metrics: &x.batch, RemoteWrite: 1}
		if ver == "2.0" {
			req.RemoteWrite = 2
		}
		if partial != nil || st.Unsorted > 0 {
			// The body holds series the decoder refused, or labels out
			// of order (a relay forwards the body as it is, and
			// receivers downstream may refuse or mis-key unsorted
			// labels): hand over the good series, sorted, as OTLP.
			x.rec = otlp.AppendMetricsProto(x.rec[:0], &x.batch)
			req.Body, req.RemoteWrite = x.rec, 0
		}
		res, cerr := h.cons.Consume(r.Context(), req)
		*req = otlpreceiver.Request{}
		if cerr != nil {
			return h.consumeFailed(w, cerr)
		}
		st.Samples, st.Histograms = notRefused(st.Samples, st.Histograms, res.RejectedRecords)
	} else if ver == "1.0" && h.meta != nil {
		// A partial write (an entry without a family name) keeps the
		// good entries, as it keeps good series, and answers 400 below.
		if err := h.meta.TakeMetadata(r.Context(), tenant, x.raw, x.body); err != nil {
			return h.consumeFailed(w, err)
		}
	}
	h.m.written.WithLabelValues(ver, "samples").Add(float64(st.Samples))
	h.m.written.WithLabelValues(ver, "histograms").Add(float64(st.Histograms))
	h.m.written.WithLabelValues(ver, "exemplars").Add(float64(st.Exemplars))
	h.m.startsIgnored.Add(float64(st.StartsIgnored))
	if ver == "2.0" {
		w.Header().Set(HeaderSamples, strconv.Itoa(st.Samples))
		w.Header().Set(HeaderHistograms, strconv.Itoa(st.Histograms))
		w.Header().Set(HeaderExemplars, strconv.Itoa(st.Exemplars))
	}
	if partial != nil {
		h.m.invalid.WithLabelValues(ver).Add(float64(partial.Dropped))
		return fail(w, http.StatusBadRequest, 0, "%v (the other series were written)", partial)
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// consumeScanned hands over a request of remote write version rw (1 or 2)
// the scan found plain (valid, float samples only) without its batch: the
// consumer queues the body as received and counts the scan's samples.
func (h *Handler) consumeScanned(w http.ResponseWriter, r *http.Request, x *exchange, tenant string, rw uint8) int {
	sc := &x.scan
	n := sc.Samples()
	if n > 0 {
		x.scanned.Points, x.scanned.NumSeries, x.scanned.Attrs, x.scanned.MaxAttrs = n, sc.Series, sc.Attrs, sc.MaxAttrs
		ss := &x.scanned.Series
		ss.Names, ss.NameHash, ss.Name, ss.ID, ss.Time = sc.Names, sc.NameHashes(), sc.Name, sc.ID, sc.Time
		x.scanned.Decoded = x.body // lent: the consumer may keep it for the lake loop
		req := &x.req
		*req = otlpreceiver.Request{Tenant: tenant, Kind: signal.KindMetrics, Body: x.raw, Transport: Transport, RemoteWrite: rw, Scanned: &x.scanned}
		res, cerr := h.cons.Consume(r.Context(), req)
		*req = otlpreceiver.Request{}
		// The same buffer, or another one in place of one the consumer
		// kept (never written again here).
		x.body, x.scanned.Decoded = x.scanned.Decoded, nil
		ss.Names, ss.NameHash, ss.Name, ss.ID, ss.Time = nil, nil, nil, nil, nil // they alias the exchange's buffers
		if cerr != nil {
			return h.consumeFailed(w, cerr)
		}
		n, _ = notRefused(n, 0, res.RejectedRecords)
	}
	if rw == 1 {
		h.m.samples1.Add(float64(n))
	} else {
		h.m.samples2.Add(float64(n))
		h.m.startsIgnored.Add(float64(sc.StartsIgnored))
		w.Header().Set(HeaderSamples, strconv.Itoa(n)) // histograms and exemplars: 0, set in serve
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// notRefused is what was written of samples and histograms when the
// consumer's processing rules refused refused of their points (a limit or
// require rule: the answer stays a success, as remote write has no partial
// success, but the 2.0 written counts tell the sender). The consumer counts
// points, not kinds: the refused are taken from the samples first.
func notRefused(samples, histograms int, refused int64) (int, int) {
	r := int(min(refused, int64(samples+histograms)))
	fromSamples := min(r, samples)
	return samples - fromSamples, histograms - (r - fromSamples)
}

// zeroHeader is the value of a 2.0 answer's counts until something is
// written, shared by every answer: net/http only reads it (an Add would
// reallocate it, its capacity being its length; a Set replaces it).
var zeroHeader = []string{"0"}

// consumeFailed answers a Consumer error as the OTLP receiver does
// (otlpreceiver.HTTPStatus), except that backpressure (the queue or the
// disk full) is a 503, not a 429: Prometheus's sender drops a batch
// answered 429 unless retry_on_http_429 is set (it is off by default, in
// 2.x and 3.x alike) and retries every 5xx, honouring Retry-After. It
// logs a failure that is the server's own.
func (h *Handler) consumeFailed(w http.ResponseWriter, err error) int {
	code, retry := otlpreceiver.HTTPStatus(err)
	if code == http.StatusTooManyRequests {
		return fail(w, http.StatusServiceUnavailable, retry, "%v", err)
	}
	if code == http.StatusServiceUnavailable && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		h.cfg.Logger.Warn("remote write: consumer failed", "err", err)
	}
	return fail(w, code, retry, "%v", err)
}

func (h *Handler) put(x *exchange) {
	if cap(x.raw) > maxPooled || cap(x.body) > maxPooled || cap(x.rec) > maxPooled || cap(x.mraw) > maxPooled || cap(x.batch.Buf) > maxPooled {
		return
	}
	h.pool.Put(x)
}

var errTooLarge = errors.New("body too large")

// readAtMost reads r into dst, failing once it holds more than limit bytes.
func readAtMost(dst []byte, r io.Reader, limit int64) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if int64(len(dst)) > limit {
			return dst, errTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}
