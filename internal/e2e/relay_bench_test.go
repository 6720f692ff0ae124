package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/prw"
	sig "github.com/sluice-dev/sluice/internal/signal"
)

// The two helpers of scripts/bench-relay.sh, run from the e2e test binary
// only when their environment is set (never in make test).

// TestRelaySink is a remote-write null sink: it decodes each request (1.0,
// or 2.0 by its Content-Type) to count its samples and answers 204 (2.0
// with its written headers). It writes its address to
// SLUICE_BENCH_RELAY_SINK, serves GET /count, and runs until SIGTERM.
func TestRelaySink(t *testing.T) {
	out := os.Getenv("SLUICE_BENCH_RELAY_SINK")
	if out == "" {
		t.Skip("scripts/bench-relay.sh helper (SLUICE_BENCH_RELAY_SINK not set)")
	}
	var samples, requests atomic.Int64
	var pool sync.Pool
	type scratch struct {
		raw, body []byte
		batch     sig.Metrics
		dec       prw.Decoder
	}
	pool.New = func() any { return new(scratch) }
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/write", func(w http.ResponseWriter, r *http.Request) {
		s := pool.Get().(*scratch)
		defer pool.Put(s)
		buf := bytes.NewBuffer(s.raw[:0])
		if _, err := buf.ReadFrom(r.Body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		s.raw = buf.Bytes()
		var err error
		if s.body, err = snappy.Decode(s.body[:cap(s.body)], s.raw); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		s.batch.Reset()
		v2 := strings.Contains(r.Header.Get("Content-Type"), "io.prometheus.write.v2.Request")
		var st prw.Stats
		if v2 {
			st, err = s.dec.DecodeV2(&s.batch, s.body)
		} else {
			st, err = s.dec.DecodeV1(&s.batch, s.body)
		}
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		samples.Add(int64(st.Samples))
		requests.Add(1)
		if v2 {
			w.Header().Set("X-Prometheus-Remote-Write-Samples-Written", strconv.Itoa(st.Samples))
			w.Header().Set("X-Prometheus-Remote-Write-Histograms-Written", "0")
			w.Header().Set("X-Prometheus-Remote-Write-Exemplars-Written", "0")
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%d %d\n", samples.Load(), requests.Load())
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	if err := os.WriteFile(out+".tmp", []byte(ln.Addr().String()), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Rename(out+".tmp", out)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	srv.Close()
}

// TestRelayLoad sends remote-write 1.0 load to SLUICE_BENCH_RELAY_TARGET
// (a full URL): SLUICE_BENCH_RELAY_SAMPLES samples in requests of
// SLUICE_BENCH_RELAY_PER_REQ series of one sample each, every series with
// SLUICE_BENCH_RELAY_LABELS labels (including __name__, sorted by name as
// Prometheus sends them), from
// SLUICE_BENCH_RELAY_WORKERS workers. Requests are encoded before the
// clock starts, so the generator costs little more than its HTTP client.
// SLUICE_BENCH_RELAY_PROTO=2 sends remote write 2.0 instead, as
// Prometheus's 2.0 sender writes it: one symbols table per request and
// metadata (type gauge) on every series.
func TestRelayLoad(t *testing.T) {
	target := os.Getenv("SLUICE_BENCH_RELAY_TARGET")
	if target == "" {
		t.Skip("scripts/bench-relay.sh helper (SLUICE_BENCH_RELAY_TARGET not set)")
	}
	total := envInt(t, "SLUICE_BENCH_RELAY_SAMPLES", 2_000_000)
	perReq := envInt(t, "SLUICE_BENCH_RELAY_PER_REQ", 1500)
	nLabels := envInt(t, "SLUICE_BENCH_RELAY_LABELS", 8)
	workers := envInt(t, "SLUICE_BENCH_RELAY_WORKERS", 4)
	series := envInt(t, "SLUICE_BENCH_RELAY_SERIES", 30_000)
	proto := envInt(t, "SLUICE_BENCH_RELAY_PROTO", 1)
	nReq := total / perReq
	// 64 distinct bodies per worker cycle; timestamps advance per body.
	const distinct = 64
	bodies := make([][]byte, distinct)
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	for b := range bodies {
		req := &prompb.WriteRequest{}
		for i := range perReq {
			id := (b*perReq + i) % series
			ls := []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("relay_metric_%d", id%50)}}
			extra := []string{"instance", "job", "pod", "namespace", "container", "zone", "path", "code", "method"}
			for k := 0; k < nLabels-1 && k < len(extra); k++ {
				ls = append(ls, prompb.Label{Name: extra[k], Value: fmt.Sprintf("%s-%d", extra[k], (id>>uint(k))%97+id%7)})
			}
			ls = append(ls, prompb.Label{Name: "series", Value: strconv.Itoa(id)})
			if len(ls) > nLabels {
				ls = append(ls[:nLabels-1], ls[len(ls)-1])
			}
			// Sorted by name, as Prometheus sends them.
			sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: ls,
				Samples: []prompb.Sample{{Value: float64(b*perReq + i), Timestamp: t0 + int64(b)*1000}}})
		}
		raw, err := req.Marshal()
		if proto == 2 {
			raw, err = relayV2(req).Marshal()
		}
		if err != nil {
			t.Fatal(err)
		}
		bodies[b] = snappy.Encode(nil, raw)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}, Timeout: time.Minute}
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(nReq) {
					return
				}
				for attempt := 0; ; attempt++ {
					req, _ := http.NewRequest(http.MethodPost, target, bytes.NewReader(bodies[i%distinct]))
					req.Header.Set("Content-Type", "application/x-protobuf")
					req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
					if proto == 2 {
						req.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
						req.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
					}
					req.Header.Set("Content-Encoding", "snappy")
					resp, err := client.Do(req)
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode/100 == 2 {
							break
						}
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
					failed.Add(1)
					if attempt > 100 {
						t.Errorf("request %d: %v", i, err)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	fmt.Printf("load: %d requests (remote write %d) of %d samples (%d labels) in %.2fs, %.0f samples/s acknowledged, %d retried\n",
		nReq, proto, perReq, nLabels, d.Seconds(), float64(nReq*perReq)/d.Seconds(), failed.Load())
}

// relayV2 is req as a remote write 2.0 request.
func relayV2(req *prompb.WriteRequest) *writev2.Request {
	st := writev2.NewSymbolTable()
	out := &writev2.Request{}
	for _, ts := range req.Timeseries {
		var refs []uint32
		for _, l := range ts.Labels {
			refs = append(refs, st.Symbolize(l.Name), st.Symbolize(l.Value))
		}
		w := writev2.TimeSeries{LabelsRefs: refs, Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE}}
		for _, smp := range ts.Samples {
			w.Samples = append(w.Samples, writev2.Sample{Value: smp.Value, Timestamp: smp.Timestamp})
		}
		out.Timeseries = append(out.Timeseries, w)
	}
	out.Symbols = st.Symbols()
	return out
}
