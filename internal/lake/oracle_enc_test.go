package lake

// The oracle: the parquet-go encoder that wrote ingest files before the
// typed page encoder (pqenc) took over, one parquet.Value per cell, kept
// verbatim (renamed) so oracle tests can write the same batches through
// both and compare the files.

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"math"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// valCol collects one chunk of values for one leaf column.
type valCol struct {
	leaf int
	null parquet.Value // a null at this column's levels
	v    []parquet.Value
}

func (c *valCol) setLeaf(leaf int) {
	c.leaf = leaf
	c.null = parquet.Value{}.Level(0, 0, leaf)
	c.v = c.v[:0]
}

func (c *valCol) req(v parquet.Value) { c.v = append(c.v, v.Level(0, 0, c.leaf)) }
func (c *valCol) opt(v parquet.Value) { c.v = append(c.v, v.Level(0, 1, c.leaf)) }
func (c *valCol) addNull()            { c.v = append(c.v, c.null) }
func (c *valCol) i32(v int32)         { c.req(parquet.Int32Value(v)) }
func (c *valCol) i64(v int64)         { c.req(parquet.Int64Value(v)) }
func (c *valCol) u32(v uint32)        { c.req(parquet.Int32Value(int32(v))) }
func (c *valCol) u64(v uint64)        { c.req(parquet.Int64Value(int64(v))) }
func (c *valCol) boolean(v bool)      { c.req(parquet.BooleanValue(v)) }
func (c *valCol) strReq(b []byte)     { c.req(parquet.ByteArrayValue(b)) }
func (c *valCol) optF64(v float64)    { c.opt(parquet.DoubleValue(v)) }
func (c *valCol) optI64(v int64)      { c.opt(parquet.Int64Value(v)) }
func (c *valCol) optU64(v uint64)     { c.opt(parquet.Int64Value(int64(v))) }
func (c *valCol) optI32(v int32)      { c.opt(parquet.Int32Value(v)) }
func (c *valCol) optBytes(b []byte)   { c.opt(parquet.ByteArrayValue(b)) }

// time stores 0 as null: OTLP uses 0 for "unset".
func (c *valCol) time(t int64) {
	if t == 0 {
		c.addNull()
		return
	}
	c.opt(parquet.Int64Value(t))
}

// str stores "" as null: OTLP (proto3) cannot tell them apart either.
func (c *valCol) str(b []byte) {
	if len(b) == 0 {
		c.addNull()
		return
	}
	c.opt(parquet.ByteArrayValue(b))
}

func (c *valCol) listU64(s []uint64) {
	if len(s) == 0 {
		c.addNull()
		return
	}
	c.v = append(c.v, parquet.Int64Value(int64(s[0])).Level(0, 1, c.leaf))
	for _, x := range s[1:] {
		c.v = append(c.v, parquet.Int64Value(int64(x)).Level(1, 1, c.leaf))
	}
}

func (c *valCol) listF64(s []float64) {
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
func (c *valCol) listF64Stride(s []float64, off int) {
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

// valCell is a resolved attribute of a resource or scope: the slot of its
// column and its value at that column's levels.
type valCell struct {
	slot int32
	val  parquet.Value
}

// valEncoder turns one partition batch into one Parquet file. It is reused
// across files so that its buffers are allocated once.
type valEncoder struct {
	nfixed int
	cols   []valCol // fixed columns, then one per attribute slot
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

	resCells   []valCell
	resRange   []signal.Range // per resource, into resCells
	resService []signal.Str   // service.name when a string, else 0
	resHasSvc  []bool
	scCells    []valCell
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

// nestedJSON returns the JSON of the array or map value v, cached per file.
// Stable results (resource and scope cells, used by every chunk) always stay
// in the arena; others may land in the chunk scratch.
func (e *valEncoder) nestedJSON(c *signal.Common, t signal.ValueType, v uint64, stable bool) ([]byte, error) {
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
func (e *valEncoder) begin(table string, fixed []fixedCol, c *signal.Common, recAttrs []signal.Range) (*parquet.Schema, error) {
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
		e.cols = append(e.cols[:cap(e.cols)], make([]valCol, n-cap(e.cols))...)
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
			e.resCells = append(e.resCells, valCell{slot, v})
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
			e.scCells = append(e.scCells, valCell{slot, v})
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

// slot returns the attribute slot of (scope, key, type), adding it.
func (e *valEncoder) slot(s attrScope, k signal.KeyID, t signal.ValueType) int32 {
	t = attrType(t) // unknown types cannot come from a decoder
	if v := e.colOf[s][t][k]; v != 0 {
		return v - 1
	}
	e.attrs = append(e.attrs, attrCol{s, k, t})
	e.colOf[s][t][k] = int32(len(e.attrs))
	return int32(len(e.attrs) - 1)
}

// attrValue builds the value of one attribute at the given leaf's levels.
func (e *valEncoder) attrValue(c *signal.Common, t signal.ValueType, v uint64, leaf int, stable bool) (parquet.Value, error) {
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
func (e *valEncoder) startChunk(n int) {
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
func (e *valEncoder) common(c *signal.Common, res, sc uint32, ri int) {
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
func (e *valEncoder) recordAttrs(c *signal.Common, r signal.Range, ri int, row int32) error {
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
func (e *valEncoder) maxColumns() int {
	if e.maxCols <= 0 {
		return DefaultMaxAttributeColumns
	}
	return e.maxCols
}

// capColumns keeps the columns keptColumns chooses and marks the others
// (colOf inOverflow) and the scopes that need an overflow column (ovfSlot
// 0, numbered by begin). Only files past the cap pay for the counting.
func (e *valEncoder) capColumns(c *signal.Common, recAttrs []signal.Range, svcID signal.KeyID, hasSvc bool) {
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

// overflowCell renders the attributes at idx (indexes into c.Attrs; -1
// skipped) as the JSON object of scope s's overflow column (see
// overflowColumns), in the arena for resources and scopes, else in the
// chunk scratch.
func (e *valEncoder) overflowCell(c *signal.Common, s attrScope, idx []int32) (valCell, error) {
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
			return valCell{}, err
		}
	}
	b = append(b, '}')
	*buf = b
	js := b[off:len(b):len(b)]
	return valCell{slot, parquet.ByteArrayValue(js).Level(0, 1, e.cols[e.nfixed+int(slot)].leaf)}, nil
}

// writeChunk hands the chunk's values to the Parquet column writers.
func (e *valEncoder) writeChunk(pw *parquet.Writer) error {
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
func (e *valEncoder) hexID(b []byte) []byte {
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

// serviceRanks ranks the resources of c by service name, for sorting.
func (e *valEncoder) serviceRanks(c *signal.Common) []int32 {
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

func (e *valEncoder) identityPerm(n int) []int32 {
	e.perm = slices.Grow(e.perm[:0], n)[:n]
	for i := range e.perm {
		e.perm[i] = int32(i)
	}
	return e.perm
}

// chunks runs fill over the sorted rows in chunks and writes them, closing
// a row group every rgRows rows.
func (e *valEncoder) chunks(pw *parquet.Writer, perm []int32, rgRows int, fill func(rows []int32) error) error {
	inGroup := 0
	step := min(chunkRows, rgRows)
	for a := 0; a < len(perm); a += step {
		rows := perm[a:min(a+step, len(perm))]
		e.startChunk(len(rows))
		if err := fill(rows); err != nil {
			return err
		}
		if err := e.writeChunk(pw); err != nil {
			return err
		}
		if inGroup += len(rows); inGroup >= rgRows {
			if err := pw.Flush(); err != nil {
				return err
			}
			inGroup = 0
		}
	}
	return nil
}

func (e *valEncoder) encodeLogs(pw func(*parquet.Schema) (*parquet.Writer, error), l *signal.Logs, ptime []int64, rgRows int) (*parquet.Writer, *parquet.Schema, error) {
	schema, err := e.begin(TableLogs, logCols, &l.Common, l.Attr)
	if err != nil {
		return nil, nil, err
	}
	rank := e.serviceRanks(&l.Common)
	perm := e.identityPerm(l.Len())
	slices.SortFunc(perm, func(a, b int32) int {
		if c := cmp.Compare(rank[l.Resource[a]], rank[l.Resource[b]]); c != 0 {
			return c
		}
		if c := cmp.Compare(ptime[a], ptime[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	w, err := pw(schema)
	if err != nil {
		return nil, nil, err
	}
	c := &l.Common
	cols := e.cols
	err = e.chunks(w, perm, rgRows, func(rows []int32) error {
		for ri, r := range rows {
			e.common(c, l.Resource[r], l.Scope[r], ri)
			cols[lTimestamp].time(l.Time[r])
			cols[lObserved].time(l.ObservedTime[r])
			cols[lSeverityNumber].i32(l.SeverityNum[r])
			cols[lSeverityText].str(c.Bytes(l.SeverityText[r]))
			switch bt := l.BodyType[r]; bt {
			case signal.ValueString:
				// A string body is stored verbatim; the empty string
				// is kept apart from "no body" by body_type.
				cols[lBody].opt(parquet.ByteArrayValue(c.Bytes(signal.Str(l.Body[r]))))
				cols[lBodyType].addNull()
			case signal.ValueEmpty:
				cols[lBody].addNull()
				cols[lBodyType].strReqOpt(typeNames[bt])
			default:
				off := len(e.scratch)
				var err error
				if e.scratch, err = appendAnyValueJSON(e.scratch, c, bt, l.Body[r]); err != nil {
					return err
				}
				cols[lBody].opt(parquet.ByteArrayValue(e.scratch[off:len(e.scratch):len(e.scratch)]))
				cols[lBodyType].strReqOpt(typeNames[min(int(bt), len(typeNames)-1)])
			}
			cols[lTraceID].str(e.hexID(l.TraceID[r][:]))
			cols[lSpanID].str(e.hexID(l.SpanID[r][:]))
			cols[lFlags].u32(l.Flags[r])
			cols[lEventName].str(c.Bytes(l.EventName[r]))
			cols[lDropped].u32(l.DroppedAttrs[r])
			if err := e.recordAttrs(c, l.Attr[r], ri, r); err != nil {
				return err
			}
		}
		return nil
	})
	return w, schema, err
}

// strReqOpt stores a non-empty constant in an optional column.
func (c *valCol) strReqOpt(b []byte) { c.opt(parquet.ByteArrayValue(b)) }

func (e *valEncoder) encodeMetrics(pw func(*parquet.Schema) (*parquet.Writer, error), m *signal.Metrics, rgRows int, sk *sketcher) (*parquet.Writer, *parquet.Schema, error) {
	// Metric metadata lives in Attrs too but has its own JSON column, so
	// only point attribute sets are flattened.
	schema, err := e.begin(TableMetrics, metricCols, &m.Common, m.Attr)
	if err != nil {
		return nil, nil, err
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
	perm := e.identityPerm(m.Len())
	slices.SortFunc(perm, func(a, b int32) int {
		if c := cmp.Compare(drank[m.Desc[a]], drank[m.Desc[b]]); c != 0 {
			return c
		}
		if c := cmp.Compare(m.SeriesID[a], m.SeriesID[b]); c != 0 {
			return c
		}
		if c := cmp.Compare(m.Time[a], m.Time[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	// Metadata JSON once per descriptor.
	metaJSON := make([]signal.Range, len(m.Descs)) // into e.arena as byte offsets
	for i, d := range m.Descs {
		if d.Metadata.Len() == 0 {
			continue
		}
		off := len(e.arena)
		if e.arena, err = otlp.AppendAttrsJSON(e.arena, c, d.Metadata); err != nil {
			return nil, nil, err
		}
		metaJSON[i] = signal.Range{Start: uint32(off), End: uint32(len(e.arena))}
	}
	w, err := pw(schema)
	if err != nil {
		return nil, nil, err
	}
	cols := e.cols
	err = e.chunks(w, perm, rgRows, func(rows []int32) error {
		for ri, r := range rows {
			d := &m.Descs[m.Desc[r]]
			e.common(c, m.Resource[r], m.Scope[r], ri)
			cols[mTimestamp].time(m.Time[r])
			cols[mStart].time(m.StartTime[r])
			cols[mName].str(c.Bytes(d.Name))
			cols[mType].strReq(metricTypeNames[min(int(d.Type), len(metricTypeNames)-1)])
			cols[mDescription].str(c.Bytes(d.Description))
			cols[mUnit].str(c.Bytes(d.Unit))
			cols[mTemporality].strReq(temporalityNames[min(int(d.Temporality), len(temporalityNames)-1)])
			cols[mMonotonic].boolean(d.Monotonic)
			cols[mSeriesID].u64(m.SeriesID[r])
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
			cols[mFlags].u32(m.Flags[r])
			isDist := d.Type == signal.MetricHistogram || d.Type == signal.MetricExponentialHistogram || d.Type == signal.MetricSummary
			fc := m.F64[m.FloatCounts[r].Start:m.FloatCounts[r].End] // a float histogram's: count, [zero,] buckets
			isFloat := len(fc) > 0
			if isDist && !isFloat {
				cols[mCount].optU64(m.Count[r])
			} else {
				cols[mCount].addNull()
			}
			has := m.Has[r]
			valOptHas(&cols[mSum], has&signal.HasSum != 0, m.Sum[r])
			valOptHas(&cols[mMin], has&signal.HasMin != 0, m.Min[r])
			valOptHas(&cols[mMax], has&signal.HasMax != 0, m.Max[r])
			br, pr, nr := m.BucketCounts[r], m.PosCounts[r], m.NegCounts[r]
			if isFloat {
				cols[mCountFloat].optF64(fc[0])
				if d.Type == signal.MetricExponentialHistogram {
					np := int(pr.Len())
					cols[mZeroCountFloat].optF64(fc[1])
					cols[mBucketsFloat].addNull()
					cols[mPosCountsFloat].listF64(fc[2 : 2+np])
					cols[mNegCountsFloat].listF64(fc[2+np:])
				} else {
					cols[mZeroCountFloat].addNull()
					cols[mBucketsFloat].listF64(fc[1:])
					cols[mPosCountsFloat].addNull()
					cols[mNegCountsFloat].addNull()
				}
				br.End, pr.End, nr.End = br.Start, pr.Start, nr.Start
			} else {
				for _, c := range []int{mCountFloat, mZeroCountFloat, mBucketsFloat, mPosCountsFloat, mNegCountsFloat} {
					cols[c].addNull()
				}
			}
			switch has & signal.HintMask {
			case signal.HintReset:
				cols[mResetHint].strReqOpt([]byte("yes"))
			case signal.HintNoReset:
				cols[mResetHint].strReqOpt([]byte("no"))
			case signal.HintGauge:
				cols[mResetHint].strReqOpt([]byte("gauge"))
			default:
				cols[mResetHint].addNull()
			}
			cols[mBucketCounts].listU64(m.U64[br.Start:br.End])
			fr := m.Bounds[r]
			cols[mBounds].listF64(m.F64[fr.Start:fr.End])
			if d.Type == signal.MetricExponentialHistogram {
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
			cols[mExpPosCounts].listU64(m.U64[pr.Start:pr.End])
			cols[mExpNegCounts].listU64(m.U64[nr.Start:nr.End])
			qr := m.Quantiles[r]
			q := m.F64[qr.Start:qr.End]
			cols[mQuantiles].listF64Stride(q, 0)
			cols[mQuantileValues].listF64Stride(q, 1)
			if er := m.Exemplars[r]; er.Len() > 0 {
				off := len(e.scratch)
				var err error
				if e.scratch, err = appendMsgsJSON(e.scratch, c, nestedExemplar, er, &e.msgs); err != nil {
					return err
				}
				cols[mExemplars].opt(parquet.ByteArrayValue(e.scratch[off:len(e.scratch):len(e.scratch)]))
			} else {
				cols[mExemplars].addNull()
			}
			if mj := metaJSON[m.Desc[r]]; mj.End > mj.Start {
				cols[mMetadata].opt(parquet.ByteArrayValue(e.arena[mj.Start:mj.End:mj.End]))
			} else {
				cols[mMetadata].addNull()
			}
			if b, ok := sk.encode(m, int(r), d.Type, &e.scratch); ok {
				cols[mSketch].optBytes(b)
			} else {
				cols[mSketch].addNull()
			}
			if err := e.recordAttrs(c, m.Attr[r], ri, r); err != nil {
				return err
			}
		}
		return nil
	})
	return w, schema, err
}

func valOptHas(c *valCol, has bool, v float64) {
	if has {
		c.optF64(v)
	} else {
		c.addNull()
	}
}

func (e *valEncoder) encodeSpans(pw func(*parquet.Schema) (*parquet.Writer, error), s *signal.Spans, ptime []int64, rgRows int) (*parquet.Writer, *parquet.Schema, error) {
	schema, err := e.begin(TableTraces, spanCols, &s.Common, s.Attr)
	if err != nil {
		return nil, nil, err
	}
	c := &s.Common
	rank := e.serviceRanks(c)
	perm := e.identityPerm(s.Len())
	slices.SortFunc(perm, func(a, b int32) int {
		if c := cmp.Compare(rank[s.Resource[a]], rank[s.Resource[b]]); c != 0 {
			return c
		}
		if c := cmp.Compare(ptime[a], ptime[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	w, err := pw(schema)
	if err != nil {
		return nil, nil, err
	}
	cols := e.cols
	err = e.chunks(w, perm, rgRows, func(rows []int32) error {
		for ri, r := range rows {
			e.common(c, s.Resource[r], s.Scope[r], ri)
			cols[tTraceID].str(e.hexID(s.TraceID[r][:]))
			cols[tSpanID].str(e.hexID(s.SpanID[r][:]))
			cols[tParentSpanID].str(e.hexID(s.ParentSpanID[r][:]))
			cols[tTraceState].str(c.Bytes(s.TraceState[r]))
			cols[tName].str(c.Bytes(s.Name[r]))
			cols[tKind].i32(s.Kind[r])
			cols[tStart].time(s.StartTime[r])
			cols[tEnd].time(s.EndTime[r])
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
				cols[x.col].opt(parquet.ByteArrayValue(e.scratch[off:len(e.scratch):len(e.scratch)]))
			}
			cols[tDropped].u32(s.DroppedAttrs[r])
			cols[tDroppedEvents].u32(s.DroppedEvents[r])
			cols[tDroppedLinks].u32(s.DroppedLinks[r])
			if err := e.recordAttrs(c, s.Attr[r], ri, r); err != nil {
				return err
			}
		}
		return nil
	})
	return w, schema, err
}
