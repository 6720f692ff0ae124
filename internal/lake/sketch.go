package lake

import (
	"math"

	"github.com/DataDog/sketches-go/ddsketch"

	"github.com/sluice-dev/sluice/internal/signal"
)

// SketchRelativeAccuracy is the relative accuracy of the sketch column.
const SketchRelativeAccuracy = 0.01

// sketcher builds the DDSketch of histogram points; one sketch is reused.
type sketcher struct {
	s *ddsketch.DDSketch
}

func newSketcher() *sketcher {
	s, err := ddsketch.NewDefaultDDSketch(SketchRelativeAccuracy)
	if err != nil {
		panic(err) // a constant accuracy is always valid
	}
	return &sketcher{s: s}
}

// add adds count observations at v, skipping what a sketch cannot hold.
func (k *sketcher) add(v float64, count uint64) { k.addF(v, float64(count)) }

// addF is add for a float count (float histograms).
func (k *sketcher) addF(v, count float64) {
	if !(count > 0) || math.IsInf(count, 0) || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	_ = k.s.AddWithCount(v, count)
}

// floatCounts is point i's FloatCounts without the count (and, exp, the
// zero count), and the zero count; ok is false for an integer histogram.
func floatCounts(m *signal.Metrics, i int, exp bool) (buckets []float64, zero float64, ok bool) {
	fc := m.FloatCounts[i]
	if fc.Len() == 0 {
		return nil, 0, false
	}
	f := m.F64[fc.Start+1 : fc.End]
	if exp && len(f) > 0 {
		zero, f = f[0], f[1:]
	}
	return f, zero, true
}

// encode appends the sketch of point i to *buf and returns it; ok is false
// for types without a sketch and for empty distributions.
func (k *sketcher) encode(m *signal.Metrics, i int, t signal.MetricType, buf *[]byte) ([]byte, bool) {
	switch t {
	case signal.MetricHistogram:
		k.s.Clear()
		br, fr := m.BucketCounts[i], m.Bounds[i]
		counts, bounds := m.U64[br.Start:br.End], m.F64[fr.Start:fr.End]
		has := m.Has[i]
		if fb, _, ok := floatCounts(m, i, false); ok {
			for j, c := range fb {
				k.addF(bucketMid(j, bounds, has&signal.HasMin != 0, m.Min[i], has&signal.HasMax != 0, m.Max[i], has&signal.HasSum != 0, m.Sum[i], m.Count[i]), c)
			}
			break
		}
		for j, c := range counts {
			if c == 0 {
				continue
			}
			k.add(bucketMid(j, bounds, has&signal.HasMin != 0, m.Min[i], has&signal.HasMax != 0, m.Max[i], has&signal.HasSum != 0, m.Sum[i], m.Count[i]), c)
		}
	case signal.MetricExponentialHistogram:
		k.s.Clear()
		base := math.Exp2(math.Exp2(-float64(m.Scale[i])))
		pr, nr := m.PosCounts[i], m.NegCounts[i]
		if fb, z, ok := floatCounts(m, i, true); ok {
			np := min(int(pr.Len()), len(fb))
			for j, c := range fb[:np] {
				k.addF(expMid(base, int(m.PosOffset[i])+j), c)
			}
			for j, c := range fb[np:] {
				k.addF(-expMid(base, int(m.NegOffset[i])+j), c)
			}
			if z > 0 && !math.IsInf(z, 0) {
				_ = k.s.AddWithCount(0, z)
			}
			break
		}
		for j, c := range m.U64[pr.Start:pr.End] {
			k.add(expMid(base, int(m.PosOffset[i])+j), c)
		}
		for j, c := range m.U64[nr.Start:nr.End] {
			k.add(-expMid(base, int(m.NegOffset[i])+j), c)
		}
		if z := m.ZeroCount[i]; z > 0 {
			_ = k.s.AddWithCount(0, float64(z))
		}
	default:
		return nil, false
	}
	if k.s.IsEmpty() {
		return nil, false
	}
	off := len(*buf)
	k.s.Encode(buf, false)
	return (*buf)[off:len(*buf):len(*buf)], true
}

// bucketMid is the representative value of explicit bucket j: the midpoint
// of its bounds; the open first and last buckets use min and max when known,
// else their finite bound. With no bounds at all, the mean (or midrange).
func bucketMid(j int, bounds []float64, hasMin bool, min float64, hasMax bool, max float64, hasSum bool, sum float64, count uint64) float64 {
	n := len(bounds)
	switch {
	case n == 0:
		switch {
		case hasSum && count > 0:
			return sum / float64(count)
		case hasMin && hasMax:
			return (min + max) / 2
		case hasMin:
			return min
		case hasMax:
			return max
		}
		return 0
	case j == 0:
		if hasMin {
			return (min + bounds[0]) / 2
		}
		return bounds[0]
	case j >= n:
		if hasMax {
			return (bounds[n-1] + max) / 2
		}
		return bounds[n-1]
	}
	return (bounds[j-1] + bounds[j]) / 2
}

// expMid is the midpoint of exponential bucket idx: (base^idx, base^(idx+1)].
func expMid(base float64, idx int) float64 {
	lo := math.Pow(base, float64(idx))
	return (lo + lo*base) / 2
}
