package lake

import (
	"cmp"
	"io"
	"math"
	"math/bits"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// chunkRows is how many rows are handed to the column writers at a time;
// small enough that pages close near their target size.
const chunkRows = 1024

// serviceRanks ranks the resources of c by service name, for sorting.
func (e *encoder) serviceRanks(c *signal.Common) []int32 {
	idx := make([]int32, len(c.Resources))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		return cmp.Compare(c.String(e.resService[a]), c.String(e.resService[b]))
	})
	rank := make([]int32, len(c.Resources))
	var r int32
	for i, ri := range idx {
		if i > 0 && c.String(e.resService[ri]) != c.String(e.resService[idx[i-1]]) {
			r++
		}
		rank[ri] = r
	}
	return rank
}

// rowKey is a row's place in a file: rows are ordered by k1, k2, k3 and
// then by their index. Sorting these keys instead of row indexes with a
// function that reads the batch's columns keeps each comparison within
// one cache line (the sort was an eighth of writing a metrics file).
type rowKey struct {
	k2, k3 uint64
	k1     uint32
	row    int32
}

func cmpRowKey(a, b rowKey) int {
	if a.k1 != b.k1 {
		return cmp.Compare(a.k1, b.k1)
	}
	if a.k2 != b.k2 {
		return cmp.Compare(a.k2, b.k2)
	}
	if a.k3 != b.k3 {
		return cmp.Compare(a.k3, b.k3)
	}
	return cmp.Compare(a.row, b.row)
}

// signedKey maps an int64 to a uint64 of the same order.
func signedKey(v int64) uint64 { return uint64(v) ^ 1<<63 }

// cmpRowKeyRest is cmpRowKey for keys of one k1.
func cmpRowKeyRest(a, b rowKey) int {
	if a.k2 != b.k2 {
		return cmp.Compare(a.k2, b.k2)
	}
	if a.k3 != b.k3 {
		return cmp.Compare(a.k3, b.k3)
	}
	return cmp.Compare(a.row, b.row)
}

// sortedPerm sorts e.keys (one per row, from keysFor) and returns the rows
// in that order. k1 is a dense rank (metric name, service), so the keys
// are first counted into their k1 buckets and then each bucket is sorted:
// fewer, cheaper comparisons than one sort of all of them.
func (e *encoder) sortedPerm() []int32 {
	keys := e.keys
	e.cuts = e.cuts[:0] // rankedPerm sets them
	var maxK1 uint32
	for _, k := range keys {
		maxK1 = max(maxK1, k.k1)
	}
	if int(maxK1) > 2*len(keys) {
		slices.SortFunc(keys, cmpRowKey)
	} else {
		counts := resetInt32(e.counts, int(maxK1)+2)
		for _, k := range keys {
			counts[k.k1+1]++
		}
		for b := 1; b < len(counts); b++ {
			counts[b] += counts[b-1]
		}
		tmp := slices.Grow(e.keys2[:0], len(keys))[:len(keys)]
		for _, k := range keys {
			tmp[counts[k.k1]] = k
			counts[k.k1]++
		}
		// counts[b] is now the end of bucket b.
		start := int32(0)
		for _, end := range counts[:maxK1+1] {
			if end-start > 1 {
				e.sortRest(tmp[start:end], keys[start:end])
			}
			start = end
		}
		e.keys, e.keys2 = tmp, keys
		keys = tmp
	}
	e.perm = slices.Grow(e.perm[:0], len(keys))[:len(keys)]
	for i, k := range keys {
		e.perm[i] = k.row
	}
	return e.perm
}

// PageCutRows is the least number of rows of one service that get pages
// of their own in every column of a logs or spans file (pageCuts;
// compaction cuts its output the same way). Fewer would start more pages
// in files of many small services; more would leave more of a flush's
// services inside pages that compaction decodes. Metrics files are not
// cut: compaction's runs there are a series' points of one flush, which
// interleave with the other flushes' and never cover a page, and cutting
// at metric names made the corpus's files 17% larger. 4,096 rather than
// 2,048: the same pages copied in a compaction of the corpus's flushes,
// half the growth of its spans files (3.7%, not 7.5%).
const PageCutRows = 4096

// pageCutRows is PageCutRows, smaller in tests.
var pageCutRows = PageCutRows

// pageCuts appends to cuts the rows of sorted keys where a page starts:
// both ends of each run of one k1 (service) of at least minRows rows.
// A flush's rows of one service are then whole pages in every column,
// which compaction copies as they are instead of decoding them (docs/
// design/encoder.md); a file of many small services or metrics keeps its
// pages, which at most 2 cuts per minRows rows bound.
func pageCuts(cuts []int64, keys []rowKey, minRows int) []int64 {
	start := 0
	for i := 1; i <= len(keys); i++ {
		if i < len(keys) && keys[i].k1 == keys[start].k1 {
			continue
		}
		if i-start >= minRows {
			if start > 0 && (len(cuts) == 0 || cuts[len(cuts)-1] != int64(start)) {
				cuts = append(cuts, int64(start))
			}
			if i < len(keys) {
				cuts = append(cuts, int64(i))
			}
		}
		start = i
	}
	return cuts
}

// sortRest sorts keys of one k1 by cmpRowKeyRest; tmp is scratch of the
// same length. A bucket of many keys is first spread by the high bits of
// k2 within its range (one counting pass, stable), then each group is
// sorted by comparison: a metrics bucket's series ids are hashes, so its
// groups are a series' points (already in time order when they came in
// order), where a comparison sort of the whole bucket was an eighth of
// encoding a remote-write file. Skewed keys make big groups, which are
// sorted as before.
func (e *encoder) sortRest(keys, tmp []rowKey) {
	n := len(keys)
	if n < 64 {
		slices.SortFunc(keys, cmpRowKeyRest)
		return
	}
	lo, hi := keys[0].k2, keys[0].k2
	for _, k := range keys {
		lo, hi = min(lo, k.k2), max(hi, k.k2)
	}
	if lo == hi {
		slices.SortFunc(keys, cmpRowKeyRest)
		return
	}
	// About one group per key: b bits of digit, from the top of the span.
	b := bits.Len(uint(n))
	shift := max(bits.Len64(hi-lo)-b, 0)
	groups := int((hi-lo)>>shift) + 1
	counts := resetInt32(e.counts2, groups+1)
	for _, k := range keys {
		counts[(k.k2-lo)>>shift+1]++
	}
	for g := 1; g < len(counts); g++ {
		counts[g] += counts[g-1]
	}
	for _, k := range keys {
		d := (k.k2 - lo) >> shift
		tmp[counts[d]] = k
		counts[d]++
	}
	// counts[g] is now the end of group g.
	start := int32(0)
	for _, end := range counts[:groups] {
		switch g := tmp[start:end]; {
		case len(g) <= 1:
		case len(g) <= 16:
			insertionSortRest(g)
		default:
			slices.SortFunc(g, cmpRowKeyRest)
		}
		start = end
	}
	e.counts2 = counts
	copy(keys, tmp)
}

// insertionSortRest sorts a few keys by cmpRowKeyRest (in place; cheap
// when they are in order already).
func insertionSortRest(g []rowKey) {
	for i := 1; i < len(g); i++ {
		for j := i; j > 0 && cmpRowKeyRest(g[j], g[j-1]) < 0; j-- {
			g[j], g[j-1] = g[j-1], g[j]
		}
	}
}

// keysFor returns e.keys with room for n rows.
func (e *encoder) keysFor(n int) []rowKey {
	e.keys = slices.Grow(e.keys[:0], n)[:n]
	return e.keys
}

// rankedPerm sorts rows by (rank of their resource, partition time, row):
// the order of logs and spans.
func (e *encoder) rankedPerm(rank []int32, res []uint32, ptime []int64) []int32 {
	keys := e.keysFor(len(res))
	for i, r := range res {
		keys[i] = rowKey{k1: uint32(rank[r]), k2: signedKey(ptime[i]), row: int32(i)}
	}
	perm := e.sortedPerm()
	e.cuts = pageCuts(e.cuts[:0], e.keys, pageCutRows)
	return perm
}

// chunks runs fill over the sorted rows in chunks, closing a row group
// every rgRows rows, and then the file's last row group.
func (e *encoder) chunks(c *signal.Common, perm []int32, rgRows int, fill func(rows []int32) error) error {
	step := min(chunkRows, rgRows)
	for a := 0; a < len(perm); a += step {
		rows := perm[a:min(a+step, len(perm))]
		e.chunkAt = a
		e.startChunk()
		if err := fill(rows); err != nil {
			return err
		}
		e.endChunk(c, len(rows))
		if e.base >= rgRows {
			if err := e.endRowGroup(); err != nil {
				return err
			}
		}
	}
	return e.endRowGroup()
}

func (e *encoder) encodeLogs(out io.Writer, l *signal.Logs, ptime []int64, rgRows int) (*parquet.Schema, error) {
	schema, err := e.begin(TableLogs, logCols, &l.Common, l.Attr)
	if err != nil {
		return nil, err
	}
	perm := e.rankedPerm(e.serviceRanks(&l.Common), l.Resource, ptime)
	if err := e.startFile(out, TableLogs, schema); err != nil {
		return nil, err
	}
	c := &l.Common
	cols := e.cols
	err = e.chunks(c, perm, rgRows, func(rows []int32) error {
		for ri, r := range rows {
			e.common(l.Resource[r], l.Scope[r], ri)
		}
		e.times(&cols[lTimestamp], l.Time, rows)
		e.times(&cols[lObserved], l.ObservedTime, rows)
		for _, r := range rows {
			cols[lSeverityNumber].i32(l.SeverityNum[r])
			cols[lSeverityText].str(c.Bytes(l.SeverityText[r]))
			switch bt := l.BodyType[r]; bt {
			case signal.ValueString:
				// A string body is stored verbatim; the empty string
				// is kept apart from "no body" by body_type.
				cols[lBody].optBytes(c.Bytes(signal.Str(l.Body[r])))
				cols[lBodyType].addNull()
			case signal.ValueEmpty:
				cols[lBody].addNull()
				cols[lBodyType].optBytes(typeNames[bt])
			default:
				off := len(e.scratch)
				var err error
				if e.scratch, err = appendAnyValueJSON(e.scratch, c, bt, l.Body[r]); err != nil {
					return err
				}
				cols[lBody].optBytes(e.scratch[off:len(e.scratch):len(e.scratch)])
				cols[lBodyType].optBytes(typeNames[min(int(bt), len(typeNames)-1)])
			}
			cols[lTraceID].str(e.hexID(l.TraceID[r][:]))
			cols[lSpanID].str(e.hexID(l.SpanID[r][:]))
			cols[lFlags].u32(l.Flags[r])
			cols[lEventName].str(c.Bytes(l.EventName[r]))
			cols[lDropped].u32(l.DroppedAttrs[r])
		}
		return e.attrRuns(c, l.Attr, rows, nil)
	})
	return schema, err
}

// typeNames are the body_type values, by signal.ValueType.
var typeNames = func() [][]byte {
	var s [][]byte
	for t := signal.ValueEmpty; t <= signal.ValueMap; t++ {
		s = append(s, []byte(t.String()))
	}
	return s
}()

var (
	metricTypeNames  [][]byte
	temporalityNames [][]byte
)

func init() {
	for t := signal.MetricUnknown; t <= signal.MetricSummary; t++ {
		metricTypeNames = append(metricTypeNames, []byte(t.String()))
	}
	for t := signal.TemporalityUnspecified; t <= signal.TemporalityCumulative; t++ {
		temporalityNames = append(temporalityNames, []byte(t.String()))
	}
}

func (e *encoder) encodeMetrics(out io.Writer, m *signal.Metrics, rgRows int, sk *sketcher) (*parquet.Schema, error) {
	// Metric metadata lives in Attrs too but has its own JSON column, so
	// only point attribute sets are flattened.
	schema, err := e.begin(TableMetrics, metricCols, &m.Common, m.Attr)
	if err != nil {
		return nil, err
	}
	c := &m.Common
	// Rank descriptors by name so the sort compares integers.
	didx := make([]int32, len(m.Descs))
	for i := range didx {
		didx[i] = int32(i)
	}
	slices.SortFunc(didx, func(a, b int32) int {
		return cmp.Compare(c.String(m.Descs[a].Name), c.String(m.Descs[b].Name))
	})
	drank := make([]int32, len(m.Descs))
	var rk int32
	for i, di := range didx {
		if i > 0 && c.String(m.Descs[di].Name) != c.String(m.Descs[didx[i-1]].Name) {
			rk++
		}
		drank[di] = rk
	}
	keys := e.keysFor(m.Len())
	for i, d := range m.Desc {
		keys[i] = rowKey{k1: uint32(drank[d]), k2: m.SeriesID[i], k3: signedKey(m.Time[i]), row: int32(i)}
	}
	perm := e.sortedPerm()
	// Metadata JSON once per descriptor.
	metaJSON := make([]signal.Range, len(m.Descs)) // into e.arena as byte offsets
	for i, d := range m.Descs {
		if d.Metadata.Len() == 0 {
			continue
		}
		off := len(e.arena)
		if e.arena, err = otlp.AppendAttrsJSON(e.arena, c, d.Metadata); err != nil {
			return nil, err
		}
		metaJSON[i] = signal.Range{Start: uint32(off), End: uint32(len(e.arena))}
	}
	// Descriptors of equal content are one run for descRuns: each request
	// of a stream brings its own descriptor of every metric.
	dcanon := make([]int32, len(m.Descs))
	var reps []int32 // the distinct descriptors of the current name
	for i, di := range didx {
		if i == 0 || drank[di] != drank[didx[i-1]] {
			reps = reps[:0]
		}
		dcanon[di] = di
		for _, r := range reps {
			if sameDesc(m, di, r, metaJSON, e.arena) {
				dcanon[di] = r
				break
			}
		}
		if dcanon[di] == di {
			reps = append(reps, di)
		}
	}
	// rankCanon is, per name rank, the one dcanon of its descriptors, or
	// -1 when they differ: descRuns then takes a rank's rows as one run
	// from the sorted keys (k1), without reading each row's descriptor
	// in sort order.
	rankCanon := make([]int32, int(rk)+1)
	for i, di := range didx {
		if i == 0 || drank[di] != drank[didx[i-1]] {
			rankCanon[drank[di]] = dcanon[di]
		} else if rankCanon[drank[di]] != dcanon[di] {
			rankCanon[drank[di]] = -1
		}
	}
	if err := e.startFile(out, TableMetrics, schema); err != nil {
		return nil, err
	}
	// Whether no gauge or sum point holds a distribution field (as in a
	// well-formed batch): one pass in row order, instead of a check per
	// run reading each row's fields in sort order.
	plainScalars := !anyDist(m, nil)
	noDists := plainScalars && !slices.ContainsFunc(m.Descs, func(d signal.MetricDesc) bool { return isDistType(d.Type) })
	// Likewise whether every point has one resource and scope, and is a
	// float without flags or exemplars (remote write): the chunks then
	// neither read those fields per row in sort order (a cache miss each
	// in a large partition) nor check them.
	oneCommon, floatsOnly := commonAndFloats(m)
	// Whether no point has a start time (remote write): the column is
	// then nulls, not gathered in sort order.
	noStart := !slices.ContainsFunc(m.StartTime[:m.Len()], func(t int64) bool { return t != 0 })
	cols := e.cols
	err = e.chunks(c, perm, rgRows, func(rows []int32) error {
		// Column by column: each loop keeps one column's buffers hot.
		if oneCommon && len(rows) > 0 {
			e.commonN(m.Resource[0], m.Scope[0], 0, len(rows))
		} else if !oneCommon {
			for ri, r := range rows {
				e.common(m.Resource[r], m.Scope[r], ri)
			}
		}
		// The timestamp and series_id columns (and the descriptor runs)
		// are read from the sorted keys (k3, k2, k1), in order, not
		// gathered from the batch in sort order (a cache miss a row in a
		// large partition).
		keys := e.keys[e.chunkAt : e.chunkAt+len(rows)]
		e.descRuns(m, rows, keys, rankCanon, metaJSON, dcanon)
		g := slices.Grow(e.i64[:0], len(rows))[:len(rows)]
		for j := range keys {
			g[j] = int64(keys[j].k3 ^ 1<<63) // signedKey's inverse
		}
		e.i64 = g
		e.bulkTimes(&cols[mTimestamp], g)
		if noStart {
			cols[mStart].nulls(len(rows)) // what times writes for zeros
		} else {
			e.times(&cols[mStart], m.StartTime, rows)
		}
		// series_id, and value when every row is a float (remote
		// write): in sort order and added in one call.
		u := slices.Grow(e.u64[:0], len(rows))[:len(rows)]
		for j := range keys {
			u[j] = keys[j].k2
		}
		e.u64 = u
		e.bulkU64(&cols[mSeriesID], u)
		f := slices.Grow(e.f64[:0], len(rows))[:len(rows)]
		floats := true
		var flag uint32
		sameFlags, noExemplars := true, true
		if floatsOnly {
			for j, r := range rows {
				f[j] = math.Float64frombits(m.Number[r])
			}
		} else {
			for j, r := range rows {
				floats = floats && m.NumberType[r] == signal.ValueDouble
				f[j] = math.Float64frombits(m.Number[r])
				if j == 0 {
					flag = m.Flags[r]
				}
				sameFlags = sameFlags && m.Flags[r] == flag
				noExemplars = noExemplars && m.Exemplars[r].Len() == 0
			}
		}
		e.f64 = f
		if floats {
			cb := &cols[mValue]
			cb.flush()
			cb.col.Float64s(f)
			cb.rows += len(f)
			cols[mValueInt].nulls(len(rows))
		} else {
			for _, r := range rows {
				switch m.NumberType[r] {
				case signal.ValueInt:
					cols[mValue].optF64(float64(int64(m.Number[r])))
					cols[mValueInt].optI64(int64(m.Number[r]))
				case signal.ValueDouble:
					cols[mValue].optF64(math.Float64frombits(m.Number[r]))
					cols[mValueInt].addNull()
				default:
					cols[mValue].addNull()
					cols[mValueInt].addNull()
				}
			}
		}
		if sameFlags {
			cols[mFlags].putN(pInt, nil, uint64(flag), len(rows))
		} else {
			for _, r := range rows {
				cols[mFlags].u32(m.Flags[r])
			}
		}
		// The distribution columns: one null run per run of gauges and
		// sums, the usual rows; nulls for the chunk when the batch has
		// only those (remote write), without reading each row's type.
		if noDists {
			for _, col := range distCols {
				cols[col].nulls(len(rows))
			}
		}
		for ri := 0; ri < len(rows) && !noDists; {
			t := m.Descs[m.Desc[rows[ri]]].Type
			n := 1
			for ri+n < len(rows) && m.Descs[m.Desc[rows[ri+n]]].Type == t {
				n++
			}
			if err := e.distColumns(m, rows[ri:ri+n], t, sk, plainScalars); err != nil {
				return err
			}
			ri += n
		}
		if noExemplars {
			cols[mExemplars].nulls(len(rows))
			return e.attrRuns(c, m.Attr, rows, u)
		}
		for _, r := range rows {
			if er := m.Exemplars[r]; er.Len() > 0 {
				off := len(e.scratch)
				var err error
				if e.scratch, err = appendMsgsJSON(e.scratch, c, nestedExemplar, er, &e.msgs); err != nil {
					return err
				}
				cols[mExemplars].optBytes(e.scratch[off:len(e.scratch):len(e.scratch)])
			} else {
				cols[mExemplars].addNull()
			}
		}
		return e.attrRuns(c, m.Attr, rows, u)
	})
	return schema, err
}

// times fills a time column (0 is null) from vals in the order of rows.
func (e *encoder) times(cb *colBuf, vals []int64, rows []int32) {
	g := slices.Grow(e.i64[:0], len(rows))[:len(rows)]
	for j, r := range rows {
		g[j] = vals[r]
	}
	e.i64 = g
	e.bulkTimes(cb, g)
}

// bulkTimes adds a time column's values of a chunk (0 is null).
func (e *encoder) bulkTimes(cb *colBuf, g []int64) {
	cb.flush()
	cb.col.Int64sNonZero(g)
	cb.rows += len(g)
}

// descRuns fills the columns of the metric descriptor (name, type,
// description, unit, temporality, monotonic, metadata) once per run of
// rows of one descriptor (dcanon: or of descriptors of equal content).
// keys are the rows' sorted keys; a run of one k1 (name rank) whose
// descriptors are all alike (rankCanon[k1] >= 0) is found from them.
func (e *encoder) descRuns(m *signal.Metrics, rows []int32, keys []rowKey, rankCanon []int32, metaJSON []signal.Range, dcanon []int32) {
	cols := e.cols
	for ri := 0; ri < len(rows); {
		k1 := keys[ri].k1
		n := 1
		var di int32
		if rc := rankCanon[k1]; rc >= 0 {
			di = rc
			for ri+n < len(rows) && keys[ri+n].k1 == k1 {
				n++
			}
		} else {
			di = int32(m.Desc[rows[ri]])
			for ri+n < len(rows) && dcanon[m.Desc[rows[ri+n]]] == dcanon[di] {
				n++
			}
		}
		ri += n
		d := &m.Descs[di]
		cols[mName].strN(m.Bytes(d.Name), n)
		cols[mType].putN(pBytes, metricTypeNames[min(int(d.Type), len(metricTypeNames)-1)], 0, n)
		cols[mDescription].strN(m.Bytes(d.Description), n)
		cols[mUnit].strN(m.Bytes(d.Unit), n)
		cols[mTemporality].putN(pBytes, temporalityNames[min(int(d.Temporality), len(temporalityNames)-1)], 0, n)
		cols[mMonotonic].putN(pBool, nil, boolBits(d.Monotonic), n)
		if mj := metaJSON[di]; mj.End > mj.Start {
			cols[mMetadata].putN(pBytes, e.arena[mj.Start:mj.End:mj.End], 0, n)
		} else {
			cols[mMetadata].nulls(n)
		}
	}
}

// sameDesc reports whether descriptors a and b of one name write the same
// descriptor columns.
func sameDesc(m *signal.Metrics, a, b int32, metaJSON []signal.Range, arena []byte) bool {
	da, db := &m.Descs[a], &m.Descs[b]
	ma, mb := metaJSON[a], metaJSON[b]
	return da.Type == db.Type && da.Temporality == db.Temporality && da.Monotonic == db.Monotonic &&
		m.String(da.Description) == m.String(db.Description) && m.String(da.Unit) == m.String(db.Unit) &&
		string(arena[ma.Start:ma.End]) == string(arena[mb.Start:mb.End])
}

// distColumns fills the histogram, exponential histogram, summary and
// sketch columns of rows, whose points are all of type t.
// plainScalars says no gauge or sum point of the batch has one
// (anyDist(m, nil) is false).
func (e *encoder) distColumns(m *signal.Metrics, rows []int32, t signal.MetricType, sk *sketcher, plainScalars bool) error {
	cols := e.cols
	n := len(rows)
	isDist := isDistType(t)
	if !isDist {
		// Gauges and sums: but Has, lists and exp fields are zero in
		// a well-formed batch; write what the batch holds all the same.
		if plainScalars || !anyDist(m, rows) {
			for _, col := range distCols {
				cols[col].nulls(n)
			}
			return nil
		}
	}
	for _, r := range rows {
		fc := m.FloatCounts[r]
		isFloat := fc.Len() > 0
		if isDist && !isFloat {
			cols[mCount].optU64(m.Count[r])
		} else {
			cols[mCount].addNull()
		}
		has := m.Has[r]
		optHas(&cols[mSum], has&signal.HasSum != 0, m.Sum[r])
		optHas(&cols[mMin], has&signal.HasMin != 0, m.Min[r])
		optHas(&cols[mMax], has&signal.HasMax != 0, m.Max[r])
		br := m.BucketCounts[r]
		if isFloat {
			br.End = br.Start
		}
		cols[mBucketCounts].listU64(m.U64[br.Start:br.End])
		fr := m.Bounds[r]
		cols[mBounds].listF64(m.F64[fr.Start:fr.End])
		if t == signal.MetricExponentialHistogram {
			cols[mExpScale].optI32(m.Scale[r])
			if isFloat {
				cols[mExpZeroCount].addNull()
			} else {
				cols[mExpZeroCount].optU64(m.ZeroCount[r])
			}
			cols[mExpZeroThreshold].optF64(m.ZeroThreshold[r])
			cols[mExpPosOffset].optI32(m.PosOffset[r])
			cols[mExpNegOffset].optI32(m.NegOffset[r])
		} else {
			cols[mExpScale].addNull()
			cols[mExpZeroCount].addNull()
			cols[mExpZeroThreshold].addNull()
			cols[mExpPosOffset].addNull()
			cols[mExpNegOffset].addNull()
		}
		pr, nr := m.PosCounts[r], m.NegCounts[r]
		if isFloat {
			e.floatCounts(m, r, t)
			pr.End, nr.End = pr.Start, nr.Start
		} else {
			cols[mCountFloat].addNull()
			cols[mZeroCountFloat].addNull()
			cols[mBucketsFloat].addNull()
			cols[mPosCountsFloat].addNull()
			cols[mNegCountsFloat].addNull()
		}
		cols[mExpPosCounts].listU64(m.U64[pr.Start:pr.End])
		cols[mExpNegCounts].listU64(m.U64[nr.Start:nr.End])
		if h := m.Has[r] & signal.HintMask; h != 0 {
			cols[mResetHint].strReq(resetHintNames[h>>3])
		} else {
			cols[mResetHint].addNull()
		}
		qr := m.Quantiles[r]
		q := m.F64[qr.Start:qr.End]
		cols[mQuantiles].listF64Stride(q, 0)
		cols[mQuantileValues].listF64Stride(q, 1)
		if b, ok := sk.encode(m, int(r), t, &e.scratch); ok {
			cols[mSketch].optBytes(b)
		} else {
			cols[mSketch].addNull()
		}
	}
	return nil
}

// floatCounts fills the float count columns of row r, a float histogram
// (signal.Metrics.FloatCounts) of type t.
func (e *encoder) floatCounts(m *signal.Metrics, r int32, t signal.MetricType) {
	cols := e.cols
	fc := m.FloatCounts[r]
	f := m.F64[fc.Start:fc.End]
	cols[mCountFloat].optF64(f[0])
	f = f[1:]
	if t != signal.MetricExponentialHistogram {
		cols[mZeroCountFloat].addNull()
		cols[mBucketsFloat].listF64(f)
		cols[mPosCountsFloat].addNull()
		cols[mNegCountsFloat].addNull()
		return
	}
	var zero float64
	if len(f) > 0 {
		zero, f = f[0], f[1:]
	}
	np := min(int(m.PosCounts[r].Len()), len(f))
	cols[mZeroCountFloat].optF64(zero)
	cols[mBucketsFloat].addNull()
	cols[mPosCountsFloat].listF64(f[:np])
	cols[mNegCountsFloat].listF64(f[np:])
}

// resetHintNames are the reset_hint values of signal.Hint* >> 3.
var resetHintNames = [4][]byte{nil, []byte("yes"), []byte("no"), []byte("gauge")}

// distCols are the columns distColumns fills.
var distCols = []int{mCount, mSum, mMin, mMax, mBucketCounts, mBounds, mExpScale, mExpZeroCount, mExpZeroThreshold,
	mExpPosOffset, mExpNegOffset, mExpPosCounts, mExpNegCounts, mQuantiles, mQuantileValues, mSketch,
	mCountFloat, mZeroCountFloat, mBucketsFloat, mPosCountsFloat, mNegCountsFloat, mResetHint}

// anyDist reports whether a gauge or sum point of rows holds a
// distribution field (a batch built by hand may).
func anyDist(m *signal.Metrics, rows []int32) bool {
	for _, r := range rows {
		if m.Has[r] != 0 || m.BucketCounts[r].Len() > 0 || m.Bounds[r].Len() > 0 || m.PosCounts[r].Len() > 0 ||
			m.NegCounts[r].Len() > 0 || m.Quantiles[r].Len() > 0 {
			return true
		}
	}
	if rows == nil {
		// Every gauge and sum point of the batch, in row order.
		for r := range m.Desc {
			if !isDistType(m.Descs[m.Desc[r]].Type) && (m.Has[r] != 0 || m.BucketCounts[r].Len() > 0 || m.Bounds[r].Len() > 0 ||
				m.PosCounts[r].Len() > 0 || m.NegCounts[r].Len() > 0 || m.Quantiles[r].Len() > 0) {
				return true
			}
		}
	}
	return false
}

// isDistType says points of type t fill the distribution columns.
func isDistType(t signal.MetricType) bool {
	return t == signal.MetricHistogram || t == signal.MetricExponentialHistogram || t == signal.MetricSummary
}

// bulkU64 adds vals, one present row each, to an INT64 column.
func (e *encoder) bulkU64(cb *colBuf, vals []uint64) {
	cb.flush()
	cb.col.Uint64s(vals)
	cb.rows += len(vals)
}

func optHas(c *colBuf, has bool, v float64) {
	if has {
		c.optF64(v)
	} else {
		c.addNull()
	}
}

func (e *encoder) encodeSpans(out io.Writer, s *signal.Spans, ptime []int64, rgRows int) (*parquet.Schema, error) {
	schema, err := e.begin(TableTraces, spanCols, &s.Common, s.Attr)
	if err != nil {
		return nil, err
	}
	c := &s.Common
	perm := e.rankedPerm(e.serviceRanks(c), s.Resource, ptime)
	if err := e.startFile(out, TableTraces, schema); err != nil {
		return nil, err
	}
	cols := e.cols
	err = e.chunks(c, perm, rgRows, func(rows []int32) error {
		for ri, r := range rows {
			e.common(s.Resource[r], s.Scope[r], ri)
		}
		e.times(&cols[tStart], s.StartTime, rows)
		e.times(&cols[tEnd], s.EndTime, rows)
		for _, r := range rows {
			cols[tTraceID].str(e.hexID(s.TraceID[r][:]))
			cols[tSpanID].str(e.hexID(s.SpanID[r][:]))
			cols[tParentSpanID].str(e.hexID(s.ParentSpanID[r][:]))
			cols[tTraceState].str(c.Bytes(s.TraceState[r]))
			cols[tName].str(c.Bytes(s.Name[r]))
			cols[tKind].i32(s.Kind[r])
			cols[tDuration].i64(s.EndTime[r] - s.StartTime[r])
			cols[tStatusCode].i32(s.StatusCode[r])
			cols[tStatusMessage].str(c.Bytes(s.StatusMessage[r]))
			cols[tFlags].u32(s.Flags[r])
			for _, x := range [2]struct {
				col  int
				kind nestedKind
				r    signal.Range
			}{{tEvents, nestedEvent, s.Events[r]}, {tLinks, nestedLink, s.Links[r]}} {
				if x.r.Len() == 0 {
					cols[x.col].addNull()
					continue
				}
				off := len(e.scratch)
				var err error
				if e.scratch, err = appendMsgsJSON(e.scratch, c, x.kind, x.r, &e.msgs); err != nil {
					return err
				}
				cols[x.col].optBytes(e.scratch[off:len(e.scratch):len(e.scratch)])
			}
			cols[tDropped].u32(s.DroppedAttrs[r])
			cols[tDroppedEvents].u32(s.DroppedEvents[r])
			cols[tDroppedLinks].u32(s.DroppedLinks[r])
		}
		return e.attrRuns(c, s.Attr, rows, nil)
	})
	return schema, err
}

// commonAndFloats reports, in one pass over m's rows in row order, whether
// every row has the first row's resource and scope, and whether every row
// is a float (ValueDouble) with flags 0 and no exemplars.
func commonAndFloats(m *signal.Metrics) (oneCommon, floatsOnly bool) {
	n := m.Len()
	if n == 0 {
		return false, false
	}
	oneCommon, floatsOnly = true, true
	res, sc := m.Resource[0], m.Scope[0]
	for i, r := range m.Resource[:n] {
		oneCommon = oneCommon && r == res && m.Scope[i] == sc
	}
	for i, t := range m.NumberType[:n] {
		floatsOnly = floatsOnly && t == signal.ValueDouble && m.Flags[i] == 0 && m.Exemplars[i].Len() == 0
	}
	return oneCommon, floatsOnly
}
