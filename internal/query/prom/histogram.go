package prom

import (
	"cmp"
	"math"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/promql"

	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/promname"
)

// Native histograms (docs/schema.md, "Native histograms in PromQL"): an
// exponential histogram point (OTLP, or a remote-write native histogram of
// schema -4..8) and a remote-write custom-bucket histogram (schema -53,
// stored as an explicit-bucket point) are served under the metric's bare
// name as histogram.FloatHistogram samples. Rollup tiers keep no buckets
// of exponential histograms, so these series are always read from raw
// points (rollupUse.serves never serves their kinds).

// Schemas Prometheus can hold: OTLP scales above the largest are reduced
// to it (buckets merge exactly); points of a scale below the smallest
// have no Prometheus form and are skipped, as Prometheus's own OTLP
// ingestion does.
const (
	maxSchema = histogram.ExponentialSchemaMax
	minSchema = histogram.ExponentialSchemaMin
)

// HistogramSampleBytes is what one native histogram sample holds in memory
// besides its buckets (histogramBytes adds those): the timestamp and the
// pointer of its HPoint, and the FloatHistogram's fields (five slice
// headers and six words), eleven times a float sample.
const HistogramSampleBytes = 16 + 160

// histogramBytes is the memory one histogram sample takes, charged to the
// query's memory reservation (Limits.Charge).
func histogramBytes(h *histogram.FloatHistogram) int64 {
	return HistogramSampleBytes + int64(8*(len(h.PositiveBuckets)+len(h.NegativeBuckets)+len(h.CustomValues))+
		8*(len(h.PositiveSpans)+len(h.NegativeSpans)))
}

// histCols are the columns of a run's native histogram points.
type histCols struct {
	scale        []int32
	scaleOK      []bool
	zc           []uint64
	zcOK         []bool
	zt           []float64
	ztOK         []bool
	po, no       []int32
	poOK, noOK   []bool
	pb, nb       []uint64
	pbOff, nbOff []int32
	exp          bool // an exponential histogram run (else custom buckets: bounds and bucket_counts)
	gauge        bool // remote write sent the run's metric as a gauge histogram

	// Float histograms (count_float non-null: fc, fcOK), whose counts are
	// these columns' instead of the integer ones; absent from files
	// written before they existed (floats false).
	floats              bool
	fc, fz              []float64
	fcOK, fzOK          []bool
	fpb, fnb, fbk       []float64 // positive, negative (exponential) or custom buckets
	fpOff, fnOff, fbOff []int32
	// hint is the reset_hint of each row (histogram.CounterResetHint;
	// UnknownCounterReset when null or absent).
	hint []histogram.CounterResetHint
}

// colNamed is the index of the leaf column of pf named name (a LIST's
// leaf is name.list.element), -1 when the file has none.
func colNamed(pf *parquet.File, name string) int {
	for i, p := range pf.Schema().Columns() {
		if p[0] == name {
			return i
		}
	}
	return -1
}

// readFloatHistograms reads a histogram run's float count and reset hint
// columns, when the file has them (readRun reads the integer ones).
func (sc *scan) readFloatHistograms(pf *parquet.File, r run, exp bool, read func(col int, f func(cc parquet.ColumnChunk) error, what string) error) error {
	n := r.end - r.start
	h := &sc.h
	h.hint = grow(h.hint, n)
	clear(h.hint)
	if col := colNamed(pf, format.ColResetHint); col >= 0 {
		rows := make([]int64, n)
		for i := range rows {
			rows[i] = r.start + int64(i)
		}
		if err := read(col, func(cc parquet.ColumnChunk) error {
			return format.ReadValuesAt(cc, r.start, r.end, rows, func(i int, v parquet.Value) {
				if !v.IsNull() {
					h.hint[i] = resetHint(v.ByteArray())
				}
			})
		}, format.ColResetHint); err != nil {
			return err
		}
	}
	col := colNamed(pf, format.ColCountFloat)
	h.floats = col >= 0
	if !h.floats {
		return nil
	}
	h.fc, h.fcOK = grow(h.fc, n), grow(h.fcOK, n)
	if err := read(col, func(cc parquet.ColumnChunk) error { return format.ReadOptFloat64s(cc, r.start, r.end, h.fc, h.fcOK) }, format.ColCountFloat); err != nil {
		return err
	}
	if !slices.Contains(h.fcOK, true) {
		return nil // integer histograms only: no other float column to read
	}
	type list struct {
		name string
		vals *[]float64
		offs *[]int32
	}
	lists := []list{{format.ColBucketCountsFloat, &h.fbk, &h.fbOff}}
	if exp {
		h.fz, h.fzOK = grow(h.fz, n), grow(h.fzOK, n)
		if err := read(colNamed(pf, format.ColExpZeroCountFloat), func(cc parquet.ColumnChunk) error {
			return format.ReadOptFloat64s(cc, r.start, r.end, h.fz, h.fzOK)
		}, format.ColExpZeroCountFloat); err != nil {
			return err
		}
		lists = []list{{format.ColExpPositiveBucketCountsFloat, &h.fpb, &h.fpOff}, {format.ColExpNegativeBucketCountsFloat, &h.fnb, &h.fnOff}}
	}
	for _, l := range lists {
		*l.offs = grow(*l.offs, n+1)
		if err := read(colNamed(pf, l.name), func(cc parquet.ColumnChunk) (err error) {
			*l.vals, err = format.ReadListF64(cc, r.start, r.end, (*l.vals)[:0], *l.offs)
			return err
		}, l.name); err != nil {
			return err
		}
	}
	return nil
}

// resetHint is the CounterResetHint of a reset_hint value.
func resetHint(b []byte) histogram.CounterResetHint {
	switch string(b) {
	case "yes":
		return histogram.CounterReset
	case "no":
		return histogram.NotCounterReset
	case "gauge":
		return histogram.GaugeType
	}
	return histogram.UnknownCounterReset
}

// gaugeHistogram reports whether the file's remote-write rows of d were
// all sent with the metadata type gaugehistogram: their samples carry the
// gauge hint, so PromQL sees no counter resets in them (remote write's
// reset_hint is not stored; the type is what says it).
func (idx *fileIndex) gaugeHistogram(d *metricDesc) bool {
	dm := idx.meta[d]
	if !d.rw || dm == nil || dm.otlp || len(dm.rw) == 0 {
		return false
	}
	for _, m := range dm.rw {
		if m.typ != "gaugehistogram" {
			return false
		}
	}
	return true
}

// readExpHistograms reads the exponential histogram columns of a run
// (readRun reads timestamp, count and sum).
func (sc *scan) readExpHistograms(pf *parquet.File, g int, r run, read func(col int, f func(cc parquet.ColumnChunk) error, what string) error) error {
	n := r.end - r.start
	h := &sc.h
	// Room for the run's share of a bucket column's values up front: the
	// buckets are most of what a histogram run reads.
	rows := pf.RowGroups()[g].NumRows()
	reserve := func(dst []uint64, cc parquet.ColumnChunk) []uint64 {
		if want := cc.NumValues() * n / max(rows, 1); int64(cap(dst)) < want {
			return make([]uint64, 0, want+want/8)
		}
		return dst
	}
	h.scale, h.scaleOK = grow(h.scale, n), grow(h.scaleOK, n)
	h.zc, h.zcOK = grow(h.zc, n), grow(h.zcOK, n)
	h.zt, h.ztOK = grow(h.zt, n), grow(h.ztOK, n)
	h.po, h.poOK = grow(h.po, n), grow(h.poOK, n)
	h.no, h.noOK = grow(h.no, n), grow(h.noOK, n)
	h.pbOff, h.nbOff = grow(h.pbOff, n+1), grow(h.nbOff, n+1)
	for _, x := range []struct {
		name string
		f    func(cc parquet.ColumnChunk) error
	}{
		{format.ColExpScale, func(cc parquet.ColumnChunk) error {
			return format.ReadOptInt32s(cc, r.start, r.end, h.scale, h.scaleOK)
		}},
		{format.ColExpZeroCount, func(cc parquet.ColumnChunk) error { return format.ReadOptUint64s(cc, r.start, r.end, h.zc, h.zcOK) }},
		{format.ColExpZeroThreshold, func(cc parquet.ColumnChunk) error {
			return format.ReadOptFloat64s(cc, r.start, r.end, h.zt, h.ztOK)
		}},
		{format.ColExpPositiveOffset, func(cc parquet.ColumnChunk) error { return format.ReadOptInt32s(cc, r.start, r.end, h.po, h.poOK) }},
		{format.ColExpNegativeOffset, func(cc parquet.ColumnChunk) error { return format.ReadOptInt32s(cc, r.start, r.end, h.no, h.noOK) }},
		{format.ColExpPositiveBucketCounts, func(cc parquet.ColumnChunk) (err error) {
			h.pb, err = format.ReadListU64(cc, r.start, r.end, reserve(h.pb, cc), h.pbOff)
			return err
		}},
		{format.ColExpNegativeBucketCounts, func(cc parquet.ColumnChunk) (err error) {
			h.nb, err = format.ReadListU64(cc, r.start, r.end, reserve(h.nb, cc), h.nbOff)
			return err
		}},
	} {
		col := -1
		for i, p := range pf.Schema().Columns() {
			if p[0] == x.name { // a LIST's leaf is name.list.element
				col = i
				break
			}
		}
		if err := read(col, x.f, x.name); err != nil {
			return err
		}
	}
	return nil
}

// histogramAt builds row k's native histogram, or nil when the row has
// none Prometheus can hold (no count; an OTLP scale below -4; custom
// buckets that do not match their bounds, or bounds that are not
// increasing; bucket indexes past int32).
func (sc *scan) histogramAt(k int64) *histogram.FloatHistogram {
	h := &sc.h
	isFloat := h.floats && h.fcOK[k]
	if !sc.cntOK[k] && !isFloat {
		return nil
	}
	fh := &histogram.FloatHistogram{Count: float64(sc.cnt[k])}
	if isFloat {
		fh.Count = h.fc[k]
	}
	switch {
	case k < int64(len(h.hint)) && h.hint[k] != histogram.UnknownCounterReset:
		fh.CounterResetHint = h.hint[k]
	case h.gauge:
		fh.CounterResetHint = histogram.GaugeType // files without reset_hint: the metadata's type
	}
	if sc.sumOK[k] {
		fh.Sum = sc.sums[k]
	}
	if !h.exp {
		bounds := sc.bnd[sc.bndOff[k]:sc.bndOff[k+1]]
		fh.Schema = histogram.CustomBucketsSchema
		if isFloat {
			counts := h.fbk[h.fbOff[k]:h.fbOff[k+1]]
			if len(counts) != len(bounds)+1 {
				return nil
			}
			fh.PositiveSpans, fh.PositiveBuckets = denseSide(counts, 0)
		} else {
			counts := sc.bkt[sc.bktOff[k]:sc.bktOff[k+1]]
			if len(counts) != len(bounds)+1 {
				return nil
			}
			fh.PositiveSpans, fh.PositiveBuckets = denseSide(counts, 0)
		}
		fh.CustomValues = slices.Clone(bounds)
		if fh.Validate() != nil {
			return nil // bounds not increasing, or +Inf among them: not a histogram PromQL can use
		}
		return fh
	}
	if !h.scaleOK[k] {
		return nil
	}
	scale := h.scale[k]
	if scale < minSchema {
		return nil
	}
	fh.Schema = scale
	if h.zcOK[k] {
		fh.ZeroCount = float64(h.zc[k])
	}
	if isFloat && h.fzOK[k] {
		fh.ZeroCount = h.fz[k]
	}
	if h.ztOK[k] {
		fh.ZeroThreshold = h.zt[k]
	}
	// OTLP bucket i of offset o is (base^(o+i), base^(o+i+1)]: Prometheus
	// bucket index o+i+1.
	// A null offset is 0 (OTLP's default); an offset so large that its
	// last bucket's index does not fit an int32 has no Prometheus form.
	for _, side := range [2]struct {
		counts  []uint64
		fcounts []float64
		off     int32
		ok      bool
		spans   *[]histogram.Span
		bkts    *[]float64
	}{
		{h.pb[h.pbOff[k]:h.pbOff[k+1]], floatSide(isFloat, h.fpb, h.fpOff, k), h.po[k], h.poOK[k], &fh.PositiveSpans, &fh.PositiveBuckets},
		{h.nb[h.nbOff[k]:h.nbOff[k+1]], floatSide(isFloat, h.fnb, h.fnOff, k), h.no[k], h.noOK[k], &fh.NegativeSpans, &fh.NegativeBuckets},
	} {
		nb := len(side.counts)
		if isFloat {
			nb = len(side.fcounts)
		}
		if nb == 0 {
			continue
		}
		off := int64(0)
		if side.ok {
			off = int64(side.off)
		}
		if off+1+int64(nb) > math.MaxInt32 {
			return nil
		}
		if isFloat {
			*side.spans, *side.bkts = denseSide(side.fcounts, int32(off+1))
		} else {
			*side.spans, *side.bkts = denseSide(side.counts, int32(off+1))
		}
	}
	if scale > maxSchema {
		if err := fh.ReduceResolution(maxSchema); err != nil {
			return nil
		}
	}
	return fh
}

// floatSide is row k's float buckets of one side, nil for an integer
// histogram.
func floatSide(isFloat bool, vals []float64, offs []int32, k int64) []float64 {
	if !isFloat {
		return nil
	}
	return vals[offs[k]:offs[k+1]]
}

// denseSide turns dense counts starting at Prometheus bucket index first
// into spans and float buckets, laid out by promname.NativeSpans.
func denseSide[T uint64 | float64](counts []T, first int32) ([]histogram.Span, []float64) {
	b := make([]float64, 0, len(counts))
	spans := promname.NativeSpans(counts, first, func(c T) { b = append(b, float64(c)) })
	return spans, b
}

// addH appends a histogram sample (see add).
func (s *series) addH(t int64, h *histogram.FloatHistogram) {
	if n := len(s.hpts); n > 0 && t <= s.hpts[n-1].T {
		s.unsorted = true
	}
	s.hpts = append(s.hpts, promql.HPoint{T: t, H: h})
}

// finishHistograms sorts histogram samples like float ones (the last read
// of a millisecond wins) and turns delta increments into their running
// sum.
func (s *series) finishHistograms() {
	if len(s.hpts) == 0 {
		return
	}
	if s.unsorted {
		slices.SortStableFunc(s.hpts, func(a, b promql.HPoint) int { return cmp.Compare(a.T, b.T) })
		out := s.hpts[:0]
		for _, p := range s.hpts {
			if n := len(out); n > 0 && out[n-1].T == p.T {
				out[n-1] = p
				continue
			}
			out = append(out, p)
		}
		s.hpts = out
	}
	if !s.cumulate {
		return
	}
	var sum *histogram.FloatHistogram
	for i := range s.hpts {
		h := s.hpts[i].H
		if sum == nil {
			sum = h.Copy()
		} else if next, _, _, err := sum.Copy().Add(h); err == nil {
			sum = next
		} // else a custom-bucket increment added to an exponential sum (or the reverse): the sum stays
		s.hpts[i].H = sum.Copy()
		if i > 0 {
			s.hpts[i].H.CounterResetHint = histogram.NotCounterReset
		}
	}
}
