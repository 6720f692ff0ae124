package e2e

import (
	"context"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
)

// audinHistograms is a series of integer native histograms per schema
// edge: schemas -4, 0 and 8, a wide zero bucket, negative buckets, spans
// with gaps, an explicit counter reset (with its hint) and an empty one.
func audinHistograms(t0 int64) []prompb.TimeSeries {
	mk := func(name, edge string, hs func(i int) *histogram.Histogram) prompb.TimeSeries {
		s := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}, {Name: "edge", Value: edge}}}
		for i := range 11 {
			h := hs(i)
			if h == nil {
				continue
			}
			s.Histograms = append(s.Histograms, prompb.FromIntHistogram(t0+int64(i)*15000, h))
		}
		return s
	}
	grow := func(schema int32, zt float64, neg bool) func(i int) *histogram.Histogram {
		return func(i int) *histogram.Histogram {
			k := uint64(i + 1)
			h := &histogram.Histogram{Schema: schema, ZeroThreshold: zt, ZeroCount: k,
				PositiveSpans:   []histogram.Span{{Offset: -2, Length: 2}, {Offset: 3, Length: 1}},
				PositiveBuckets: []int64{int64(k), int64(k), -int64(k) + 1}}
			h.Count = k + k + 2*k + k + 1
			h.Sum = float64(i) * 3.25
			if neg {
				h.NegativeSpans, h.NegativeBuckets = []histogram.Span{{Offset: 1, Length: 1}}, []int64{int64(2 * k)}
				h.Count += 2 * k
				h.Sum -= float64(i)
			}
			return h
		}
	}
	return []prompb.TimeSeries{
		mk("audin_nh", "s-4", grow(-4, 0, false)),
		mk("audin_nh", "s0", grow(0, 0.001, true)),
		mk("audin_nh", "s8", grow(8, 0, true)),
		mk("audin_nh", "zero", grow(2, 0.5, true)),
		mk("audin_nh", "reset", func(i int) *histogram.Histogram {
			h := grow(1, 0, false)(i % 6)
			if i == 6 {
				h.CounterResetHint = histogram.CounterReset
			}
			return h
		}),
		mk("audin_nh", "empty", func(i int) *histogram.Histogram { return &histogram.Histogram{Schema: 0} }),
	}
}

// TestAudinNativeHistogramsAgreeWithPrometheus sends the same remote write
// 1.0 request of integer native histograms (audinHistograms) to Debian's
// Prometheus 2.42 (remote-write receiver, native histograms on) and to
// `sluice run`: the raw histograms agree exactly, and so do the functions
// whose definition did not change between Prometheus 2.42 and sluice's
// PromQL engine (count, sum, rate, increase, sum) exactly; quantiles and
// fractions within 10% (Prometheus 3 interpolates inside a native bucket
// exponentially, 2.42 linearly).
func TestAudinNativeHistogramsAgreeWithPrometheus(t *testing.T) {
	pbase, stderr := startPrometheus(t, freePort(t), "global: {}\n", "--web.enable-remote-write-receiver", "--enable-feature=native-histograms")
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr))
	sbase := "http://" + qaddr
	t0 := time.Now().Add(-20 * time.Minute).Truncate(time.Minute).UnixMilli()
	req := &prompb.WriteRequest{Timeseries: audinHistograms(t0)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, base := range []string{pbase, sbase} {
		api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, req); err != nil {
			t.Fatalf("write to %s: %v\n%s", base, err, stderr)
		}
	}
	at := time.UnixMilli(t0 + 10*15000 + 7000)
	for _, c := range []struct {
		expr string
		tol  float64
	}{
		{`audin_nh[3m]`, 0},
		{`audin_nh`, 0},
		{`histogram_count(audin_nh)`, 0},
		{`histogram_sum(audin_nh)`, 0},
		{`histogram_count(rate(audin_nh[1m]))`, 1e-12},
		{`histogram_sum(rate(audin_nh[1m]))`, 1e-12},
		{`histogram_count(increase(audin_nh[2m]))`, 1e-12},
		{`rate(audin_nh[1m])`, 1e-12},
		{`histogram_count(sum(audin_nh))`, 0},
		// Within a bucket's relative width (schema 0: 2), except at schema
		// -4, where one bucket spans 2^16 and the two interpolations
		// differ by orders of magnitude.
		{`histogram_quantile(0.5, audin_nh{edge!="s-4"})`, 0.1},
		{`histogram_quantile(0.99, audin_nh{edge!="s-4"})`, 0.1},
		{`histogram_fraction(-1, 1, audin_nh{edge!="s-4"})`, 0.1},
	} {
		p, ok := nhQuery(t, pbase, c.expr, at)
		if !ok || len(p) == 0 {
			t.Fatalf("%s: prometheus has no result\n%s", c.expr, stderr)
		}
		s, ok := nhQuery(t, sbase, c.expr, at)
		if !ok {
			t.Fatalf("%s: sluice failed", c.expr)
		}
		if d := nhDiff(p, s, c.tol); d != "" {
			t.Fatalf("%s: %s\nprometheus %v\nsluice     %v", c.expr, d, p, s)
		}
		t.Logf("%s: %d series agree (max relative difference %.3g)", c.expr, len(p), nhMaxRel(p, s))
	}
}
