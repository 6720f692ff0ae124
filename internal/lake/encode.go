package lake

import (
	"encoding/hex"
	"fmt"
	"math"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/signal"
)

// colBuf collects one chunk of values for one leaf column.
type colBuf struct {
	leaf int
	null parquet.Value // a null at this column's levels
	v    []parquet.Value
}

func (c *colBuf) setLeaf(leaf int) {
	c.leaf = leaf
	c.null = parquet.Value{}.Level(0, 0, leaf)
	c.v = c.v[:0]
}

func (c *colBuf) req(v parquet.Value) { c.v = append(c.v, v.Level(0, 0, c.leaf)) }
func (c *colBuf) opt(v parquet.Value) { c.v = append(c.v, v.Level(0, 1, c.leaf)) }
func (c *colBuf) addNull()            { c.v = append(c.v, c.null) }
func (c *colBuf) i32(v int32)         { c.req(parquet.Int32Value(v)) }
func (c *colBuf) i64(v int64)         { c.req(parquet.Int64Value(v)) }
func (c *colBuf) u32(v uint32)        { c.req(parquet.Int32Value(int32(v))) }
func (c *colBuf) u64(v uint64)        { c.req(parquet.Int64Value(int64(v))) }
func (c *colBuf) boolean(v bool)      { c.req(parquet.BooleanValue(v)) }
func (c *colBuf) strReq(b []byte)     { c.req(parquet.ByteArrayValue(b)) }
func (c *colBuf) optF64(v float64)    { c.opt(parquet.DoubleValue(v)) }
func (c *colBuf) optI64(v int64)      { c.opt(parquet.Int64Value(v)) }
func (c *colBuf) optU64(v uint64)     { c.opt(parquet.Int64Value(int64(v))) }
func (c *colBuf) optI32(v int32)      { c.opt(parquet.Int32Value(v)) }
func (c *colBuf) optBytes(b []byte)   { c.opt(parquet.ByteArrayValue(b)) }

// time stores 0 as null: OTLP uses 0 for "unset".
func (c *colBuf) time(t int64) {
	if t == 0 {
		c.addNull()
		return
	}
	c.opt(parquet.Int64Value(t))
}

// str stores "" as null: OTLP (proto3) cannot tell them apart either.
func (c *colBuf) str(b []byte) {
	if len(b) == 0 {
		c.addNull()
		return
	}
	c.opt(parquet.ByteArrayValue(b))
}

func (c *colBuf) listU64(s []uint64) {
	if len(s) == 0 {
		c.addNull()
		return
	}
	c.v = append(c.v, parquet.Int64Value(int64(s[0])).Level(0, 1, c.leaf))
	for _, x := range s[1:] {
		c.v = append(c.v, parquet.Int64Value(int64(x)).Level(1, 1, c.leaf))
	}
}

func (c *colBuf) listF64(s []float64) {
	if len(s) == 0 {
		c.addNull()
		return
	}
	c.v = append(c.v, parquet.DoubleValue(s[0]).Level(0, 1, c.leaf))
	for _, x := range s[1:] {
		c.v = append(c.v, parquet.DoubleValue(x).Level(1, 1, c.leaf))
	}
}

// listF64Stride writes every other element of s starting at off (summary
// quantiles are stored as (quantile, value) pairs).
func (c *colBuf) listF64Stride(s []float64, off int) {
	if len(s) <= off {
		c.addNull()
		return
	}
	rep := 0
	for i := off; i < len(s); i += 2 {
		c.v = append(c.v, parquet.DoubleValue(s[i]).Level(rep, 1, c.leaf))
		rep = 1
	}
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
	val  parquet.Value
}

// encoder turns one partition batch into one Parquet file. It is reused
// across files so that its buffers are allocated once.
type encoder struct {
	nfixed int
	cols   []colBuf // fixed columns, then one per attribute slot
	attrs  []attrCol

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

	stamp    []int32 // per key: 1 + the row or set that last used it
	lastSlot []int32 // per key: the slot it used there

	arena   []byte // JSON of resource and scope attributes, per file
	scratch []byte // per chunk
	perm    []int32
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
	for _, r := range recAttrs {
		for i := r.Start; i < r.End; i++ {
			e.slot(scopeRecord, c.Attrs.Key[i], c.Attrs.Type[i])
		}
	}

	// Bounded schema: past maxCols, the least used attributes go to
	// their scope's overflow column.
	e.ovfSlot = [numAttrScopes]int32{-1, -1, -1}
	nattr := len(e.attrs)
	if nattr > e.maxColumns() {
		e.capColumns(c, recAttrs, svcID, hasSvcKey)
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
		e.cols[i].setLeaf(leaf.ColumnIndex)
	}
	for i, name := range attrNames {
		leaf, ok := schema.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("lake: column %q missing from schema", name)
		}
		e.cols[len(fixed)+i].setLeaf(leaf.ColumnIndex)
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
			v, err := e.attrValue(c, t, c.Attrs.Val[i], e.cols[e.nfixed+int(slot)].leaf, true)
			if err != nil {
				return nil, err
			}
			e.resCells = append(e.resCells, cell{slot, v})
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
			v, err := e.attrValue(c, t, c.Attrs.Val[i], e.cols[e.nfixed+int(slot)].leaf, true)
			if err != nil {
				return nil, err
			}
			e.scCells = append(e.scCells, cell{slot, v})
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
	// Record rows stamp with negative numbers from here on, so they never
	// meet a set stamp.
	clear(e.stamp)
	return schema, nil
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

// attrValue builds the value of one attribute at the given leaf's levels.
func (e *encoder) attrValue(c *signal.Common, t signal.ValueType, v uint64, leaf int, stable bool) (parquet.Value, error) {
	var pv parquet.Value
	switch t {
	case signal.ValueString, signal.ValueBytes:
		pv = parquet.ByteArrayValue(c.Bytes(signal.Str(v)))
	case signal.ValueInt:
		pv = parquet.Int64Value(int64(v))
	case signal.ValueDouble:
		pv = parquet.DoubleValue(math.Float64frombits(v))
	case signal.ValueBool:
		pv = parquet.BooleanValue(v != 0)
	case signal.ValueEmpty:
		pv = parquet.BooleanValue(true)
	default:
		js, err := e.nestedJSON(c, t, v, stable)
		if err != nil {
			return pv, err
		}
		pv = parquet.ByteArrayValue(js)
	}
	return pv.Level(0, 1, leaf), nil
}

// startChunk prepares the buffers for n rows: fixed columns empty, attribute
// columns all null.
func (e *encoder) startChunk(n int) {
	e.scratch = e.scratch[:0]
	for i := range e.cols[:e.nfixed] {
		e.cols[i].v = e.cols[i].v[:0]
	}
	for i := range e.cols[e.nfixed:] {
		cb := &e.cols[e.nfixed+i]
		cb.v = slices.Grow(cb.v[:0], n)[:n]
		nv := cb.null
		for j := range cb.v {
			cb.v[j] = nv
		}
	}
}

// common fills the resource and scope columns of chunk row ri.
func (e *encoder) common(c *signal.Common, res, sc uint32, ri int) {
	r := &c.Resources[res]
	s := &c.Scopes[sc]
	cols := e.cols
	if e.resHasSvc[res] {
		cols[cServiceName].opt(parquet.ByteArrayValue(c.Bytes(e.resService[res])))
	} else {
		cols[cServiceName].addNull()
	}
	cols[cScopeName].str(c.Bytes(s.Name))
	cols[cScopeVersion].str(c.Bytes(s.Version))
	cols[cScopeSchemaURL].str(c.Bytes(s.SchemaURL))
	cols[cScopeDropped].u32(s.DroppedAttrs)
	cols[cResourceSchemaURL].str(c.Bytes(r.SchemaURL))
	cols[cResourceDropped].u32(r.DroppedAttrs)
	attrCols := cols[e.nfixed:]
	rr := e.resRange[res]
	for _, cl := range e.resCells[rr.Start:rr.End] {
		attrCols[cl.slot].v[ri] = cl.val
	}
	sr := e.scRange[sc]
	for _, cl := range e.scCells[sr.Start:sr.End] {
		attrCols[cl.slot].v[ri] = cl.val
	}
}

// recordAttrs fills the record attribute columns of chunk row ri; row is
// unique per row of the file, for duplicate detection.
func (e *encoder) recordAttrs(c *signal.Common, r signal.Range, ri int, row int32) error {
	attrCols := e.cols[e.nfixed:]
	stampV := row + 1
	e.ovfRow = e.ovfRow[:0]
	for i := r.Start; i < r.End; i++ {
		k := c.Attrs.Key[i]
		t := c.Attrs.Type[i]
		if int(t) >= numValueTypes {
			t = signal.ValueEmpty
		}
		slot := e.colOf[scopeRecord][t][k] - 1
		if e.stamp[k] == stampV {
			// Duplicate key in one set: the last one wins.
			if prev := e.lastSlot[k]; prev < -1 {
				e.ovfRow[-2-prev] = -1
			} else if prev != slot {
				attrCols[prev].v[ri] = attrCols[prev].null
			}
		}
		if slot < 0 {
			// Overflow: lastSlot is -2 - the entry's index in ovfRow.
			e.stamp[k], e.lastSlot[k] = stampV, -2-int32(len(e.ovfRow))
			e.ovfRow = append(e.ovfRow, int32(i))
			continue
		}
		cb := &attrCols[slot]
		e.stamp[k], e.lastSlot[k] = stampV, slot
		v, err := e.attrValue(c, t, c.Attrs.Val[i], cb.leaf, false)
		if err != nil {
			return err
		}
		cb.v[ri] = v
	}
	if len(e.ovfRow) > 0 {
		cl, err := e.overflowCell(c, scopeRecord, e.ovfRow)
		if err != nil {
			return err
		}
		attrCols[cl.slot].v[ri] = cl.val
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
	return cell{slot, parquet.ByteArrayValue(js).Level(0, 1, e.cols[e.nfixed+int(slot)].leaf)}, nil
}

// writeChunk hands the chunk's values to the Parquet column writers.
func (e *encoder) writeChunk(pw *parquet.Writer) error {
	cws := pw.ColumnWriters()
	for i := range e.cols {
		cb := &e.cols[i]
		if _, err := cws[cb.leaf].WriteRowValues(cb.v); err != nil {
			return err
		}
	}
	return nil
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
