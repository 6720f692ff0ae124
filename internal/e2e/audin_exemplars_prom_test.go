package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// exemplarSet renders an exemplars answer as sorted lines: series labels,
// exemplar labels, value, time in ms.
func exemplarSet(a exemplarAnswer) []string {
	var out []string
	for _, s := range a {
		for _, e := range s.Exemplars {
			out = append(out, fmt.Sprintf("%v %v %s %d", s.SeriesLabels, e.Labels, e.Value, int64(e.Timestamp*1000+0.5)))
		}
	}
	sort.Strings(out)
	return out
}

// TestAudinPrometheusExemplarsToSluice: Debian's Prometheus 2.42 (exemplar
// storage on) scrapes a counter and a classic histogram with exemplars in
// the OpenMetrics exposition and remote-writes them (1.0, send_exemplars)
// to `sluice run`. Prometheus sends each exemplar in a TimeSeries of its
// own, without samples; /api/v1/query_exemplars of sluice answers the
// exemplars Prometheus's own answers, series by series.
func TestAudinPrometheusExemplarsToSluice(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr))
	sbase := "http://" + qaddr

	reg := prometheus.NewRegistry()
	ctr := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "audx_requests_total", Help: "Requests."}, []string{"code"})
	hist := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "audx_latency_seconds", Help: "Latency.", Buckets: []float64{0.1, 1}})
	reg.MustRegister(ctr, hist)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true})}
	go target.Serve(ln)
	t.Cleanup(func() { target.Close() })
	observe := func(i int) {
		ctr.WithLabelValues("200").(prometheus.ExemplarAdder).AddWithExemplar(1, prometheus.Labels{"trace_id": fmt.Sprintf("c%04d", i)})
		hist.(prometheus.ExemplarObserver).ObserveWithExemplar(float64(i%3)*0.4, prometheus.Labels{"trace_id": fmt.Sprintf("h%04d", i)})
	}
	observe(0)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(700 * time.Millisecond):
				observe(i)
			}
		}
	}()

	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: audx
    static_configs: [{targets: ["%s"]}]
remote_write:
  - url: http://%s/api/v1/write
    send_exemplars: true
    queue_config: {batch_send_deadline: 200ms, min_backoff: 100ms}
`, ln.Addr(), qaddr)
	pbase, stderr := startPrometheus(t, freePort(t), cfg, "--enable-feature=exemplar-storage")
	q := url.Values{"query": {`{__name__=~"audx_.*"}`}, "start": {fmt.Sprint(time.Now().Add(-time.Hour).Unix())}, "end": {fmt.Sprint(time.Now().Add(time.Hour).Unix())}}
	// Wait until Prometheus holds exemplars of both metrics from a few
	// scrapes, then stop observing: what it holds stops growing.
	for start := time.Now(); ; time.Sleep(300 * time.Millisecond) {
		if time.Since(start) > 60*time.Second {
			t.Fatalf("prometheus has no exemplars of both metrics:\n%v\n%s", exemplarSet(queryExemplars(t, pbase, http.MethodGet, q)), stderr)
		}
		got := strings.Join(exemplarSet(queryExemplars(t, pbase, http.MethodGet, q)), "\n")
		if strings.Count(got, "trace_id:c") >= 3 && strings.Count(got, "trace_id:h") >= 3 {
			break
		}
	}
	close(stop)
	<-done
	// Nothing new is observed now: Prometheus's set stops growing once it
	// scraped the last exemplars, and sluice's must reach the same. Both
	// are read again on every round, so a late scrape cannot fail it.
	var got, want []string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		want = exemplarSet(queryExemplars(t, pbase, http.MethodGet, q))
		got = exemplarSet(queryExemplars(t, sbase, http.MethodGet, q))
		if strings.Join(got, "\n") == strings.Join(want, "\n") {
			break
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("sluice's exemplars\n%s\nprometheus's\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), stderr)
	}
	t.Logf("%d exemplars agree", len(want))
}
