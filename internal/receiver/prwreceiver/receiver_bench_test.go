package prwreceiver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/stats"
)

// decodingConsumer does what the pipeline's consumer does with a request
// before the queue append: take the decoded batch (decode an OTLP body).
type decodingConsumer struct{ m signal.Metrics }

func (c *decodingConsumer) Consume(_ context.Context, req *otlpreceiver.Request) (otlpreceiver.Result, error) {
	if req.Metrics != nil {
		c.m, *req.Metrics = *req.Metrics, c.m
		return otlpreceiver.Result{}, nil
	}
	c.m.Reset()
	return otlpreceiver.Result{}, otlp.DecodeMetrics(&c.m, req.Body)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serveV1 posts a snappy-encoded remote write 1.0 body to h and fails
// unless it is written (204).
func serveV1(b *testing.B, h http.Handler, body []byte) {
	r := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/x-protobuf")
	r.Header.Set("Content-Encoding", "snappy")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusNoContent {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
}

// BenchmarkServeV1 is one remote write 1.0 request of 1,000 series (one
// sample, 5 labels each) through the handler: snappy, decode, and the
// hand-over to the consumer; no queue append.
func BenchmarkServeV1(b *testing.B) { benchServe(b, 1000, 5, &decodingConsumer{}) }

// benchServe serves one remote write 1.0 request of n series (one sample,
// a metric name cycling over 50 and labels labels each) to c through the
// handler, over and over, and reports samples per CPU-second.
func benchServe(b *testing.B, n, labels int, c otlpreceiver.Consumer) {
	req := &prompb.WriteRequest{}
	for i := range n {
		ls := []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("metric_%d_total", i%50)}}
		for k := range labels {
			ls = append(ls, prompb.Label{Name: fmt.Sprintf("label_%d", k), Value: fmt.Sprintf("value_%d_%d", k, i)})
		}
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: float64(i), Timestamp: 1700000000000 + int64(i)}}})
	}
	raw, _ := req.Marshal()
	body := snappy.Encode(nil, raw)
	h, err := New(Config{MaxConcurrentRequests: 1}, c)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		serveV1(b, h, body)
	}
	b.ReportMetric(float64(n)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "samples/cpu-s")
}

// scanConsumer takes scanned requests, as the pipeline's consumer does
// without processing rules.
type scanConsumer struct{ decodingConsumer }

func (c *scanConsumer) TakesScanned() bool { return true }

func (c *scanConsumer) Consume(ctx context.Context, req *otlpreceiver.Request) (otlpreceiver.Result, error) {
	if req.Scanned != nil {
		return otlpreceiver.Result{}, nil
	}
	return c.decodingConsumer.Consume(ctx, req)
}

// BenchmarkServeV1Scanned is BenchmarkServeV1 through the scan (no batch),
// for a large and a small request: what the receiver costs a relay.
func BenchmarkServeV1Scanned(b *testing.B) {
	for _, c := range [][2]int{{1000, 5}, {100, 6}} {
		b.Run(fmt.Sprintf("series=%d/labels=%d", c[0], c[1]), func(b *testing.B) {
			benchServe(b, c[0], c[1], &scanConsumer{})
		})
	}
}

// statsConsumer takes scanned requests and counts them in live
// statistics, as the pipeline's consumer does after the queue append.
type statsConsumer struct {
	scanConsumer
	st *stats.Stats
}

func (c *statsConsumer) Consume(ctx context.Context, req *otlpreceiver.Request) (otlpreceiver.Result, error) {
	if req.Scanned != nil {
		c.st.ObserveSeries(req.Tenant, &req.Scanned.Series, len(req.Body))
		return otlpreceiver.Result{}, nil
	}
	return c.decodingConsumer.Consume(ctx, req)
}

// BenchmarkServeV1Relay is the relay benchmark's load (scripts/bench-relay.sh,
// TestRelayLoad in internal/e2e: 64 distinct requests of 1,500 or 100
// series, 8 or 6 labels, 30,000 series in all, cycled) through the handler,
// the scan and the live statistics: the relay's CPU per sample without
// HTTP, the queue and the exporter, with the caches as the relay has
// them (the statistics' series table next to the requests scanned).
func BenchmarkServeV1Relay(b *testing.B) {
	for _, c := range [][2]int{{1500, 8}, {100, 6}} {
		b.Run(fmt.Sprintf("series=%d/labels=%d", c[0], c[1]), func(b *testing.B) {
			perReq, nLabels := c[0], c[1]
			const distinct, series = 64, 30_000
			t0 := time.Now().Add(-time.Hour).UnixMilli()
			bodies := make([][]byte, distinct)
			for k := range bodies {
				req := &prompb.WriteRequest{}
				for i := range perReq {
					id := (k*perReq + i) % series
					ls := []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("relay_metric_%d", id%50)}}
					extra := []string{"instance", "job", "pod", "namespace", "container", "zone", "path", "code", "method"}
					for j := 0; j < nLabels-1 && j < len(extra); j++ {
						ls = append(ls, prompb.Label{Name: extra[j], Value: fmt.Sprintf("%s-%d", extra[j], (id>>uint(j))%97+id%7)})
					}
					ls = append(ls, prompb.Label{Name: "series", Value: strconv.Itoa(id)})
					if len(ls) > nLabels {
						ls = append(ls[:nLabels-1], ls[len(ls)-1])
					}
					sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
					req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: ls,
						Samples: []prompb.Sample{{Value: float64(k*perReq + i), Timestamp: t0 + int64(k)*1000}}})
				}
				raw, err := req.Marshal()
				if err != nil {
					b.Fatal(err)
				}
				bodies[k] = snappy.Encode(nil, raw)
			}
			st, err := stats.New(stats.Config{})
			if err != nil {
				b.Fatal(err)
			}
			h, err := New(Config{MaxConcurrentRequests: 1}, &statsConsumer{st: st})
			if err != nil {
				b.Fatal(err)
			}
			for _, body := range bodies { // every series known: the steady state
				serveV1(b, h, body)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for n := 0; n < b.N; n++ {
				serveV1(b, h, bodies[n%distinct])
			}
			// CPU time, not wall time: the machine is shared.
			b.ReportMetric(float64(perReq)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "samples/cpu-s")
		})
	}
}
