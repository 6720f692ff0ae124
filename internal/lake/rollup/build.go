package rollup

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake"
)

// rng is a half-open range into one of the hour's arenas.
type rng struct{ start, end int32 }

// series is one series of the hour: its descriptor, where its labels are
// read from, and the runs of its points in the hour's point arrays.
type series struct {
	sid                          uint64
	name, typ, unit, temporality string
	monotonic                    bool
	kind                         Kind
	rg, row                      int32 // first point: row group and row of the file being read
	labels                       []labelVal
	runs                         []rng
}

type labelVal struct {
	col int32 // index into hour.labelCols
	v   parquet.Value
}

type labelCol struct {
	name string
	node parquet.Node
}

// hour holds one raw hour in memory: ~21 bytes per gauge/sum point, plus
// the payload of distribution points.
type hour struct {
	start, end int64 // [start, end) unix ns
	series     map[uint64]int32
	ser        []series

	t  []int64
	v  []float64
	hv []bool
	x  []int32 // distribution index, -1 for numeric points

	dCount            []uint64
	dSum, dMin, dMax  []float64
	dCountF           []float64 // a float histogram's count_float
	dHas              []uint8   // hasCount, hasSum, hasMin, hasMax, hasCountF bits
	dBuckets, dBounds []rng
	dBucketsF         []rng // a float histogram's bucket_counts_float, in f64
	dSketch           []rng
	u64               []uint64
	f64               []float64
	bytes             []byte
	labelCols         []labelCol
	labelIdx          map[string]int32
	skipped           int64 // points without a timestamp in the hour
	rows              int64
	cr                chunkReader
	gcr               [9 + numDist]chunkReader // the group's rollup and distribution columns
	off1, off2        []int32
	newSeries         []int32 // series first seen in the current file
	prevSid           uint64
	prevSer           int32
}

const (
	hasCount = 1 << iota
	hasSum
	hasMin
	hasMax
	hasCountF
)

func newHour(start, end int64) *hour {
	return &hour{start: start, end: end, series: make(map[uint64]int32), labelIdx: make(map[string]int32), prevSer: -1}
}

// reserve sizes the point arrays for n raw rows (the catalog's count of
// the hour), so reading does not grow them point by point.
func (h *hour) reserve(n int64) {
	n = min(n, 1<<28) // a bogus catalog row count must not exhaust memory
	h.t = make([]int64, 0, n)
	h.v = make([]float64, 0, n)
	h.hv = make([]bool, 0, n)
	h.x = make([]int32, 0, n)
}

// addFile reads the rollup columns of one raw metrics file, row group by
// row group, then the label columns of the series it introduced.
func (h *hour) addFile(pf *parquet.File, onGroup func(rows int64)) error {
	cols := lookupCols(pf.Schema())
	if cols.sid < 0 || cols.ts < 0 || cols.typ < 0 {
		return fmt.Errorf("not a metrics file: no series_id, timestamp or metric_type column")
	}
	h.newSeries = h.newSeries[:0]
	h.prevSer = -1 // runs never span files
	groups := pf.RowGroups()
	for gi, rg := range groups {
		if err := h.addGroup(rg, int32(gi), cols); err != nil {
			return fmt.Errorf("row group %d: %w", gi, err)
		}
		h.rows += rg.NumRows()
		if onGroup != nil {
			onGroup(rg.NumRows())
		}
	}
	return h.readLabels(pf, groups)
}

// column buffers of one row group, reused.
type groupCols struct {
	sid, ts, val, vint, typ, temp, mono, name, unit []parquet.Value
}

func (h *hour) addGroup(rg parquet.RowGroup, gi int32, c rawCols) error {
	n := int(rg.NumRows())
	var g groupCols
	// One reused buffer per column: no copy, no allocation per group.
	read := func(i, col int) ([]parquet.Value, error) {
		v, err := h.gcr[i].read(rg, col)
		if err != nil {
			return nil, err
		}
		if v != nil && len(v) != n {
			return nil, fmt.Errorf("column %d has %d values for %d rows", col, len(v), n)
		}
		return v, nil
	}
	var err error
	for i, p := range [...]struct {
		dst *[]parquet.Value
		col int
	}{{&g.sid, c.sid}, {&g.ts, c.ts}, {&g.val, c.value}, {&g.vint, c.valueInt}, {&g.typ, c.typ}} {
		if *p.dst, err = read(i, p.col); err != nil {
			return err
		}
	}
	// Descriptor columns are needed only where a series starts; read them
	// lazily, once per row group.
	descRead := false
	readDesc := func() error {
		if descRead {
			return nil
		}
		descRead = true
		for i, p := range [...]struct {
			dst *[]parquet.Value
			col int
		}{{&g.temp, c.temporality}, {&g.mono, c.monotonic}, {&g.name, c.name}, {&g.unit, c.unit}} {
			if *p.dst, err = read(5+i, p.col); err != nil {
				return err
			}
		}
		return nil
	}
	var d *distCols
	for r := range n {
		sid := g.sid[r].Uint64()
		var si int32
		if sid == h.prevSid && h.prevSer >= 0 {
			si = h.prevSer
		} else {
			var ok bool
			if si, ok = h.series[sid]; !ok {
				if err := readDesc(); err != nil {
					return err
				}
				si = h.addSeries(sid, g, r, gi)
			}
			h.prevSid, h.prevSer = sid, si
			s := &h.ser[si]
			s.runs = append(s.runs, rng{int32(len(h.t)), int32(len(h.t))})
		}
		tv := g.ts[r]
		if tv.IsNull() || tv.Int64() < h.start || tv.Int64() >= h.end {
			h.skipped++
			continue
		}
		s := &h.ser[si]
		x := int32(-1)
		if !s.kind.numeric() {
			if d == nil {
				if d, err = h.readDist(rg, c, n); err != nil {
					return err
				}
			}
			x = h.addDist(d, r)
		}
		var v float64
		hv := false
		if g.vint != nil && !g.vint[r].IsNull() {
			v, hv = float64(g.vint[r].Int64()), true
		} else if g.val != nil && !g.val[r].IsNull() {
			v, hv = g.val[r].Double(), true
		}
		h.t = append(h.t, tv.Int64())
		h.v = append(h.v, v)
		h.hv = append(h.hv, hv)
		h.x = append(h.x, x)
		s.runs[len(s.runs)-1].end = int32(len(h.t))
	}
	return nil
}

func str(vals []parquet.Value, r int) string {
	if vals == nil || vals[r].IsNull() {
		return ""
	}
	return string(vals[r].ByteArray())
}

func (h *hour) addSeries(sid uint64, g groupCols, r int, gi int32) int32 {
	s := series{sid: sid, name: str(g.name, r), typ: str(g.typ, r), unit: str(g.unit, r),
		temporality: str(g.temp, r), rg: gi, row: int32(r)}
	if g.mono != nil && !g.mono[r].IsNull() {
		s.monotonic = g.mono[r].Boolean()
	}
	s.kind = KindOf(s.typ, s.temporality, s.monotonic)
	si := int32(len(h.ser))
	h.ser = append(h.ser, s)
	h.series[sid] = si
	h.newSeries = append(h.newSeries, si)
	return si
}

// distCols are the distribution columns of one row group.
type distCols struct {
	count, sum, min, max, buckets, bounds, sketch []parquet.Value
	countF, bucketsF                              []parquet.Value // float histograms
	bOff, fOff, bfOff                             []int32
}

// numDist is the number of distribution columns readDist reads.
const numDist = 9

func (h *hour) readDist(rg parquet.RowGroup, c rawCols, n int) (*distCols, error) {
	d := &distCols{}
	var err error
	for i, p := range [...]struct {
		dst *[]parquet.Value
		col int
	}{{&d.count, c.count}, {&d.sum, c.sum}, {&d.min, c.min}, {&d.max, c.max}, {&d.sketch, c.sketch},
		{&d.buckets, c.buckets}, {&d.bounds, c.bounds}, {&d.countF, c.countF}, {&d.bucketsF, c.bucketsF}} {
		v, err2 := h.gcr[len(h.gcr)-numDist+i].read(rg, p.col)
		if err2 != nil {
			return nil, err2
		}
		*p.dst = v
	}
	if d.buckets != nil {
		d.bOff = listOffsets(d.buckets, 0, nil)
	}
	if d.bounds != nil {
		d.fOff = listOffsets(d.bounds, 0, nil)
	}
	if d.bucketsF != nil {
		d.bfOff = listOffsets(d.bucketsF, 0, nil)
	}
	for _, p := range [...][]parquet.Value{d.count, d.sum, d.min, d.max, d.sketch, d.countF} {
		if p != nil && len(p) != n {
			err = fmt.Errorf("distribution column has %d values for %d rows", len(p), n)
		}
	}
	if (d.bOff != nil && len(d.bOff) != n+1) || (d.fOff != nil && len(d.fOff) != n+1) || (d.bfOff != nil && len(d.bfOff) != n+1) {
		err = fmt.Errorf("list column rows differ from %d rows", n)
	}
	return d, err
}

func (h *hour) addDist(d *distCols, r int) int32 {
	var has uint8
	get := func(vals []parquet.Value, bit uint8) parquet.Value {
		if vals == nil || vals[r].IsNull() {
			return parquet.Value{}
		}
		has |= bit
		return vals[r]
	}
	cnt, sum, mn, mx := get(d.count, hasCount), get(d.sum, hasSum), get(d.min, hasMin), get(d.max, hasMax)
	cntF := get(d.countF, hasCountF)
	h.dCount = append(h.dCount, cnt.Uint64())
	h.dCountF = append(h.dCountF, cntF.Double())
	h.dSum = append(h.dSum, sum.Double())
	h.dMin = append(h.dMin, mn.Double())
	h.dMax = append(h.dMax, mx.Double())
	h.dHas = append(h.dHas, has)
	br := rng{int32(len(h.u64)), int32(len(h.u64))}
	if d.bOff != nil {
		for _, v := range d.buckets[d.bOff[r]:d.bOff[r+1]] {
			if !v.IsNull() {
				h.u64 = append(h.u64, v.Uint64())
			}
		}
		br.end = int32(len(h.u64))
	}
	fr := h.appendF64(d.bounds, d.fOff, r)
	bfr := h.appendF64(d.bucketsF, d.bfOff, r)
	sr := rng{int32(len(h.bytes)), int32(len(h.bytes))}
	if d.sketch != nil && !d.sketch[r].IsNull() {
		h.bytes = append(h.bytes, d.sketch[r].ByteArray()...)
		sr.end = int32(len(h.bytes))
	}
	h.dBuckets = append(h.dBuckets, br)
	h.dBounds = append(h.dBounds, fr)
	h.dBucketsF = append(h.dBucketsF, bfr)
	h.dSketch = append(h.dSketch, sr)
	return int32(len(h.dCount) - 1)
}

// appendF64 appends row r's elements of a LIST<DOUBLE> column (vals split
// by off; none when the column is absent) to the f64 arena.
func (h *hour) appendF64(vals []parquet.Value, off []int32, r int) rng {
	fr := rng{int32(len(h.f64)), int32(len(h.f64))}
	if off != nil {
		for _, v := range vals[off[r]:off[r+1]] {
			if !v.IsNull() {
				h.f64 = append(h.f64, v.Double())
			}
		}
		fr.end = int32(len(h.f64))
	}
	return fr
}

// readLabels copies the label columns of the series first seen in this
// file from their first row.
func (h *hour) readLabels(pf *parquet.File, groups []parquet.RowGroup) error {
	if len(h.newSeries) == 0 {
		return nil
	}
	schema := pf.Schema()
	type fileLabel struct {
		col    int   // leaf index in the file
		global int32 // index into h.labelCols
	}
	var labels []fileLabel
	for _, f := range schema.Fields() {
		if !isLabel(f.Name()) || !f.Leaf() {
			continue
		}
		leaf, ok := schema.Lookup(f.Name())
		if !ok {
			continue
		}
		gi, ok := h.labelIdx[f.Name()]
		if !ok {
			gi = int32(len(h.labelCols))
			h.labelIdx[f.Name()] = gi
			h.labelCols = append(h.labelCols, labelCol{name: f.Name(), node: f})
		}
		labels = append(labels, fileLabel{leaf.ColumnIndex, gi})
	}
	// New series in file order are in row-group order too.
	byGroup := slices.Clone(h.newSeries)
	slices.SortFunc(byGroup, func(a, b int32) int {
		return cmp.Or(cmp.Compare(h.ser[a].rg, h.ser[b].rg), cmp.Compare(h.ser[a].row, h.ser[b].row))
	})
	for i := 0; i < len(byGroup); {
		gi := h.ser[byGroup[i]].rg
		j := i
		for j < len(byGroup) && h.ser[byGroup[j]].rg == gi {
			j++
		}
		for _, l := range labels {
			vals, err := h.cr.read(groups[gi], l.col)
			if err != nil {
				return fmt.Errorf("labels of row group %d: %w", gi, err)
			}
			for _, si := range byGroup[i:j] {
				s := &h.ser[si]
				if int(s.row) < len(vals) && !vals[s.row].IsNull() {
					s.labels = append(s.labels, labelVal{l.global, vals[s.row].Clone()})
				}
			}
		}
		i = j
	}
	return nil
}

// order returns the series sorted by metric name and series id, the sort
// key of metrics_rollup files.
func (h *hour) order() []int32 {
	idx := make([]int32, len(h.ser))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		return cmp.Or(strings.Compare(h.ser[a].name, h.ser[b].name), cmp.Compare(h.ser[a].sid, h.ser[b].sid))
	})
	return idx
}

// points returns the indices of a series' points in time order; equal
// timestamps order by value, so "last" does not depend on file order.
func (h *hour) points(s *series, buf []int32) []int32 {
	buf = buf[:0]
	sorted := true
	var prev int64 = math.MinInt64
	for _, r := range s.runs {
		for i := r.start; i < r.end; i++ {
			if h.t[i] <= prev {
				sorted = false
			}
			prev = h.t[i]
			buf = append(buf, i)
		}
	}
	if !sorted {
		slices.SortStableFunc(buf, func(a, b int32) int {
			return cmp.Or(cmp.Compare(h.t[a], h.t[b]), cmp.Compare(h.v[a], h.v[b]))
		})
	}
	return buf
}

// aggregate runs every series through agg in output order.
func (h *hour) aggregate(agg *Aggregator, onSeries func(si int32)) {
	var buf []int32
	var p Point
	for _, si := range h.order() {
		s := &h.ser[si]
		onSeries(si)
		agg.Begin(s.kind)
		buf = h.points(s, buf)
		for _, i := range buf {
			p = Point{T: h.t[i], V: h.v[i], HasV: h.hv[i]}
			if x := h.x[i]; x >= 0 {
				has := h.dHas[x]
				p.Count, p.HasCount = h.dCount[x], has&hasCount != 0
				p.Sum, p.HasSum = h.dSum[x], has&hasSum != 0
				p.Min, p.HasMin = h.dMin[x], has&hasMin != 0
				p.Max, p.HasMax = h.dMax[x], has&hasMax != 0
				p.CountF, p.HasCountF = h.dCountF[x], has&hasCountF != 0
				b, f, k, bf := h.dBuckets[x], h.dBounds[x], h.dSketch[x], h.dBucketsF[x]
				p.Buckets, p.Bounds, p.Sketch = h.u64[b.start:b.end], h.f64[f.start:f.end], h.bytes[k.start:k.end]
				p.BucketsF = h.f64[bf.start:bf.end]
			}
			agg.Add(&p)
		}
		agg.End()
	}
}

var _ = lake.TableMetrics

// capLabels bounds the hour's attribute label columns as a raw file's
// (lake.KeptColumns, docs/schema.md "Bounded schema"): of the attribute
// columns of the series with points in the hour, the limit most used stay
// columns, and each series' labels in the others go, typed, into its
// scope's overflow label, merged with the overflow object the series
// already had. Without it the union of many raw files' columns could
// exceed the cap, and parquet-go's column limit.
func (h *hour) capLabels(limit int) error {
	if limit <= 0 {
		limit = lake.DefaultMaxAttributeColumns
	}
	var attrCols []int32 // label column indexes of attribute columns, first seen first
	pos := make([]int32, len(h.labelCols))
	for i, lc := range h.labelCols {
		pos[i] = -1
		if lake.IsAttributeColumn(lc.name) {
			pos[i] = int32(len(attrCols))
			attrCols = append(attrCols, int32(i))
		}
	}
	if len(attrCols) <= limit {
		return nil
	}
	freq := make([]int32, len(attrCols))
	for si := range h.ser {
		s := &h.ser[si]
		if !h.hasPoints(s) {
			continue
		}
		for _, l := range s.labels {
			if p := pos[l.col]; p >= 0 {
				freq[p]++
			}
		}
	}
	keep := make([]bool, len(h.labelCols))
	for _, i := range lake.KeptColumns(freq, limit) {
		keep[attrCols[i]] = true
	}
	type obj struct {
		col int32
		js  []byte
	}
	var objs []obj
	for si := range h.ser {
		s := &h.ser[si]
		moved := false
		for _, l := range s.labels {
			if pos[l.col] >= 0 && !keep[l.col] {
				moved = true
				break
			}
		}
		if !moved {
			continue
		}
		objs = objs[:0]
		labels := s.labels[:0:0]
		// The series' own overflow objects first, then the moved labels.
		for _, l := range s.labels {
			if lake.IsOverflowColumn(h.labelCols[l.col].name) {
				objs = append(objs, obj{l.col, slices.Clone(l.v.ByteArray())})
			}
		}
		for _, l := range s.labels {
			name := h.labelCols[l.col].name
			switch {
			case lake.IsOverflowColumn(name):
			case pos[l.col] >= 0 && !keep[l.col]:
				ovf := lake.OverflowColumn(name[:strings.IndexByte(name, '.')])
				oc := h.labelColumn(ovf)
				k := slices.IndexFunc(objs, func(o obj) bool { return o.col == oc })
				if k < 0 {
					objs = append(objs, obj{col: oc})
					k = len(objs) - 1
				}
				var err error
				if _, objs[k].js, err = lake.AppendOverflowAttr(objs[k].js, name, l.v); err != nil {
					return fmt.Errorf("series %d: %w", s.sid, err)
				}
			default:
				labels = append(labels, l)
			}
		}
		for _, o := range objs {
			labels = append(labels, labelVal{o.col, parquet.ByteArrayValue(o.js)})
		}
		s.labels = labels
	}
	return nil
}

// hasPoints reports whether s has a point in the hour.
func (h *hour) hasPoints(s *series) bool {
	for _, r := range s.runs {
		if r.end > r.start {
			return true
		}
	}
	return false
}

// labelColumn returns the index of the overflow label column name, adding
// it (an OPTIONAL STRING, as raw files have it) when no raw file had it.
func (h *hour) labelColumn(name string) int32 {
	if i, ok := h.labelIdx[name]; ok {
		return i
	}
	i := int32(len(h.labelCols))
	h.labelIdx[name] = i
	h.labelCols = append(h.labelCols, labelCol{name: name, node: parquet.Optional(parquet.String())})
	return i
}
