package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

// audBackend is a remote-write receiver whose answers a test scripts: it
// records when each request came, holds requests while hold says so, and
// keeps the samples of the requests it accepted (2xx).
type audBackend struct {
	srv *httptest.Server
	URL string

	mu      sync.Mutex
	answer  func(n int) (int, http.Header) // n: the request's index, from 0
	times   []time.Time
	samples map[string]int // accepted samples per __name__

	inflight, maxInflight atomic.Int64
	hold                  func() bool // hold a request while it returns true
}

func newAudBackend(t *testing.T, answer func(n int) (int, http.Header)) *audBackend {
	t.Helper()
	b := &audBackend{answer: answer, samples: map[string]int{}}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	b.URL = b.srv.URL + "/api/v1/write"
	return b
}

func (b *audBackend) serve(w http.ResponseWriter, r *http.Request) {
	n := b.inflight.Add(1)
	defer b.inflight.Add(-1)
	for m := b.maxInflight.Load(); n > m && !b.maxInflight.CompareAndSwap(m, n); m = b.maxInflight.Load() {
	}
	if b.hold != nil {
		for end := time.Now().Add(30 * time.Second); b.hold() && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	idx := len(b.times)
	b.times = append(b.times, time.Now())
	answer := b.answer
	b.mu.Unlock()
	code, hdr := 200, http.Header(nil)
	if answer != nil {
		code, hdr = answer(idx)
	}
	if code/100 == 2 {
		plain, err := snappy.Decode(nil, body)
		var req prompb.WriteRequest
		if err == nil {
			err = req.Unmarshal(plain)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		for _, ts := range req.Timeseries {
			for _, l := range ts.Labels {
				if l.Name == "__name__" {
					b.samples[l.Value] += len(ts.Samples)
				}
			}
		}
		b.mu.Unlock()
	}
	for k, v := range hdr {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
	if code/100 != 2 {
		fmt.Fprintf(w, "scripted answer %d", code)
	}
}

func (b *audBackend) requests() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.times)
}

func (b *audBackend) got(name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.samples[name]
}

func (b *audBackend) requestTimes() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.times...)
}

// audRelay starts a forward-only sluice whose metrics pipeline sends
// remote write (received on its own listener) to the exporters of
// exporters (YAML under exporters:, each named in the pipeline).
func audRelay(t *testing.T, exporters string, names ...string) *server {
	t.Helper()
	dir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}
  prometheus_remote_write: {listen: 127.0.0.1:0}
admin: {addr: 127.0.0.1:0}
query: {addr: 127.0.0.1:0}
lake: {root: %s}
queue: {dir: %s}
exporters:
%s
pipelines:
  metrics: {receivers: [prometheus_remote_write, otlp], exporters: [%s]}
shutdown_timeout: %s
`, filepath.Join(dir, "lake"), filepath.Join(dir, "queue"), exporters, strings.Join(names, ", "), runShutdownTimeout))
	return startServer(t, cfg)
}

// audWrite sends one 1.0 request of a series of metric name with n samples.
func audWrite(t *testing.T, addr, name string, n int) {
	t.Helper()
	api, err := remoteapi.NewAPI("http://"+addr, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}, {Name: "job", Value: "audout"}}}
	t0 := time.Now().Add(-10 * time.Minute).UnixMilli()
	for i := range n {
		ts.Samples = append(ts.Samples, prompb.Sample{Value: float64(i), Timestamp: t0 + int64(i)*1000})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}}); err != nil {
		t.Fatalf("remote write to sluice: %v", err)
	}
}

// TestAudoutPermanentRefusals: a backend answering 400, 401 or 404
// refuses the data for good (the remote-write rule: a 4xx other than 429
// is not retried). Each exporter drops the request once, counts it in
// sluice_exporter_dropped_requests_total{exporter,endpoint}, logs a line
// naming the exporter, the endpoint and the status, moves on (the next
// request is sent, the breaker stays closed) and never retries it. (A 413
// is sent again in parts: rw_toolarge_test.go.)
func TestAudoutPermanentRefusals(t *testing.T) {
	codes := []int{400, 401, 404}
	var yaml []string
	var names []string
	backends := map[int]*audBackend{}
	for _, c := range codes {
		b := newAudBackend(t, func(int) (int, http.Header) { return c, nil })
		backends[c] = b
		name := fmt.Sprintf("prometheus_remote_write/s%d", c)
		names = append(names, name)
		yaml = append(yaml, fmt.Sprintf("  %s: {endpoints: [%s], batch_delay: 20ms, retry_initial_backoff: 10ms}", name, b.URL))
	}
	s := audRelay(t, strings.Join(yaml, "\n"), names...)
	for round := 1; round <= 2; round++ {
		audWrite(t, s.prw, "aud_refused", 3)
		for _, c := range codes {
			b := backends[c]
			series := fmt.Sprintf(`sluice_exporter_dropped_requests_total{endpoint=%q,exporter="prometheus_remote_write/s%d"}`, b.URL, c)
			if !waitFor(30*time.Second, func() bool { return metricValue(t, s.admin, series) == float64(round) }) {
				t.Fatalf("%d: %s = %v after round %d, want %d\n%s", c, series, metricValue(t, s.admin, series), round, round, scrapeMetrics(t, s.admin))
			}
			if got := b.requests(); got != round {
				t.Errorf("%d: the backend got %d requests after round %d, want %d (a permanent refusal is not retried)", c, got, round, round)
			}
		}
	}
	m := scrapeMetrics(t, s.admin)
	for _, c := range codes {
		b := backends[c]
		name := fmt.Sprintf("prometheus_remote_write/s%d", c)
		for _, series := range []string{
			fmt.Sprintf(`sluice_exporter_retried_requests_total{endpoint=%q,exporter=%q} 0`, b.URL, name),
			fmt.Sprintf(`sluice_exporter_breaker_state{endpoint=%q,exporter=%q} 0`, b.URL, name),
			fmt.Sprintf(`sluice_exporter_queue_lag_bytes{exporter=%q} 0`, name),
		} {
			if !strings.Contains(m, series+"\n") {
				t.Errorf("%d: /metrics has no line %q", c, series)
			}
		}
		// One log line per refusal at most, naming what a user needs.
		found := false
		for _, l := range strings.Split(s.stderr.String(), "\n") {
			if strings.Contains(l, name) && strings.Contains(l, b.URL) && strings.Contains(l, fmt.Sprint(c)) && strings.Contains(l, "scripted answer") {
				found = true
			}
		}
		if !found {
			t.Errorf("%d: no log line names the exporter %s, the endpoint %s, the status and the backend's answer:\n%s", c, name, b.URL, s.stderr)
		}
	}
}

// TestAudoutRetryAfter: 429 and 503 answers are retried, and their
// Retry-After (delay-seconds, then an HTTP-date) is waited out even though
// retry_initial_backoff is 10ms; the sample then arrives once, and the
// retries are counted.
func TestAudoutRetryAfter(t *testing.T) {
	var dateSet time.Time
	b := newAudBackend(t, func(n int) (int, http.Header) {
		switch n {
		case 0:
			return 429, http.Header{"Retry-After": {"2"}}
		case 1:
			dateSet = time.Now()
			return 503, http.Header{"Retry-After": {dateSet.Add(3 * time.Second).UTC().Format(http.TimeFormat)}}
		}
		return 200, nil
	})
	s := audRelay(t, fmt.Sprintf("  prometheus_remote_write/ra: {endpoints: [%s], batch_delay: 20ms, retry_initial_backoff: 10ms, retry_max_backoff: 20ms}", b.URL),
		"prometheus_remote_write/ra")
	audWrite(t, s.prw, "aud_retry_after", 5)
	if !waitFor(60*time.Second, func() bool { return b.got("aud_retry_after") == 5 }) {
		t.Fatalf("the backend got %d of 5 samples after two refusals with Retry-After", b.got("aud_retry_after"))
	}
	ts := b.requestTimes()
	if len(ts) != 3 {
		t.Fatalf("%d requests, want 3 (429, 503, 200)", len(ts))
	}
	if d := ts[1].Sub(ts[0]); d < 2*time.Second {
		t.Errorf("retry after 429 with Retry-After: 2 came %v later, want >= 2s", d)
	}
	// HTTP-date has one-second resolution: the date said dateSet+3s
	// truncated to the second, so at least 2s.
	if d := ts[2].Sub(ts[1]); d < 2*time.Second {
		t.Errorf("retry after 503 with an HTTP-date 3s ahead came %v later, want >= 2s", d)
	}
	series := fmt.Sprintf(`sluice_exporter_retried_requests_total{endpoint=%q,exporter="prometheus_remote_write/ra"}`, b.URL)
	if v := metricValue(t, s.admin, series); v != 2 {
		t.Errorf("%s = %v, want 2", series, v)
	}
}

// TestAudoutBreaker: an endpoint that fails opens its breaker (state 2 on
// /metrics, opened counted) and, once it answers again, the breaker closes
// (state 0) and what was held is delivered.
func TestAudoutBreaker(t *testing.T) {
	var up atomic.Bool
	b := newAudBackend(t, func(int) (int, http.Header) {
		if up.Load() {
			return 200, nil
		}
		return 503, nil
	})
	name := "prometheus_remote_write/br"
	s := audRelay(t, fmt.Sprintf("  %s: {endpoints: [%s], batch_delay: 20ms, retry_initial_backoff: 10ms, retry_max_backoff: 50ms, breaker_failures: 3, breaker_cooldown: 300ms}", name, b.URL), name)
	audWrite(t, s.prw, "aud_breaker", 4)
	state := fmt.Sprintf(`sluice_exporter_breaker_state{endpoint=%q,exporter=%q}`, b.URL, name)
	opened := fmt.Sprintf(`sluice_exporter_breaker_opened_total{endpoint=%q,exporter=%q}`, b.URL, name)
	if !waitFor(30*time.Second, func() bool { return metricValue(t, s.admin, state) == 2 }) {
		t.Fatalf("breaker never open:\n%s", scrapeMetrics(t, s.admin))
	}
	if v := metricValue(t, s.admin, opened); v < 1 {
		t.Errorf("%s = %v, want >= 1", opened, v)
	}
	if v := metricValue(t, s.admin, fmt.Sprintf(`sluice_exporter_queue_lag_bytes{exporter=%q}`, name)); v <= 0 {
		t.Errorf("queue lag %v bytes while the endpoint is down, want > 0", v)
	}
	up.Store(true)
	if !waitFor(30*time.Second, func() bool { return b.got("aud_breaker") == 4 }) {
		t.Fatalf("after the endpoint came back the backend got %d of 4 samples", b.got("aud_breaker"))
	}
	if !waitFor(30*time.Second, func() bool { return metricValue(t, s.admin, state) == 0 }) {
		t.Fatalf("breaker did not close:\n%s", scrapeMetrics(t, s.admin))
	}
	// A single small request later is delivered on its own, not held for
	// a fuller batch.
	audWrite(t, s.prw, "aud_breaker_after", 1)
	if !waitFor(30*time.Second, func() bool { return b.got("aud_breaker_after") == 1 }) {
		t.Fatalf("a single small request was not delivered")
	}
}
