package prom

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/sluice-dev/sluice/internal/signal"
)

// floatWorkload builds float native histograms with fractional counts, as
// Prometheus's recording rules over native histograms produce them
// (rate, sum by), each series sent with reset hints:
//   - nhf_rate_seconds (schema 2, positive, negative and zero buckets):
//     cumulative, a real reset at 2/3 sent with the hint "yes", a point at
//     1/3 whose counts grow but that is sent with "yes" all the same (the
//     engine must trust the hint), the others alternating "no" and
//     unknown;
//   - nhf_size_bytes (custom buckets): cumulative, unknown hints;
//   - nhf_queue (schema 0): a gauge histogram (the hint "gauge" on every
//     sample, metadata type histogram), counts going up and down.
func floatWorkload(start time.Time, points int) []nhSeries {
	r := rand.New(rand.NewPCG(7, 99))
	t0 := start.UnixMilli()
	mk := func(name, kind string) labels.Labels {
		return labels.FromStrings("__name__", name, "job", "rules", "kind", kind)
	}
	out := []nhSeries{{lbls: mk("nhf_rate_seconds", "exp")}, {lbls: mk("nhf_size_bytes", "custom")}, {lbls: mk("nhf_queue", "gauge")}}
	frac := func() float64 { return float64(r.IntN(1000)) / 3 / 7 } // 1/21ths: not exact in binary
	for si := range out {
		s := &out[si]
		custom := []float64{0.25, 1, 4, 16}
		npos, nneg := 7, 3
		if si == 1 {
			npos, nneg = len(custom)+1, 0
		}
		pos, neg := make([]float64, npos), make([]float64, nneg)
		var zero, sum float64
		for i := range points {
			hint := histogram.UnknownCounterReset
			switch {
			case si == 2:
				hint = histogram.GaugeType
				for b := range pos {
					pos[b] = frac()
				}
				for b := range neg {
					neg[b] = frac()
				}
				zero, sum = frac(), frac()-100
			default:
				if si == 0 && i == points*2/3 { // a counter reset
					clear(pos)
					clear(neg)
					zero, sum = 0, 0
					hint = histogram.CounterReset
				}
				for b := range pos {
					if r.IntN(4) > 0 {
						d := frac()
						pos[b] += d
						sum += d * (float64(b) + 0.5)
					}
				}
				for b := range neg {
					d := frac()
					neg[b] += d
					sum -= d * float64(b+1)
				}
				if si == 0 {
					zero += frac()
					switch {
					case i == points/3:
						hint = histogram.CounterReset // not a reset by its counts: the hint says so
					case hint == histogram.UnknownCounterReset && i%2 == 0 && i > 0:
						hint = histogram.NotCounterReset
					}
				}
			}
			h := &histogram.FloatHistogram{CounterResetHint: hint, Schema: 2, Count: zero, Sum: sum,
				PositiveSpans: []histogram.Span{{Offset: -2, Length: uint32(len(pos))}}, PositiveBuckets: slices.Clone(pos)}
			if si == 2 {
				h.Schema = 0
			}
			for _, c := range pos {
				h.Count += c
			}
			if si == 1 {
				h.Schema, h.CustomValues = histogram.CustomBucketsSchema, custom
				h.PositiveSpans[0].Offset = 0
			} else {
				h.ZeroThreshold, h.ZeroCount = 0.01, zero
				h.NegativeSpans, h.NegativeBuckets = []histogram.Span{{Offset: 1, Length: uint32(len(neg))}}, slices.Clone(neg)
				for _, c := range neg {
					h.Count += c
				}
			}
			s.ts = append(s.ts, t0+int64(i)*15_000)
			s.hs = append(s.hs, h)
		}
	}
	return out
}

// floatQueries are nativeQueries' kind over floatWorkload's series.
var floatQueries = []string{
	`nhf_rate_seconds`,
	`nhf_size_bytes`,
	`nhf_queue`,
	`histogram_count(nhf_rate_seconds)`,
	`histogram_sum(nhf_size_bytes)`,
	`histogram_count(rate(nhf_rate_seconds[2m]))`,
	`histogram_count(increase(nhf_rate_seconds[10m]))`,
	`resets(nhf_rate_seconds[30m])`,
	`resets(nhf_queue[30m])`,
	`histogram_quantile(0.9, rate(nhf_rate_seconds[2m]))`,
	`histogram_quantile(0.5, rate(nhf_size_bytes[5m]))`,
	`histogram_quantile(0.99, sum by (job) (rate(nhf_rate_seconds[2m])))`,
	`histogram_fraction(0, 2, nhf_queue)`,
	`histogram_count(delta(nhf_queue[5m]))`,
	`histogram_sum(avg_over_time(nhf_queue[5m]))`,
	`count_over_time({__name__=~"nhf_.*"}[10m])`,
}

// Float histograms with fractional counts (exponential and custom
// buckets) and reset hints come back from the lake as they were sent:
// every sample bit for bit, hint included, and every query of
// floatQueries, instant and range, gives what the PromQL engine gives
// over the same samples in memory.
func TestFloatHistogramsMatchPrometheus(t *testing.T) {
	l := newTestLake(t)
	ws := floatWorkload(synthStart, 120)
	l.WriteBatches(t, "acme", remoteWrite2(t, ws))
	lake, ref := adapterOf(t, l).Queryable("acme", Limits{}), memQueryable(ws)

	// Exactly the samples sent, read back with a range selector.
	end := synthStart.Add(30 * time.Minute)
	for _, s := range ws {
		name := s.lbls.Get("__name__")
		qry, err := newEngine().NewInstantQuery(context.Background(), lake, nil, name+"[31m]", end)
		if err != nil {
			t.Fatal(err)
		}
		res := qry.Exec(context.Background())
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		m, _ := res.Matrix()
		if len(m) != 1 || len(m[0].Histograms) != len(s.hs) {
			t.Fatalf("%s: %v, want one series of %d histograms", name, m, len(s.hs))
		}
		for i, p := range m[0].Histograms {
			if p.T != s.ts[i] || exactHistogram(p.H) != exactHistogram(s.hs[i]) {
				t.Fatalf("%s sample %d at %d:\n got %s\nwant %s", name, i, p.T, exactHistogram(p.H), exactHistogram(s.hs[i]))
			}
		}
	}

	eng := newEngine()
	matchEngine(t, eng, lake, ref, floatQueries,
		[]time.Time{synthStart.Add(90 * time.Second), synthStart.Add(10*time.Minute + 5*time.Second), synthStart.Add(20 * time.Minute), synthStart.Add(27*time.Minute + 7*time.Second)},
		end)
	// The hints matter: nhf_rate_seconds has two resets by its hints
	// (one of them not visible in its counts).
	for expr, want := range map[string]float64{`resets(nhf_rate_seconds[31m])`: 2} {
		v := evalInstant(t, eng, lake, expr, end)
		if len(v) != 1 || v[0].F != want {
			t.Errorf("%s: %v, want %g", expr, v, want)
		}
	}
}

// exactHistogram renders every field of h that a sender sets, floats as
// their bits' exact decimal form, buckets without the empty ones (span
// layouts may differ).
func exactHistogram(h *histogram.FloatHistogram) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "hint=%d schema=%d count=%v sum=%v zt=%v zc=%v custom=%v buckets=", h.CounterResetHint, h.Schema,
		math.Float64bits(h.Count), math.Float64bits(h.Sum), h.ZeroThreshold, math.Float64bits(h.ZeroCount), h.CustomValues)
	for it := h.AllBucketIterator(); it.Next(); {
		if b := it.At(); b.Count != 0 && !(b.Lower == -h.ZeroThreshold && b.Upper == h.ZeroThreshold) {
			fmt.Fprintf(&sb, "[%g,%g]:%v ", b.Lower, b.Upper, math.Float64bits(b.Count))
		}
	}
	return sb.String()
}

// A remote-write gauge histogram stored without reset hints (files
// written before reset_hint, or rows whose hint is null) still reads
// with the gauge hint when its metadata type is gaugehistogram, and as
// unknown otherwise.
func TestGaugeHintFallsBackToMetadata(t *testing.T) {
	for _, gaugeMeta := range []bool{true, false} {
		l := newTestLake(t)
		ws := floatWorkload(synthStart, 20)[2:]
		ws[0].gauge = gaugeMeta
		m := remoteWrite2(t, ws)
		for i := range m.Has {
			if m.Has[i]&signal.HintMask != signal.HintGauge {
				t.Fatalf("point %d: has %#x, want the gauge hint decoded", i, m.Has[i])
			}
			m.Has[i] &^= signal.HintMask
		}
		l.WriteBatches(t, "acme", m)
		v := instant(t, adapterOf(t, l).Queryable("acme", Limits{}), `nhf_queue`, synthStart.Add(time.Minute))
		want := histogram.UnknownCounterReset
		if gaugeMeta {
			want = histogram.GaugeType
		}
		if len(v) != 1 || v[0].H == nil || v[0].H.CounterResetHint != want {
			t.Errorf("metadata gaugehistogram %v: %v, want one histogram with hint %d", gaugeMeta, v, want)
		}
	}
}

// FuzzFloatHistogramAt: whatever a (damaged) float histogram row holds,
// building its histogram never panics and gives nil or a histogram that
// Prometheus validates (a non-negative zero threshold, counts as stored).
func FuzzFloatHistogramAt(f *testing.F) {
	f.Add(true, int8(2), int32(-3), int32(1), 2.5, []byte{1, 0, 2, 0, 0, 0, 3}, []byte{1}, uint8(2))
	f.Add(false, int8(0), int32(0), int32(0), 0.75, []byte{1, 2, 0}, []byte{10, 5}, uint8(3))
	f.Add(true, int8(9), int32(2147483600), int32(0), 1.0, []byte{1, 1, 1}, []byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, exp bool, scale int8, po, no int32, count float64, pos, neg []byte, hint uint8) {
		fl := func(b []byte) []float64 {
			out := make([]float64, len(b))
			for i, x := range b {
				out[i] = float64(x) / 3
			}
			return out
		}
		sc := &scan{cnt: []uint64{0}, cntOK: []bool{false}, sums: []float64{1.5}, sumOK: []bool{true}}
		sc.h = histCols{exp: exp, floats: true, fc: []float64{count}, fcOK: []bool{true},
			hint: []histogram.CounterResetHint{histogram.CounterResetHint(hint % 4)}}
		if exp {
			sc.h.scale, sc.h.scaleOK = []int32{int32(scale)}, []bool{true}
			sc.h.zc, sc.h.zcOK, sc.h.zt, sc.h.ztOK = []uint64{0}, []bool{false}, []float64{0.001}, []bool{true}
			sc.h.fz, sc.h.fzOK = []float64{0.5}, []bool{true}
			sc.h.po, sc.h.poOK, sc.h.no, sc.h.noOK = []int32{po}, []bool{true}, []int32{no}, []bool{true}
			sc.h.pbOff, sc.h.nbOff = []int32{0, 0}, []int32{0, 0}
			sc.h.fpb, sc.h.fpOff = fl(pos), []int32{0, int32(len(pos))}
			sc.h.fnb, sc.h.fnOff = fl(neg), []int32{0, int32(len(neg))}
		} else {
			bnd := make([]float64, len(neg))
			for i, x := range neg {
				bnd[i] = float64(x) / 4
			}
			sc.bnd, sc.bndOff = bnd, []int32{0, int32(len(bnd))}
			sc.bktOff = []int32{0, 0}
			sc.h.fbk, sc.h.fbOff = fl(pos), []int32{0, int32(len(pos))}
		}
		h := sc.histogramAt(0)
		if h == nil {
			return
		}
		if h.CounterResetHint != histogram.CounterResetHint(hint%4) {
			t.Fatalf("hint %d, want %d", h.CounterResetHint, hint%4)
		}
		if !(count >= 0) || math.IsInf(count, 0) {
			return // a count Prometheus would refuse is served as stored
		}
		if err := h.Validate(); err != nil {
			t.Fatalf("%v: %v", h, err)
		}
	})
}
