package rollup

import (
	"math"
	"testing"
	"time"
)

var base = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixNano()

const (
	sec    = int64(time.Second)
	minute = int64(time.Minute)
)

// run aggregates pts of one series of kind k and returns the windows per
// tier.
func run(tiers []int64, k Kind, pts []Point) [][]Window {
	out := make([][]Window, len(tiers))
	a := NewAggregator(tiers, func(tier int, w *Window) {
		c := *w
		c.Buckets = append([]uint64(nil), w.Buckets...)
		c.Bounds = append([]float64(nil), w.Bounds...)
		c.BucketsF = append([]float64(nil), w.BucketsF...)
		c.Sketch = append([]byte(nil), w.Sketch...)
		out[tier] = append(out[tier], c)
	})
	a.Begin(k)
	for i := range pts {
		a.Add(&pts[i])
	}
	a.End()
	return out
}

func gauge(t int64, v float64) Point { return Point{T: t, V: v, HasV: true} }

func TestWindowAlignment(t *testing.T) {
	// A point exactly on a boundary opens the window starting there; the
	// last nanosecond before it belongs to the previous one.
	pts := []Point{gauge(base, 1), gauge(base+minute-1, 2), gauge(base+minute, 3), gauge(base+5*minute, 4), gauge(base+time.Hour.Nanoseconds()-1, 5)}
	w := run([]int64{minute, 5 * minute, int64(time.Hour)}, KindGauge, pts)
	starts := func(ws []Window) []int64 {
		var s []int64
		for _, x := range ws {
			s = append(s, (x.Start-base)/sec)
		}
		return s
	}
	if got := starts(w[0]); len(got) != 4 || got[0] != 0 || got[1] != 60 || got[2] != 300 || got[3] != 3540 {
		t.Fatalf("1m windows at %v s", got)
	}
	if w[0][0].Points != 2 || w[0][0].Last != 2 || w[0][1].Points != 1 {
		t.Fatalf("1m windows: %+v", w[0][:2])
	}
	if got := starts(w[1]); len(got) != 3 || got[0] != 0 || got[1] != 300 || got[2] != 3300 {
		t.Fatalf("5m windows at %v s", got)
	}
	if len(w[2]) != 1 || w[2][0].Points != 5 || w[2][0].Sum != 15 || w[2][0].Min != 1 || w[2][0].Max != 5 || w[2][0].First != 1 || w[2][0].Last != 5 {
		t.Fatalf("1h window: %+v", w[2])
	}
	if floor(-1, minute) != -minute {
		t.Fatalf("floor(-1) = %d", floor(-1, minute))
	}
}

func TestCounterResets(t *testing.T) {
	// 10 → 15 → 3 (reset) → 8 in one minute, then 2 (reset) at the next.
	pts := []Point{gauge(base, 10), gauge(base+10*sec, 15), gauge(base+20*sec, 3), gauge(base+30*sec, 8), gauge(base+minute, 2)}
	w := run([]int64{minute, 5 * minute}, KindCounter, pts)
	if m := w[0][0]; m.Increase != 5+3+5 || m.Resets != 1 || m.First != 10 || m.Last != 8 {
		t.Fatalf("1m: %+v", m)
	}
	if m := w[0][1]; m.Increase != 0 || m.Resets != 0 || m.First != 2 {
		t.Fatalf("second 1m: %+v", m)
	}
	// 5m: the boundary pair 8 → 2 is a reset too.
	if m := w[1][0]; m.Increase != 13+2 || m.Resets != 2 || m.Points != 5 {
		t.Fatalf("5m: %+v", m)
	}
}

func TestDeltaSum(t *testing.T) {
	w := run([]int64{minute}, KindDeltaSum, []Point{gauge(base, 3), gauge(base+sec, 4)})
	if m := w[0][0]; m.Increase != 7 || !m.HasIncrease || m.Sum != 7 {
		t.Fatalf("%+v", m)
	}
}

func TestNaNAndInf(t *testing.T) {
	// NaN and missing values count as points but not as values; ±Inf are
	// values (sum/min/max follow IEEE) but stay out of the sketch.
	pts := []Point{gauge(base, math.NaN()), {T: base + sec}, gauge(base+2*sec, 2), gauge(base+3*sec, math.Inf(1))}
	w := run([]int64{minute}, KindGauge, pts)[0][0]
	if w.Points != 4 || w.Count != 2 || !math.IsInf(w.Sum, 1) || w.Min != 2 || !math.IsInf(w.Max, 1) || w.First != 2 || !math.IsInf(w.Last, 1) {
		t.Fatalf("%+v", w)
	}
	if len(w.Sketch) == 0 {
		t.Fatal("finite value missing from the sketch")
	}
	// A window of only NaN has points but no value fields.
	w = run([]int64{minute}, KindGauge, []Point{gauge(base, math.NaN())})[0][0]
	if w.Points != 1 || w.HasCount || w.HasSum || w.HasFirst || len(w.Sketch) != 0 {
		t.Fatalf("%+v", w)
	}
}

func TestEmptyWindows(t *testing.T) {
	// Windows without points are not emitted.
	w := run([]int64{minute, 5 * minute}, KindGauge, []Point{gauge(base, 1), gauge(base+30*minute, 2)})
	if len(w[0]) != 2 || len(w[1]) != 2 {
		t.Fatalf("%d 1m and %d 5m windows, want 2 and 2", len(w[0]), len(w[1]))
	}
	if w := run([]int64{minute}, KindGauge, nil); len(w[0]) != 0 {
		t.Fatalf("windows of no points: %v", w)
	}
}

func TestDeltaHistogramBounds(t *testing.T) {
	h := func(t int64, counts []uint64, bounds []float64) Point {
		var n uint64
		for _, c := range counts {
			n += c
		}
		return Point{T: t, Count: n, HasCount: true, Sum: float64(n), HasSum: true, Min: 1, HasMin: true, Max: 9, HasMax: true, Buckets: counts, Bounds: bounds}
	}
	b1, b2 := []float64{1, 5}, []float64{1, 10}
	pts := []Point{h(base, []uint64{1, 2, 3}, b1), h(base+sec, []uint64{1, 1, 1}, b1), h(base+minute, []uint64{4, 0, 0}, b2)}
	w := run([]int64{minute, 5 * minute}, KindDeltaDist, pts)
	if m := w[0][0]; !m.HasBuckets || m.Count != 9 || m.Buckets[0] != 2 || m.Buckets[1] != 3 || m.Buckets[2] != 4 {
		t.Fatalf("matching bounds: %+v", m)
	}
	if m := w[1][0]; m.HasBuckets || !m.Mismatch || m.Count != 13 || m.Sum != 13 {
		t.Fatalf("differing bounds: %+v", m)
	}
}

// TestTiersCombine: a tier computed from the finer one equals the tier
// computed from the raw points directly.
func TestTiersCombine(t *testing.T) {
	var pts []Point
	v := 0.0
	for i := range 600 {
		v += float64(i % 7)
		if i%97 == 0 {
			v = float64(i % 5) // resets
		}
		pts = append(pts, gauge(base+int64(i)*6*sec+int64(i%3), v))
	}
	for _, k := range []Kind{KindGauge, KindCounter, KindDeltaSum} {
		fine := run([]int64{minute, 5 * minute, int64(time.Hour)}, k, pts)
		for ti, tier := range []int64{5 * minute, int64(time.Hour)} {
			direct := run([]int64{tier}, k, pts)[0]
			got := fine[ti+1]
			if len(got) != len(direct) {
				t.Fatalf("kind %d tier %d: %d windows from finer, %d direct", k, tier, len(got), len(direct))
			}
			for i := range got {
				a, b := got[i], direct[i]
				a.Sketch, b.Sketch = nil, nil
				if string(got[i].Sketch) != string(direct[i].Sketch) {
					t.Fatalf("kind %d tier %d window %d: sketches differ", k, tier, i)
				}
				if a.Start != b.Start || a.Points != b.Points || a.Count != b.Count || a.Sum != b.Sum || a.Min != b.Min ||
					a.Max != b.Max || a.First != b.First || a.Last != b.Last || a.Increase != b.Increase || a.Resets != b.Resets ||
					a.FirstT != b.FirstT || a.LastT != b.LastT {
					t.Fatalf("kind %d tier %d window %d:\nfrom finer %+v\ndirect     %+v", k, tier, i, a, b)
				}
			}
		}
	}
}

func TestValidateTiers(t *testing.T) {
	if _, err := ParseTiers("1m,5m,1h"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "5m,1m", "1m,7m", "2h", "1m,90s", "1500ms", "-1m", "x"} {
		if _, err := ParseTiers(bad); err == nil {
			t.Errorf("ParseTiers(%q) accepted", bad)
		}
	}
	if TierName(time.Minute) != "1m" || TierName(time.Hour) != "1h" || TierName(30*time.Second) != "30s" {
		t.Fatal("tier names")
	}
}
