package format

import (
	"io"
	"math"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/sluice-dev/sluice/internal/signal"
)

// File's column reads: one loop over a chunk's pages as pageVals, from
// the typed decoder (decode.go) for chunks of the lake's own encodings,
// from parquet-go's checked pages (pageFromValues) for any other chunk, so
// every chunk is stored by the same code. The parquet-go path is also the
// oracle of the typed decoder (SetLegacyRead, TestTypedReadMatches).

// readColumn reads every value of one column chunk.
func (f *File) readColumn(cc parquet.ColumnChunk, rc *readCol, n int, c *signal.Common, base int, dst any) error {
	f.t.dictReady = false // a new chunk has a new dictionary
	if fcc, ok := cc.(*parquet.FileColumnChunk); ok && !f.legacy {
		if ref, ok := typedChunk(fcc); ok {
			d := &f.t.dec
			if err := d.open(fcc, ref); err != nil {
				return err
			}
			d.defRuns = rc.slot >= 0 // attrTyped takes levels as runs
			defer d.close()
			return f.readPages(d.next, rc, n, c, base, dst)
		}
	}
	pages := Pages(cc)
	defer pages.Close()
	var page parquet.Page
	defer func() { parquet.Release(page) }()
	return f.readPages(func() (*pageVals, error) {
		parquet.Release(page)
		var err error
		if page, err = pages.ReadPage(); err != nil {
			page = nil
			return nil, err
		}
		return &f.t.pv, f.t.pv.fromValues(page, rc, &f.t.vbuf)
	}, rc, n, c, base, dst)
}

// readPages stores the pages next gives (io.EOF after the last) of a
// column chunk of n rows.
func (f *File) readPages(next func() (*pageVals, error), rc *readCol, n int, c *signal.Common, base int, dst any) error {
	row := 0
	repeated := rc.kind.IsList() && rc.fixed >= 0
	for {
		p, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if repeated {
			row, err = f.listTyped(rc, p, row, n, base, dst)
		} else {
			if row+p.n > n {
				return errRows
			}
			err = f.consumeTyped(rc, p, row, c, base, dst)
			row += p.n
		}
		if err != nil {
			return err
		}
	}
	if row != n {
		return errRows
	}
	return nil
}

// fromValues sets p to a page decoded by parquet-go: its levels, and its
// non-null values in the slice of rc's physical type (a chunk in an
// encoding or codec the typed decoder does not read).
func (p *pageVals) fromValues(page parquet.Page, rc *readCol, vbuf *[]parquet.Value) error {
	nv := page.NumValues()
	if nv < 0 || nv > MaxPageValues {
		return pageErr("data page of %d values (at most %d)", nv, MaxPageValues)
	}
	n := int(nv)
	*p = pageVals{
		n: n, maxDef: rc.maxDef, typ: rc.ptype,
		i32: p.i32[:0], i64: p.i64[:0], f64: p.f64[:0], bools: p.bools[:0], dataBuf: p.dataBuf[:0], offs: append(p.offs[:0], 0),
		defsBuf: p.defsBuf[:0], repsBuf: p.repsBuf[:0],
	}
	hasDefs, hasReps := rc.maxDef > 0, rc.maxRep > 0
	vr := page.Values()
	if cap(*vbuf) == 0 {
		*vbuf = make([]parquet.Value, 1024)
	}
	buf := (*vbuf)[:cap(*vbuf)]
	read := 0
	for {
		k, err := vr.ReadValues(buf)
		if read += k; read > n {
			return errRows
		}
		for _, v := range buf[:k] {
			if hasDefs {
				p.defsBuf = append(p.defsBuf, uint8(v.DefinitionLevel()))
			}
			if hasReps {
				p.repsBuf = append(p.repsBuf, uint8(v.RepetitionLevel()))
			}
			if v.IsNull() {
				continue
			}
			switch p.typ {
			case pqformat.Boolean:
				p.bools = append(p.bools, v.Boolean())
			case pqformat.Int32:
				p.i32 = append(p.i32, v.Int32())
			case pqformat.Int64:
				p.i64 = append(p.i64, v.Int64())
			case pqformat.Double:
				p.f64 = append(p.f64, v.Double())
			case pqformat.ByteArray:
				p.dataBuf = append(p.dataBuf, v.ByteArray()...)
				p.offs = append(p.offs, uint32(len(p.dataBuf)))
			default:
				return shapeErr("values of type %s", p.typ)
			}
			p.nn++
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if k == 0 {
			return io.ErrNoProgress
		}
	}
	if read != n {
		return errRows
	}
	p.data = p.dataBuf
	if hasDefs {
		p.defs = p.defsBuf
	}
	if hasReps {
		p.reps = p.repsBuf
	}
	return nil
}

// skipTyped reports whether the typed path skips a fixed column of table:
// columns derived from others and not part of a batch (the sketch from
// the buckets, a span's duration from its times).
func skipTyped(table string, fixed int) bool {
	switch table {
	case TableMetrics:
		return fixed == mSketch
	case TableTraces:
		return fixed == tDuration
	}
	return false
}

// dictCache returns the per-index cache of the chunk's dictionary values,
// sized (and cleared) at the chunk's first dictionary page.
func (t *rowTmp) dictCache(p *pageVals) ([]uint64, []bool) {
	if !t.dictReady {
		t.dictReady = true
		t.dictX = resize(t.dictX, p.dict.n)
		t.dictOK = resize(t.dictOK, p.dict.n)
	}
	return t.dictX, t.dictOK
}

// spreadNum places the page's values at their rows of dst (p.n of them),
// 0 for nulls, converting each to dst's type as parquet.Value does.
func spreadNum[S, T int32 | int64 | uint32 | uint64 | float64](p *pageVals, src []S, dst []T) {
	dst = dst[:p.n]
	if p.defs == nil {
		src = src[:len(dst)]
		for i := range dst {
			dst[i] = T(src[i])
		}
		return
	}
	j := 0
	for i, l := range p.defs {
		if l != 0 {
			dst[i] = T(src[j])
			j++
		} else {
			dst[i] = 0
		}
	}
}

// runStrsTyped stores a page of strings that repeat row after row
// (resource and scope fields): repeated values share one Str of the tmp
// arena; a dictionary index equal to the previous one is that value.
func runStrsTyped(t *rowTmp, prev *signal.Str, dst []signal.Str, p *pageVals) {
	j := 0
	lastK := int32(-1)
	for i := range p.n {
		if !p.present(i) {
			continue
		}
		if p.idx != nil {
			k := p.idx[j]
			if k == lastK && *prev != 0 {
				dst[i] = *prev
				j++
				continue
			}
			lastK = k
		}
		dst[i] = t.strRun(prev, p.bytesAt(j))
		j++
	}
}

// strsTyped stores a page of strings: each value in the destination arena, a dictionary
// value once per chunk (arena strings are immutable, so rows share it).
func (f *File) strsTyped(c *signal.Common, dst []signal.Str, p *pageVals) {
	var dx []uint64
	var dok []bool
	if p.idx != nil {
		dx, dok = f.t.dictCache(p)
	}
	j := 0
	for i := range p.n {
		if !p.present(i) {
			continue
		}
		if p.idx != nil {
			k := p.idx[j]
			if !dok[k] {
				dx[k], dok[k] = uint64(c.AppendBytes(p.dict.value(k))), true
			}
			dst[i] = signal.Str(dx[k])
		} else {
			dst[i] = c.AppendBytes(p.bytesAt(j))
		}
		j++
	}
}

// traceIDs decodes the hex trace ids of a page into dst.
func traceIDs(dst []signal.TraceID, p *pageVals) error {
	j := 0
	for i := range p.n {
		if !p.present(i) {
			continue
		}
		x := p.bytesAt(j)
		j++
		if !hexTraceID(&dst[i], x) {
			return errBadID
		}
	}
	return nil
}

// spanIDs is traceIDs for span ids.
func spanIDs(dst []signal.SpanID, p *pageVals) error {
	j := 0
	for i := range p.n {
		if !p.present(i) {
			continue
		}
		x := p.bytesAt(j)
		j++
		if !hexSpanID(&dst[i], x) {
			return errBadID
		}
	}
	return nil
}

// consumeTyped stores one page of a non-repeated column, starting at row
// (relative to the row group).
func (f *File) consumeTyped(rc *readCol, p *pageVals, row int, c *signal.Common, base int, dst any) error {
	t := f.t
	if rc.slot >= 0 {
		return f.attrTyped(rc, p, row, c)
	}
	if rc.ovf != 0 {
		s := rc.ovf - 1
		runStrsTyped(t, &t.prevOvf[s], t.ovf[s][row:], p)
		return nil
	}
	switch rc.fixed {
	case cServiceName:
		runStrsTyped(t, &t.prevFixed[cServiceName], t.svc[row:], p)
		for i := range p.n {
			t.svcOK[row+i] = p.present(i)
		}
		return nil
	case cScopeName:
		runStrsTyped(t, &t.prevFixed[cScopeName], t.scName[row:], p)
		return nil
	case cScopeVersion:
		runStrsTyped(t, &t.prevFixed[cScopeVersion], t.scVersion[row:], p)
		return nil
	case cScopeSchemaURL:
		runStrsTyped(t, &t.prevFixed[cScopeSchemaURL], t.scURL[row:], p)
		return nil
	case cResourceSchemaURL:
		runStrsTyped(t, &t.prevFixed[cResourceSchemaURL], t.resURL[row:], p)
		return nil
	case cScopeDropped:
		spreadNum(p, p.i32, t.scDropped[row:])
		return nil
	case cResourceDropped:
		spreadNum(p, p.i32, t.resDropped[row:])
		return nil
	}
	b := base + row
	switch d := dst.(type) {
	case *signal.Logs:
		return f.logsTyped(d, rc.fixed, p, b, row)
	case *signal.Metrics:
		return f.metricsTyped(d, rc.fixed, p, b, row)
	case *signal.Spans:
		return f.spansTyped(d, rc.fixed, p, b)
	}
	return nil
}

func (f *File) logsTyped(d *signal.Logs, col int, p *pageVals, b, row int) error {
	k := p.n
	switch col {
	case lTimestamp:
		spreadNum(p, p.i64, d.Time[b:b+k])
	case lObserved:
		spreadNum(p, p.i64, d.ObservedTime[b:b+k])
	case lSeverityNumber:
		spreadNum(p, p.i32, d.SeverityNum[b:b+k])
	case lSeverityText:
		f.strsTyped(&d.Common, d.SeverityText[b:b+k], p)
	case lBody:
		j := 0
		for i := range k {
			if !p.present(i) {
				f.t.bodyNull[row+i] = true
				continue
			}
			d.Body[b+i] = uint64(d.AppendBytes(p.bytesAt(j)))
			j++
		}
	case lBodyType:
		j := 0
		for i := range k {
			if p.present(i) {
				f.t.bodyType[row+i] = f.t.str(p.bytesAt(j))
				j++
			}
		}
	case lTraceID:
		return traceIDs(d.TraceID[b:b+k], p)
	case lSpanID:
		return spanIDs(d.SpanID[b:b+k], p)
	case lFlags:
		spreadNum(p, p.i32, d.Flags[b:b+k])
	case lEventName:
		f.strsTyped(&d.Common, d.EventName[b:b+k], p)
	case lDropped:
		spreadNum(p, p.i32, d.DroppedAttrs[b:b+k])
	}
	return nil
}

func (f *File) spansTyped(d *signal.Spans, col int, p *pageVals, b int) error {
	k := p.n
	switch col {
	case tTraceID:
		return traceIDs(d.TraceID[b:b+k], p)
	case tSpanID:
		return spanIDs(d.SpanID[b:b+k], p)
	case tParentSpanID:
		return spanIDs(d.ParentSpanID[b:b+k], p)
	case tTraceState:
		f.strsTyped(&d.Common, d.TraceState[b:b+k], p)
	case tName:
		f.strsTyped(&d.Common, d.Name[b:b+k], p)
	case tKind:
		spreadNum(p, p.i32, d.Kind[b:b+k])
	case tStart:
		spreadNum(p, p.i64, d.StartTime[b:b+k])
	case tEnd:
		spreadNum(p, p.i64, d.EndTime[b:b+k])
	case tStatusCode:
		spreadNum(p, p.i32, d.StatusCode[b:b+k])
	case tStatusMessage:
		f.strsTyped(&d.Common, d.StatusMessage[b:b+k], p)
	case tFlags:
		spreadNum(p, p.i32, d.Flags[b:b+k])
	case tEvents, tLinks:
		kind, rs := NestedEvent, d.Events
		if col == tLinks {
			kind, rs = NestedLink, d.Links
		}
		return f.nestedTyped(&d.Common, kind, rs[b:b+k], p)
	case tDropped:
		spreadNum(p, p.i32, d.DroppedAttrs[b:b+k])
	case tDroppedEvents:
		spreadNum(p, p.i32, d.DroppedEvents[b:b+k])
	case tDroppedLinks:
		spreadNum(p, p.i32, d.DroppedLinks[b:b+k])
	}
	return nil
}

// nestedTyped parses the OTLP JSON arrays of a page (span events and
// links, exemplars) into c.Msgs; a null is an empty range.
func (f *File) nestedTyped(c *signal.Common, kind NestedKind, rs []signal.Range, p *pageVals) error {
	j := 0
	for i := range p.n {
		if !p.present(i) {
			m := uint32(len(c.Msgs))
			rs[i] = signal.Range{Start: m, End: m}
			continue
		}
		r, err := parseMsgsJSON(c, kind, p.bytesAt(j), &f.sink, f.addMsg)
		j++
		if err != nil {
			return err
		}
		rs[i] = r
	}
	return nil
}

func (f *File) metricsTyped(d *signal.Metrics, col int, p *pageVals, b, row int) error {
	t := f.t
	k := p.n
	switch col {
	case mTimestamp:
		spreadNum(p, p.i64, d.Time[b:b+k])
	case mStart:
		spreadNum(p, p.i64, d.StartTime[b:b+k])
	case mName:
		runStrsTyped(t, &t.prevDesc[0], t.name[row:], p)
	case mType:
		runStrsTyped(t, &t.prevDesc[1], t.mtype[row:], p)
	case mDescription:
		runStrsTyped(t, &t.prevDesc[2], t.desc[row:], p)
	case mUnit:
		runStrsTyped(t, &t.prevDesc[3], t.unit[row:], p)
	case mTemporality:
		runStrsTyped(t, &t.prevDesc[4], t.temp[row:], p)
	case mMetadata:
		runStrsTyped(t, &t.prevDesc[5], t.meta[row:], p)
	case mMonotonic:
		copy(t.mono[row:row+k], p.bools[:k])
	case mSeriesID:
		spreadNum(p, p.i64, d.SeriesID[b:b+k])
	case mValue:
		j := 0
		for i := range k {
			if p.present(i) {
				d.NumberType[b+i] = signal.ValueDouble
				d.Number[b+i] = math.Float64bits(p.f64[j])
				j++
			}
		}
	case mValueInt:
		j := 0
		for i := range k {
			if p.present(i) {
				t.valueInt[row+i], t.valueIntOK[row+i] = uint64(p.i64[j]), true
				j++
			}
		}
	case mFlags:
		spreadNum(p, p.i32, d.Flags[b:b+k])
	case mCount:
		spreadNum(p, p.i64, d.Count[b:b+k])
	case mSum, mMin, mMax:
		dstF, bit := d.Sum, signal.HasSum
		if col == mMin {
			dstF, bit = d.Min, signal.HasMin
		} else if col == mMax {
			dstF, bit = d.Max, signal.HasMax
		}
		j := 0
		for i := range k {
			if p.present(i) {
				dstF[b+i] = p.f64[j]
				d.Has[b+i] |= bit
				j++
			}
		}
	case mExpScale:
		spreadNum(p, p.i32, d.Scale[b:b+k])
	case mExpZeroCount:
		spreadNum(p, p.i64, d.ZeroCount[b:b+k])
	case mExpZeroThreshold:
		spreadNum(p, p.f64, d.ZeroThreshold[b:b+k])
	case mExpPosOffset:
		spreadNum(p, p.i32, d.PosOffset[b:b+k])
	case mExpNegOffset:
		spreadNum(p, p.i32, d.NegOffset[b:b+k])
	case mExemplars:
		return f.nestedTyped(&d.Common, NestedExemplar, d.Exemplars[b:b+k], p)
	case mCountFloat, mExpZeroCountFloat:
		dst := t.zeroF
		if col == mCountFloat {
			dst = t.countF
		}
		j := 0
		for i := range k {
			if p.present(i) {
				dst[row+i] = p.f64[j]
				if col == mCountFloat {
					t.countFOK[row+i] = true
				}
				j++
			}
		}
	case mResetHint:
		runStrsTyped(t, &t.prevHint, t.hint[row:], p)
	}
	return nil
}

// listTyped stores one page of a LIST column: a level with repetition
// level 0 starts a row, definition level 1 is an element.
func (f *File) listTyped(rc *readCol, p *pageVals, row, n, base int, dst any) (int, error) {
	d, ok := dst.(*signal.Metrics)
	if !ok {
		return row, nil
	}
	t := f.t
	ranges, u64, tmp, ok := f.listTarget(rc, d)
	if !ok {
		return row, nil
	}
	off := base
	if tmp {
		off = 0
	}
	j := 0
	for i := range p.n {
		if p.reps[i] == 0 {
			if row >= n {
				return row, errRows
			}
			var at uint32
			switch {
			case tmp:
				at = uint32(len(t.f64))
			case u64:
				at = uint32(len(d.U64))
			default:
				at = uint32(len(d.F64))
			}
			ranges[off+row] = signal.Range{Start: at, End: at}
			row++
		} else if row == 0 {
			return row, errRows
		}
		if p.defs[i] != 1 {
			continue
		}
		switch {
		case tmp:
			t.f64 = append(t.f64, p.f64[j])
		case u64:
			d.U64 = append(d.U64, uint64(p.i64[j]))
		default:
			d.F64 = append(d.F64, p.f64[j])
		}
		j++
		ranges[off+row-1].End++
	}
	return row, nil
}

// attrTyped collects the values of one page of an attribute column as
// changes (attrSet, attrNull), a run of null or present rows at a time.
func (f *File) attrTyped(rc *readCol, p *pageVals, row int, c *signal.Common) error {
	t := f.t
	if p.nn == 0 {
		if p.n > 0 {
			t.attrNull(rc, row)
		}
		return nil
	}
	defRuns := p.runsOfDefs(t.defRunsBuf)
	if p.defRuns == nil {
		t.defRunsBuf = defRuns
	}
	if p.dict != nil { // dictionary indexes, as runs (p.idx may be unset)
		dx, dok := t.dictCache(p)
		return f.attrDictTyped(rc, p, defRuns, row, c, dx, dok)
	}
	j := 0
	r := row
	for _, dr := range defRuns {
		if dr.v == 0 {
			// A run of nulls: only its first row can change anything
			// (attrNull notes where a value stops).
			t.attrNull(rc, r)
			r += int(dr.n)
			continue
		}
		for end := r + int(dr.n); r < end; r++ {
			var x uint64
			switch rc.typ {
			case signal.ValueInt:
				x = uint64(p.i64[j])
			case signal.ValueDouble:
				x = math.Float64bits(p.f64[j])
			case signal.ValueBool:
				if p.bools[j] {
					x = 1
				}
			case signal.ValueEmpty:
			default:
				var err error
				if x, err = f.attrBytes(rc, c, p.bytesAt(j)); err != nil {
					return err
				}
			}
			j++
			t.attrSet(rc, r, x)
		}
	}
	return nil
}

// attrDictTyped is attrTyped for a dictionary-encoded page (string,
// bytes, array and map attributes), by runs: a run of present rows takes
// the dictionary indexes a run at a time, so a value is looked up once
// per run; a run gives only its first row's change (attrSet keeps only
// changes), and a run that repeats the previous index nothing. Each
// dictionary value is stored once per chunk and the rows that repeat it
// share its Str.
func (f *File) attrDictTyped(rc *readCol, p *pageVals, defRuns []valRun, row int, c *signal.Common, dx []uint64, dok []bool) error {
	t := f.t
	runs, dict := p.runs, p.dict
	record := rc.scope == ScopeRecord
	slot := rc.slot
	// attrSet and attrNull on locals: the column's current value and its
	// scope's changes, stored back at the end (and read by attrBytes).
	chg := t.changes(rc.scope)
	ents := *chg
	isSet, cur := t.lastSet[slot], t.lastVal[slot]
	defer func() { *chg, t.lastSet[slot], t.lastVal[slot] = ents, isSet, cur }()
	lastK := int32(-1)
	ri, left := 0, 0 // the current index run, and its values not yet taken
	r := row
	for _, dr := range defRuns {
		if dr.v == 0 {
			if isSet {
				isSet = false
				ents = append(ents, entry{row: uint32(r), slot: uint32(slot) | absentSlot})
			}
			lastK = -1
			r += int(dr.n)
			continue
		}
		// Rows [r, end) are present.
		for end := r + int(dr.n); r < end; {
			for left == 0 {
				if ri >= len(runs) {
					return shapeErr("dictionary indexes end before the page's values")
				}
				left = int(runs[ri].n)
				ri++
			}
			k := runs[ri-1].v
			m := min(left, end-r)
			left -= m
			if k == lastK {
				r += m
				continue
			}
			lastK = k
			x := dx[k]
			if !dok[k] {
				t.lastSet[slot], t.lastVal[slot] = isSet, cur
				var err error
				if x, err = f.attrBytes(rc, c, dict.value(k)); err != nil {
					return err
				}
				dx[k], dok[k] = x, true
			} else if !record {
				// prevAttr follows, for strRun on plain pages after a
				// dictionary fallback.
				t.prevAttr[slot] = signal.Str(x)
			}
			if !isSet || cur != x {
				isSet, cur = true, x
				ents = append(ents, entry{row: uint32(r), slot: uint32(slot), val: x})
			}
			r += m
		}
	}
	return nil
}
