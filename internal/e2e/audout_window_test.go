package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
)

// otlpLogsBackend is an OTLP/HTTP logs receiver that counts requests in
// flight (holding each while hold says so) and the "seq" attributes of
// the records it got.
type otlpLogsBackend struct {
	URL                   string
	inflight, maxInflight atomic.Int64
	hold                  func() bool
	down                  atomic.Bool // answer 503
	mu                    sync.Mutex
	seqs                  map[int64]int
	encodings             map[string]int
}

func newOTLPLogsBackend(t *testing.T) *otlpLogsBackend {
	b := &otlpLogsBackend{seqs: map[int64]int{}, encodings: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.inflight.Add(1)
		defer b.inflight.Add(-1)
		for m := b.maxInflight.Load(); n > m && !b.maxInflight.CompareAndSwap(m, n); m = b.maxInflight.Load() {
		}
		for end := time.Now().Add(30 * time.Second); b.hold != nil && b.hold() && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
		if b.down.Load() {
			io.Copy(io.Discard, r.Body)
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path != "/v1/logs" {
			http.Error(w, "path "+r.URL.Path, http.StatusNotFound)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		enc := r.Header.Get("Content-Encoding")
		var err error
		switch enc {
		case "gzip":
			var zr *gzip.Reader
			if zr, err = gzip.NewReader(bytes.NewReader(raw)); err == nil {
				raw, err = io.ReadAll(zr)
			}
		case "zstd":
			var d *zstd.Decoder
			if d, err = zstd.NewReader(nil); err == nil {
				raw, err = d.DecodeAll(raw, nil)
				d.Close()
			}
		}
		req := plogotlp.NewExportRequest()
		if err == nil {
			err = req.UnmarshalProto(raw)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		b.encodings[enc]++
		rls := req.Logs().ResourceLogs()
		for i := range rls.Len() {
			sls := rls.At(i).ScopeLogs()
			for j := range sls.Len() {
				lrs := sls.At(j).LogRecords()
				for k := range lrs.Len() {
					if v, ok := lrs.At(k).Attributes().Get("seq"); ok {
						b.seqs[v.Int()]++
					}
				}
			}
		}
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(nil)
	}))
	t.Cleanup(srv.Close)
	b.URL = srv.URL
	return b
}

// count returns how often seq arrived.
func (b *otlpLogsBackend) count(seq int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seqs[seq]
}

func (b *otlpLogsBackend) distinct() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seqs)
}

// TestAudoutOTLPConcurrency: concurrency is "requests in flight per
// endpoint". With a backend slow to answer and many queued requests, an
// otlp exporter (http, gzip and zstd) has several requests in flight to
// its endpoint at once, and every acknowledged record arrives.
func TestAudoutOTLPConcurrency(t *testing.T) {
	for _, comp := range []string{"gzip", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			b := newOTLPLogsBackend(t)
			var release atomic.Bool
			b.hold = func() bool { return !release.Load() && b.inflight.Load() < 3 }
			dir := t.TempDir()
			cfg := writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}
admin: {addr: 127.0.0.1:0}
lake: {root: %s}
queue: {dir: %s}
exporters:
  otlp/slow:
    endpoints: [%s]
    compression: %s
    concurrency: 3
    batch_bytes: 1KiB
    batch_delay: 10ms
pipelines:
  logs: {receivers: [otlp], exporters: [otlp/slow]}
shutdown_timeout: %s
`, filepath.Join(dir, "lake"), filepath.Join(dir, "queue"), b.URL, comp, runShutdownTimeout))
			s := startServer(t, cfg)
			g := newLoadGen(20)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for range 30 {
				if !g.send(t, ctx, http.DefaultClient, s.http) {
					t.Fatalf("sluice refused a logs request (%d refused, %d failed)", g.refused.Load(), g.failed.Load())
				}
			}
			waitFor(30*time.Second, func() bool { return b.maxInflight.Load() >= 3 })
			release.Store(true)
			if m := b.maxInflight.Load(); m < 3 {
				t.Errorf("concurrency 3 and 30 requests queued behind a slow endpoint: at most %d in flight", m)
			}
			want := g.ackedCount()
			if !waitFor(60*time.Second, func() bool { return b.distinct() == want }) {
				t.Fatalf("the backend got %d of %d acknowledged records", b.distinct(), want)
			}
			b.mu.Lock()
			encs := fmt.Sprint(b.encodings)
			b.mu.Unlock()
			if b.encodings[comp] == 0 || len(b.encodings) != 1 {
				t.Errorf("Content-Encoding of the requests: %s, want %s only", encs, comp)
			}
			series := `sluice_exporter_queue_lag_bytes{exporter="otlp/slow"}`
			if !waitFor(30*time.Second, func() bool { return metricValue(t, s.admin, series) == 0 }) {
				t.Errorf("%s = %v after every record was delivered, want 0", series, metricValue(t, s.admin, series))
			}
		})
	}
}
