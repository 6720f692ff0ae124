package prom

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
)

// deltaTwins renders OTLP JSON with, per route, a monotonic delta sum
// "jobs.delta" and a delta histogram "lat.delta", and their cumulative twins
// "jobs.cum" and "lat.cum" whose points are the running sums of the delta
// points (from zero before the first point). Increments are random (seeded);
// timestamps are every 10 s with a few ms of jitter.
func deltaTwins(start time.Time, points int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	b.WriteString(`{"resourceMetrics":[{"resource":{"attributes":[` + attr("service.name", "svc") + `]},"scopeMetrics":[{"metrics":[`)
	var jd, jc, hd, hc []string
	bounds := `0.1,1`
	for _, route := range []string{"/a", "/b"} {
		a := attr("http.route", route)
		var cum float64
		var cumB [3]int
		var cumN int
		var cumS float64
		st := start.UnixNano()
		for i := 0; i < points; i++ {
			ts := start.Add(time.Duration(i+1)*10*time.Second + time.Duration(r.IntN(5))*time.Millisecond).UnixNano()
			prev := st
			if i > 0 {
				prev = ts - 10*int64(time.Second)
			}
			inc := float64(r.IntN(20))
			cum += inc
			jd = append(jd, fmt.Sprintf(`{"attributes":[%s],"startTimeUnixNano":"%d","timeUnixNano":"%d","asDouble":%g}`, a, prev, ts, inc))
			jc = append(jc, fmt.Sprintf(`{"attributes":[%s],"startTimeUnixNano":"%d","timeUnixNano":"%d","asDouble":%g}`, a, st, ts, cum))
			var dB [3]int
			n := 0
			for k := range dB {
				dB[k] = r.IntN(4)
				cumB[k] += dB[k]
				n += dB[k]
			}
			cumN += n
			s := float64(n) * 0.3
			cumS += s
			hd = append(hd, fmt.Sprintf(`{"attributes":[%s],"startTimeUnixNano":"%d","timeUnixNano":"%d","count":"%d","sum":%g,"bucketCounts":["%d","%d","%d"],"explicitBounds":[%s]}`,
				a, prev, ts, n, s, dB[0], dB[1], dB[2], bounds))
			hc = append(hc, fmt.Sprintf(`{"attributes":[%s],"startTimeUnixNano":"%d","timeUnixNano":"%d","count":"%d","sum":%g,"bucketCounts":["%d","%d","%d"],"explicitBounds":[%s]}`,
				a, st, ts, cumN, cumS, cumB[0], cumB[1], cumB[2], bounds))
		}
	}
	fmt.Fprintf(&b, `{"name":"jobs.delta","sum":{"aggregationTemporality":1,"isMonotonic":true,"dataPoints":[%s]}},`, strings.Join(jd, ","))
	fmt.Fprintf(&b, `{"name":"jobs.cum","sum":{"aggregationTemporality":2,"isMonotonic":true,"dataPoints":[%s]}},`, strings.Join(jc, ","))
	fmt.Fprintf(&b, `{"name":"lat.delta","unit":"s","histogram":{"aggregationTemporality":1,"dataPoints":[%s]}},`, strings.Join(hd, ","))
	fmt.Fprintf(&b, `{"name":"lat.cum","unit":"s","histogram":{"aggregationTemporality":2,"dataPoints":[%s]}}`, strings.Join(hc, ","))
	b.WriteString(`]}]}]}`)
	return []byte(b.String())
}

func rangeQuery(t *testing.T, q storage.Queryable, expr string, start, end time.Time, step time.Duration) promql.Matrix {
	t.Helper()
	qry, err := newEngine().NewRangeQuery(context.Background(), q, nil, expr, start, end, step)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", expr, res.Err)
	}
	m, err := res.Matrix()
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return m
}

// Delta sums and delta histograms are summed over time per series at read
// time, so the standard PromQL functions give the answers they give over
// the same data sent as cumulative, and metadata reports one type.
func TestDeltaTemporality(t *testing.T) {
	l := newTestLake(t)
	start := synthStart
	const points = 180 // 30 minutes
	l.Write(t, "acme", 0, deltaTwins(start, points, 7))
	a := adapterOf(t, l)
	q := a.Queryable("acme", Limits{})

	// The truth for a constant rate: 10 every 10 s is 1/s.
	qs := []string{
		`rate(jobs_delta_total[1m])`,
		`increase(jobs_delta_total[3m])`,
		`jobs_delta_total`,
		`sum by (http_route) (rate(lat_delta_seconds_count[2m]))`,
		`rate(lat_delta_seconds_sum[5m])`,
		`histogram_quantile(0.5, sum by (le, http_route) (rate(lat_delta_seconds_bucket[2m])))`,
	}
	from, to := start.Add(-time.Minute), start.Add(40*time.Minute)
	for _, expr := range qs {
		twin := strings.NewReplacer("jobs_delta", "jobs_cum", "lat_delta", "lat_cum").Replace(expr)
		got := rangeQuery(t, q, expr, from, to, 30*time.Second)
		want := rangeQuery(t, q, twin, from, to, 30*time.Second)
		if len(got) == 0 || len(got) != len(want) {
			t.Fatalf("%s: %d series, twin %s: %d", expr, len(got), twin, len(want))
		}
		for i := range got {
			g, w := got[i].Floats, want[i].Floats
			if len(g) != len(w) || len(g) < 10 {
				t.Fatalf("%s series %d: %d points, twin %d", expr, i, len(g), len(w))
			}
			for k := range g {
				if g[k].T != w[k].T || !(math.Abs(g[k].F-w[k].F) <= 1e-9*math.Max(1, math.Abs(w[k].F)) || math.IsNaN(g[k].F) && math.IsNaN(w[k].F)) {
					t.Fatalf("%s at %d: %v, cumulative twin %v", expr, g[k].T, g[k].F, w[k].F)
				}
			}
		}
	}

	// Constant increments: rate is exactly the truth (the issue saw 0.22/s
	// where it is 1/s).
	l2 := newTestLake(t)
	var dp []string
	for i := 1; i <= 60; i++ {
		ts := start.Add(time.Duration(i) * 10 * time.Second).UnixNano()
		dp = append(dp, fmt.Sprintf(`{"startTimeUnixNano":"%d","timeUnixNano":"%d","asInt":"10"}`, ts-10*int64(time.Second), ts))
	}
	l2.Write(t, "acme", 0, []byte(fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[%s]},"scopeMetrics":[{"metrics":[`+
		`{"name":"ticks","sum":{"aggregationTemporality":1,"isMonotonic":true,"dataPoints":[%s]}}]}]}]}`, attr("service.name", "svc"), strings.Join(dp, ","))))
	a2 := adapterOf(t, l2)
	m := rangeQuery(t, a2.Queryable("acme", Limits{}), `rate(ticks_total[1m])`, start.Add(2*time.Minute), start.Add(10*time.Minute), time.Minute)
	if len(m) != 1 || len(m[0].Floats) != 9 {
		t.Fatalf("rate of the delta counter: %v", m)
	}
	for _, p := range m[0].Floats {
		if !near(p.F, 1) {
			t.Fatalf("rate(ticks_total[1m]) at %d = %v, want 1/s", p.T, p.F)
		}
	}

	md, err := a.Metadata(context.Background(), "acme", "jobs_delta_total")
	if err != nil || len(md) != 1 || md[0].Type != "counter" {
		t.Fatalf("metadata of a monotonic delta sum: %v %v, want one counter", md, err)
	}
	md, err = a.Metadata(context.Background(), "acme", "lat_delta_seconds")
	if err != nil || len(md) != 1 || md[0].Type != "histogram" {
		t.Fatalf("metadata of a delta histogram: %v %v", md, err)
	}
}
