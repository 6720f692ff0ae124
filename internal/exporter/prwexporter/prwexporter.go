package prwexporter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/version"
)

// maxSeriesPerRequest bounds one WriteRequest (Prometheus's own sender
// defaults to 2000 samples per request).
const maxSeriesPerRequest = 2000

// Config of a remote-write exporter.
type Config struct {
	Endpoints    []string // full push URLs
	Protocol     string   // "1.0" or "2.0" (falls back to 1.0 per endpoint on 415)
	Shard        bool     // shard series over the endpoints; else replicate
	TenantHeader string
	Headers      map[string]string
	Timeout      time.Duration
	Policy       sending.Policy
	// TLS is the client TLS of https:// endpoints (nil: the system's
	// roots, no client certificate).
	TLS *tls.Config
	// CAFile is the file TLS.RootCAs came from (tls.ca_file): read again
	// when it changes on disk, for new connections.
	CAFile string
	// Only, when set, is the one of Endpoints this exporter delivers to:
	// under Shard its share of the series (the ring still spans every
	// endpoint, so a series maps to the same one as without Only), else
	// everything. The other endpoints are left to exporters of their own
	// (the pipeline runs one per endpoint, each on a cursor of its own,
	// so that an endpoint that is down holds back none of the others).
	// Endpoints() is then this one only.
	Only string
	// SendNativeHistograms sends native histograms over 1.0 too
	// (prometheus.WriteRequest.histograms); without it 1.0 drops and
	// counts them. 2.0 always carries them.
	SendNativeHistograms bool
	// NoMetadata leaves out metric metadata (1.0: per metric family and
	// request; 2.0: per series). Zero value: metadata is sent, as
	// Prometheus's send_metadata defaults to true.
	NoMetadata bool
	// Families remembers metadata sent without series, for the series
	// of later requests; nil: a table of the default bound.
	Families *prw.FamilyTable
	// Concurrency is the requests in flight per endpoint (lanes): above
	// 1, each batch's series are split by the hash of their labels into
	// up to Concurrency lanes per endpoint, sent at once (a series always
	// in the same lane, so its samples never overtake each other).
	// Remote-write records are split as received (split.go: series bytes
	// copied, 2.0 symbols rewritten per lane), OTLP records on the convert
	// path; 0 or 1: one request per endpoint at a time.
	Concurrency int
}

// Exporter is an exporter.Sender for remote write.
type Exporter struct {
	cfg  Config
	eps  []*sending.Endpoint
	ring *sending.Ring
	hc   *http.Client
	cv   converter
	m    signal.Metrics
	dec  prw.Decoder // remote-write records on the convert path
	// fam remembers the families' metadata remote-write senders sent in
	// requests of their own, for the series of later requests (the
	// convert path puts metadata on each 2.0 series).
	fam *prw.FamilyTable
	// blocks are the snappy bodies of the records sendMerged joins, and
	// joined their request (reused, as mPayload: the payload of a request
	// is not used after Send returns).
	blocks [][]byte
	joined []byte
	// The symbols, series, one rewritten series and the snappy payload of
	// the 2.0 records sendMergedV2 merges.
	mSyms, mSeries, mTS, mPayload []byte
	// unsnap is the snappy-decoded body of the record at hand (records
	// hold remote write as received)
	unsnap []byte
	// split cuts pass-through records by series for lanes and shard mode
	// (split.go), made on first use.
	split *splitter

	useV1 []*atomic.Bool // per endpoint: 1.0 configured, or 2.0 answered 415
	only  int            // index of Config.Only in eps; -1: every endpoint

	droppedPoints, badBodies, sentSeries, fallbacks, trimmedExemplars atomic.Uint64
}

// TrimmedExemplars counts exemplars whose labels passed 128 runes and
// were cut to trace_id and span_id (for /metrics).
func (e *Exporter) TrimmedExemplars() uint64 { return e.trimmedExemplars.Load() }

// Fallbacks counts endpoints that answered 415 to 2.0 and now get 1.0.
func (e *Exporter) Fallbacks() uint64 { return e.fallbacks.Load() }

// New validates cfg.
func New(cfg Config) (*Exporter, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("prwexporter: no endpoints")
	}
	if cfg.Protocol != "" && cfg.Protocol != "1.0" && cfg.Protocol != "2.0" {
		return nil, fmt.Errorf("prwexporter: protocol %q: want 1.0 or 2.0", cfg.Protocol)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	// The transport copies a request's body to the connection through
	// its write buffer, one write per buffer: 4 KiB by default is 25
	// system calls for a 100 KiB pass-through request (7% of a relay's
	// CPU at 1,500 samples per request). Past the first buffer the
	// connection writes the rest in one call (bodyConn).
	rt, _, err := sending.HTTPTransport(cfg.TLS, cfg.CAFile, func(tc *tls.Config) *http.Transport {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.WriteBufferSize = 64 << 10
		tr.DialContext = dialBodyConn()
		tr.TLSClientConfig = tc
		return tr
	})
	if err != nil {
		return nil, fmt.Errorf("prwexporter: tls ca_file: %w", err)
	}
	e := &Exporter{cfg: cfg, hc: &http.Client{Timeout: cfg.Timeout, Transport: rt, CheckRedirect: sending.PostRedirect}, ring: sending.NewRing(cfg.Endpoints),
		fam: cfg.Families}
	if e.fam == nil {
		e.fam = prw.NewFamilyTable(0)
	}
	if cfg.Concurrency < 0 {
		return nil, fmt.Errorf("prwexporter: concurrency %d: want 1 or more", cfg.Concurrency)
	}
	for _, u := range cfg.Endpoints {
		e.eps = append(e.eps, sending.NewEndpoint(u, cfg.Policy))
		var v1 atomic.Bool
		v1.Store(cfg.Protocol != "2.0")
		e.useV1 = append(e.useV1, &v1)
	}
	e.only = -1
	if cfg.Only != "" {
		if e.only = slices.Index(cfg.Endpoints, cfg.Only); e.only < 0 {
			return nil, fmt.Errorf("prwexporter: only %q is not one of the endpoints", cfg.Only)
		}
	}
	return e, nil
}

// encodeOpts are the request options of the configuration.
func (e *Exporter) encodeOpts() encodeOpts {
	return encodeOpts{native: e.cfg.SendNativeHistograms, metadata: !e.cfg.NoMetadata}
}

// lanes is the requests in flight per endpoint a batch is split into.
func (e *Exporter) lanes() int { return max(e.cfg.Concurrency, 1) }

// laneOf is the lane of a series of label hash h among n: a mix of h,
// independent of the ring's pick of an endpoint by h in shard mode.
func laneOf(h uint64, n int) int {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return int(h % uint64(n))
}

// Endpoints implements exporter.Sender.
func (e *Exporter) Endpoints() []*sending.Endpoint {
	if e.only >= 0 {
		return e.eps[e.only : e.only+1]
	}
	return e.eps
}

// others reports an endpoint this exporter leaves to another (Config.Only).
func (e *Exporter) others(k int) bool { return e.only >= 0 && k != e.only }

// Stats: points remote write 1.0 cannot carry (delta sums and histograms,
// unknown types), metric bodies that do not decode, series sent.
func (e *Exporter) Stats() (droppedPoints, badBodies, sentSeries uint64) {
	return e.droppedPoints.Load(), e.badBodies.Load(), e.sentSeries.Load()
}

// DroppedPoints reports points remote write 1.0 cannot carry and metric
// bodies that did not decode (for /metrics).
func (e *Exporter) DroppedPoints() (unsupported, badBodies uint64) {
	return e.droppedPoints.Load(), e.badBodies.Load()
}

// seriesHash hashes a series' sorted labels.
func seriesHash(ls []prompb.Label) uint64 {
	d := xxhash.New()
	for _, l := range ls {
		d.WriteString(l.Name)
		d.Write([]byte{0xff})
		d.WriteString(l.Value)
		d.Write([]byte{0xff})
	}
	return d.Sum64()
}

// Send implements exporter.Sender. Records of one tenant are sent
// together, in queue order; non-metrics records are ignored. A
// remote-write record of the protocol the exporter speaks is passed
// through (passThrough); the others are decoded and converted.
func (e *Exporter) Send(ctx context.Context, recs []exporter.Record) error {
	// One batch for the whole call: records decode one after another into
	// it and the series' label values alias its arena (no copy per label),
	// so it is reset only here, after the previous call's series were sent.
	e.m.Reset()
	for i := 0; i < len(recs); {
		tenant := recs[i].Tenant
		j := i
		for ; j < len(recs) && recs[j].Tenant == tenant; j++ {
		}
		// Runs of pass-through and converted records, sent in order so
		// that a series' samples never overtake each other.
		for k := i; k < j; {
			pass := e.passThrough(&recs[k])
			l := k + 1
			for ; l < j && e.passThrough(&recs[l]) == pass; l++ {
			}
			var err error
			if pass {
				err = e.sendRaw(ctx, tenant, recs[k:l])
			} else {
				err = e.sendConverted(ctx, tenant, recs[k:l])
			}
			if err != nil {
				return err
			}
			k = l
		}
		i = j
	}
	return nil
}

// sendConverted decodes recs (OTLP or remote write) and sends their series.
func (e *Exporter) sendConverted(ctx context.Context, tenant string, recs []exporter.Record) error {
	e.cv.reset()
	for j := range recs {
		if recs[j].Kind != signal.KindMetrics {
			continue
		}
		from := e.m.Len()
		if err := e.decode(&recs[j]); err != nil {
			e.badBodies.Add(1) // a failed decode leaves the batch as it was
			continue
		}
		e.cv.dropped = 0
		e.cv.fromRW = recs[j].RemoteWrite != 0
		e.cv.add(&e.m, from)
		e.droppedPoints.Add(e.cv.dropped)
		e.badBodies.Add(e.cv.badExemplars) // an exemplar is part of its body
		e.trimmedExemplars.Add(e.cv.trimmedExemplars)
		e.cv.badExemplars, e.cv.trimmedExemplars = 0, 0
	}
	e.cv.inTimeOrder()
	return e.sendSeries(ctx, tenant, e.cv.series, e.cv.meta)
}

// decode appends a record's metrics to e.m. Remote-write series without
// metadata get their family's from e.fam, which learns what 1.0 requests
// carry (Prometheus sends metadata in requests without series).
func (e *Exporter) decode(r *exporter.Record) error {
	switch r.RemoteWrite {
	case 0:
		return otlp.DecodeMetrics(&e.m, r.Body)
	case 1, 2:
		var err error
		if e.unsnap, err = prw.Unsnappy(e.unsnap, r.Body); err != nil {
			return err
		}
		from := len(e.m.Descs)
		if r.RemoteWrite == 1 {
			_, err = e.dec.DecodeV1(&e.m, e.unsnap)
			e.fam.LearnV1(r.Tenant, e.unsnap)
		} else {
			_, err = e.dec.DecodeV2(&e.m, e.unsnap)
		}
		var pe *prw.PartialError
		if errors.As(err, &pe) {
			err = nil // the receiver queued it: keep its good series, as it did
		}
		if err == nil && !e.cfg.NoMetadata {
			e.fam.Describe(r.Tenant, &e.m, from)
		}
		return err
	}
	return fmt.Errorf("remote-write version %d", r.RemoteWrite)
}

// sendSeries sends series (meta: each one's 2.0 metadata and protocol
// version) to the endpoints, sharded or replicated.
func (e *Exporter) sendSeries(ctx context.Context, tenant string, series []prompb.TimeSeries, meta []seriesMeta) error {
	if len(series) == 0 {
		return nil
	}
	// Each endpoint's series, split into lanes: per[k][l] is lane l of
	// endpoint k. One lane unless Concurrency is above 1.
	nl := e.lanes()
	per := make([][][]prompb.TimeSeries, len(e.eps))
	perMeta := make([][][]seriesMeta, len(e.eps))
	for k := range per {
		per[k], perMeta[k] = make([][]prompb.TimeSeries, nl), make([][]seriesMeta, nl)
	}
	shard := e.cfg.Shard && len(e.eps) > 1
	if !shard && nl == 1 {
		for k := range per {
			per[k][0], perMeta[k][0] = series, meta
		}
	} else {
		for i, s := range series {
			h := seriesHash(s.Labels)
			l := 0
			if nl > 1 {
				l = laneOf(h, nl)
			}
			if shard {
				k := e.ring.Pick(h)
				per[k][l] = append(per[k][l], s)
				perMeta[k][l] = append(perMeta[k][l], meta[i])
				continue
			}
			for k := range per {
				per[k][l] = append(per[k][l], s)
				perMeta[k][l] = append(perMeta[k][l], meta[i])
			}
		}
	}
	errs := make([]error, len(e.eps)*nl)
	var wg sync.WaitGroup
	for k := range e.eps {
		for l := range nl {
			if len(per[k][l]) == 0 || e.others(k) {
				continue
			}
			wg.Go(func() { errs[k*nl+l] = e.sendLane(ctx, k, tenant, per[k][l], perMeta[k][l]) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sendLane sends series, one lane of endpoint k, in requests of at most
// maxSeriesPerRequest, one after another (a lane's requests stay in
// order). Each request is retried on its own (deliver): a lane that
// failed never resends what the other lanes delivered.
func (e *Exporter) sendLane(ctx context.Context, k int, tenant string, s []prompb.TimeSeries, sm []seriesMeta) error {
	for len(s) > 0 {
		n := min(len(s), maxSeriesPerRequest)
		if err := e.sendPart(ctx, k, tenant, s[:n], sm[:n]); err != nil {
			return err
		}
		s, sm = s[n:], sm[n:]
	}
	return nil
}

// sendPart sends series as one request to endpoint k. An endpoint that
// refuses it as too large (413) gets it again in two halves, the first
// delivered (or dropped) before the second goes, so a series listed twice
// stays in time order; a request of one series still refused is dropped
// and counted (sending.Endpoint.DropTooLarge). It returns nil when every
// series was delivered or dropped and counted.
func (e *Exporter) sendPart(ctx context.Context, k int, tenant string, part []prompb.TimeSeries, pm []seriesMeta) error {
	opts := e.encodeOpts()
	// The series of the request the endpoint got last; 1.0
	// without send_native_histograms drops (and counts)
	// native histograms that have no classic form.
	// (v1: the 1.0 request was made, so it went last: an endpoint
	// never goes back to 2.0.)
	var n1, n2, dropped int
	var v1 bool
	var want written // what the 2.0 request holds
	sent, err := e.deliverCounted(ctx, k, tenant, func() (b []byte, err error) { b, n2, want, err = encodeV2With(part, pm, opts); return b, err },
		func() (b []byte, err error) {
			v1 = true
			b, n1, dropped, err = encodeV1With(part, pm, opts)
			return b, err
		}, &want)
	if errors.Is(err, sending.ErrTooLarge) {
		return e.sendHalves(ctx, k, tenant, part, pm, err)
	}
	if err != nil {
		return err
	}
	if sent {
		if v1 {
			e.sentSeries.Add(uint64(n1))
			e.droppedPoints.Add(uint64(dropped))
		} else {
			e.sentSeries.Add(uint64(n2))
			e.droppedPoints.Add(uint64(want.lostExemplars))
		}
	}
	return nil
}

// sendHalves sends series, which endpoint k refused as too large (err),
// in two requests of half the series each (sendPart), or drops and counts
// a single series.
func (e *Exporter) sendHalves(ctx context.Context, k int, tenant string, part []prompb.TimeSeries, pm []seriesMeta, err error) error {
	ep := e.eps[k]
	if len(part) <= 1 {
		what := "no series"
		if len(part) == 1 {
			what = labelsString(part[0].Labels)
		}
		ep.DropTooLarge(err, what)
		return nil
	}
	ep.Split()
	h := len(part) / 2
	if err := e.sendPart(ctx, k, tenant, part[:h], pm[:h]); err != nil {
		return err
	}
	return e.sendPart(ctx, k, tenant, part[h:], pm[h:])
}

// labelsString writes a series' labels as PromQL does: name{l="v", ...}.
func labelsString(ls []prompb.Label) string {
	m := make(model.Metric, len(ls))
	for _, l := range ls {
		m[model.LabelName(l.Name)] = model.LabelValue(l.Value)
	}
	return m.String()
}

// deliver sends one request to endpoint k: 2.0 (v2's payload) unless the
// endpoint speaks 1.0 only, else v1's; each payload is made at most once.
// It returns nil when the endpoint accepted it (sent) or refused it for
// good (dropped and counted by the endpoint), and an error wrapping
// sending.ErrTooLarge when it refused it for its size (413): the caller
// sends its series again in parts (sendHalves).
func (e *Exporter) deliver(ctx context.Context, k int, tenant string, v2f, v1f func() ([]byte, error)) (sent bool, _ error) {
	return e.deliverCounted(ctx, k, tenant, v2f, v1f, nil)
}

// deliverCounted is deliver that, when want is set (by v2f: what its
// request holds), checks a 2.0 endpoint's X-Prometheus-Remote-Write-*-Written
// headers against it: what the endpoint says it did not write is counted
// as rejected (sluice_exporter_rejected_items_total) and logged, not sent
// again (it answered 2xx: resending would duplicate what it wrote).
func (e *Exporter) deliverCounted(ctx context.Context, k int, tenant string, v2f, v1f func() ([]byte, error), want *written) (sent bool, _ error) {
	ep := e.eps[k]
	var v1, v2 []byte
	err := ep.DoSplit(ctx, func(ctx context.Context) sending.Outcome {
		var err error
		if !e.useV1[k].Load() {
			if v2 == nil {
				if v2, err = v2f(); err != nil {
					return sending.Outcome{Status: 400, Err: err}
				}
			}
			o := e.attempt(ctx, k, tenant, v2, true)
			var why string
			switch {
			case o.Status == http.StatusUnsupportedMediaType:
				// The spec's fallback: this endpoint speaks 1.0 only.
				why = "it answered 415 to 2.0"
			case o.OK() && !writtenHeaders(o.Header):
				// A 2.0 receiver must answer with the written counts; a
				// 1.0 one that does not check the Content-Type
				// (Prometheus 2.x) reads a 2.0 request as an empty 1.0
				// one and answers 204, having written nothing.
				// Prometheus's own sender takes this answer as a failure.
				why = "it answered 2.0 with " + strconv.Itoa(o.Status) + " but no X-Prometheus-Remote-Write-*-Written header, as a 1.0 receiver does"
			default:
				if o.OK() && want != nil {
					e.checkWritten(ep, *want, o.Header)
				}
				return o
			}
			if e.useV1[k].CompareAndSwap(false, true) { // once, whichever lane saw it first
				e.fallbacks.Add(1)
				ep.Logger().Warn("exporter: endpoint takes remote write 1.0 only; sending it 1.0 from now on (until a restart)",
					"endpoint", ep.Name, "why", why)
			}
		}
		if v1 == nil {
			if v1, err = v1f(); err != nil {
				return sending.Outcome{Status: 400, Err: err}
			}
		}
		if len(v1) == 0 {
			// Nothing 1.0 carries (native histograms without
			// send_native_histograms, dropped and counted): no request.
			return sending.Outcome{Status: http.StatusNoContent}
		}
		return e.attempt(ctx, k, tenant, v1, false)
	})
	if err != nil && !errors.Is(err, sending.ErrRejected) {
		return false, err // ctx ended, or sending.ErrTooLarge
	}
	return err == nil, nil
}

// written is what a 2.0 request holds, or what a receiver says it wrote
// of it (the X-Prometheus-Remote-Write-*-Written headers).
type written struct {
	samples, histograms, exemplars int
	// lostExemplars (what a request holds) are exemplars left out: no
	// series of their labels with a sample or histogram in the request.
	lostExemplars int
}

// Names of the 2.0 answer's headers.
const (
	samplesWritten    = "X-Prometheus-Remote-Write-Samples-Written"
	histogramsWritten = "X-Prometheus-Remote-Write-Histograms-Written"
	exemplarsWritten  = "X-Prometheus-Remote-Write-Exemplars-Written"
)

// checkWritten compares a 2.0 endpoint's written headers (a 2xx answer
// with at least one of them) with what the request held, want. A header
// missing beside the others says 0 written, as the specification tells a
// sender to assume; one that is no count is not compared. Items not
// written are counted and logged as a partial rejection: a receiver
// answering 2xx has accepted the request and will not take them again
// (Prometheus's sender takes an answer saying nothing was written as a
// failure not to retry, the same outcome).
func (e *Exporter) checkWritten(ep *sending.Endpoint, want written, h http.Header) {
	var lost int64
	var what []string
	for _, c := range []struct {
		header string
		sent   int
	}{{samplesWritten, want.samples}, {histogramsWritten, want.histograms}, {exemplarsWritten, want.exemplars}} {
		v := h.Get(c.header)
		got := 0
		if v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				continue
			}
			got = int(min(n, int64(c.sent)))
		}
		if got < c.sent {
			lost += int64(c.sent - got)
			what = append(what, strconv.Itoa(got)+" of "+strconv.Itoa(c.sent)+" "+strings.TrimSuffix(strings.TrimPrefix(c.header, "X-Prometheus-Remote-Write-"), "-Written"))
		}
	}
	if lost > 0 {
		ep.PartialRejection(lost, "remote write 2.0 answer says written: "+strings.Join(what, ", "))
	}
}

// writtenHeaders reports whether a 2.0 answer carries any of the
// X-Prometheus-Remote-Write-*-Written headers a 2.0 receiver sends.
func writtenHeaders(h http.Header) bool {
	for _, k := range []string{samplesWritten, histogramsWritten, exemplarsWritten} {
		if h.Get(k) != "" {
			return true
		}
	}
	return false
}

func (e *Exporter) attempt(ctx context.Context, k int, tenant string, payload []byte, v2 bool) sending.Outcome {
	req, err := newRequest(ctx, e.eps[k].Name, payload)
	if err != nil {
		return sending.Outcome{Status: 400, Err: err}
	}
	// The configured headers first (a User-Agent of theirs wins), the
	// protocol's last: the specification lets no user override them.
	req.Header.Set("User-Agent", userAgent)
	for h, v := range e.cfg.Headers {
		req.Header.Set(h, v)
	}
	if e.cfg.TenantHeader != "" {
		req.Header.Set(e.cfg.TenantHeader, tenant)
	}
	req.Header.Set("Content-Encoding", "snappy")
	if v2 {
		req.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
		req.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	} else {
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	}
	return sending.Send(e.hc, req)
}

// userAgent names the sender and its version, an RFC 9110 product as the
// specification asks ("sluice/1.4.0", or the commit of a build without a
// version tag), as Prometheus sends "Prometheus/3.7.1".
var userAgent = "sluice/" + strings.TrimPrefix(version.String(), "v")
