package prwexporter

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// specRequest is one request a specReceiver got, as sent.
type specRequest struct {
	method string
	header http.Header
	body   []byte // as sent (snappy)
	at     time.Time
}

// specReceiver is a remote-write endpoint on 127.0.0.1:0 that keeps every
// request as sent and answers with answer (nil: 204 with the 2.0
// written headers a 2.0 receiver sends, counting what it got).
type specReceiver struct {
	mu     sync.Mutex
	reqs   []specRequest
	answer func(n int, r specRequest, w http.ResponseWriter) // n: 0-based request number
	url    string
}

func newSpecReceiver(t *testing.T, answer func(int, specRequest, http.ResponseWriter)) *specReceiver {
	sr := &specReceiver{answer: answer}
	srv := httptest.NewServer(sr)
	t.Cleanup(srv.Close)
	sr.url = srv.URL
	return sr
}

func (sr *specReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	req := specRequest{method: r.Method, header: r.Header.Clone(), body: b, at: time.Now()}
	sr.mu.Lock()
	n := len(sr.reqs)
	sr.reqs = append(sr.reqs, req)
	sr.mu.Unlock()
	if sr.answer != nil {
		sr.answer(n, req, w)
		return
	}
	writtenAnswer(req, w, 1)
}

// writtenAnswer answers a 2.0 request 204 with the written headers, each
// the request's count times frac (1: all written); a 1.0 request plain 204.
func writtenAnswer(r specRequest, w http.ResponseWriter, frac float64) {
	if isV2(r) {
		var s, h, e int
		if raw, err := snappy.Decode(nil, r.body); err == nil {
			var req writev2.Request
			if req.Unmarshal(raw) == nil {
				for _, ts := range req.Timeseries {
					s, h, e = s+len(ts.Samples), h+len(ts.Histograms), e+len(ts.Exemplars)
				}
			}
		}
		w.Header().Set("X-Prometheus-Remote-Write-Samples-Written", fmt.Sprint(int(float64(s)*frac)))
		w.Header().Set("X-Prometheus-Remote-Write-Histograms-Written", fmt.Sprint(int(float64(h)*frac)))
		w.Header().Set("X-Prometheus-Remote-Write-Exemplars-Written", fmt.Sprint(int(float64(e)*frac)))
	}
	w.WriteHeader(http.StatusNoContent)
}

func isV2(r specRequest) bool {
	return strings.Contains(r.header.Get("Content-Type"), "io.prometheus.write.v2.Request")
}

func (sr *specReceiver) requests() []specRequest {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return slices.Clone(sr.reqs)
}

// framedSnappy is the stream identifier that starts snappy's framed
// format, which remote write does not use.
var framedSnappy = []byte{0xff, 0x06, 0x00, 0x00, 's', 'N', 'a', 'P', 'p', 'Y'}

// userAgent is RFC 9110's product/version, the sender's name and version.
var userAgentRE = regexp.MustCompile(`^sluice/[!#$%&'*+.^_` + "`" + `|~0-9A-Za-z-]+$`)

// specSeries is one series of a request, resolved: labels in the order
// sent, samples, native histograms' timestamps, exemplars' labels.
type specSeries struct {
	labels     []prompb.Label
	samples    []prompb.Sample
	histograms []int64
	exemplars  [][]prompb.Label
	meta       writev2.Metadata // 2.0
	start      []int64          // 2.0: each sample's and histogram's start timestamp
}

// decodeSpec checks a request against the remote-write specification
// (1.0 or 2.0 by its Content-Type) and returns its series and 1.0
// metadata; every violation is reported with t.Errorf.
func decodeSpec(t *testing.T, r specRequest) ([]specSeries, []prompb.MetricMetadata) {
	t.Helper()
	v2 := isV2(r)
	h := r.header
	wantCT, wantV := "application/x-protobuf", "0.1.0"
	if v2 {
		wantCT, wantV = "application/x-protobuf;proto=io.prometheus.write.v2.Request", "2.0.0"
	}
	if r.method != http.MethodPost {
		t.Errorf("method %s, want POST", r.method)
	}
	if got := h.Get("Content-Type"); got != wantCT {
		t.Errorf("Content-Type %q, want %q", got, wantCT)
	}
	if got := h.Get("Content-Encoding"); got != "snappy" {
		t.Errorf("Content-Encoding %q, want snappy", got)
	}
	if got := h.Get("X-Prometheus-Remote-Write-Version"); got != wantV {
		t.Errorf("X-Prometheus-Remote-Write-Version %q, want %q", got, wantV)
	}
	if got := h.Get("User-Agent"); !userAgentRE.MatchString(got) {
		t.Errorf("User-Agent %q, want sluice/<version> (RFC 9110 product)", got)
	}
	if bytes.HasPrefix(r.body, framedSnappy) {
		t.Errorf("body in snappy's framed format, want block format")
	}
	raw, err := snappy.Decode(nil, r.body)
	if err != nil || len(raw) == 0 {
		t.Errorf("body is no snappy block (%v) or empty (%d bytes)", err, len(raw))
		return nil, nil
	}
	var out []specSeries
	if !v2 {
		var req prompb.WriteRequest
		if err := req.Unmarshal(raw); err != nil {
			t.Errorf("1.0 body: %v", err)
			return nil, nil
		}
		if len(req.Timeseries) == 0 && len(req.Metadata) == 0 {
			t.Errorf("empty 1.0 request")
		}
		for _, ts := range req.Timeseries {
			s := specSeries{labels: ts.Labels, samples: ts.Samples}
			for _, x := range ts.Histograms {
				s.histograms = append(s.histograms, x.Timestamp)
			}
			for _, e := range ts.Exemplars {
				s.exemplars = append(s.exemplars, e.Labels)
			}
			out = append(out, s)
		}
		for _, m := range req.Metadata {
			if m.MetricFamilyName == "" {
				t.Errorf("1.0 metadata without a metric family name: %+v", m)
			}
		}
		checkSeries(t, out)
		return out, req.Metadata
	}
	var req writev2.Request
	if err := req.Unmarshal(raw); err != nil {
		t.Errorf("2.0 body: %v", err)
		return nil, nil
	}
	syms := req.Symbols
	if len(syms) == 0 || syms[0] != "" {
		t.Errorf("2.0 symbols %q: want \"\" first", syms[:min(len(syms), 3)])
		return nil, nil
	}
	seen := map[string]bool{}
	for _, s := range syms[1:] {
		if s == "" || seen[s] {
			t.Errorf("2.0 symbol %q twice", s)
		}
		seen[s] = true
	}
	used := make([]bool, len(syms))
	used[0] = true
	sym := func(ref uint32) string {
		if int(ref) >= len(syms) {
			t.Errorf("2.0 symbol reference %d past the table (%d)", ref, len(syms))
			return ""
		}
		used[ref] = true
		return syms[ref]
	}
	pairs := func(refs []uint32) []prompb.Label {
		if len(refs)%2 != 0 {
			t.Errorf("2.0 odd label references %v", refs)
		}
		var l []prompb.Label
		for i := 0; i+1 < len(refs); i += 2 {
			l = append(l, prompb.Label{Name: sym(refs[i]), Value: sym(refs[i+1])})
		}
		return l
	}
	if len(req.Timeseries) == 0 {
		t.Errorf("2.0 request without series")
	}
	for _, ts := range req.Timeseries {
		s := specSeries{labels: pairs(ts.LabelsRefs), meta: ts.Metadata}
		sym(ts.Metadata.HelpRef)
		sym(ts.Metadata.UnitRef)
		for _, x := range ts.Samples {
			s.samples = append(s.samples, prompb.Sample{Value: x.Value, Timestamp: x.Timestamp})
			s.start = append(s.start, x.StartTimestamp)
		}
		for _, x := range ts.Histograms {
			s.histograms = append(s.histograms, x.Timestamp)
			s.start = append(s.start, x.StartTimestamp)
		}
		for _, e := range ts.Exemplars {
			s.exemplars = append(s.exemplars, pairs(e.LabelsRefs))
		}
		if len(ts.Samples) > 0 && len(ts.Histograms) > 0 {
			t.Errorf("2.0 series %v has samples and histograms", s.labels)
		}
		if len(ts.Samples) == 0 && len(ts.Histograms) == 0 {
			// Exemplars alone too: Prometheus's 2.0 receiver refuses them.
			t.Errorf("2.0 series %v has no sample or histogram", s.labels)
		}
		for k, st := range s.start {
			// A start (created) time is in milliseconds, at or before
			// its sample's; 0 when unknown.
			at := int64(0)
			if k < len(s.samples) {
				at = s.samples[k].Timestamp
			} else {
				at = s.histograms[k-len(s.samples)]
			}
			if st != 0 && (st < 1e12 || st > at) {
				t.Errorf("2.0 series %v: start timestamp %d for a sample at %d", s.labels, st, at)
			}
		}
		out = append(out, s)
	}
	for i, u := range used {
		if !u {
			t.Errorf("2.0 symbol %q unused", syms[i])
		}
	}
	checkSeries(t, out)
	return out, nil
}

// checkSeries checks what both versions require of series: labels sorted
// by name, no name twice, no empty name or value, one __name__; samples or
// histograms (or exemplars alone, as Prometheus sends them); timestamps
// in milliseconds; a series' samples in time order across the request.
func checkSeries(t *testing.T, ss []specSeries) {
	t.Helper()
	last := map[string]int64{}
	for _, s := range ss {
		names := 0
		for i, l := range s.labels {
			if l.Name == "" || l.Value == "" {
				t.Errorf("series %v: empty label name or value", s.labels)
			}
			if i > 0 && s.labels[i-1].Name >= l.Name {
				t.Errorf("series %v: labels not sorted by name, or a name twice", s.labels)
			}
			if l.Name == "__name__" {
				names++
			}
		}
		if names != 1 {
			t.Errorf("series %v: %d __name__ labels, want 1", s.labels, names)
		}
		if len(s.samples)+len(s.histograms)+len(s.exemplars) == 0 {
			t.Errorf("series %v: no sample, histogram or exemplar", s.labels)
		}
		key := fmt.Sprint(s.labels)
		ts := make([]int64, 0, len(s.samples)+len(s.histograms))
		for _, x := range s.samples {
			ts = append(ts, x.Timestamp)
		}
		ts = append(ts, s.histograms...)
		for _, x := range ts {
			// Milliseconds since 1970: 2001 to 2286.
			if x < 1e12 || x >= 1e13 {
				t.Errorf("series %v: timestamp %d is not in milliseconds", s.labels, x)
			}
			if prev, ok := last[key]; ok && x < prev {
				t.Errorf("series %v: sample at %d after one at %d in the same request", s.labels, x, prev)
			} else if ok && x == prev {
				t.Errorf("series %v: two samples at %d in the same request", s.labels, x)
			}
			last[key] = x
		}
	}
}

// otlpBody marshals md as an OTLP export request.
func otlpBody(t *testing.T, md pmetric.Metrics) []byte {
	t.Helper()
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// awkwardMetrics is OTLP that tests a converter's care: a stale point
// (no recorded value), attributes with an empty value, with characters a
// label name cannot have, two keys that sanitise alike, Unicode values,
// a summary, an exponential histogram and a histogram, timestamps with
// sub-millisecond parts.
func awkwardMetrics(t *testing.T, at time.Time) []byte {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	rm.Resource().Attributes().PutStr("service.instance.id", "i-1")
	rm.Resource().Attributes().PutStr("host.name", "h1")
	rm.Resource().Attributes().PutStr("empty", "")
	sm := rm.ScopeMetrics().AppendEmpty()
	ts := pcommon.NewTimestampFromTime(at.Add(123456 * time.Nanosecond))

	g := sm.Metrics().AppendEmpty()
	g.SetName("queue.depth")
	g.SetDescription("Items waiting.")
	gp := g.SetEmptyGauge().DataPoints()
	p := gp.AppendEmpty()
	p.SetTimestamp(ts)
	p.SetDoubleValue(7)
	p.Attributes().PutStr("a.b", "dot")
	p.Attributes().PutStr("a_b", "underscore")
	p.Attributes().PutStr("blank", "")
	p.Attributes().PutStr("city", "Zürich 🚀")
	p.Attributes().PutStr("9lives", "digit")
	p = gp.AppendEmpty()
	p.SetTimestamp(ts)
	p.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	p.Attributes().PutStr("gone", "yes")

	s := sm.Metrics().AppendEmpty()
	s.SetName("rpc.latency")
	s.SetUnit("ms")
	sp := s.SetEmptySummary().DataPoints().AppendEmpty()
	sp.SetTimestamp(ts)
	sp.SetCount(4)
	sp.SetSum(10)
	q := sp.QuantileValues().AppendEmpty()
	q.SetQuantile(0.5)
	q.SetValue(2)

	eh := sm.Metrics().AppendEmpty()
	eh.SetName("payload.size")
	eh.SetUnit("By")
	e := eh.SetEmptyExponentialHistogram()
	e.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	ep := e.DataPoints().AppendEmpty()
	ep.SetTimestamp(ts)
	ep.SetStartTimestamp(pcommon.NewTimestampFromTime(at.Add(-time.Hour)))
	ep.SetScale(2)
	ep.Positive().SetOffset(3)
	ep.Positive().BucketCounts().FromRaw([]uint64{1, 0, 2})
	ep.SetCount(3)
	ep.SetSum(30)
	ex := ep.Exemplars().AppendEmpty()
	ex.SetTimestamp(ts)
	ex.SetDoubleValue(9)
	ex.SetTraceID(exTrace)
	ex.SetSpanID(exSpan)

	h := sm.Metrics().AppendEmpty()
	h.SetName("wait")
	h.SetUnit("s")
	hh := h.SetEmptyHistogram()
	hh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hp := hh.DataPoints().AppendEmpty()
	hp.SetTimestamp(ts)
	hp.SetStartTimestamp(pcommon.NewTimestampFromTime(at.Add(-time.Hour)))
	hp.ExplicitBounds().FromRaw([]float64{0.5, 1})
	hp.BucketCounts().FromRaw([]uint64{1, 1, 1})
	hp.SetCount(3)
	hp.SetSum(2)
	return otlpBody(t, md)
}

// Every request the exporter sends, over 1.0 (with and without native
// histograms) and 2.0, keeps the specification's rules (decodeSpec: the
// headers, snappy block format, sorted unique non-empty labels, the
// symbols table, millisecond timestamps in order), for OTLP of every kind
// and for remote write of the other version (converted); and the
// converter's care: the stale marker bit for bit, empty attributes left
// out, colliding keys joined, Unicode kept.
func TestSpecRequests(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	otlpRecs := []exporter.Record{
		{Kind: signal.KindMetrics, Tenant: "t", Body: awkwardMetrics(t, at)},
		{Kind: signal.KindMetrics, Tenant: "t", Body: testMetrics(t, at, 3)},
		{Kind: signal.KindMetrics, Tenant: "t", Body: exemplarMetrics(t, at, at.Add(-time.Minute))},
		{Kind: signal.KindMetrics, Tenant: "t", Body: nativeMetrics(t, at)},
	}
	for _, tc := range []struct {
		name     string
		protocol string
		native   bool
	}{{"1.0", "1.0", false}, {"1.0 native", "1.0", true}, {"2.0", "2.0", false}} {
		t.Run(tc.name, func(t *testing.T) {
			sr := newSpecReceiver(t, nil)
			exp, err := New(Config{Endpoints: []string{sr.url}, Protocol: tc.protocol, SendNativeHistograms: tc.native})
			if err != nil {
				t.Fatal(err)
			}
			if err := exp.Send(waittest.Context(t), otlpRecs); err != nil {
				t.Fatal(err)
			}
			reqs := sr.requests()
			if len(reqs) == 0 {
				t.Fatal("no request")
			}
			byLabels := map[string]specSeries{}
			for _, r := range reqs {
				if got := isV2(r); got != (tc.protocol == "2.0") {
					t.Errorf("protocol %s sent a request of Content-Type %q", tc.protocol, r.header.Get("Content-Type"))
				}
				ss, _ := decodeSpec(t, r)
				for _, s := range ss {
					byLabels[promLabels(s.labels)] = s
				}
			}
			want := `{__name__="queue_depth", a_b="dot;underscore", city="Zürich 🚀", instance="i-1", job="svc", key_9lives="digit"}`
			if s, ok := byLabels[want]; !ok || len(s.samples) != 1 || s.samples[0].Value != 7 || s.samples[0].Timestamp != at.UnixMilli() {
				t.Errorf("gauge with awkward attributes: want %s = 7 @%d; got series %v", want, at.UnixMilli(), keys(byLabels, "queue_depth"))
			}
			stale, ok := byLabels[`{__name__="queue_depth", gone="yes", instance="i-1", job="svc"}`]
			if !ok || len(stale.samples) != 1 || math.Float64bits(stale.samples[0].Value) != value.StaleNaN {
				t.Errorf("stale point: want the stale NaN bits %#x, got %v", value.StaleNaN, stale.samples)
			}
			if _, ok := byLabels[`{__name__="target_info", host_name="h1", instance="i-1", job="svc"}`]; !ok {
				t.Errorf("target_info: got %v", keys(byLabels, "target_info"))
			}
			if tc.protocol == "2.0" {
				// Cumulative points carry their start time (created
				// timestamp); a gauge none.
				k := `{__name__="payload_size_bytes", instance="i-1", job="svc"}`
				if s := byLabels[k]; len(s.start) != 1 || s.start[0] != at.Add(-time.Hour).UnixMilli() || len(s.exemplars) != 1 {
					t.Errorf("native histogram %s: start %v, exemplars %d; want start %d, 1 exemplar", k, s.start, len(s.exemplars), at.Add(-time.Hour).UnixMilli())
				}
				if s := byLabels[want]; len(s.start) != 1 || s.start[0] != 0 {
					t.Errorf("gauge: start %v, want 0", s.start)
				}
			}
			for _, name := range []string{"rpc_latency_milliseconds", "wait_seconds_bucket", "payload_size_bytes"} {
				if len(keys(byLabels, name)) == 0 && (name != "payload_size_bytes" || tc.native || tc.protocol == "2.0") {
					t.Errorf("no %s series", name)
				}
			}
		})
	}
}

// promLabels renders labels as Prometheus prints a series.
func promLabels(ls []prompb.Label) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", l.Name, l.Value)
	}
	b.WriteByte('}')
	return b.String()
}

// keys lists the series of m whose name is name.
func keys(m map[string]specSeries, name string) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, `{__name__="`+name+`"`) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Configured headers go on every request, but never over the protocol's
// (Content-Type, Content-Encoding, the version; config validation refuses
// them too); a configured User-Agent replaces sluice's.
func TestSpecHeadersNotOverridden(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	for _, protocol := range []string{"1.0", "2.0"} {
		sr := newSpecReceiver(t, nil)
		exp, err := New(Config{Endpoints: []string{sr.url}, Protocol: protocol, TenantHeader: "X-Scope-OrgID", Headers: map[string]string{
			"Authorization": "Bearer x", "content-encoding": "gzip", "Content-Type": "text/plain", "X-Prometheus-Remote-Write-Version": "9.9.9",
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "acme", Body: testMetrics(t, at, 1)}}); err != nil {
			t.Fatal(err)
		}
		reqs := sr.requests()
		if len(reqs) != 1 {
			t.Fatalf("%s: %d requests, want 1", protocol, len(reqs))
		}
		decodeSpec(t, reqs[0]) // the protocol's headers
		if h := reqs[0].header; h.Get("Authorization") != "Bearer x" || h.Get("X-Scope-OrgID") != "acme" {
			t.Errorf("%s: configured headers lost: %v", protocol, h)
		}
	}
	sr := newSpecReceiver(t, nil)
	exp, err := New(Config{Endpoints: []string{sr.url}, Headers: map[string]string{"User-Agent": "acme-relay/2.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "acme", Body: testMetrics(t, at, 1)}}); err != nil {
		t.Fatal(err)
	}
	if got := sr.requests()[0].header.Get("User-Agent"); got != "acme-relay/2.1" {
		t.Errorf("configured User-Agent: got %q", got)
	}
}

// reversedGauge is OTLP with one gauge series whose n points are listed
// newest first, one second apart, ending at end, values 0..n-1 oldest
// first.
func reversedGauge(t *testing.T, end time.Time, n int) []byte {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("backwards")
	gp := g.SetEmptyGauge().DataPoints()
	for i := n - 1; i >= 0; i-- {
		p := gp.AppendEmpty()
		p.SetTimestamp(pcommon.NewTimestampFromTime(end.Add(-time.Duration(n-1-i) * time.Second)))
		p.SetDoubleValue(float64(i))
	}
	return otlpBody(t, md)
}

// A series' points out of time order in one batch (an OTLP request
// listing them newest first; a later record older than an earlier one)
// go oldest first, so a receiver keeps them all: Prometheus drops a sample
// older than one it wrote in the same request. Checked by the spec
// receiver (each series' samples in time order across the request) and
// by real Prometheus (every sample stored).
func TestSpecSeriesInTimeOrder(t *testing.T) {
	end := time.Now().Truncate(time.Second)
	recs := []exporter.Record{
		{Kind: signal.KindMetrics, Tenant: "t", Body: reversedGauge(t, end, 5)},
		{Kind: signal.KindMetrics, Tenant: "t", Body: reversedGauge(t, end.Add(-10*time.Second), 3)},
	}
	for _, protocol := range []string{"1.0", "2.0"} {
		sr := newSpecReceiver(t, nil)
		exp, err := New(Config{Endpoints: []string{sr.url}, Protocol: protocol})
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Send(waittest.Context(t), recs); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range sr.requests() {
			ss, _ := decodeSpec(t, r)
			for _, s := range ss {
				if s.labels[0].Value == "backwards" {
					n += len(s.samples)
				}
			}
		}
		if n != 8 {
			t.Errorf("%s: %d samples of the series, want 8", protocol, n)
		}
	}

	addr := startPrometheus(t)
	exp, err := New(Config{Endpoints: []string{"http://" + addr + "/api/v1/write"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	r := promQuery(t, addr, `backwards[1m]`, end)
	if len(r) != 1 || len(r[0].Values) != 8 {
		t.Fatalf("prometheus kept %v, want the series' 8 samples", r)
	}
}

// A 2.0 endpoint's X-Prometheus-Remote-Write-*-Written headers are
// checked against what the request held: what it says it did not write
// is counted as rejected (not sent again: it answered 2xx); a header
// missing beside the others says 0, as the specification tells a sender
// to assume; a header that is no count is not compared.
func TestSpecWrittenHeaders(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	recs := []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: exemplarMetrics(t, at, at.Add(-time.Minute))}}
	for _, tc := range []struct {
		name   string
		answer func(r specRequest, w http.ResponseWriter)
		lost   func(s, h, e int) int // of the request's samples, histograms, exemplars
	}{
		{"all written", func(r specRequest, w http.ResponseWriter) { writtenAnswer(r, w, 1) }, func(s, h, e int) int { return 0 }},
		{"half written", func(r specRequest, w http.ResponseWriter) { writtenAnswer(r, w, 0.5) },
			func(s, h, e int) int { return s - s/2 + h - h/2 + e - e/2 }},
		{"none written", func(r specRequest, w http.ResponseWriter) { writtenAnswer(r, w, 0) }, func(s, h, e int) int { return s + h + e }},
		{"samples header only", func(r specRequest, w http.ResponseWriter) {
			w.Header().Set("X-Prometheus-Remote-Write-Samples-Written", "1000000")
			w.WriteHeader(http.StatusOK)
		}, func(s, h, e int) int { return h + e }},
		{"not counts", func(r specRequest, w http.ResponseWriter) {
			for _, k := range []string{"Samples", "Histograms", "Exemplars"} {
				w.Header().Set("X-Prometheus-Remote-Write-"+k+"-Written", "many")
			}
			w.WriteHeader(http.StatusNoContent)
		}, func(s, h, e int) int { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := newSpecReceiver(t, func(_ int, r specRequest, w http.ResponseWriter) { tc.answer(r, w) })
			exp, err := New(Config{Endpoints: []string{sr.url}, Protocol: "2.0"})
			if err != nil {
				t.Fatal(err)
			}
			if err := exp.Send(waittest.Context(t), recs); err != nil {
				t.Fatal(err)
			}
			reqs := sr.requests()
			if len(reqs) != 1 || !isV2(reqs[0]) || exp.Fallbacks() != 0 {
				t.Fatalf("%d requests (fallbacks %d), want one 2.0 request, not resent", len(reqs), exp.Fallbacks())
			}
			var s, h, e int
			ss, _ := decodeSpec(t, reqs[0])
			for _, x := range ss {
				s, h, e = s+len(x.samples), h+len(x.histograms), e+len(x.exemplars)
			}
			if s == 0 || h == 0 || e == 0 {
				t.Fatalf("test data: %d samples, %d histograms, %d exemplars; want some of each", s, h, e)
			}
			ep := exp.Endpoints()[0]
			if got, want := ep.Stats.Rejected.Load(), uint64(tc.lost(s, h, e)); got != want || ep.Stats.Sent.Load() != 1 {
				t.Errorf("rejected %d, want %d (of %d samples, %d histograms, %d exemplars); sent %d", got, want, s, h, e, ep.Stats.Sent.Load())
			}
		})
	}
}

// The answers a remote-write sender must tell apart, each from a real
// HTTP endpoint, over 1.0 and 2.0: 2xx is sent; a 4xx other than 429 is
// dropped and counted after one request, never retried (415 too, over
// 1.0), but for 413, which is sent again as two requests of half the
// series each (toolarge_test.go has more); 429 and 5xx are retried until an answer is 2xx, the wait at least
// a Retry-After the answer gave (seconds, or an HTTP date).
func TestSpecAnswers(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	recs := []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: testMetrics(t, at, 1)}}
	status := func(code int, header ...string) func(specRequest, http.ResponseWriter) {
		return func(_ specRequest, w http.ResponseWriter) {
			for i := 0; i+1 < len(header); i += 2 {
				w.Header().Set(header[i], header[i+1])
			}
			http.Error(w, "the endpoint's reason", code)
		}
	}
	for _, tc := range []struct {
		name     string
		first    func(specRequest, http.ResponseWriter) // the first answer; later ones are 2xx
		requests int                                    // requests the endpoint gets
		dropped  uint64
		wait     time.Duration // at least between the first two requests
	}{
		{"200", func(r specRequest, w http.ResponseWriter) { writtenAnswer(r, w, 1) }, 1, 0, 0},
		{"400", status(400), 1, 1, 0},
		{"401", status(401), 1, 1, 0},
		{"403", status(403), 1, 1, 0},
		{"404", status(404), 1, 1, 0},
		{"409", status(409), 1, 1, 0},
		{"413", status(413), 3, 0, 0},
		{"422", status(422), 1, 1, 0},
		{"500", status(500), 2, 0, 0},
		{"502", status(502), 2, 0, 0},
		{"503", status(503), 2, 0, 0},
		{"504", status(504), 2, 0, 0},
		{"429", status(429), 2, 0, 0},
		{"429 Retry-After seconds", status(429, "Retry-After", "1"), 2, 0, time.Second},
		{"503 Retry-After date", func(r specRequest, w http.ResponseWriter) {
			// Whole seconds: 2 s from now is at least 1 s from now.
			status(503, "Retry-After", time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat))(r, w)
		}, 2, 0, time.Second},
	} {
		for _, protocol := range []string{"1.0", "2.0"} {
			t.Run(tc.name+"/"+protocol, func(t *testing.T) {
				sr := newSpecReceiver(t, func(n int, r specRequest, w http.ResponseWriter) {
					if n == 0 {
						tc.first(r, w)
						return
					}
					writtenAnswer(r, w, 1)
				})
				exp, err := New(Config{Endpoints: []string{sr.url}, Protocol: protocol, Policy: sending.Policy{InitialBackoff: 5 * time.Millisecond}})
				if err != nil {
					t.Fatal(err)
				}
				if err := exp.Send(waittest.Context(t), recs); err != nil {
					t.Fatal(err)
				}
				reqs := sr.requests()
				ep := exp.Endpoints()[0]
				if len(reqs) != tc.requests || ep.Stats.Dropped.Load() != tc.dropped || exp.Fallbacks() != 0 {
					t.Fatalf("%d requests, %d dropped (fallbacks %d); want %d, %d", len(reqs), ep.Stats.Dropped.Load(), exp.Fallbacks(), tc.requests, tc.dropped)
				}
				for _, r := range reqs {
					decodeSpec(t, r)
				}
				if len(reqs) == 2 {
					if !bytes.Equal(reqs[0].body, reqs[1].body) {
						t.Error("the retry is not the same request")
					}
					if d := reqs[1].at.Sub(reqs[0].at); d < max(tc.wait, 5*time.Millisecond) {
						t.Errorf("retried after %v, want at least %v", d, max(tc.wait, 5*time.Millisecond))
					}
				}
			})
		}
	}
}

// A request that would hold nothing is not sent: over 1.0 without
// send_native_histograms a batch of native histograms only is dropped and
// counted, with no request (it went as an empty WriteRequest), also to a
// 2.0 exporter's endpoint that answers 415 and gets 1.0.
func TestSpecNoEmptyRequest(t *testing.T) {
	md := pmetric.NewMetrics()
	eh := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	eh.SetName("payload.size")
	e := eh.SetEmptyExponentialHistogram()
	e.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	p := e.DataPoints().AppendEmpty()
	p.SetTimestamp(pcommon.NewTimestampFromTime(time.Unix(1_800_000_000, 0)))
	p.SetScale(2)
	p.Positive().BucketCounts().FromRaw([]uint64{1})
	p.SetCount(1)
	recs := []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: otlpBody(t, md)}}
	for _, protocol := range []string{"1.0", "2.0"} {
		sr := newSpecReceiver(t, func(_ int, r specRequest, w http.ResponseWriter) {
			if isV2(r) {
				http.Error(w, "1.0 only", http.StatusUnsupportedMediaType)
				return
			}
			writtenAnswer(r, w, 1)
		})
		exp, err := New(Config{Endpoints: []string{sr.url}, Protocol: protocol})
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Send(waittest.Context(t), recs); err != nil {
			t.Fatal(err)
		}
		var v1 int
		for _, r := range sr.requests() {
			if !isV2(r) {
				v1++
				decodeSpec(t, r)
			}
		}
		if dropped, _ := exp.DroppedPoints(); v1 != 0 || dropped != 1 {
			t.Errorf("%s: %d 1.0 requests, %d points dropped; want none sent, 1 dropped", protocol, v1, dropped)
		}
	}
}

// A 2.0 exporter into real Prometheus 2.x (a 1.0 receiver that does not
// check the Content-Type: it reads a 2.0 request as an empty 1.0 one and
// answers 204 without written counts) falls back to 1.0 once and every
// sample arrives, of that batch and the next.
func TestSpecV2IntoPrometheus2(t *testing.T) {
	addr := startPrometheus(t)
	end := time.Now().Truncate(time.Second)
	exp, err := New(Config{Endpoints: []string{"http://" + addr + "/api/v1/write"}, Protocol: "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{end.Add(-10 * time.Second), end} {
		if err := exp.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: testMetrics(t, at, 3)}}); err != nil {
			t.Fatal(err)
		}
	}
	if exp.Fallbacks() != 1 {
		t.Fatalf("fallbacks %d, want 1", exp.Fallbacks())
	}
	r := promQuery(t, addr, `room_temperature_celsius[1m]`, end)
	if len(r) != 3 {
		t.Fatalf("prometheus has %d gauge series, want 3", len(r))
	}
	for _, s := range r {
		if len(s.Values) != 6 {
			t.Errorf("%v: %d samples, want 6", s.Metric, len(s.Values))
		}
	}
}

// An OTLP point without a time (time_unix_nano 0, which OTLP requires) is
// dropped and counted, not sent at 0: a receiver refuses a sample that
// old with the rest of its request (Prometheus answers 400), so the
// other series of the batch would be lost with it. Checked with real
// Prometheus: the good series beside it arrives.
func TestSpecPointWithoutTime(t *testing.T) {
	end := time.Now().Truncate(time.Second)
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	g := sm.Metrics().AppendEmpty()
	g.SetName("untimed")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1)
	ok := sm.Metrics().AppendEmpty()
	ok.SetName("timed")
	p := ok.SetEmptyGauge().DataPoints().AppendEmpty()
	p.SetTimestamp(pcommon.NewTimestampFromTime(end))
	p.SetDoubleValue(2)
	recs := []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: otlpBody(t, md)}}

	sr := newSpecReceiver(t, nil)
	exp, err := New(Config{Endpoints: []string{sr.url}})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	for _, r := range sr.requests() {
		decodeSpec(t, r) // timestamps in milliseconds since 2001
	}
	if dropped, _ := exp.DroppedPoints(); dropped != 1 {
		t.Errorf("dropped %d points, want the untimed one", dropped)
	}

	// Prometheus with data (a fresh one takes any time): a sample at 0
	// is out of bounds, and its request refused whole.
	addr := startPrometheus(t)
	exp, err = New(Config{Endpoints: []string{"http://" + addr + "/api/v1/write"}})
	if err != nil {
		t.Fatal(err)
	}
	first := pmetric.NewMetrics()
	ok.CopyTo(first.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty())
	first.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).SetTimestamp(pcommon.NewTimestampFromTime(end.Add(-time.Second)))
	for _, b := range [][]byte{otlpBody(t, first), recs[0].Body} {
		if err := exp.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: b}}); err != nil {
			t.Fatal(err)
		}
	}
	if r := promQuery(t, addr, `timed[1m]`, end); len(r) != 1 || len(r[0].Values) != 2 || exp.Endpoints()[0].Stats.Dropped.Load() != 0 {
		t.Fatalf("prometheus has %v (requests dropped %d), want both samples of the timed series", r, exp.Endpoints()[0].Stats.Dropped.Load())
	}
}

// OTLP metric names become the names the OpenTelemetry specification's
// Prometheus compatibility gives them (otlptranslator's
// UnderscoreEscapingWithSuffixes, Prometheus's default): unit words and
// _total as suffixes, never twice; invalid characters as "_"; the
// metadata's type and unit with them.
func TestSpecOTLPNames(t *testing.T) {
	type kind int
	const (
		gauge kind = iota
		counter
		upDown
		hist
		summary
	)
	at := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name, unit string
		kind       kind
		want       []string // __name__ of the series, sorted
		typ        writev2.Metadata_MetricType
		metaUnit   string
	}{
		{"room.temperature", "Cel", gauge, []string{"room_temperature_celsius"}, writev2.Metadata_METRIC_TYPE_GAUGE, "celsius"},
		{"http.requests", "", counter, []string{"http_requests_total"}, writev2.Metadata_METRIC_TYPE_COUNTER, ""},
		{"network.io", "By", counter, []string{"network_io_bytes_total"}, writev2.Metadata_METRIC_TYPE_COUNTER, "bytes"},
		{"requests_total", "", counter, []string{"requests_total"}, writev2.Metadata_METRIC_TYPE_COUNTER, ""},
		{"queue.size", "{items}", upDown, []string{"queue_size"}, writev2.Metadata_METRIC_TYPE_GAUGE, ""},
		{"cpu.utilization", "1", gauge, []string{"cpu_utilization_ratio"}, writev2.Metadata_METRIC_TYPE_GAUGE, ""}, // UnitNamer: "1" is dimensionless
		{"throughput", "By/s", gauge, []string{"throughput_bytes_per_second"}, writev2.Metadata_METRIC_TYPE_GAUGE, "bytes_per_second"},
		{"latency_seconds", "s", gauge, []string{"latency_seconds"}, writev2.Metadata_METRIC_TYPE_GAUGE, "seconds"},
		{"my-metric/x", "", gauge, []string{"my_metric_x"}, writev2.Metadata_METRIC_TYPE_GAUGE, ""},
		{"rpc.duration", "ms", hist, []string{"rpc_duration_milliseconds_bucket", "rpc_duration_milliseconds_count", "rpc_duration_milliseconds_sum"}, writev2.Metadata_METRIC_TYPE_HISTOGRAM, "milliseconds"},
		{"gc.pause", "s", summary, []string{"gc_pause_seconds", "gc_pause_seconds_count", "gc_pause_seconds_sum"}, writev2.Metadata_METRIC_TYPE_SUMMARY, "seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := pmetric.NewMetrics()
			m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
			m.SetName(tc.name)
			m.SetUnit(tc.unit)
			ts := pcommon.NewTimestampFromTime(at)
			switch tc.kind {
			case gauge:
				p := m.SetEmptyGauge().DataPoints().AppendEmpty()
				p.SetTimestamp(ts)
				p.SetDoubleValue(1)
			case counter, upDown:
				s := m.SetEmptySum()
				s.SetIsMonotonic(tc.kind == counter)
				s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
				p := s.DataPoints().AppendEmpty()
				p.SetTimestamp(ts)
				p.SetIntValue(1)
			case hist:
				h := m.SetEmptyHistogram()
				h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
				p := h.DataPoints().AppendEmpty()
				p.SetTimestamp(ts)
				p.ExplicitBounds().FromRaw([]float64{1})
				p.BucketCounts().FromRaw([]uint64{1, 0})
				p.SetCount(1)
				p.SetSum(0.5)
			case summary:
				p := m.SetEmptySummary().DataPoints().AppendEmpty()
				p.SetTimestamp(ts)
				p.SetCount(1)
				p.SetSum(0.5)
				q := p.QuantileValues().AppendEmpty()
				q.SetQuantile(0.5)
				q.SetValue(0.5)
			}
			sr := newSpecReceiver(t, nil)
			exp, err := New(Config{Endpoints: []string{sr.url}, Protocol: "2.0"})
			if err != nil {
				t.Fatal(err)
			}
			if err := exp.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: otlpBody(t, md)}}); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range sr.requests() {
				raw, _ := snappy.Decode(nil, r.body)
				var req writev2.Request
				if err := req.Unmarshal(raw); err != nil {
					t.Fatal(err)
				}
				ss, _ := decodeSpec(t, r)
				for k, s := range ss {
					if got := req.Timeseries[k].Metadata; got.Type != tc.typ || req.Symbols[got.UnitRef] != tc.metaUnit {
						t.Errorf("%s: metadata type %v unit %q, want %v %q", s.labels[0].Value, got.Type, req.Symbols[got.UnitRef], tc.typ, tc.metaUnit)
					}
					if !slices.Contains(names, s.labels[0].Value) {
						names = append(names, s.labels[0].Value)
					}
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.want) {
				t.Errorf("series %v, want %v", names, tc.want)
			}
		})
	}
}

// Over 2.0 a series must hold a sample or a histogram (Prometheus's 2.0
// receiver refuses one of exemplars alone with 400). Remote write 1.0 as
// Prometheus sends it (each exemplar a series of its own) relayed over
// 2.0: the exemplars go on the series of their labels that has a sample
// in the request; those of a series without one are left out and counted.
func TestSpecV2ExemplarsOnASample(t *testing.T) {
	lbls := []prompb.Label{{Name: "__name__", Value: "rq_total"}, {Name: "job", Value: "a"}}
	other := []prompb.Label{{Name: "__name__", Value: "other_total"}, {Name: "job", Value: "a"}}
	ex := func(v float64) []prompb.Exemplar {
		return []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "t1"}}, Value: v, Timestamp: 1_800_000_000_500}}
	}
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: lbls, Exemplars: ex(6)},
		{Labels: lbls, Samples: []prompb.Sample{{Value: 5, Timestamp: 1_800_000_000_000}}},
		{Labels: lbls, Exemplars: ex(7)},
		{Labels: other, Exemplars: ex(8)},
	}}
	sr := newSpecReceiver(t, nil)
	exp, err := New(Config{Endpoints: []string{sr.url}, Protocol: "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), []exporter.Record{v1Record(t, "t", req)}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range sr.requests() {
		ss, _ := decodeSpec(t, r)
		for _, s := range ss {
			got = append(got, fmt.Sprintf("%s samples=%d exemplars=%d", s.labels[0].Value, len(s.samples), len(s.exemplars)))
		}
	}
	if dropped, _ := exp.DroppedPoints(); strings.Join(got, ";") != "rq_total samples=1 exemplars=2" || dropped != 1 {
		t.Errorf("series %q, dropped %d; want rq_total's sample with both its exemplars, other_total's exemplar dropped", got, dropped)
	}
}

// Redirects: 307 and 308 keep the method and body, so the request is
// sent again to the new location; 301, 302 and 303 would turn it into a
// GET without a body (Go's client, as browsers do), which a page at the
// new location may well answer 200, the samples lost and counted sent.
// They are not followed: the request is refused for good (a wrong URL),
// dropped and counted, and the log names the status.
func TestSpecRedirects(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	recs := []exporter.Record{{Kind: signal.KindMetrics, Tenant: "t", Body: testMetrics(t, at, 1)}}
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			var gets atomic.Int64
			target := newSpecReceiver(t, func(_ int, r specRequest, w http.ResponseWriter) {
				if r.method != http.MethodPost {
					gets.Add(1)
					w.WriteHeader(http.StatusOK) // a page, not a receiver
					return
				}
				writtenAnswer(r, w, 1)
			})
			from := newSpecReceiver(t, func(_ int, _ specRequest, w http.ResponseWriter) {
				w.Header().Set("Location", target.url+"/api/v1/write")
				w.WriteHeader(code)
			})
			exp, err := New(Config{Endpoints: []string{from.url}})
			if err != nil {
				t.Fatal(err)
			}
			if err := exp.Send(waittest.Context(t), recs); err != nil {
				t.Fatal(err)
			}
			ep := exp.Endpoints()[0]
			posts := 0
			for _, r := range target.requests() {
				if r.method == http.MethodPost {
					posts++
					decodeSpec(t, r)
				}
			}
			follow := code == 307 || code == 308
			if follow && (posts != 1 || ep.Stats.Dropped.Load() != 0) || !follow && (posts+int(gets.Load()) != 0 || ep.Stats.Dropped.Load() != 1) {
				t.Errorf("%d: the target got %d POSTs and %d GETs, dropped %d; want the request %s", code, posts, gets.Load(), ep.Stats.Dropped.Load(),
					map[bool]string{true: "sent there", false: "dropped, not followed"}[follow])
			}
		})
	}
}
