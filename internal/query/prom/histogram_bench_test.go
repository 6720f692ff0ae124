package prom

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
)

// BenchmarkNativeHistogramQuery: 50 remote-write native histogram series
// (schema 3, 40 populated buckets) of 240 points each, one hour; the
// query reads all 12,000 histogram samples from the lake and the engine
// sums their rates. Reports histogram samples loaded per second.
func BenchmarkNativeHistogramQuery(b *testing.B) {
	const nSeries, nPoints, nBuckets = 50, 240, 40
	ws := make([]nhSeries, nSeries)
	for s := range ws {
		ws[s].lbls = labels.FromStrings("__name__", "nh_latency_seconds", "job", "api", "pod", fmt.Sprint("p", s))
		counts := make([]float64, nBuckets)
		for i := range nPoints {
			h := &histogram.FloatHistogram{Schema: 3, ZeroThreshold: 0.001, PositiveSpans: []histogram.Span{{Offset: -20, Length: nBuckets}}}
			for k := range counts {
				counts[k] += float64((i + k + s) % 4)
				h.Count += counts[k]
				h.Sum += counts[k] * float64(k)
			}
			h.PositiveBuckets = append([]float64(nil), counts...)
			ws[s].ts = append(ws[s].ts, synthStart.Add(time.Duration(i)*15*time.Second).UnixMilli())
			ws[s].hs = append(ws[s].hs, h)
			ws[s].ints = append(ws[s].ints, toInt(h))
		}
	}
	l := newTestLake(b)
	l.WriteBatches(b, "acme", remoteWrite2(b, ws))
	ad := adapterOf(b, l)
	eng := newEngine()
	at := synthStart.Add(time.Hour - time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		q := ad.Queryable("acme", Limits{})
		qry, err := eng.NewInstantQuery(context.Background(), q, nil, `histogram_quantile(0.9, sum(rate(nh_latency_seconds[1h])))`, at)
		if err != nil {
			b.Fatal(err)
		}
		res := qry.Exec(context.Background())
		if res.Err != nil {
			b.Fatal(res.Err)
		}
		if v, _ := res.Vector(); len(v) != 1 {
			b.Fatalf("result %v", res.Value)
		}
		qry.Close()
	}
	b.ReportMetric(float64(nSeries*nPoints)*float64(b.N)/b.Elapsed().Seconds(), "histograms/s")
}
