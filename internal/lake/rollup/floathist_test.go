package rollup

import (
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// rollupRow is the part of a metrics_rollup row the float histogram
// tests look at.
type rollupRow struct {
	Tier        string    `parquet:"tier"`
	WindowStart int64     `parquet:"window_start"`
	MetricName  string    `parquet:"metric_name,optional"`
	Points      uint64    `parquet:"points"`
	Count       *uint64   `parquet:"count,optional"`
	CountFloat  *float64  `parquet:"count_float,optional"`
	Sum         *float64  `parquet:"sum,optional"`
	Increase    *float64  `parquet:"increase,optional"`
	Resets      *uint64   `parquet:"resets,optional"`
	Buckets     []uint64  `parquet:"bucket_counts,optional,list"`
	BucketsF    []float64 `parquet:"bucket_counts_float,optional,list"`
	Bounds      []float64 `parquet:"explicit_bounds,optional,list"`
}

// rollupRows reads every live metrics_rollup row of tier (e.g. "1m").
func rollupRows(t *testing.T, e *env, tier string) []rollupRow {
	t.Helper()
	var out []rollupRow
	for _, s := range liveSegs(t, e.cat, Table) {
		rows, err := parquet.ReadFile[rollupRow](filepath.Join(e.root, filepath.FromSlash(s.Path)))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Tier == tier {
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(a, b rollupRow) int {
		if a.MetricName != b.MetricName {
			if a.MetricName < b.MetricName {
				return -1
			}
			return 1
		}
		return int(a.WindowStart - b.WindowStart)
	})
	return out
}

// remoteWriteHour decodes a remote write 1.0 request as the receiver
// does: the series' float and integer native histograms, every 15 s over
// the first 10 minutes of benchHour.
func remoteWriteHour(t *testing.T, series ...prompb.TimeSeries) *signal.Metrics {
	t.Helper()
	body, err := (&prompb.WriteRequest{Timeseries: series}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	m := &signal.Metrics{}
	var d prw.Decoder
	if _, err := d.DecodeV1(m, body); err != nil {
		t.Fatal(err)
	}
	return m
}

// floatCum is point k of a cumulative custom-bucket float histogram, as
// a recording rule over native histograms writes it: fractional counts
// growing by 0.3, 0.6 and 0.9 per bucket each step, reset at step 25.
func floatCum(k int) *histogram.FloatHistogram {
	x := float64(k%25 + 1)
	return &histogram.FloatHistogram{Schema: histogram.CustomBucketsSchema, Count: 1.8 * x, Sum: 2.5 * x,
		CustomValues:    []float64{0.5, 1},
		PositiveSpans:   []histogram.Span{{Offset: 0, Length: 3}},
		PositiveBuckets: []float64{0.3 * x, 0.6 * x, 0.9 * x}}
}

// TestFloatHistogramRollup: windows of float native histograms keep their
// exact counts in count_float and bucket_counts_float (count and
// bucket_counts null), with the reset-aware increase of the float count;
// integer histograms in the same hour are rolled up as before.
func TestFloatHistogramRollup(t *testing.T) {
	const steps = 40 // 10 minutes at 15 s
	at := func(k int) int64 { return benchHour.Add(time.Duration(k) * 15 * time.Second).UnixMilli() }
	fl := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "job:latency:rate5m"}}}
	in := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "latency"}}}
	for k := range steps {
		fl.Histograms = append(fl.Histograms, prompb.FromFloatHistogram(at(k), floatCum(k)))
		n := uint64(k + 1)
		in.Histograms = append(in.Histograms, prompb.FromIntHistogram(at(k), &histogram.Histogram{
			Schema: histogram.CustomBucketsSchema, Count: 3 * n, Sum: float64(n), CustomValues: []float64{0.5, 1},
			PositiveSpans: []histogram.Span{{Offset: 0, Length: 3}}, PositiveBuckets: []int64{int64(n), 0, 0}}))
	}
	e := newEnv(t)
	e.write(t, "acme", benchHour, remoteWriteHour(t, fl, in))
	if done, _ := runAll(t, e, e.cat, Options{Logger: quiet}); done != 1 {
		t.Fatalf("%d hours rolled up, want 1", done)
	}

	for _, tier := range []struct {
		name string
		d    time.Duration
	}{{"1m", time.Minute}, {"5m", 5 * time.Minute}} {
		rows := rollupRows(t, e, tier.name)
		per := int(tier.d / (15 * time.Second))
		var fRows, iRows int
		for _, r := range rows {
			first := int((time.Duration(r.WindowStart) - time.Duration(benchHour.UnixNano())) / (15 * time.Second))
			last := min(first+per, steps) - 1
			if r.Points != uint64(last-first+1) {
				t.Fatalf("%s %s window %d: %d points, want %d", tier.name, r.MetricName, first, r.Points, last-first+1)
			}
			switch r.MetricName {
			case "job:latency:rate5m":
				fRows++
				want := floatCum(last)
				if r.Count != nil || r.CountFloat == nil || *r.CountFloat != want.Count {
					t.Fatalf("%s window %d: count %v, count_float %v, want null and %v", tier.name, first, r.Count, r.CountFloat, want.Count)
				}
				if r.Buckets != nil || !slices.Equal(r.BucketsF, want.PositiveBuckets) || !slices.Equal(r.Bounds, []float64{0.5, 1}) {
					t.Fatalf("%s window %d: buckets %v, float buckets %v, bounds %v; want null, %v, [0.5 1]",
						tier.name, first, r.Buckets, r.BucketsF, r.Bounds, want.PositiveBuckets)
				}
				var inc float64
				var resets uint64
				for k := first + 1; k <= last; k++ {
					if a, b := floatCum(k-1).Count, floatCum(k).Count; b >= a {
						inc += b - a
					} else {
						inc, resets = inc+b, resets+1
					}
				}
				if r.Increase == nil || math.Abs(*r.Increase-inc) > 1e-9 || r.Resets == nil || *r.Resets != resets {
					t.Fatalf("%s window %d: increase %v resets %v, want %v and %d", tier.name, first, r.Increase, r.Resets, inc, resets)
				}
			case "latency":
				iRows++
				n := uint64(last + 1)
				if r.CountFloat != nil || r.Count == nil || *r.Count != 3*n || r.BucketsF != nil || !slices.Equal(r.Buckets, []uint64{n, n, n}) {
					t.Fatalf("%s integer window %d: count %v count_float %v buckets %v float buckets %v",
						tier.name, first, r.Count, r.CountFloat, r.Buckets, r.BucketsF)
				}
			default:
				t.Fatalf("unexpected series %q", r.MetricName)
			}
		}
		if want := (steps + per - 1) / per; fRows != want || iRows != want {
			t.Fatalf("%s: %d float and %d integer windows, want %d each", tier.name, fRows, iRows, want)
		}
	}
}

// TestDeltaFloatHistogramWindows: delta float histograms sum their float
// counts and buckets; a window mixing float and integer buckets keeps its
// counts (each kind in its own column) but no buckets.
func TestDeltaFloatHistogramWindows(t *testing.T) {
	b := []float64{1, 5}
	f := func(ts int64, counts ...float64) Point {
		var n float64
		for _, c := range counts {
			n += c
		}
		return Point{T: ts, CountF: n, HasCountF: true, BucketsF: counts, Bounds: b}
	}
	i := func(ts int64, counts ...uint64) Point {
		var n uint64
		for _, c := range counts {
			n += c
		}
		return Point{T: ts, Count: n, HasCount: true, Buckets: counts, Bounds: b}
	}
	pts := []Point{f(base, 0.5, 0.25, 0), f(base+sec, 0.5, 0, 1.5), i(base+minute, 1, 2, 3), f(base+2*minute, 0.1, 0.2, 0.3)}
	w := run([]int64{minute, 5 * minute}, KindDeltaDist, pts)
	if m := w[0][0]; !m.HasBuckets || !m.FloatBuckets || m.HasCount || !m.HasCountF || m.CountF != 2.75 ||
		!slices.Equal(m.BucketsF, []float64{1, 0.25, 1.5}) {
		t.Fatalf("float window: %+v", m)
	}
	if m := w[0][1]; !m.HasBuckets || m.FloatBuckets || m.Count != 6 || m.HasCountF {
		t.Fatalf("integer window: %+v", m)
	}
	if m := w[1][0]; m.HasBuckets || !m.Mismatch || m.Count != 6 || math.Abs(m.CountF-3.35) > 1e-12 {
		t.Fatalf("mixed 5m window: %+v", m)
	}
	// The 5m window computed directly from the points agrees.
	if m := run([]int64{5 * minute}, KindDeltaDist, pts)[0][0]; m.HasBuckets || !m.Mismatch || m.Count != 6 || math.Abs(m.CountF-3.35) > 1e-12 {
		t.Fatalf("mixed 5m window, direct: %+v", m)
	}
}
