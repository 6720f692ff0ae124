package rollup

import (
	"math"
	"slices"

	"github.com/DataDog/sketches-go/ddsketch"
)

// Kind is how a series' points aggregate; it follows from the metric type,
// temporality and monotonicity of the series' first point.
type Kind uint8

const (
	KindGauge     Kind = iota // gauges and non-monotonic cumulative sums
	KindCounter               // monotonic cumulative sums: reset-aware increase
	KindDeltaSum              // delta sums: the increase is the sum
	KindDeltaDist             // delta histograms and exponential histograms: summed
	KindCumDist               // cumulative histograms, exponential histograms, summaries: latest state
)

// KindOf maps the metrics table's metric_type, temporality and
// is_monotonic to a Kind.
func KindOf(metricType, temporality string, monotonic bool) Kind {
	switch metricType {
	case "sum":
		switch {
		case temporality == "delta":
			return KindDeltaSum
		case monotonic && temporality == "cumulative":
			return KindCounter
		}
		return KindGauge
	case "histogram", "exponential_histogram":
		if temporality == "delta" {
			return KindDeltaDist
		}
		return KindCumDist
	case "summary":
		return KindCumDist
	}
	return KindGauge
}

func (k Kind) numeric() bool { return k <= KindDeltaSum }

// Point is one raw point as the aggregator sees it. Slices alias the
// caller's buffers and are only read during Add.
type Point struct {
	T    int64
	V    float64 // gauge/sum value (value_int converted when the point is an int)
	HasV bool
	// Distributions (histograms, exponential histograms, summaries).
	Count                  uint64
	HasCount               bool
	Sum, Min, Max          float64
	HasSum, HasMin, HasMax bool
	Buckets                []uint64
	Bounds                 []float64
	Sketch                 []byte // the raw sketch column, encoded
	// A float histogram (count_float, bucket_counts_float): its exact
	// counts, with Count and Buckets unset.
	CountF    float64
	HasCountF bool
	BucketsF  []float64
}

// Window is the aggregate of one series over one aligned window of one
// tier. The meaning of each field per Kind is the metrics_rollup contract
// in docs/schema.md.
type Window struct {
	Start          int64  // aligned window start, unix ns
	Points         uint64 // raw points (rows) in the window
	FirstT, LastT  int64  // timestamps of the first and last point
	Count          uint64
	HasCount       bool
	Sum            float64
	HasSum         bool
	Min, Max       float64
	HasMin, HasMax bool
	// First and Last: the first and latest non-NaN value (numeric kinds),
	// or the first and latest cumulative count (KindCumDist).
	First, Last float64
	HasFirst    bool
	Increase    float64 // reset-aware (KindCounter, KindCumDist on count); the sum for KindDeltaSum
	Resets      uint64
	HasIncrease bool
	Buckets     []uint64
	Bounds      []float64
	HasBuckets  bool // buckets summed (or latest) over points whose bounds all matched
	Mismatch    bool // bounds differed within the window: Buckets left null
	Sketch      []byte
	// Float histograms: the float count (summed, or the latest), apart
	// from the integer histograms' Count, and the float buckets; when
	// FloatBuckets the window's buckets are BucketsF, not Buckets (a
	// delta window mixing float and integer buckets is a Mismatch).
	CountF       float64
	HasCountF    bool
	BucketsF     []float64
	FloatBuckets bool
}

func (w *Window) reset() {
	b, f, bf, sk := w.Buckets[:0], w.Bounds[:0], w.BucketsF[:0], w.Sketch[:0]
	*w = Window{Buckets: b, Bounds: f, BucketsF: bf, Sketch: sk}
}

// floor aligns t down to a multiple of tier (both ns); the epoch is a
// multiple of every tier dividing 1h, so this is UTC alignment.
func floor(t, tier int64) int64 {
	r := t % tier
	if r < 0 {
		r += tier
	}
	return t - r
}

// delta is a counter's increase from a to b: a drop is a reset, after
// which the counter counted b from zero.
func delta(a, b float64) (float64, bool) {
	if b >= a {
		return b - a, false
	}
	return b, true
}

// Aggregator rolls one series at a time into every tier. Points must come
// in time order (ties in any fixed order); Begin starts a series, End
// closes its open windows. Emit receives each closed window; the Window
// and its slices are reused after Emit returns.
type Aggregator struct {
	tiers []int64
	kind  Kind
	cur   []Window
	sk    []*ddsketch.DDSketch
	Emit  func(tier int, w *Window)
}

// NewAggregator returns an aggregator for tiers (ns, finest first,
// validated).
func NewAggregator(tiers []int64, emit func(tier int, w *Window)) *Aggregator {
	a := &Aggregator{tiers: tiers, cur: make([]Window, len(tiers)), sk: make([]*ddsketch.DDSketch, len(tiers)), Emit: emit}
	for i := range a.sk {
		s, err := ddsketch.NewDefaultDDSketch(sketchAccuracy)
		if err != nil {
			panic(err) // constant accuracy
		}
		a.sk[i] = s
	}
	return a
}

// sketchAccuracy is the relative accuracy of the raw sketch column
// (lake.SketchRelativeAccuracy); rollup sketches must use the same mapping
// to merge.
const sketchAccuracy = 0.01

// Begin starts a series of kind k.
func (a *Aggregator) Begin(k Kind) {
	a.kind = k
	for i := range a.cur {
		a.cur[i].reset()
		a.sk[i].Clear()
	}
}

// End closes every open window of the series.
func (a *Aggregator) End() { a.advance(0, true) }

// Add adds the next point of the series.
func (a *Aggregator) Add(p *Point) {
	a.advance(p.T, false)
	w := &a.cur[0]
	if w.Points == 0 {
		w.Start = floor(p.T, a.tiers[0])
		w.FirstT = p.T
	}
	w.Points++
	w.LastT = p.T
	switch a.kind {
	case KindGauge, KindCounter, KindDeltaSum:
		if !p.HasV || math.IsNaN(p.V) {
			return
		}
		v := p.V
		w.Count++
		w.HasCount = true
		if !w.HasFirst {
			w.First, w.Min, w.Max, w.Sum = v, v, v, v
			w.HasFirst, w.HasMin, w.HasMax, w.HasSum = true, true, true, true
		} else {
			w.Sum += v
			w.Min = math.Min(w.Min, v)
			w.Max = math.Max(w.Max, v)
			if a.kind == KindCounter {
				d, reset := delta(w.Last, v)
				w.Increase += d
				if reset {
					w.Resets++
				}
			}
		}
		w.Last = v
		switch a.kind {
		case KindCounter:
			w.HasIncrease = true
		case KindDeltaSum:
			w.Increase, w.HasIncrease = w.Sum, true
		case KindGauge:
			if !math.IsInf(v, 0) {
				for _, s := range a.sk {
					_ = s.Add(v)
				}
			}
		}
	case KindDeltaDist:
		if p.HasCount {
			w.Count += p.Count
			w.HasCount = true
		}
		if p.HasCountF {
			w.CountF += p.CountF
			w.HasCountF = true
		}
		if p.HasSum {
			if w.HasSum {
				w.Sum += p.Sum
			} else {
				w.Sum, w.HasSum = p.Sum, true
			}
		}
		if p.HasMin && (!w.HasMin || p.Min < w.Min) {
			w.Min, w.HasMin = p.Min, true
		}
		if p.HasMax && (!w.HasMax || p.Max > w.Max) {
			w.Max, w.HasMax = p.Max, true
		}
		if p.HasCountF {
			addBucketsF(w, p.BucketsF, p.Bounds)
		} else {
			addBuckets(w, p.Buckets, p.Bounds)
		}
		if len(p.Sketch) > 0 {
			for _, s := range a.sk {
				_ = s.DecodeAndMergeWith(p.Sketch)
			}
		}
	case KindCumDist:
		// The latest cumulative state; the count's reset-aware increase.
		w.Count, w.HasCount = p.Count, p.HasCount
		w.CountF, w.HasCountF = p.CountF, p.HasCountF
		w.Sum, w.HasSum = p.Sum, p.HasSum
		w.Buckets = append(w.Buckets[:0], p.Buckets...)
		w.BucketsF = append(w.BucketsF[:0], p.BucketsF...)
		w.Bounds = append(w.Bounds[:0], p.Bounds...)
		w.FloatBuckets = p.HasCountF
		w.HasBuckets = len(p.Buckets) > 0 || len(p.BucketsF) > 0
		w.Sketch = append(w.Sketch[:0], p.Sketch...)
		if p.HasCount || p.HasCountF {
			c := float64(p.Count)
			if p.HasCountF {
				c = p.CountF
			}
			if !w.HasFirst {
				w.First, w.HasFirst, w.HasIncrease = c, true, true
			} else {
				d, reset := delta(w.Last, c)
				w.Increase += d
				if reset {
					w.Resets++
				}
			}
			w.Last = c
		}
	}
}

// addBuckets sums a delta histogram's buckets into w while the bounds of
// every point so far match; the first mismatch leaves them null for the
// window.
func addBuckets(w *Window, counts []uint64, bounds []float64) {
	sumBuckets(w, &w.Buckets, counts, bounds, false)
}

// addBucketsF is addBuckets for a float histogram's buckets. A window
// whose points mix float and integer buckets has no buckets (Mismatch),
// as one whose bounds differ.
func addBucketsF(w *Window, counts, bounds []float64) {
	sumBuckets(w, &w.BucketsF, counts, bounds, true)
}

// sumBuckets adds counts into dst, w's Buckets or BucketsF as float says.
func sumBuckets[T uint64 | float64](w *Window, dst *[]T, counts []T, bounds []float64, float bool) {
	if w.Mismatch || len(counts) == 0 {
		return
	}
	if !w.HasBuckets {
		*dst = append((*dst)[:0], counts...)
		w.Bounds = append(w.Bounds[:0], bounds...)
		w.HasBuckets, w.FloatBuckets = true, float
		return
	}
	if w.FloatBuckets != float || len(counts) != len(*dst) || !slices.Equal(bounds, w.Bounds) {
		w.mismatch()
		return
	}
	for i, c := range counts {
		(*dst)[i] += c
	}
}

// mismatch leaves w's buckets null for the rest of the window.
func (w *Window) mismatch() {
	w.Mismatch, w.HasBuckets, w.FloatBuckets = true, false, false
	w.Buckets, w.BucketsF, w.Bounds = w.Buckets[:0], w.BucketsF[:0], w.Bounds[:0]
}

// advance closes the windows that end before t (all of them when final).
// Tiers nest, so once one tier's window is still current every coarser
// one is too.
func (a *Aggregator) advance(t int64, final bool) {
	for i := range a.cur {
		w := &a.cur[i]
		if w.Points == 0 {
			continue
		}
		if !final && floor(t, a.tiers[i]) == w.Start {
			return
		}
		if a.kind == KindGauge || a.kind == KindDeltaDist {
			w.Sketch = w.Sketch[:0]
			if !a.sk[i].IsEmpty() {
				a.sk[i].Encode(&w.Sketch, false)
			}
			a.sk[i].Clear()
		}
		a.Emit(i, w)
		if i+1 < len(a.cur) {
			Combine(a.kind, &a.cur[i+1], w, a.tiers[i+1])
		}
		w.reset()
	}
}

// Combine folds the finer window c, which follows everything already in
// p, into p, a window of tier parentTier (ns). Sketches of numeric and
// delta kinds are not combined here (the Aggregator feeds every tier's
// sketch directly, which equals merging: DDSketch merges are exact).
func Combine(k Kind, p, c *Window, parentTier int64) {
	if c.Points == 0 {
		return
	}
	if p.Points == 0 {
		b, f, bf, sk := p.Buckets, p.Bounds, p.BucketsF, p.Sketch
		*p = *c
		p.Buckets = append(b[:0], c.Buckets...)
		p.Bounds = append(f[:0], c.Bounds...)
		p.BucketsF = append(bf[:0], c.BucketsF...)
		p.Sketch = append(sk[:0], c.Sketch...)
		p.Start = floor(c.Start, parentTier)
		return
	}
	p.Points += c.Points
	p.LastT = c.LastT
	switch k {
	case KindGauge, KindCounter, KindDeltaSum:
		if !c.HasFirst {
			return
		}
		if !p.HasFirst {
			start, points, firstT, lastT := p.Start, p.Points, p.FirstT, p.LastT
			b, f, bf, sk := p.Buckets, p.Bounds, p.BucketsF, p.Sketch
			*p = *c
			p.Start, p.Points, p.FirstT, p.LastT = start, points, firstT, lastT
			p.Buckets, p.Bounds, p.BucketsF, p.Sketch = b[:0], f[:0], bf[:0], sk[:0]
			return
		}
		p.Count += c.Count
		p.Sum += c.Sum
		p.Min = math.Min(p.Min, c.Min)
		p.Max = math.Max(p.Max, c.Max)
		switch k {
		case KindCounter:
			d, reset := delta(p.Last, c.First)
			p.Increase += c.Increase + d
			p.Resets += c.Resets
			if reset {
				p.Resets++
			}
		case KindDeltaSum:
			p.Increase = p.Sum
		}
		p.Last = c.Last
	case KindDeltaDist:
		if c.HasCount {
			p.Count += c.Count
			p.HasCount = true
		}
		if c.HasCountF {
			p.CountF += c.CountF
			p.HasCountF = true
		}
		if c.HasSum {
			if p.HasSum {
				p.Sum += c.Sum
			} else {
				p.Sum, p.HasSum = c.Sum, true
			}
		}
		if c.HasMin && (!p.HasMin || c.Min < p.Min) {
			p.Min, p.HasMin = c.Min, true
		}
		if c.HasMax && (!p.HasMax || c.Max > p.Max) {
			p.Max, p.HasMax = c.Max, true
		}
		switch {
		case c.Mismatch:
			p.mismatch()
		case c.HasBuckets && c.FloatBuckets:
			addBucketsF(p, c.BucketsF, c.Bounds)
		case c.HasBuckets:
			addBuckets(p, c.Buckets, c.Bounds)
		}
	case KindCumDist:
		p.Count, p.HasCount = c.Count, c.HasCount
		p.CountF, p.HasCountF = c.CountF, c.HasCountF
		p.Sum, p.HasSum = c.Sum, c.HasSum
		p.Buckets = append(p.Buckets[:0], c.Buckets...)
		p.BucketsF = append(p.BucketsF[:0], c.BucketsF...)
		p.Bounds = append(p.Bounds[:0], c.Bounds...)
		p.HasBuckets, p.FloatBuckets = c.HasBuckets, c.FloatBuckets
		p.Sketch = append(p.Sketch[:0], c.Sketch...)
		if c.HasFirst {
			if !p.HasFirst {
				p.First, p.HasFirst, p.HasIncrease = c.First, true, true
				p.Increase, p.Resets = c.Increase, c.Resets
			} else {
				d, reset := delta(p.Last, c.First)
				p.Increase += c.Increase + d
				p.Resets += c.Resets
				if reset {
					p.Resets++
				}
			}
			p.Last = c.Last
		}
	}
}
