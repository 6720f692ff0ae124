package prom

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/promname"
)

// scan is the state of one Select: reused column buffers and the series
// built so far.
type scan struct {
	q          *Querier
	sets       [][]*labels.Matcher // a series is selected when it meets every matcher of some set
	labelsOnly bool
	delta      bool            // the current run holds delta points (metricDesc.cumulative)
	ru         *rollupUse      // non-nil while the selector reads rollups for some hours
	only       map[uint64]bool // non-nil: read only these lake series (readOnly)
	mint, maxt int64           // unix ns, inclusive
	outs       []output

	byHash map[uint64][]*series
	all    []*series
	// bySID finds the series of a lake series and output without building
	// its labels again: lake series recur in every file of the range.
	bySID map[sidKey]*series

	ids          []uint64
	ts           []int64
	tsOK         []bool
	vals         []float64
	valOK        []bool
	cnt          []uint64
	cntOK        []bool
	sums         []float64
	sumOK        []bool
	bnd          []float64
	bndOff       []int32
	bkt          []uint64
	bktOff       []int32
	qs, qv       []float64
	qsOff, qvOff []int32
	h            histCols // native histograms (histogram.go)
	histBytes    int64    // memory of the histogram samples added since the last addSamples
	// metrics_rollup windows (readRollupRun).
	wStart, wFirstT          []int64
	wPoints                  []uint64
	wFirst, wInc             []float64
	wFirstOK, wIncOK, wReqOK []bool

	groupLbls []labels.Labels
	need      []int64
	needGroup []int
	sb        labels.ScratchBuilder
	extra     map[float64]*series // per group and output: le/quantile -> series
	bktSer    []*series           // bucket series of the current bounds
}

func grow[T any](s []T, n int64) []T {
	if int64(cap(s)) < n {
		return make([]T, n)
	}
	return s[:n]
}

// addBytes charges the share of a column chunk that rows [a, b) take.
func (sc *scan) addBytes(pf *parquet.File, g, col int, rows, total int64) error {
	md := pf.Metadata().RowGroups[g].Columns[col].MetaData
	n := md.TotalCompressedSize
	if total > 0 {
		n = n * rows / total
	}
	sc.q.a.Stats.Bytes.Add(n)
	sc.q.a.bytesTotal.Add(float64(n))
	sc.q.bytes += n
	if lim := sc.q.lim.MaxBytes; lim > 0 && sc.q.bytes > lim {
		return fmt.Errorf("%w: the query would read more than %d bytes of lake data (query.max_bytes); narrow the time range or the selectors", ErrLimit, lim)
	}
	return nil
}

// readRun reads the rows of run r of row group g and adds their samples.
func (sc *scan) readRun(pf *parquet.File, idx *fileIndex, g int, r run) error {
	if sc.only != nil {
		return sc.readOnly(pf, idx, g, r)
	}
	rg := pf.RowGroups()[g]
	ccs := rg.ColumnChunks()
	n := r.end - r.start
	total := rg.NumRows()
	c := &idx.cols
	read := func(col int, f func(cc parquet.ColumnChunk) error, what string) error {
		if col < 0 {
			return fmt.Errorf("row group %d: no %s column", g, what)
		}
		if err := sc.addBytes(pf, g, col, n, total); err != nil {
			return err
		}
		if err := f(ccs[col]); err != nil {
			return fmt.Errorf("row group %d: %s: %w", g, what, err)
		}
		return nil
	}
	sc.delta = r.desc.cumulative()
	sc.ids = grow(sc.ids, n)
	if err := read(c.seriesID, func(cc parquet.ColumnChunk) error { return format.ReadUint64s(cc, r.start, r.end, sc.ids) }, format.ColSeriesID); err != nil {
		return err
	}
	need := map[part]bool{}
	for _, o := range sc.outs {
		need[o.part] = true
	}
	hist := need[partHistogram] && !sc.labelsOnly
	// A labels-only select (series, labels, label values) lists a series
	// only when it has a point in the range, as Prometheus's head does:
	// where the row group lies wholly inside the range, every series in it
	// has, so its timestamps are read only at the range's edges.
	rgi := idx.rgs[g]
	edge := sc.labelsOnly && !(rgi.minT <= rgi.maxT && sc.mint <= rgi.minT && rgi.maxT <= sc.maxt)
	if !sc.labelsOnly || edge || need[partBucket] || need[partQuantile] {
		sc.ts, sc.tsOK = grow(sc.ts, n), grow(sc.tsOK, n)
		if err := read(c.ts, func(cc parquet.ColumnChunk) error { return format.ReadOptInt64s(cc, r.start, r.end, sc.ts, sc.tsOK) }, format.ColTimestamp); err != nil {
			return err
		}
		if need[partValue] && !sc.labelsOnly {
			sc.vals, sc.valOK = grow(sc.vals, n), grow(sc.valOK, n)
			if err := read(c.value, func(cc parquet.ColumnChunk) error {
				return format.ReadOptFloat64s(cc, r.start, r.end, sc.vals, sc.valOK)
			}, format.ColValue); err != nil {
				return err
			}
		}
		if (need[partSum] || hist) && !sc.labelsOnly {
			sc.sums, sc.sumOK = grow(sc.sums, n), grow(sc.sumOK, n)
			if err := read(c.sum, func(cc parquet.ColumnChunk) error {
				return format.ReadOptFloat64s(cc, r.start, r.end, sc.sums, sc.sumOK)
			}, format.ColSum); err != nil {
				return err
			}
		}
		if (need[partCount] || need[partQuantile] || hist) && !sc.labelsOnly {
			sc.cnt, sc.cntOK = grow(sc.cnt, n), grow(sc.cntOK, n)
			if err := read(c.count, func(cc parquet.ColumnChunk) error { return format.ReadOptUint64s(cc, r.start, r.end, sc.cnt, sc.cntOK) }, format.ColCount); err != nil {
				return err
			}
		}
		if hist && r.desc.kind == kindExpHistogram {
			if err := sc.readExpHistograms(pf, g, r, read); err != nil {
				return err
			}
		}
		sc.h.exp = r.desc.kind == kindExpHistogram
		sc.h.gauge = hist && idx.gaugeHistogram(r.desc)
		if hist {
			if err := sc.readFloatHistograms(pf, r, sc.h.exp, read); err != nil {
				return err
			}
		}
		if need[partBucket] || (hist && !sc.h.exp) {
			sc.bndOff, sc.bktOff = grow(sc.bndOff, n+1), grow(sc.bktOff, n+1)
			if err := read(c.bounds, func(cc parquet.ColumnChunk) (err error) {
				sc.bnd, err = format.ReadListF64(cc, r.start, r.end, sc.bnd, sc.bndOff)
				return err
			}, format.ColExplicitBounds); err != nil {
				return err
			}
			if err := read(c.buckets, func(cc parquet.ColumnChunk) (err error) {
				sc.bkt, err = format.ReadListU64(cc, r.start, r.end, sc.bkt, sc.bktOff)
				return err
			}, format.ColBucketCounts); err != nil {
				return err
			}
		}
		if need[partQuantile] {
			sc.qsOff, sc.qvOff = grow(sc.qsOff, n+1), grow(sc.qvOff, n+1)
			if err := read(c.quantiles, func(cc parquet.ColumnChunk) (err error) {
				sc.qs, err = format.ReadListF64(cc, r.start, r.end, sc.qs, sc.qsOff)
				return err
			}, format.ColQuantiles); err != nil {
				return err
			}
			if err := read(c.qvalues, func(cc parquet.ColumnChunk) (err error) {
				sc.qv, err = format.ReadListF64(cc, r.start, r.end, sc.qv, sc.qvOff)
				return err
			}, format.ColQuantileValues); err != nil {
				return err
			}
		}
	}
	sc.q.a.Stats.Rows.Add(n)
	sc.q.a.rowsTotal.Add(float64(n))
	if err := sc.runLabels(pf, idx, g, r); err != nil {
		return err
	}
	k := 0
	added := int64(0)
	for i := int64(0); i < n; k++ {
		j := i + 1
		for j < n && sc.ids[j] == sc.ids[i] {
			j++
		}
		if edge && !sc.anyInRange(i, j) {
			i = j
			continue
		}
		m, err := sc.emit(sc.groupLbls[k], i, j)
		if err != nil {
			return err
		}
		added += m
		i = j
	}
	return sc.addSamples(added)
}

// anyInRange says whether rows [i, j) have a timestamp in the range.
func (sc *scan) anyInRange(i, j int64) bool {
	for k := i; k < j; k++ {
		if sc.tsOK[k] && sc.ts[k] >= sc.mint && sc.ts[k] <= sc.maxt {
			return true
		}
	}
	return false
}

// addSamples counts samples loaded against query.max_samples.
func (sc *scan) addSamples(added int64) error {
	sc.q.samples += added
	sc.q.a.Stats.Samples.Add(added)
	if lim := sc.q.lim.MaxSamples; lim > 0 && sc.q.samples > lim {
		return fmt.Errorf("%w: the query would load more than %d samples (query.max_samples); narrow the time range or the selectors", ErrLimit, lim)
	}
	if sc.q.lim.Charge != nil {
		hb := sc.histBytes
		sc.histBytes = 0
		return sc.q.lim.Charge(added*SampleBytes + hb)
	}
	sc.histBytes = 0
	return nil
}

// readCol charges and reads column col of row group g for a run of n of
// its rows.
func (sc *scan) readCol(pf *parquet.File, g, col int, n int64, what string, f func(cc parquet.ColumnChunk) error) error {
	if col < 0 {
		return fmt.Errorf("row group %d: no %s column", g, what)
	}
	rg := pf.RowGroups()[g]
	if err := sc.addBytes(pf, g, col, n, rg.NumRows()); err != nil {
		return err
	}
	if err := f(rg.ColumnChunks()[col]); err != nil {
		return fmt.Errorf("row group %d: %s: %w", g, what, err)
	}
	return nil
}

// runLabels sets sc.groupLbls to the label set of each lake series (run
// of equal sc.ids) of run r, in order: from the cache, else read once from
// the label columns at the series' first row.
func (sc *scan) runLabels(pf *parquet.File, idx *fileIndex, g int, r run) error {
	n := r.end - r.start
	sc.groupLbls = sc.groupLbls[:0]
	sc.need, sc.needGroup = sc.need[:0], sc.needGroup[:0]
	tenant := sc.q.tenant
	for i := int64(0); i < n; {
		j := i + 1
		for j < n && sc.ids[j] == sc.ids[i] {
			j++
		}
		l, ok := sc.q.a.labels.get(tenant, sc.ids[i], r.desc.rw)
		if !ok {
			sc.need = append(sc.need, r.start+i)
			sc.needGroup = append(sc.needGroup, len(sc.groupLbls))
		}
		sc.groupLbls = append(sc.groupLbls, l)
		i = j
	}
	if len(sc.need) > 0 {
		return sc.readLabels(pf, idx, g, r)
	}
	return nil
}

// readLabels reads the label columns at sc.need rows and caches the label
// sets.
func (sc *scan) readLabels(pf *parquet.File, idx *fileIndex, g int, r run) error {
	ccs := pf.RowGroups()[g].ColumnChunks()
	total := pf.RowGroups()[g].NumRows()
	k := len(sc.need)
	svc, ns, inst := make([]string, k), make([]string, k), make([]string, k)
	kvs := make([][]attrLabel, k)
	readStr := func(col int, dst []string) error {
		if col < 0 {
			return nil
		}
		if err := sc.addBytes(pf, g, col, r.end-r.start, total); err != nil {
			return err
		}
		return format.ReadValuesAt(ccs[col], r.start, r.end, sc.need, func(i int, v parquet.Value) {
			if !v.IsNull() {
				dst[i] = string(v.ByteArray())
			}
		})
	}
	c := &idx.cols
	if err := readStr(c.service, svc); err != nil {
		return fmt.Errorf("row group %d: service_name: %w", g, err)
	}
	if err := readStr(c.namespace, ns); err != nil {
		return fmt.Errorf("row group %d: resource.service.namespace: %w", g, err)
	}
	if err := readStr(c.instance, inst); err != nil {
		return fmt.Errorf("row group %d: resource.service.instance.id: %w", g, err)
	}
	for _, lc := range idx.labelCols {
		if err := sc.addBytes(pf, g, lc.col, r.end-r.start, total); err != nil {
			return err
		}
		label := lc.label
		if r.desc.rw {
			// Remote write: the label is exactly the key that was sent.
			label = lc.key
		} else if label == "" {
			continue
		}
		err := format.ReadValuesAt(ccs[lc.col], r.start, r.end, sc.need, func(i int, v parquet.Value) {
			if !v.IsNull() {
				kvs[i] = append(kvs[i], attrLabel{Label: label, Key: lc.key, Value: formatLabelValue(v, lc.kind)})
			}
		})
		if err != nil {
			return fmt.Errorf("row group %d: attr.%s: %w", g, lc.key, err)
		}
	}
	if err := sc.readOverflowLabels(pf, idx, g, r, total, kvs); err != nil {
		return err
	}
	for i := range sc.need {
		sc.sb.Reset()
		if svc[i] != "" {
			sc.sb.Add(labelServiceName, svc[i])
			job := svc[i]
			if ns[i] != "" {
				job = ns[i] + "/" + job
			}
			sc.sb.Add(labelJob, job)
		}
		if inst[i] != "" {
			sc.sb.Add(labelInstance, inst[i])
		}
		kv := kvs[i]
		if !r.desc.rw {
			reclaimLabels(kv, svc[i] != "", inst[i] != "", r.desc.kind)
		}
		promname.SortAttrLabels(kv)
		promname.JoinCollisions(&sc.sb, kv)
		sc.sb.Sort()
		l := sc.sb.Labels()
		id := sc.ids[sc.need[i]-r.start]
		sc.q.a.labels.put(sc.q.tenant, id, r.desc.rw, l)
		sc.groupLbls[sc.needGroup[i]] = l
	}
	return nil
}

// emit adds the samples of rows [i, j) (one lake series) to the series of
// each selected output, and returns how many it added.
func (sc *scan) emit(attrs labels.Labels, i, j int64) (int64, error) {
	var added int64
	for _, o := range sc.outs {
		switch o.part {
		case partValue, partSum, partCount:
			s, err := sc.cachedSeries(sc.ids[i], attrs, o.name, "", 0)
			if err != nil || s == nil || sc.labelsOnly {
				if err != nil {
					return 0, err
				}
				continue
			}
			for k := i; k < j; k++ {
				if !sc.tsOK[k] || sc.ts[k] < sc.mint || sc.ts[k] > sc.maxt {
					continue
				}
				var v float64
				switch o.part {
				case partValue:
					if !sc.valOK[k] {
						continue
					}
					v = sc.vals[k]
				case partSum:
					if !sc.sumOK[k] {
						continue
					}
					v = sc.sums[k]
				default:
					if !sc.cntOK[k] {
						continue
					}
					v = float64(sc.cnt[k])
				}
				if sc.ru != nil {
					if err := sc.ru.addRaw(s, sc.ids[i], sc.ts[k], v); err != nil {
						return 0, err
					}
				} else {
					s.add(sc.ts[k]/1_000_000, v)
				}
				added++
			}
		case partHistogram:
			s, err := sc.cachedSeries(sc.ids[i], attrs, o.name, "", 0)
			if err != nil || s == nil || sc.labelsOnly {
				if err != nil {
					return 0, err
				}
				continue
			}
			for k := i; k < j; k++ {
				if !sc.tsOK[k] || sc.ts[k] < sc.mint || sc.ts[k] > sc.maxt {
					continue
				}
				h := sc.histogramAt(k)
				if h == nil {
					continue
				}
				s.addH(sc.ts[k]/1_000_000, h)
				// A histogram sample costs more than a float (addSamples
				// charges SampleBytes for each sample): the rest here.
				sc.histBytes += histogramBytes(h) - SampleBytes
				added++
			}
		case partBucket, partQuantile:
			clear(sc.extra)
			if sc.extra == nil {
				sc.extra = map[float64]*series{}
			}
			var lastBounds []float64
			lastOK := false
			for k := i; k < j; k++ {
				if !sc.tsOK[k] || sc.ts[k] < sc.mint || sc.ts[k] > sc.maxt {
					continue
				}
				t := sc.ts[k] / 1_000_000
				if o.part == partBucket {
					bounds := sc.bnd[sc.bndOff[k]:sc.bndOff[k+1]]
					counts := sc.bkt[sc.bktOff[k]:sc.bktOff[k+1]]
					if len(counts) != len(bounds)+1 {
						continue // no buckets (or a malformed point): nothing to expose
					}
					// Bounds rarely change within a series: look the bucket
					// series up once per change, not once per sample.
					if !lastOK || !slices.Equal(bounds, lastBounds) {
						lastBounds, lastOK = bounds, true
						sc.bktSer = sc.bktSer[:0]
						for b := 0; b <= len(bounds); b++ {
							le := math.Inf(1)
							if b < len(bounds) {
								le = bounds[b]
							}
							s, err := sc.extraSeries(sc.ids[i], attrs, o.name, labelLe, le)
							if err != nil {
								return 0, err
							}
							sc.bktSer = append(sc.bktSer, s)
						}
					}
					if sc.labelsOnly {
						continue
					}
					var cum uint64
					for b, s := range sc.bktSer {
						cum += counts[b]
						if s != nil {
							s.add(t, float64(cum))
							added++
						}
					}
				} else {
					qs := sc.qs[sc.qsOff[k]:sc.qsOff[k+1]]
					qv := sc.qv[sc.qvOff[k]:sc.qvOff[k+1]]
					for b := range qs {
						if b >= len(qv) {
							break
						}
						s, err := sc.extraSeries(sc.ids[i], attrs, o.name, labelQuantile, qs[b])
						if err != nil {
							return 0, err
						}
						if s != nil && !sc.labelsOnly {
							s.add(t, qv[b])
							added++
						}
					}
				}
			}
		}
	}
	return added, nil
}

var rejected = &series{}

type sidKey struct {
	id    uint64
	name  string
	extra uint64 // bits of le or quantile, +1; 0 for none
}

// cachedSeries is seriesFor through bySID.
func (sc *scan) cachedSeries(id uint64, attrs labels.Labels, name, label string, v float64) (*series, error) {
	k := sidKey{id: id, name: name}
	if label != "" {
		k.extra = math.Float64bits(v) + 1
	}
	if s, ok := sc.bySID[k]; ok {
		if s == rejected {
			return nil, nil
		}
		return s, nil
	}
	val := ""
	if label != "" {
		val = formatFloat(v)
	}
	s, err := sc.seriesFor(attrs, name, label, val)
	if err != nil {
		return nil, err
	}
	if s == nil {
		sc.bySID[k] = rejected
	} else {
		s.cumulate = s.cumulate || sc.delta
		sc.bySID[k] = s
	}
	return s, nil
}

func (sc *scan) extraSeries(id uint64, attrs labels.Labels, name, label string, v float64) (*series, error) {
	if s, ok := sc.extra[v]; ok {
		if s == rejected {
			return nil, nil
		}
		return s, nil
	}
	s, err := sc.cachedSeries(id, attrs, name, label, v)
	if err != nil {
		return nil, err
	}
	if s == nil {
		sc.extra[v] = rejected
	} else {
		sc.extra[v] = s
	}
	return s, nil
}

// formatFloat renders le and quantile values as Prometheus does.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// seriesFor returns the series with labels attrs + __name__ (+ extra), or
// nil when the matchers reject it.
func (sc *scan) seriesFor(attrs labels.Labels, name, extraName, extraVal string) (*series, error) {
	sc.sb.Reset()
	attrs.Range(func(l labels.Label) { sc.sb.Add(l.Name, l.Value) })
	sc.sb.Add(labels.MetricName, name)
	if extraName != "" {
		sc.sb.Add(extraName, extraVal)
	}
	sc.sb.Sort()
	l := sc.sb.Labels()
	if !slices.ContainsFunc(sc.sets, func(ms []*labels.Matcher) bool { return selects(ms, l) }) {
		return nil, nil
	}
	h := l.Hash()
	for _, s := range sc.byHash[h] {
		if labels.Equal(s.lbls, l) {
			return s, nil
		}
	}
	sc.q.series++
	sc.q.a.Stats.Series.Add(1)
	if lim := sc.q.lim.MaxSeries; lim > 0 && sc.q.series > lim {
		return nil, fmt.Errorf("%w: the query would select more than %d series (query.max_series), counted over all its selectors (a series two of them select counts twice; the match[] sets of one series or labels request count it once); add label matchers or send fewer selectors", ErrLimit, lim)
	}
	s := &series{lbls: l}
	if sc.ru != nil {
		s.ru = &seriesRollup{}
	}
	sc.byHash[h] = append(sc.byHash[h], s)
	sc.all = append(sc.all, s)
	return s, nil
}

// selects says whether the label set meets every matcher of ms.
func selects(ms []*labels.Matcher, l labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

// series is one Prometheus series: its samples in time order once
// finished.
type series struct {
	lbls     labels.Labels
	pts      []promql.FPoint
	hpts     []promql.HPoint // native histogram samples (histogram.go)
	unsorted bool
	// cumulate: the samples are delta increments; finish turns them into
	// their running sum over the selected range.
	cumulate bool
	ru       *seriesRollup // set while a selector reads rollups
}

func (s *series) add(t int64, v float64) {
	if n := len(s.pts); n > 0 && t <= s.pts[n-1].T {
		s.unsorted = true
	}
	s.pts = append(s.pts, promql.FPoint{T: t, F: v})
}

// finish sorts the samples by time; of samples with the same millisecond
// the last one read wins. Delta samples become their running sum (a NaN
// increment adds nothing), as Prometheus's OTLP ingestion converts delta
// to cumulative: the sum starts at the first sample the query selects, so
// increases and rates are right and the level is relative to the range.
func (s *series) finish() {
	s.finishHistograms()
	s.sortPoints()
	if s.cumulate {
		var sum float64
		for i := range s.pts {
			if v := s.pts[i].F; !math.IsNaN(v) {
				sum += v
			}
			s.pts[i].F = sum
		}
	}
}

func (s *series) sortPoints() {
	if !s.unsorted {
		return
	}
	slices.SortStableFunc(s.pts, func(a, b promql.FPoint) int { return cmp.Compare(a.T, b.T) })
	out := s.pts[:0]
	for _, p := range s.pts {
		if n := len(out); n > 0 && out[n-1].T == p.T {
			out[n-1] = p
			continue
		}
		out = append(out, p)
	}
	s.pts, s.unsorted = out, false
}

type seriesSet struct {
	s []*series
	i int
}

func (ss *seriesSet) Next() bool {
	ss.i++
	return ss.i < len(ss.s)
}
func (ss *seriesSet) At() storage.Series {
	s := ss.s[ss.i]
	return promql.NewStorageSeries(promql.Series{Metric: s.lbls, Floats: s.pts, Histograms: s.hpts})
}
func (ss *seriesSet) Err() error                        { return nil }
func (ss *seriesSet) Warnings() annotations.Annotations { return nil }
