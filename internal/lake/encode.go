package lake

import (
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/sluice-dev/sluice/internal/lake/pqenc"

	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/unsafex"
)

// colBuf builds one leaf column of a file with pqenc. Values arrive row by
// row; the last run of equal values (or nulls) is held as pending and
// handed to the Column as one call, so a resource attribute repeated over
// thousands of rows costs one dictionary lookup. Attribute columns are
// set out of order (setAt): the rows they skip are nulls.
type colBuf struct {
	leaf int
	col  pqenc.Column
	rows int // rows handed to col in this row group

	// the pending run: pn rows of one value
	pk pendKind
	pb []byte // pBytes; aliases batch, arena or chunk scratch until flush
	pu uint64 // pInt, pFloat (bits), pBool
	pn int

	tmp []float64 // listF64Stride

	// refs remembers the dictionary index and hash of the arena values
	// (pStr) the column saw last, by Str (direct-mapped): an interned
	// value starts many runs of a column (each series' points are one
	// run), and each run's value was looked up in the dictionary and
	// hashed for the bloom filter again. 256 entries, made at the
	// column's first such value: a label of a hundred values (job,
	// instance, pod) starts its runs in no order a smaller table keeps.
	refs []strRef
}

// strRefBits is log2 of the entries of colBuf.refs.
const strRefBits = 8

type strRef struct {
	s   signal.Str
	ref pqenc.ValueRef
}

// strRef returns the ValueRef kept for s, emptied when it was another
// Str's. A Str names the same bytes for the whole file (one batch), and a
// ValueRef is only used within its chunk.
func (c *colBuf) strRef(s signal.Str) *pqenc.ValueRef {
	if c.refs == nil {
		c.refs = make([]strRef, 1<<strRefBits)
	}
	e := &c.refs[(uint64(s)^uint64(s)>>32)*0x9e3779b97f4a7c15>>(64-strRefBits)]
	if e.s != s {
		e.s, e.ref = s, pqenc.ValueRef{}
	}
	return &e.ref
}

// pendKind is the kind of a colBuf's pending run.
type pendKind uint8

const (
	pNone pendKind = iota
	pNull
	pBytes
	pStr // bytes of an attribute value in the batch arena; pu is its Str
	pInt
	pFloat
	pBool
)

// total is the number of rows in the column's row group so far.
func (c *colBuf) total() int { return c.rows + c.pn }

// flush hands the pending run to the column.
func (c *colBuf) flush() {
	switch c.pk {
	case pNone:
		return
	case pNull:
		c.col.Null(c.pn)
	case pBytes:
		c.col.Bytes(c.pb, c.pn)
	case pStr:
		c.col.BytesRef(c.pb, c.pn, c.strRef(signal.Str(c.pu)))
	case pInt:
		c.col.Int(int64(c.pu), c.pn)
	case pFloat:
		c.col.Float(math.Float64frombits(c.pu), c.pn)
	case pBool:
		c.col.Bool(c.pu != 0, c.pn)
	}
	c.rows += c.pn
	c.pk, c.pb, c.pn = pNone, nil, 0
}

func (c *colBuf) nulls(k int) {
	if c.pk == pNull {
		c.pn += k
		return
	}
	c.flush()
	c.pk, c.pn = pNull, k
}

// putN adds n rows of a value.
func (c *colBuf) putN(k pendKind, b []byte, u uint64, n int) {
	c.put(k, b, u)
	c.pn += n - 1
}

// strN adds n rows of b, null when empty (str).
func (c *colBuf) strN(b []byte, n int) {
	if len(b) == 0 {
		c.nulls(n)
		return
	}
	c.putN(pBytes, b, 0, n)
}

// setAtN sets n rows from row of an attribute column (setAt).
func (c *colBuf) setAtN(row int, k pendKind, b []byte, u uint64, n int) {
	c.setAt(row, k, b, u)
	c.pn += n - 1
}

// put adds one row of a value; the fast path (the run goes on) inlines.
func (c *colBuf) put(k pendKind, b []byte, u uint64) {
	if c.pk == k && c.pu == u && (k != pBytes || string(c.pb) == string(b)) {
		c.pn++
		return
	}
	c.restart(k, b, u)
}

// putU is put for kinds without bytes.
func (c *colBuf) putU(k pendKind, u uint64) {
	if c.pk == k && c.pu == u {
		c.pn++
		return
	}
	c.restart(k, nil, u)
}

// putB is put for byte arrays.
func (c *colBuf) putB(b []byte) {
	if c.pk == pBytes && string(c.pb) == string(b) {
		c.pn++
		return
	}
	c.restart(pBytes, b, 0)
}

// restart flushes the run and starts one of the value; kept out of line
// so that the put fast paths inline.
//
//go:noinline
func (c *colBuf) restart(k pendKind, b []byte, u uint64) {
	c.flush()
	c.pk, c.pb, c.pu, c.pn = k, b, u, 1
}

func (c *colBuf) addNull()          { c.nulls(1) }
func (c *colBuf) i32(v int32)       { c.putU(pInt, uint64(int64(v))) }
func (c *colBuf) i64(v int64)       { c.putU(pInt, uint64(v)) }
func (c *colBuf) u32(v uint32)      { c.putU(pInt, uint64(v)) }
func (c *colBuf) u64(v uint64)      { c.putU(pInt, v) }
func (c *colBuf) boolean(v bool)    { c.putU(pBool, boolBits(v)) }
func (c *colBuf) strReq(b []byte)   { c.putB(b) }
func (c *colBuf) optF64(v float64)  { c.putU(pFloat, math.Float64bits(v)) }
func (c *colBuf) optI64(v int64)    { c.putU(pInt, uint64(v)) }
func (c *colBuf) optU64(v uint64)   { c.putU(pInt, v) }
func (c *colBuf) optI32(v int32)    { c.putU(pInt, uint64(int64(v))) }
func (c *colBuf) optBytes(b []byte) { c.putB(b) }

func boolBits(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// time stores 0 as null: OTLP uses 0 for "unset".
func (c *colBuf) time(t int64) {
	if t == 0 {
		c.addNull()
		return
	}
	c.putU(pInt, uint64(t))
}

// str stores "" as null: OTLP (proto3) cannot tell them apart either.
func (c *colBuf) str(b []byte) {
	if len(b) == 0 {
		c.addNull()
		return
	}
	c.putB(b)
}

func (c *colBuf) listU64(s []uint64) {
	if len(s) == 0 {
		c.addNull()
		return
	}
	c.flush()
	c.col.ListUint64(s)
	c.rows++
}

func (c *colBuf) listF64(s []float64) {
	if len(s) == 0 {
		c.addNull()
		return
	}
	c.flush()
	c.col.ListFloat64(s)
	c.rows++
}

// listF64Stride writes every other element of s starting at off (summary
// quantiles are stored as (quantile, value) pairs).
func (c *colBuf) listF64Stride(s []float64, off int) {
	if len(s) <= off {
		c.addNull()
		return
	}
	c.tmp = c.tmp[:0]
	for i := off; i < len(s); i += 2 {
		c.tmp = append(c.tmp, s[i])
	}
	c.listF64(c.tmp)
}

// setAt sets row `row` of the row group (an attribute column): rows skipped
// since the last value are null.
func (c *colBuf) setAt(row int, k pendKind, b []byte, u uint64) {
	if gap := row - c.total(); gap > 0 {
		c.nulls(gap)
	} else if gap < 0 {
		panic("lake: attribute column row set out of order")
	}
	c.put(k, b, u)
}

// setStrN sets n rows from row of an attribute column to the arena
// value s (bytes b). The run check compares Strs, not bytes: equal values
// in different places of the arena make two runs of one value, which the
// column joins (one dictionary index, or the same bytes appended), so the
// file is the same; the batch's copier interns values (signal's
// valueTable), so they rarely differ.
func (c *colBuf) setStrN(row int, s signal.Str, b []byte, n int) {
	if gap := row - c.total(); gap > 0 {
		c.nulls(gap)
	} else if gap < 0 {
		panic("lake: attribute column row set out of order")
	}
	if c.pk == pStr && c.pu == uint64(s) {
		c.pn += n
		return
	}
	c.flush()
	c.pk, c.pb, c.pu, c.pn = pStr, b, uint64(s), n
}

// unsetLast takes back the values of the n rows from row, the last rows
// set (a duplicate key whose later value goes to this or another column),
// leaving them unset.
func (c *colBuf) unsetLast(row, n int) {
	if c.total() != row+n || c.pn < n || c.pk == pNull {
		panic("lake: attribute column row set out of order")
	}
	if c.pn -= n; c.pn == 0 {
		c.pk, c.pb = pNone, nil
	}
}

// pad fills the column with nulls up to rows rows and flushes it.
func (c *colBuf) pad(rows int) {
	if gap := rows - c.total(); gap > 0 {
		c.nulls(gap)
	}
	c.flush()
}

// attrCol is one flattened attribute column.
type attrCol struct {
	scope attrScope
	key   signal.KeyID
	typ   signal.ValueType
}

// cell is a resolved attribute of a resource or scope: the slot of its
// column and its value at that column's levels.
type cell struct {
	slot int32
	k    pendKind
	b    []byte
	u    uint64
}

// encoder turns one partition batch into one Parquet file. It is reused
// across files so that its buffers are allocated once.
type encoder struct {
	nfixed int
	cols   []colBuf // fixed columns, then one per attribute slot
	attrs  []attrCol

	// The file being written: its leaves in schema order, the column of
	// each leaf (cols index), and the rows of the row group before the
	// current chunk.
	file   *pqenc.File
	footer *format.FileMetaData
	leaves []pqenc.Leaf
	order  []int32
	base   int
	runs   []commonRun // the chunk's runs of rows of one resource and scope

	// cuts are the file's rows where every column starts a page (both
	// ends of each service's rows when pageCutRows or more: pageCuts);
	// rgStart is the row group's first row in the file.
	cuts, rgCuts []int64
	rgStart      int

	// resTab and scTab hold, column by column, the cell (index into
	// resCells, scCells; -1 when none) of each resource and scope:
	// resTab[i*len(Resources)+r] is resource r's cell in slot resSlots[i].
	// nil when a file has too many resources times columns for them
	// (maxCommonCells); its runs are then written row by row.
	resSlots, scSlots []int32
	resTab, scTab     []int32

	// colOf[scope][type][key] is the attribute slot + 1, 0 when none,
	// inOverflow when the attribute goes to its scope's overflow column.
	colOf [numAttrScopes][numValueTypes][]int32

	// maxCols caps the attribute columns of a file (keptColumns); ovfSlot
	// is the slot of each scope's overflow column, -1 when the file has
	// none. ovfRow holds a record's overflow attributes (indexes into
	// Attrs, -1 once a later duplicate replaced one) until the row ends.
	maxCols int
	ovfSlot [numAttrScopes]int32
	ovfRow  []int32
	freq    []int32
	kept    []int32

	resCells   []cell
	resRange   []signal.Range // per resource, into resCells
	resService []signal.Str   // service.name when a string, else 0
	resHasSvc  []bool
	scCells    []cell
	scRange    []signal.Range
	// Canonical byte values of the fixed resource columns (service_name,
	// resource_schema_url: two per resource) and scope columns (name,
	// version, schema URL: three per scope); see canonical.
	resFixed [][]byte
	scFixed  [][]byte
	canon    map[canonKey]canonValue

	stamp    []int32 // per key: 1 + the row or set that last used it
	lastSlot []int32 // per key: the slot it used there
	recSlot  []int32 // per record attribute (index into Attrs): its slot, < 0 in the overflow

	arena   []byte // JSON of resource and scope attributes, per file
	scratch []byte // per chunk
	perm    []int32
	keys    []rowKey // sorted by sortedPerm: keys[i].row is perm[i]
	chunkAt int      // the index in perm of the chunk's first row (chunks)
	keys2   []rowKey // sortedPerm's buckets
	counts  []int32
	counts2 []int32 // sortRest's groups
	i64     []int64 // a column's values of a chunk, in sort order
	u64     []uint64
	f64     []float64
	names   []byte
	msgs    [][]byte

	// jsonCache maps a nested AnyValue's protobuf to its JSON in arena:
	// the same map or array value recurs across records (85% of them in
	// the corpus logs), and rendering JSON is the costliest step.
	jsonCache      map[string]signal.Range
	jsonCacheBytes int
}

// Bounds of the per-file JSON cache (variables for tests).
var (
	maxJSONCacheEntries = 8192
	maxJSONCacheBytes   = 8 << 20
)

// nestedJSON returns the JSON of the array or map value v, cached per file.
// Stable results (resource and scope cells, used by every chunk) always stay
// in the arena; others may land in the chunk scratch.
func (e *encoder) nestedJSON(c *signal.Common, t signal.ValueType, v uint64, stable bool) ([]byte, error) {
	pb := c.Bytes(signal.Str(v))
	if r, ok := e.jsonCache[string(pb)]; ok {
		return e.arena[r.Start:r.End:r.End], nil
	}
	off := len(e.arena)
	var err error
	if e.arena, err = appendAnyValueJSON(e.arena, c, t, v); err != nil {
		e.arena = e.arena[:off]
		return nil, err
	}
	js := e.arena[off:len(e.arena):len(e.arena)]
	if len(e.jsonCache) < maxJSONCacheEntries && e.jsonCacheBytes+len(js)+len(pb) <= maxJSONCacheBytes && len(e.arena) <= math.MaxUint32 {
		if e.jsonCache == nil {
			e.jsonCache = make(map[string]signal.Range)
		}
		e.jsonCache[string(pb)] = signal.Range{Start: uint32(off), End: uint32(len(e.arena))}
		e.jsonCacheBytes += len(js) + len(pb)
	} else if !stable {
		// Not cached: let the next uncached value reuse the space.
		e.arena = e.arena[:off]
		e.scratch = append(e.scratch, js...)
		js = e.scratch[len(e.scratch)-len(js) : len(e.scratch) : len(e.scratch)]
	}
	return js, nil
}

// begin lays out the attribute columns of c for one file and returns the
// file schema. recAttrs are the attribute sets of the records.
func (e *encoder) begin(table string, fixed []fixedCol, c *signal.Common, recAttrs []signal.Range) (*parquet.Schema, error) {
	nk := c.Keys.Len()
	for s := range e.colOf {
		for t := range e.colOf[s] {
			e.colOf[s][t] = resetInt32(e.colOf[s][t], nk)
		}
	}
	e.stamp = resetInt32(e.stamp, nk)
	e.lastSlot = resetInt32(e.lastSlot, nk)
	e.attrs = e.attrs[:0]
	e.arena = e.arena[:0]
	clear(e.jsonCache)
	e.jsonCacheBytes = 0

	// Resources: last duplicate wins; a string service.name goes to its
	// own column.
	svcID, hasSvcKey := signal.KeyID(0), false
	for i := range nk {
		if c.Keys.Name(signal.KeyID(i)) == "service.name" {
			svcID, hasSvcKey = signal.KeyID(i), true
			break
		}
	}
	e.resService = e.resService[:0]
	e.resHasSvc = e.resHasSvc[:0]
	var stampGen int32
	for _, r := range c.Resources {
		stampGen++
		var svc signal.Str
		has := false
		for i := int(r.Attrs.End) - 1; i >= int(r.Attrs.Start); i-- {
			k := c.Attrs.Key[i]
			if e.stamp[k] == stampGen {
				continue
			}
			e.stamp[k] = stampGen
			if hasSvcKey && k == svcID && c.Attrs.Type[i] == signal.ValueString {
				svc, has = signal.Str(c.Attrs.Val[i]), true
				continue
			}
			e.slot(scopeResource, k, c.Attrs.Type[i])
		}
		e.resService = append(e.resService, svc)
		e.resHasSvc = append(e.resHasSvc, has)
	}
	for _, s := range c.Scopes {
		stampGen++
		for i := int(s.Attrs.End) - 1; i >= int(s.Attrs.Start); i-- {
			k := c.Attrs.Key[i]
			if e.stamp[k] == stampGen {
				continue
			}
			e.stamp[k] = stampGen
			e.slot(scopeScope, k, c.Attrs.Type[i])
		}
	}
	// Record columns: every (key, type) seen. A type shadowed by a later
	// duplicate may leave an all-null column; that is harmless.
	e.recSlot = slices.Grow(e.recSlot[:0], c.Attrs.Len())[:c.Attrs.Len()]
	recSlot := e.recSlot
	if c.ShareAttrSets {
		// Records share Ranges (a series' points, a partition's
		// ShareAttrSets: two Ranges are equal or apart), so a set is
		// resolved once: a remote-write file holds ten points per set.
		for i := range recSlot {
			recSlot[i] = slotUnset
		}
		for _, r := range recAttrs {
			if r.Len() == 0 || recSlot[r.Start] != slotUnset {
				continue
			}
			for i := r.Start; i < r.End; i++ {
				recSlot[i] = e.slot(scopeRecord, c.Attrs.Key[i], c.Attrs.Type[i])
			}
		}
	} else {
		for _, r := range recAttrs {
			for i := r.Start; i < r.End; i++ {
				recSlot[i] = e.slot(scopeRecord, c.Attrs.Key[i], c.Attrs.Type[i])
			}
		}
	}

	// Bounded schema: past maxCols, the least used attributes go to
	// their scope's overflow column.
	e.ovfSlot = [numAttrScopes]int32{-1, -1, -1}
	nattr := len(e.attrs)
	if nattr > e.maxColumns() {
		e.capColumns(c, recAttrs, svcID, hasSvcKey)
		for _, r := range recAttrs {
			for i := r.Start; i < r.End; i++ {
				recSlot[i] = e.colOf[scopeRecord][attrType(c.Attrs.Type[i])][c.Attrs.Key[i]] - 1
			}
		}
		nattr = len(e.attrs)
		for s := range e.ovfSlot {
			if e.ovfSlot[s] == 0 {
				e.ovfSlot[s] = int32(nattr)
				nattr++
			}
		}
	}

	// Schema: fixed columns and attribute columns by name.
	g := make(parquet.Group, len(fixed)+nattr)
	for _, f := range fixed {
		g[f.name] = f.kind.node()
	}
	attrNames := make([]string, len(e.attrs))
	for i, a := range e.attrs {
		e.names = appendColumnName(e.names[:0], a.scope, c.Keys.Name(a.key), a.typ)
		name := string(e.names)
		if _, dup := g[name]; dup {
			return nil, fmt.Errorf("lake: attribute column %q collides with another column", name)
		}
		g[name] = attrNode(a.typ)
		attrNames[i] = name
	}
	for s, slot := range e.ovfSlot {
		if slot >= 0 {
			g[overflowColumns[s]] = parquet.Optional(parquet.String())
			attrNames = append(attrNames, overflowColumns[s])
		}
	}
	schema := parquet.NewSchema(table, g)

	e.nfixed = len(fixed)
	n := len(fixed) + nattr
	if cap(e.cols) < n {
		e.cols = append(e.cols[:cap(e.cols)], make([]colBuf, n-cap(e.cols))...)
	}
	e.cols = e.cols[:n]
	for i, f := range fixed {
		leaf, ok := schema.Lookup(leafPath(f)...)
		if !ok {
			return nil, fmt.Errorf("lake: column %q missing from schema", f.name)
		}
		e.cols[i].leaf = leaf.ColumnIndex
	}
	for i, name := range attrNames {
		leaf, ok := schema.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("lake: column %q missing from schema", name)
		}
		e.cols[len(fixed)+i].leaf = leaf.ColumnIndex
	}

	// Resolve resource and scope attribute values once per file.
	e.resCells, e.resRange = e.resCells[:0], e.resRange[:0]
	for ri, r := range c.Resources {
		stampGen++
		start := uint32(len(e.resCells))
		ovf := e.ovfRow[:0]
		for i := int(r.Attrs.End) - 1; i >= int(r.Attrs.Start); i-- {
			k := c.Attrs.Key[i]
			if e.stamp[k] == stampGen {
				continue
			}
			e.stamp[k] = stampGen
			if e.resHasSvc[ri] && k == svcID {
				continue
			}
			t := attrType(c.Attrs.Type[i])
			slot := e.colOf[scopeResource][t][k] - 1
			if slot < 0 {
				ovf = append(ovf, int32(i))
				continue
			}
			cl, err := e.attrValue(c, t, c.Attrs.Val[i], true)
			if err != nil {
				return nil, err
			}
			cl.slot = slot
			e.resCells = append(e.resCells, cl)
		}
		e.ovfRow = ovf[:0]
		if len(ovf) > 0 {
			cl, err := e.overflowCell(c, scopeResource, ovf)
			if err != nil {
				return nil, err
			}
			e.resCells = append(e.resCells, cl)
		}
		e.resRange = append(e.resRange, signal.Range{Start: start, End: uint32(len(e.resCells))})
	}
	e.scCells, e.scRange = e.scCells[:0], e.scRange[:0]
	for _, s := range c.Scopes {
		stampGen++
		start := uint32(len(e.scCells))
		ovf := e.ovfRow[:0]
		for i := int(s.Attrs.End) - 1; i >= int(s.Attrs.Start); i-- {
			k := c.Attrs.Key[i]
			if e.stamp[k] == stampGen {
				continue
			}
			e.stamp[k] = stampGen
			t := attrType(c.Attrs.Type[i])
			slot := e.colOf[scopeScope][t][k] - 1
			if slot < 0 {
				ovf = append(ovf, int32(i))
				continue
			}
			cl, err := e.attrValue(c, t, c.Attrs.Val[i], true)
			if err != nil {
				return nil, err
			}
			cl.slot = slot
			e.scCells = append(e.scCells, cl)
		}
		e.ovfRow = ovf[:0]
		if len(ovf) > 0 {
			cl, err := e.overflowCell(c, scopeScope, ovf)
			if err != nil {
				return nil, err
			}
			e.scCells = append(e.scCells, cl)
		}
		e.scRange = append(e.scRange, signal.Range{Start: start, End: uint32(len(e.scCells))})
	}
	e.canonCells(c)
	// Record rows stamp with negative numbers from here on, so they never
	// meet a set stamp.
	clear(e.stamp)
	return schema, nil
}

// canonKey is a value of one column: slot is the attribute slot, or
// -1 - the fixed column.
type canonKey struct {
	slot int32
	v    string
}

// canonValue is the first slice seen with a canonKey's bytes and its
// number in the file.
type canonValue struct {
	b  []byte
	id uint64
}

// canonical returns the first slice seen with b's bytes in column slot
// of this file, and its number (unique per value of the column). Equal
// values of different resources and scopes then share one slice and one
// number, so that a column's run check (colBuf.put) compares them without
// reading the bytes: metrics sorted by name alternate between resources
// every few rows.
func (e *encoder) canonical(slot int32, b []byte) ([]byte, uint64) {
	if len(b) == 0 {
		return b, 0
	}
	if e.canon == nil {
		e.canon = make(map[canonKey]canonValue)
	}
	k := canonKey{slot, unsafex.String(b)} // b outlives the file's map
	if v, ok := e.canon[k]; ok {
		return v.b, v.id
	}
	id := uint64(len(e.canon)) + 1
	e.canon[k] = canonValue{b, id}
	return b, id
}

// canonCells makes the byte values of the resource and scope columns
// canonical (canonical), resolved once per file: an attribute cell's
// value becomes a pStr of its number.
func (e *encoder) canonCells(c *signal.Common) {
	clear(e.canon)
	for i := range e.resCells {
		if cl := &e.resCells[i]; cl.k == pBytes {
			cl.b, cl.u = e.canonical(cl.slot, cl.b)
			cl.k = pStr
		}
	}
	for i := range e.scCells {
		if cl := &e.scCells[i]; cl.k == pBytes {
			cl.b, cl.u = e.canonical(cl.slot, cl.b)
			cl.k = pStr
		}
	}
	e.resFixed = e.resFixed[:0]
	for ri := range c.Resources {
		var svc []byte
		if e.resHasSvc[ri] {
			svc, _ = e.canonical(int32(-1-cServiceName), c.Bytes(e.resService[ri]))
		}
		url, _ := e.canonical(int32(-1-cResourceSchemaURL), c.Bytes(c.Resources[ri].SchemaURL))
		e.resFixed = append(e.resFixed, svc, url)
	}
	e.scFixed = e.scFixed[:0]
	for _, sc := range c.Scopes {
		name, _ := e.canonical(int32(-1-cScopeName), c.Bytes(sc.Name))
		version, _ := e.canonical(int32(-1-cScopeVersion), c.Bytes(sc.Version))
		url, _ := e.canonical(int32(-1-cScopeSchemaURL), c.Bytes(sc.SchemaURL))
		e.scFixed = append(e.scFixed, name, version, url)
	}
	e.resSlots, e.resTab = commonTable(e.resSlots, e.resTab, e.resCells, e.resRange, len(e.cols)-e.nfixed)
	e.scSlots, e.scTab = commonTable(e.scSlots, e.scTab, e.scCells, e.scRange, len(e.cols)-e.nfixed)
}

// maxCommonCells bounds the resource (or scope) table of a file: 4 MiB
// (a variable for tests).
var maxCommonCells = 1 << 20

// commonTable lays out the cells of resources (or scopes) column by
// column (see encoder.resTab): slots are the columns any of them has, in
// order of first use.
func commonTable(slots, tab []int32, cells []cell, ranges []signal.Range, nslots int) ([]int32, []int32) {
	slots = slots[:0]
	var seen [64]uint64 // slots below 4096 without a map
	var seenMap map[int32]bool
	for _, cl := range cells {
		if s := cl.slot; s < 64*64 {
			if seen[s>>6]&(1<<(s&63)) == 0 {
				seen[s>>6] |= 1 << (s & 63)
				slots = append(slots, s)
			}
		} else if !seenMap[s] {
			if seenMap == nil {
				seenMap = make(map[int32]bool)
			}
			seenMap[s] = true
			slots = append(slots, s)
		}
	}
	n := len(ranges)
	if len(slots)*n > maxCommonCells || n == 0 {
		return slots, nil
	}
	dense := make([]int32, nslots)
	for i, s := range slots {
		dense[s] = int32(i)
	}
	tab = slices.Grow(tab[:0], len(slots)*n)[:len(slots)*n]
	for i := range tab {
		tab[i] = -1
	}
	for r, rg := range ranges {
		for x := rg.Start; x < rg.End; x++ {
			tab[int(dense[cells[x].slot])*n+r] = int32(x)
		}
	}
	return slots, tab
}

func resetInt32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// attrType maps types no decoder produces to ValueEmpty, as slot does.
func attrType(t signal.ValueType) signal.ValueType {
	if int(t) >= numValueTypes {
		return signal.ValueEmpty
	}
	return t
}

// slot returns the attribute slot of (scope, key, type), adding it.
func (e *encoder) slot(s attrScope, k signal.KeyID, t signal.ValueType) int32 {
	t = attrType(t) // unknown types cannot come from a decoder
	if v := e.colOf[s][t][k]; v != 0 {
		return v - 1
	}
	e.attrs = append(e.attrs, attrCol{s, k, t})
	e.colOf[s][t][k] = int32(len(e.attrs))
	return int32(len(e.attrs) - 1)
}

// attrValue returns the value of one attribute as a cell (slot unset).
func (e *encoder) attrValue(c *signal.Common, t signal.ValueType, v uint64, stable bool) (cell, error) {
	switch t {
	case signal.ValueString, signal.ValueBytes:
		return cell{k: pBytes, b: c.Bytes(signal.Str(v))}, nil
	case signal.ValueInt:
		return cell{k: pInt, u: v}, nil
	case signal.ValueDouble:
		return cell{k: pFloat, u: v}, nil
	case signal.ValueBool:
		return cell{k: pBool, u: boolBits(v != 0)}, nil
	case signal.ValueEmpty:
		return cell{k: pBool, u: 1}, nil
	}
	js, err := e.nestedJSON(c, t, v, stable)
	if err != nil {
		return cell{}, err
	}
	return cell{k: pBytes, b: js}, nil
}

// startChunk starts a chunk of rows: values of the previous chunk that
// alias the scratch are in their columns by now (endChunk).
func (e *encoder) startChunk() { e.scratch = e.scratch[:0] }

// common notes the resource and scope of chunk row ri. Rows of one
// resource and scope come in runs (rows are sorted by service; metrics,
// sorted by name, switch resource nearly every row), and the chunk's runs
// are written column by column when it ends (endCommon).
func (e *encoder) common(res, sc uint32, ri int) {
	row := e.base + ri
	if k := len(e.runs) - 1; k >= 0 {
		if r := &e.runs[k]; r.res == res && r.sc == sc && r.row+r.n == row {
			r.n++
			return
		}
	}
	e.runs = append(e.runs, commonRun{res: res, sc: sc, row: row, n: 1})
}

// commonN is n calls of common for rows ri to ri+n-1 of one resource and
// scope.
func (e *encoder) commonN(res, sc uint32, ri, n int) {
	row := e.base + ri
	if k := len(e.runs) - 1; k >= 0 {
		if r := &e.runs[k]; r.res == res && r.sc == sc && r.row+r.n == row {
			r.n += n
			return
		}
	}
	e.runs = append(e.runs, commonRun{res: res, sc: sc, row: row, n: n})
}

// commonRun is a run of rows of one resource and scope.
type commonRun struct {
	res, sc uint32
	row, n  int
}

// endCommon writes the resource and scope columns of the chunk's runs,
// one column at a time: a column's value changes rarely from one run to
// the next, so each run is mostly a compare in a short loop.
func (e *encoder) endCommon(c *signal.Common) {
	runs := e.runs
	if len(runs) == 0 {
		return
	}
	e.runs = runs[:0]
	cols := e.cols
	cb := &cols[cServiceName]
	for _, r := range runs {
		if e.resHasSvc[r.res] {
			cb.putN(pBytes, e.resFixed[2*r.res], 0, r.n)
		} else {
			cb.nulls(r.n)
		}
	}
	cb = &cols[cResourceSchemaURL]
	for _, r := range runs {
		cb.strN(e.resFixed[2*r.res+1], r.n)
	}
	cb = &cols[cResourceDropped]
	for _, r := range runs {
		cb.putN(pInt, nil, uint64(c.Resources[r.res].DroppedAttrs), r.n)
	}
	for j, col := range [3]int{cScopeName, cScopeVersion, cScopeSchemaURL} {
		cb = &cols[col]
		for _, r := range runs {
			cb.strN(e.scFixed[3*int(r.sc)+j], r.n)
		}
	}
	cb = &cols[cScopeDropped]
	for _, r := range runs {
		cb.putN(pInt, nil, uint64(c.Scopes[r.sc].DroppedAttrs), r.n)
	}
	attrCols := cols[e.nfixed:]
	if e.resTab == nil {
		for _, r := range runs {
			rr := e.resRange[r.res]
			for _, cl := range e.resCells[rr.Start:rr.End] {
				attrCols[cl.slot].setAtN(r.row, cl.k, cl.b, cl.u, r.n)
			}
		}
	} else {
		n := len(c.Resources)
		for i, slot := range e.resSlots {
			cellsByColumn(&attrCols[slot], e.resTab[i*n:(i+1)*n], e.resCells, runs, false)
		}
	}
	if e.scTab == nil {
		for _, r := range runs {
			sr := e.scRange[r.sc]
			for _, cl := range e.scCells[sr.Start:sr.End] {
				attrCols[cl.slot].setAtN(r.row, cl.k, cl.b, cl.u, r.n)
			}
		}
	} else {
		n := len(c.Scopes)
		for i, slot := range e.scSlots {
			cellsByColumn(&attrCols[slot], e.scTab[i*n:(i+1)*n], e.scCells, runs, true)
		}
	}
}

// cellsByColumn writes one resource (or, with scope, scope) attribute
// column of runs; tab is that column's cell of each resource or scope.
func cellsByColumn(cb *colBuf, tab []int32, cells []cell, runs []commonRun, scope bool) {
	for _, r := range runs {
		x := r.res
		if scope {
			x = r.sc
		}
		ci := tab[x]
		if ci < 0 {
			continue
		}
		cl := &cells[ci]
		if cb.pk == cl.k && cb.pu == cl.u && cl.k != pBytes && cb.total() == r.row {
			cb.pn += r.n // the usual case: the value goes on
			continue
		}
		cb.setAtN(r.row, cl.k, cl.b, cl.u, r.n)
	}
}

// attrRuns fills the record attribute columns of a chunk's rows (batch
// indexes in sort order; attr is the batch's per-record sets, series the
// rows' series ids in the same order, or nil). Rows whose
// sets are equal come in runs (the points of one series, sorted together)
// and each run is written once: one lookup and one column call per
// attribute of the run instead of per row.
func (e *encoder) attrRuns(c *signal.Common, attr []signal.Range, rows []int32, series []uint64) error {
	start := 0
	for i := 1; i <= len(rows); i++ {
		// Points of different series rarely share a set (only across
		// metrics or resources): their sets are not read. Two runs of
		// one set write the same file as one.
		if i < len(rows) && (series == nil || series[start] == series[i]) &&
			sameAttrs(c, attr[rows[start]], attr[rows[i]]) {
			continue
		}
		if err := e.recordAttrs(c, attr[rows[start]], start, rows[start], i-start); err != nil {
			return err
		}
		start = i
	}
	return nil
}

// sameAttrs reports whether attribute sets a and b hold the same words
// (keys, types and values in the same order). Sets whose strings are equal
// but in different places of the arena are not the same here: they are
// written as two runs, with the same result in the file (setStrN).
func sameAttrs(c *signal.Common, a, b signal.Range) bool {
	n := a.Len()
	if n != b.Len() {
		return false
	}
	if n == 0 || a == b {
		return true
	}
	at := &c.Attrs
	return slices.Equal(at.Val[a.Start:a.End], at.Val[b.Start:b.End]) &&
		slices.Equal(at.Key[a.Start:a.End], at.Key[b.Start:b.End]) &&
		slices.Equal(at.Type[a.Start:a.End], at.Type[b.Start:b.End])
}

// recordAttrs fills the record attribute columns of n chunk rows from ri,
// all with the set r; row (the batch index of the first) is unique per
// row of the file, for duplicate detection.
func (e *encoder) recordAttrs(c *signal.Common, r signal.Range, ri int, row int32, n int) error {
	attrCols := e.cols[e.nfixed:]
	at := e.base + ri
	stampV := row + 1
	e.ovfRow = e.ovfRow[:0]
	keys := c.Attrs.Key[r.Start:r.End]
	types := c.Attrs.Type[r.Start : r.End : r.Start+uint32(len(keys))]
	vals := c.Attrs.Val[r.Start : r.End : r.Start+uint32(len(keys))]
	slots := e.recSlot[r.Start : r.End : r.Start+uint32(len(keys))]
	stamp, lastSlot := e.stamp, e.lastSlot
	for j, k := range keys {
		slot := slots[j]
		if stamp[k] == stampV {
			// Duplicate key in one set: the last one wins.
			if prev := lastSlot[k]; prev < -1 {
				e.ovfRow[-2-prev] = -1
			} else {
				attrCols[prev].unsetLast(at, n)
			}
		}
		if slot < 0 {
			// Overflow: lastSlot is -2 - the entry's index in ovfRow.
			stamp[k], lastSlot[k] = stampV, -2-int32(len(e.ovfRow))
			e.ovfRow = append(e.ovfRow, int32(r.Start)+int32(j))
			continue
		}
		stamp[k], lastSlot[k] = stampV, slot
		cb := &attrCols[slot]
		switch t := types[j]; t {
		case signal.ValueString, signal.ValueBytes:
			s := signal.Str(vals[j])
			cb.setStrN(at, s, c.Bytes(s), n)
		case signal.ValueInt:
			cb.setAtN(at, pInt, nil, vals[j], n)
		case signal.ValueDouble:
			cb.setAtN(at, pFloat, nil, vals[j], n)
		case signal.ValueBool:
			cb.setAtN(at, pBool, nil, boolBits(vals[j] != 0), n)
		default:
			cl, err := e.attrValue(c, attrType(t), vals[j], false)
			if err != nil {
				return err
			}
			cb.setAtN(at, cl.k, cl.b, cl.u, n)
		}
	}
	if len(e.ovfRow) > 0 {
		cl, err := e.overflowCell(c, scopeRecord, e.ovfRow)
		if err != nil {
			return err
		}
		attrCols[cl.slot].setAtN(at, cl.k, cl.b, cl.u, n)
	}
	return nil
}

// maxColumns is the attribute column cap of a file.
func (e *encoder) maxColumns() int {
	if e.maxCols <= 0 {
		return DefaultMaxAttributeColumns
	}
	return e.maxCols
}

// capColumns keeps the columns keptColumns chooses and marks the others
// (colOf inOverflow) and the scopes that need an overflow column (ovfSlot
// 0, numbered by begin). Only files past the cap pay for the counting.
func (e *encoder) capColumns(c *signal.Common, recAttrs []signal.Range, svcID signal.KeyID, hasSvc bool) {
	e.freq = resetInt32(e.freq, len(e.attrs))
	count := func(s attrScope, r signal.Range) {
		for i := r.Start; i < r.End; i++ {
			k := c.Attrs.Key[i]
			if v := e.colOf[s][attrType(c.Attrs.Type[i])][k]; v > 0 && !(s == scopeResource && hasSvc && k == svcID && c.Attrs.Type[i] == signal.ValueString) {
				e.freq[v-1]++
			}
		}
	}
	for _, r := range c.Resources {
		count(scopeResource, r.Attrs)
	}
	for _, s := range c.Scopes {
		count(scopeScope, s.Attrs)
	}
	for _, r := range recAttrs {
		count(scopeRecord, r)
	}
	e.kept = keptColumns(e.kept, e.freq, e.maxColumns())
	kept := e.attrs[:0]
	next := 0 // index into e.kept
	for i, a := range e.attrs {
		if next < len(e.kept) && int(e.kept[next]) == i {
			next++
			kept = append(kept, a)
			e.colOf[a.scope][a.typ][a.key] = int32(len(kept))
			continue
		}
		e.colOf[a.scope][a.typ][a.key] = inOverflow
		e.ovfSlot[a.scope] = 0
	}
	e.attrs = kept
}

// slotUnset marks a record attribute whose slot begin has not resolved
// yet (slots are column indexes, or -1 for overflow).
const slotUnset = math.MinInt32

// inOverflow in colOf marks an attribute stored in the overflow column.
const inOverflow = -1

// overflowCell renders the attributes at idx (indexes into c.Attrs; -1
// skipped) as the JSON object of scope s's overflow column (see
// overflowColumns), in the arena for resources and scopes, else in the
// chunk scratch.
func (e *encoder) overflowCell(c *signal.Common, s attrScope, idx []int32) (cell, error) {
	slot := e.ovfSlot[s]
	buf := &e.scratch
	if s != scopeRecord {
		buf = &e.arena
	}
	off := len(*buf)
	b := append(*buf, '{')
	first := true
	for _, i := range idx {
		if i < 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, []byte(c.Keys.Name(c.Attrs.Key[i])))
		b = append(b, ':')
		var err error
		if b, err = appendAnyValueJSON(b, c, attrType(c.Attrs.Type[i]), c.Attrs.Val[i]); err != nil {
			*buf = b[:off]
			return cell{}, err
		}
	}
	b = append(b, '}')
	*buf = b
	js := b[off:len(b):len(b)]
	return cell{slot: slot, k: pBytes, b: js}, nil
}

// startFile lays out the columns of a file of schema (from begin) on w.
func (e *encoder) startFile(w io.Writer, table string, schema *parquet.Schema) error {
	footer, err := pqenc.Footer(schema, FileOptions(table)...)
	if err != nil {
		return err
	}
	e.footer = footer
	paths := schema.Columns()
	if len(paths) != len(e.cols) {
		return fmt.Errorf("lake: %d columns laid out for a schema of %d", len(e.cols), len(paths))
	}
	e.leaves = slices.Grow(e.leaves[:0], len(paths))[:len(paths)]
	bloom := bloomColumn(table)
	for j, p := range paths {
		leaf, _ := schema.Lookup(p...)
		li, err := pqenc.NewLeaf(leaf)
		if err != nil {
			return fmt.Errorf("lake: %w", err)
		}
		li.Path = p // Lookup's leaf path is its last element only
		if li.Dict {
			li.MaxDictBytes = MaxDictBytes
		}
		if len(p) == 1 && p[0] == bloom && bloom != "" {
			li.Bloom, li.BloomBitsPerValue = true, BloomBitsPerValue
		}
		e.leaves[j] = li
	}
	e.order = slices.Grow(e.order[:0], len(paths))[:len(paths)]
	for i := range e.cols {
		e.order[e.cols[i].leaf] = int32(i)
	}
	e.file = pqenc.NewFile(w, e.leaves, Codec())
	e.rgStart = 0
	e.resetColumns()
	return nil
}

func (e *encoder) resetColumns() {
	for i := range e.cols {
		cb := &e.cols[i]
		cb.col.Reset(&e.leaves[cb.leaf], Codec())
		cb.rows, cb.pk, cb.pb, cb.pn = 0, pNone, nil, 0
	}
	e.rgCuts = e.rgCuts[:0]
	k, _ := slices.BinarySearch(e.cuts, int64(e.rgStart+1))
	for _, x := range e.cuts[k:] {
		e.rgCuts = append(e.rgCuts, x-int64(e.rgStart))
	}
	if len(e.rgCuts) > 0 {
		for i := range e.cols {
			e.cols[i].col.SetCuts(e.rgCuts)
		}
	}
	e.base = 0
	e.runs = e.runs[:0]
}

// endChunk hands the pending values of a chunk of n rows to the columns,
// which copy them, so the chunk scratch can be reused.
func (e *encoder) endChunk(c *signal.Common, n int) {
	e.endCommon(c)
	e.base += n
	for i := range e.cols {
		e.cols[i].pad(e.base)
	}
}

// endRowGroup writes the row group's column chunks in schema order.
func (e *encoder) endRowGroup() error {
	if e.base == 0 {
		return nil
	}
	e.file.BeginRowGroup(e.base)
	for _, i := range e.order {
		if err := e.file.WriteChunk(&e.cols[i].col); err != nil {
			return err
		}
	}
	e.rgStart += e.base
	e.resetColumns()
	return nil
}

// finishFile ends the last row group and writes the footer with kv.
func (e *encoder) finishFile(kv []format.KeyValue) error {
	if err := e.endRowGroup(); err != nil {
		return err
	}
	clear(e.canon) // its keys alias the partition's batch
	e.cuts = e.cuts[:0]
	meta := *e.footer
	meta.KeyValueMetadata = kv
	err := e.file.Close(&meta)
	e.file = nil
	return err
}

// appendHex appends the lowercase hex of b to the chunk scratch and returns
// it, or nil when b is all zero (absent id).
func (e *encoder) hexID(b []byte) []byte {
	zero := true
	for _, x := range b {
		if x != 0 {
			zero = false
			break
		}
	}
	if zero {
		return nil
	}
	off := len(e.scratch)
	e.scratch = hex.AppendEncode(e.scratch, b)
	return e.scratch[off:len(e.scratch):len(e.scratch)]
}
