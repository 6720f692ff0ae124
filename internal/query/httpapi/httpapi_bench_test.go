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
	a, err := prom.NewAdapter(prom.Options{Catalog: l.Catalog, Store: l.Store})
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(Config{Adapter: a})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
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
