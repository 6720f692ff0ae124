package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/query/prom"
	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
)

// BenchmarkQueryRangeHTTP measures a range query through the whole
// handler (admission, budget, evaluation, encoding) over 100 series of
// 240 points: "raw" returns every series at a 15 s step (encoding-heavy),
// "sum" one aggregated series.
func BenchmarkQueryRangeHTTP(b *testing.B) {
	l := promtest.NewLake(b)
	routes := make([]string, 20)
	for i := range routes {
		routes[i] = fmt.Sprintf("/r%d", i)
	}
	svcs := []string{"s1", "s2", "s3", "s4", "s5"}
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	l.Write(b, "default", 0, promtest.Synth{Start: t0, Interval: 15 * time.Second, Points: 240, Services: svcs, Routes: routes,
		CounterStep: 1, Bounds: []float64{1}, HistStep: []int{1, 1}}.JSON())
	srv, _ := benchServer(b, l)
	for name, q := range map[string]string{"raw": "test_requests_total", "sum": "sum(rate(test_requests_total[5m]))"} {
		b.Run(name, func(b *testing.B) {
			u := srv.URL + "/api/v1/query_range?" + url.Values{"query": {q}, "start": {fmt.Sprint(t0.Unix())},
				"end": {fmt.Sprint(t0.Add(time.Hour).Unix())}, "step": {"15"}}.Encode()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := http.Get(u)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || n < 100 {
					b.Fatalf("%d, %d bytes", resp.StatusCode, n)
				}
			}
		})
	}
}

// BenchmarkLabelsMatchSets measures /api/v1/labels and
// /api/v1/label/http_route/values over a day of data (24 hourly files, 10
// services x 10 routes, a counter, a gauge and a 6-bucket histogram every
// 15 s) with 1, 4 and 8 match[] sets, as Grafana sends several, each set
// one service: "same" selects the counter in every set, "mixed" cycles
// through four metrics (counter, gauge, histogram buckets, count). rows/op
// is what the request reads from the lake: with one scan for all sets it
// grows with what the sets select, not with how many there are.
func BenchmarkLabelsMatchSets(b *testing.B) {
	l := promtest.NewLake(b)
	var svcs, routes []string
	for i := range 10 {
		svcs = append(svcs, fmt.Sprintf("svc-%d", i))
		routes = append(routes, fmt.Sprintf("/r%d", i))
	}
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for h := range 24 {
		l.Write(b, "default", 0, promtest.Synth{Start: t0.Add(time.Duration(h) * time.Hour), Interval: 15 * time.Second, Points: 240,
			Services: svcs, Routes: routes, CounterStep: 1, Bounds: []float64{0.05, 0.1, 0.25, 0.5, 1}, HistStep: []int{3, 5, 4, 2, 1, 1}}.JSON())
	}
	srv, a := benchServer(b, l)
	metrics := []string{"test_requests_total", "test_queue_depth", "test_latency_seconds_bucket", "test_latency_seconds_count"}
	for _, path := range []string{"/api/v1/labels", "/api/v1/label/http_route/values"} {
		for _, shape := range []string{"same", "mixed"} {
			for _, n := range []int{1, 4, 8} {
				b.Run(fmt.Sprintf("%s/%s/sets=%d", path[len("/api/v1/"):], shape, n), func(b *testing.B) {
					v := url.Values{"start": {fmt.Sprint(t0.Unix())}, "end": {fmt.Sprint(t0.Add(24 * time.Hour).Unix())}}
					for i := range n {
						m := metrics[0]
						if shape == "mixed" {
							m = metrics[i%len(metrics)]
						}
						v.Add("match[]", fmt.Sprintf(`%s{service_name="svc-%d"}`, m, i))
					}
					u := srv.URL + path + "?" + v.Encode()
					get := func() {
						resp, err := http.Get(u)
						if err != nil {
							b.Fatal(err)
						}
						n, _ := io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 || n < 40 {
							b.Fatalf("%d, %d bytes", resp.StatusCode, n)
						}
					}
					get() // warm the file indexes and label cache, as a running server's are
					rows := a.Stats.Rows.Load()
					b.ReportAllocs()
					for b.Loop() {
						get()
					}
					b.ReportMetric(float64(a.Stats.Rows.Load()-rows)/float64(b.N), "rows/op")
				})
			}
		}
	}
}

// benchServer serves the query API over l's lake, default options, until
// the benchmark ends; a is its adapter (for its read counters).
func benchServer(b *testing.B, l *promtest.Lake) (srv *httptest.Server, a *prom.Adapter) {
	a, err := prom.NewAdapter(prom.Options{Catalog: l.Catalog, Store: l.Store})
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(Config{Adapter: a})
	if err != nil {
		b.Fatal(err)
	}
	srv = httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return srv, a
}
