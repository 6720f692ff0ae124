package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestPrometheusNativeHistogramsToSluice: Debian's real Prometheus (2.42,
// --enable-feature=native-histograms) scrapes native histograms from a
// client_golang target (NativeHistogramBucketFactor 1.1, positive,
// negative and zero observations) in the protobuf exposition and
// remote-writes them (1.0 with send_native_histograms) to a real
// `sluice run` (default 60 s flush interval: within the test's seconds
// sluice answers from its unflushed tail). The same PromQL queries
// against both agree series by
// series: the raw histograms bucket by bucket, histogram_count,
// histogram_sum and rate exactly (up to float rounding);
// histogram_quantile and histogram_fraction within one bucket's width,
// because Prometheus 3 (sluice's engine) interpolates inside a native
// bucket exponentially where 2.42 interpolates linearly.
func TestPrometheusNativeHistogramsToSluice(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr))

	// The scrape target: native histograms only (no classic buckets).
	reg := prometheus.NewRegistry()
	hv := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nh_test_seconds", Help: "Test latencies.",
		NativeHistogramBucketFactor: 1.1, NativeHistogramZeroThreshold: 0.001}, []string{"route"})
	reg.MustRegister(hv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go target.Serve(ln)
	t.Cleanup(func() { target.Close() })
	stop := make(chan struct{})
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		r := rand.New(rand.NewPCG(1, 2))
		a, b := hv.WithLabelValues("/a"), hv.WithLabelValues("/b")
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			for range 20 {
				a.Observe(math.Exp(r.NormFloat64() - 2)) // lognormal around 0.14 s
				switch v := r.NormFloat64(); {
				case v < -1.5:
					b.Observe(0) // the zero bucket
				default:
					b.Observe(v * 3) // both signs
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-observed })

	paddr := freePort(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: nh
    static_configs: [{targets: ["%s"]}]
remote_write:
  - url: http://%s/api/v1/write
    send_native_histograms: true
    queue_config: {batch_send_deadline: 500ms, min_backoff: 100ms}
`, ln.Addr(), qaddr)
	pbase, stderr := startPrometheus(t, paddr, cfg, "--enable-feature=native-histograms")
	sbase := "http://" + qaddr

	// Wait for ten scrapes of both series in Prometheus.
	var stamps []int64
	for start := time.Now(); ; time.Sleep(500 * time.Millisecond) {
		if time.Since(start) > 60*time.Second {
			t.Fatalf("prometheus has scraped %d native histograms:\n%s", len(stamps), stderr)
		}
		res, ok := nhQuery(t, pbase, `nh_test_seconds{route="/a"}[1m]`, time.Now())
		if !ok || len(res) != 1 {
			continue
		}
		stamps = stamps[:0]
		for _, p := range res[0].points {
			stamps = append(stamps, p.t)
		}
		if len(stamps) >= 10 && len(res[0].points[0].h.buckets) > 0 {
			break
		}
	}
	// Evaluate half a scrape interval after a scrape: no range boundary
	// falls on a sample (Prometheus 2's ranges are closed, 3's left-open).
	last := stamps[len(stamps)-1]
	at := time.UnixMilli(last - 500)

	// Remote write lags the scrape: wait until sluice has what Prometheus has.
	caught := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		p, _ := nhQuery(t, pbase, `nh_test_seconds[1m]`, at)
		s, _ := nhQuery(t, sbase, `nh_test_seconds[1m]`, at)
		if len(p) == 2 && nhDiff(p, s, 1e-9) == "" {
			caught = true
			break
		}
	}
	if !caught {
		p, _ := nhQuery(t, pbase, `nh_test_seconds[1m]`, at)
		s, _ := nhQuery(t, sbase, `nh_test_seconds[1m]`, at)
		t.Fatalf("sluice never caught up: %s\n%s", nhDiff(p, s, 1e-9), stderr)
	}
	for _, c := range []struct {
		expr string
		tol  float64
	}{
		{`nh_test_seconds`, 1e-9},
		{`nh_test_seconds[5s]`, 1e-9},
		{`histogram_count(nh_test_seconds)`, 1e-9},
		{`histogram_sum(nh_test_seconds)`, 1e-9},
		{`rate(nh_test_seconds[5s])`, 1e-9},
		{`histogram_count(rate(nh_test_seconds[5s]))`, 1e-9},
		{`histogram_sum(rate(nh_test_seconds[5s]))`, 1e-9},
		{`sum(rate(nh_test_seconds[5s]))`, 1e-9},
		{`histogram_count(sum by (job) (increase(nh_test_seconds[5s])))`, 1e-9},
		// One bucket is 2^(1/8) - 1 = 9% wide at schema 3 (factor 1.1).
		{`histogram_quantile(0.9, rate(nh_test_seconds[5s]))`, 0.1},
		{`histogram_quantile(0.5, nh_test_seconds)`, 0.1},
		{`histogram_quantile(0.99, sum(rate(nh_test_seconds[5s])))`, 0.1},
		{`histogram_fraction(0, 0.2, rate(nh_test_seconds[5s]))`, 0.02},
	} {
		p, ok := nhQuery(t, pbase, c.expr, at)
		if !ok || len(p) == 0 {
			t.Fatalf("%s: prometheus has no result", c.expr)
		}
		s, ok := nhQuery(t, sbase, c.expr, at)
		if !ok {
			t.Fatalf("%s: sluice failed", c.expr)
		}
		if d := nhDiff(p, s, c.tol); d != "" {
			t.Fatalf("%s: %s", c.expr, d)
		}
		t.Logf("%s: %d series agree (max relative difference %.3g)", c.expr, len(p), nhMaxRel(p, s))
	}
}

type nhHist struct {
	count, sum float64
	buckets    [][4]float64 // boundary code, lower, upper, count
}

type nhPoint struct {
	t int64 // ms
	f float64
	h *nhHist
}

type nhSeries struct {
	metric string
	points []nhPoint
}

// nhQuery runs an instant query and returns its series (a vector's
// samples as one-point series), sorted by labels; ok is false on an error
// answer.
func nhQuery(t *testing.T, base, expr string, at time.Time) ([]nhSeries, bool) {
	t.Helper()
	resp, err := http.PostForm(base+"/api/v1/query", url.Values{"query": {expr}, "time": {fmt.Sprintf("%.3f", float64(at.UnixMilli())/1000)}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric     map[string]string   `json:"metric"`
				Value      []json.RawMessage   `json:"value"`
				Values     [][]json.RawMessage `json:"values"`
				Histogram  []json.RawMessage   `json:"histogram"`
				Histograms [][]json.RawMessage `json:"histograms"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &a); err != nil || a.Status != "success" {
		t.Logf("%s at %s: %s", expr, base, b)
		return nil, false
	}
	point := func(raw []json.RawMessage, hist bool) nhPoint {
		if len(raw) != 2 {
			t.Fatalf("%s: point %s", expr, raw)
		}
		var sec float64
		json.Unmarshal(raw[0], &sec)
		p := nhPoint{t: int64(math.Round(sec * 1000))}
		if !hist {
			var s string
			json.Unmarshal(raw[1], &s)
			p.f = parseNum(t, s)
			return p
		}
		var h struct {
			Count   string              `json:"count"`
			Sum     string              `json:"sum"`
			Buckets [][]json.RawMessage `json:"buckets"`
		}
		if err := json.Unmarshal(raw[1], &h); err != nil {
			t.Fatalf("%s: histogram %s: %v", expr, raw[1], err)
		}
		p.h = &nhHist{count: parseNum(t, h.Count), sum: parseNum(t, h.Sum)}
		for _, bk := range h.Buckets {
			var code float64
			var lo, up, n string
			json.Unmarshal(bk[0], &code)
			json.Unmarshal(bk[1], &lo)
			json.Unmarshal(bk[2], &up)
			json.Unmarshal(bk[3], &n)
			p.h.buckets = append(p.h.buckets, [4]float64{code, parseNum(t, lo), parseNum(t, up), parseNum(t, n)})
		}
		return p
	}
	var out []nhSeries
	for _, r := range a.Data.Result {
		keys := make([]string, 0, len(r.Metric))
		for k, v := range r.Metric {
			keys = append(keys, k+"="+v)
		}
		slices.Sort(keys)
		s := nhSeries{metric: "{" + strings.Join(keys, ",") + "}"}
		if r.Value != nil {
			s.points = append(s.points, point(r.Value, false))
		}
		if r.Histogram != nil {
			s.points = append(s.points, point(r.Histogram, true))
		}
		for _, v := range r.Values {
			s.points = append(s.points, point(v, false))
		}
		for _, v := range r.Histograms {
			s.points = append(s.points, point(v, true))
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y nhSeries) int { return strings.Compare(x.metric, y.metric) })
	return out, true
}

func parseNum(t *testing.T, s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return f
}

func nhRel(a, b float64) float64 {
	if a == b || math.IsNaN(a) && math.IsNaN(b) {
		return 0
	}
	return math.Abs(a-b) / math.Max(math.Abs(a), math.Abs(b))
}

// nhDiff describes the first difference between Prometheus's answer p and
// sluice's s beyond relative tolerance tol; "" when they agree.
func nhDiff(p, s []nhSeries, tol float64) string {
	if len(p) != len(s) {
		return fmt.Sprintf("%d series from prometheus, %d from sluice", len(p), len(s))
	}
	for i := range p {
		if p[i].metric != s[i].metric || len(p[i].points) != len(s[i].points) {
			return fmt.Sprintf("series %d: prometheus %s (%d points), sluice %s (%d points)", i, p[i].metric, len(p[i].points), s[i].metric, len(s[i].points))
		}
		for k, pp := range p[i].points {
			sp := s[i].points[k]
			if pp.t != sp.t || (pp.h == nil) != (sp.h == nil) {
				return fmt.Sprintf("%s point %d: prometheus %+v, sluice %+v", p[i].metric, k, pp, sp)
			}
			if pp.h == nil {
				if nhRel(pp.f, sp.f) > tol {
					return fmt.Sprintf("%s at %d: prometheus %v, sluice %v", p[i].metric, pp.t, pp.f, sp.f)
				}
				continue
			}
			ph, sh := pp.h, sp.h
			if nhRel(ph.count, sh.count) > tol || nhRel(ph.sum, sh.sum) > tol || len(ph.buckets) != len(sh.buckets) {
				return fmt.Sprintf("%s at %d: prometheus count %v sum %v %d buckets, sluice count %v sum %v %d buckets",
					p[i].metric, pp.t, ph.count, ph.sum, len(ph.buckets), sh.count, sh.sum, len(sh.buckets))
			}
			for j, pb := range ph.buckets {
				sb := sh.buckets[j]
				if pb[0] != sb[0] || nhRel(pb[1], sb[1]) > 1e-12 || nhRel(pb[2], sb[2]) > 1e-12 || nhRel(pb[3], sb[3]) > tol {
					return fmt.Sprintf("%s at %d bucket %d: prometheus %v, sluice %v", p[i].metric, pp.t, j, pb, sb)
				}
			}
		}
	}
	return ""
}

// nhMaxRel is the largest relative difference of float values and
// histogram counts and sums between two agreeing answers.
func nhMaxRel(p, s []nhSeries) float64 {
	m := 0.0
	for i := range p {
		for k, pp := range p[i].points {
			sp := s[i].points[k]
			if pp.h == nil {
				m = max(m, nhRel(pp.f, sp.f))
			} else {
				m = max(m, nhRel(pp.h.count, sp.h.count), nhRel(pp.h.sum, sp.h.sum))
			}
		}
	}
	return m
}
