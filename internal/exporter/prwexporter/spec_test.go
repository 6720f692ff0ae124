package prwexporter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/signal"
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
		if err := exp.Send(context.Background(), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "acme", Body: testMetrics(t, at, 1)}}); err != nil {
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
	if err := exp.Send(context.Background(), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "acme", Body: testMetrics(t, at, 1)}}); err != nil {
		t.Fatal(err)
	}
	if got := sr.requests()[0].header.Get("User-Agent"); got != "acme-relay/2.1" {
		t.Errorf("configured User-Agent: got %q", got)
	}
}
