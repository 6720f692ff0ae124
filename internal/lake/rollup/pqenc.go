package rollup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// This file encodes metrics_rollup files column by column. A rollup row
// repeats its series' descriptor and labels (tens of label columns out of
// ~100 in a file) in every window row, and rows are sorted by series, so
// most columns are long runs of one value. parquet-go's writer takes one
// parquet.Value per row and column and hashes every dictionary value
// again; here a run costs one level run and one dictionary-index run,
// whatever its length.
//
// The output is what parquet-go writes for the same schema and options:
// data pages v2 with CRCs, a PLAIN dictionary page and RLE_DICTIONARY
// data for dictionary-encoded columns, PLAIN or (byte arrays)
// DELTA_LENGTH_BYTE_ARRAY otherwise, zstd, chunk statistics (NaN only when
// all values are NaN), encoding stats, column and offset indexes; the
// footer is parquet-go's own, taken from an empty file written with the
// same schema and options. Levels and dictionary indexes are RLE runs
// only (no bit-packed groups), which the hybrid encoding allows.

// A data page ends at pageRows rows or once its values take pageBytes,
// about where parquet-go's writer (PageBufferSize 256 KiB) ends one:
// fewer, larger pages compress better.
const (
	pageRows  = 64 * 1024
	pageBytes = 250 << 10
)

// leafInfo is how one leaf column is encoded.
type leafInfo struct {
	path           []string
	kind           parquet.Kind
	maxDef, maxRep byte
	dict           bool // RLE_DICTIONARY data pages and a PLAIN dictionary page
	delta          bool // DELTA_LENGTH_BYTE_ARRAY (byte arrays without dictionary)
	unsigned       bool // integer statistics compare unsigned
	encodings      []format.Encoding
}

// newLeafInfo describes leaf, or errors when its type or encoding is not
// one this encoder writes.
func newLeafInfo(leaf parquet.LeafColumn) (leafInfo, error) {
	t := leaf.Node.Type()
	li := leafInfo{path: leaf.Path, kind: t.Kind(), maxDef: byte(leaf.MaxDefinitionLevel), maxRep: byte(leaf.MaxRepetitionLevel)}
	enc := format.Plain
	if e := leaf.Node.Encoding(); e != nil {
		enc = e.Encoding()
	} else if li.kind == parquet.ByteArray {
		enc = format.DeltaLengthByteArray // parquet-go's default for byte arrays
	}
	switch {
	case enc == format.RLEDictionary && li.kind == parquet.ByteArray:
		li.dict = true
	case enc == format.DeltaLengthByteArray && li.kind == parquet.ByteArray:
		li.delta = true
	case enc == format.Plain && (li.kind == parquet.Int64 || li.kind == parquet.Int32 ||
		li.kind == parquet.Double || li.kind == parquet.Boolean):
	default:
		return li, fmt.Errorf("column %v: %s with encoding %s not supported", leaf.Path, t, enc)
	}
	if li.kind == parquet.Int64 || li.kind == parquet.Int32 {
		li.unsigned = t.Compare(parquet.Int64Value(-1).Level(0, 0, 0), parquet.Int64Value(0)) > 0
	}
	// As parquet-go lists them: sorted by value.
	if li.dict {
		li.encodings = append(li.encodings, format.Plain)
	}
	if li.maxDef > 0 || li.maxRep > 0 {
		li.encodings = append(li.encodings, format.RLE)
	}
	switch {
	case li.delta:
		li.encodings = append(li.encodings, format.DeltaLengthByteArray)
	case li.dict:
		li.encodings = append(li.encodings, format.RLEDictionary)
	default:
		li.encodings = append(li.encodings, format.Plain)
	}
	slices.Sort(li.encodings)
	li.encodings = slices.Compact(li.encodings)
	return li, nil
}

// levelRuns appends RLE runs of one level (bit width at most 8).
type levelRuns struct {
	buf []byte
	cur byte
	n   int
}

func (e *levelRuns) add(v byte, k int) {
	if e.n > 0 && v == e.cur {
		e.n += k
		return
	}
	e.flush()
	e.cur, e.n = v, k
}

func (e *levelRuns) flush() {
	if e.n > 0 {
		e.buf = binary.AppendUvarint(e.buf, uint64(e.n)<<1)
		e.buf = append(e.buf, e.cur)
		e.n = 0
	}
}

// idxRun is a run of one dictionary index.
type idxRun struct{ v, n int32 }

// bounds are the min and max of a page's or chunk's non-null values.
// NaN is never a bound, unless all values are NaN, as parquet-go does.
type bounds struct {
	ok       bool // a non-NaN value was added
	nan      bool // a NaN was added
	iMin     int64
	iMax     int64
	fMin     float64
	fMax     float64
	bMin     []byte
	bMax     []byte
	unsigned bool
}

func (b *bounds) addInt(v int64) {
	switch {
	case !b.ok:
		b.iMin, b.iMax, b.ok = v, v, true
	case b.unsigned:
		if uint64(v) < uint64(b.iMin) {
			b.iMin = v
		}
		if uint64(v) > uint64(b.iMax) {
			b.iMax = v
		}
	default:
		b.iMin, b.iMax = min(b.iMin, v), max(b.iMax, v)
	}
}

func (b *bounds) addFloat(v float64) {
	switch {
	case v != v:
		b.nan = true
	case !b.ok:
		b.fMin, b.fMax, b.ok = v, v, true
	default:
		if v < b.fMin {
			b.fMin = v
		}
		if v > b.fMax {
			b.fMax = v
		}
	}
}

func (b *bounds) addBytes(v []byte) {
	switch {
	case !b.ok:
		b.bMin, b.bMax, b.ok = v, v, true
	case bytes.Compare(v, b.bMin) < 0:
		b.bMin = v
	case bytes.Compare(v, b.bMax) > 0:
		b.bMax = v
	}
}

// has reports whether any non-null value was added.
func (b *bounds) has() bool { return b.ok || b.nan }

func (b *bounds) merge(kind parquet.Kind, o *bounds) {
	b.nan = b.nan || o.nan
	if !o.ok {
		return
	}
	switch kind {
	case parquet.Double:
		b.addFloat(o.fMin)
		b.addFloat(o.fMax)
	case parquet.ByteArray:
		b.addBytes(o.bMin)
		b.addBytes(o.bMax)
	default:
		b.addInt(o.iMin)
		b.addInt(o.iMax)
	}
}

// encode returns the statistics encoding of the bounds (PLAIN, without
// length prefix).
func (b *bounds) encode(kind parquet.Kind) (lo, hi []byte) {
	if !b.ok {
		if b.nan {
			nan := binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN()))
			return nan, bytes.Clone(nan)
		}
		return nil, nil
	}
	switch kind {
	case parquet.Boolean:
		return []byte{byte(b.iMin)}, []byte{byte(b.iMax)}
	case parquet.Int32:
		return binary.LittleEndian.AppendUint32(nil, uint32(b.iMin)), binary.LittleEndian.AppendUint32(nil, uint32(b.iMax))
	case parquet.Int64:
		return binary.LittleEndian.AppendUint64(nil, uint64(b.iMin)), binary.LittleEndian.AppendUint64(nil, uint64(b.iMax))
	case parquet.Double:
		return binary.LittleEndian.AppendUint64(nil, math.Float64bits(b.fMin)), binary.LittleEndian.AppendUint64(nil, math.Float64bits(b.fMax))
	}
	// Never nil: an empty string is a bound, written as an empty binary.
	return append([]byte{}, b.bMin...), append([]byte{}, b.bMax...)
}

// pageRec is a data page of a dictionary-encoded chunk, kept until the
// chunk's dictionary page is written.
type pageRec struct {
	nVals, nNulls, nRows int
	rep, def             []byte // RLE levels, aliasing colEnc.levels
	runs                 []idxRun
	firstRow             int64
	b                    bounds
}

// colEnc builds one column chunk page by page and writes it to f: pages
// of plain columns as they fill, those of dictionary columns after the
// dictionary page, at the end of the chunk. It is reused for every column
// of a file.
type colEnc struct {
	li *leafInfo
	f  *pqFile

	// current page
	def, rep      levelRuns
	nVals, nNulls int
	nRows         int
	plain         []byte   // PLAIN values, or concatenated byte arrays (delta)
	offs          []uint32 // byte array offsets (delta)
	nBits         int      // booleans in plain
	runStart      int      // first of the page's runs
	b             bounds

	// chunk
	rows   int64 // rows before the current page
	start  int64 // file offset of the chunk
	md     format.ColumnMetaData
	ci     format.ColumnIndex
	oi     format.OffsetIndex
	cb     bounds
	pages  []pageRec
	levels []byte // levels of pages
	runs   []idxRun
	dict   map[string]int32
	dictPl []byte // PLAIN dictionary page values
	dictN  int
}

func (c *colEnc) reset(li *leafInfo, f *pqFile) {
	c.li, c.f = li, f
	c.def, c.rep = levelRuns{buf: c.def.buf[:0]}, levelRuns{buf: c.rep.buf[:0]}
	c.nVals, c.nNulls, c.nRows, c.nBits = 0, 0, 0, 0
	c.plain, c.offs = c.plain[:0], append(c.offs[:0], 0)
	c.runStart, c.rows = 0, 0
	c.b, c.cb = bounds{unsigned: li.unsigned}, bounds{unsigned: li.unsigned}
	c.start = f.off
	c.md = format.ColumnMetaData{Type: format.Type(li.kind), Encoding: li.encodings, PathInSchema: li.path,
		Codec: format.Zstd, DataPageOffset: f.off}
	c.ci = format.ColumnIndex{BoundaryOrder: format.Unordered}
	c.oi = format.OffsetIndex{}
	c.pages, c.levels, c.runs = c.pages[:0], c.levels[:0], c.runs[:0]
	if c.dict == nil {
		c.dict = make(map[string]int32)
	}
	clear(c.dict)
	c.dictPl, c.dictN = c.dictPl[:0], 0
}

// endRows counts k finished rows and closes the page when full.
func (c *colEnc) endRows(k int) {
	c.nRows += k
	if c.nRows >= pageRows || len(c.plain) >= pageBytes {
		c.endPage()
	}
}

// room is how many more rows fit in the current page.
func (c *colEnc) room() int { return pageRows - c.nRows }

func (c *colEnc) endPage() {
	if c.nVals == 0 {
		return
	}
	c.def.flush()
	c.rep.flush()
	p := pageRec{nVals: c.nVals, nNulls: c.nNulls, nRows: c.nRows, firstRow: c.rows, b: c.b}
	f := c.f
	switch {
	case c.li.dict:
		// p's slices alias c.levels and c.runs: later pages only append,
		// so the bytes they see stay put even when the arrays move.
		l0 := len(c.levels)
		c.levels = append(c.levels, c.rep.buf...)
		l1 := len(c.levels)
		c.levels = append(c.levels, c.def.buf...)
		p.rep, p.def = c.levels[l0:l1:l1], c.levels[l1:]
		p.runs = c.runs[c.runStart:]
		c.runStart = len(c.runs)
		c.pages = append(c.pages, p)
	case c.li.delta:
		var err error
		if f.pbuf, err = parquet.DeltaLengthByteArray.EncodeByteArray(f.pbuf[:0], c.plain, c.offs); err != nil {
			f.fail(err)
		}
		p.rep, p.def = c.rep.buf, c.def.buf
		c.writePage(&p, f.pbuf, format.DeltaLengthByteArray)
	default:
		p.rep, p.def = c.rep.buf, c.def.buf
		c.writePage(&p, c.plain, format.Plain)
	}
	c.rows += int64(c.nRows)
	c.def.buf, c.rep.buf = c.def.buf[:0], c.rep.buf[:0]
	c.nVals, c.nNulls, c.nRows, c.nBits = 0, 0, 0, 0
	c.plain, c.offs = c.plain[:0], append(c.offs[:0], 0)
	c.b = bounds{unsigned: c.li.unsigned}
}

// writePage compresses and writes one data page with its encoded values.
func (c *colEnc) writePage(p *pageRec, vals []byte, enc format.Encoding) {
	f := c.f
	var err error
	if f.zbuf, err = f.codec.Encode(f.zbuf[:0], vals); err != nil {
		f.fail(err)
		return
	}
	crc := crc32.Update(0, crc32.IEEETable, p.rep)
	crc = crc32.Update(crc, crc32.IEEETable, p.def)
	crc = crc32.Update(crc, crc32.IEEETable, f.zbuf)
	lv := len(p.rep) + len(p.def)
	h := format.PageHeader{Type: format.DataPageV2, UncompressedPageSize: int32(lv + len(vals)),
		CompressedPageSize: int32(lv + len(f.zbuf)), CRC: int32(crc)}
	h.DataPageHeaderV2 = thrift.New(format.DataPageHeaderV2{NumValues: int32(p.nVals), NumNulls: int32(p.nNulls),
		NumRows: int32(p.nRows), Encoding: enc, DefinitionLevelsByteLength: int32(len(p.def)),
		RepetitionLevelsByteLength: int32(len(p.rep)), IsCompressed: thrift.New(true)})
	off := f.off
	hl := f.writePage(&h, p.rep, p.def, f.zbuf)
	c.md.TotalUncompressedSize += int64(hl + lv + len(vals))
	c.md.NumValues += int64(p.nVals)
	c.md.Statistics.NullCount += int64(p.nNulls)
	lo, hi := p.b.encode(c.li.kind)
	c.ci.NullPages = append(c.ci.NullPages, !p.b.has())
	c.ci.MinValues = append(c.ci.MinValues, lo)
	c.ci.MaxValues = append(c.ci.MaxValues, hi)
	c.ci.NullCounts = append(c.ci.NullCounts, int64(p.nNulls))
	c.oi.PageLocations = append(c.oi.PageLocations, format.PageLocation{Offset: off,
		CompressedPageSize: int32(f.off - off), FirstRowIndex: p.firstRow})
	c.cb.merge(c.li.kind, &p.b)
}

// null adds k null rows (a null list for list columns).
func (c *colEnc) null(k int) {
	for k > 0 {
		n := min(k, c.room())
		if c.li.maxDef > 0 {
			c.def.add(0, n)
		}
		if c.li.maxRep > 0 {
			c.rep.add(0, n)
		}
		c.nVals += n
		c.nNulls += n
		k -= n
		c.endRows(n)
	}
}

// present adds the levels of k present top-level values.
func (c *colEnc) present(k int) {
	if c.li.maxDef > 0 {
		c.def.add(c.li.maxDef, k)
	}
	c.nVals += k
}

func (c *colEnc) appendInt(v int64) {
	if c.li.kind == parquet.Int32 {
		c.plain = binary.LittleEndian.AppendUint32(c.plain, uint32(v))
	} else {
		c.plain = binary.LittleEndian.AppendUint64(c.plain, uint64(v))
	}
}

// putInt adds k rows of integer v.
func (c *colEnc) putInt(v int64, k int) {
	for k > 0 {
		n := min(k, c.room())
		c.present(n)
		for range n {
			c.appendInt(v)
		}
		c.b.addInt(v)
		k -= n
		c.endRows(n)
	}
}

// putFloat adds k rows of v.
func (c *colEnc) putFloat(v float64, k int) {
	for k > 0 {
		n := min(k, c.room())
		c.present(n)
		for range n {
			c.plain = binary.LittleEndian.AppendUint64(c.plain, math.Float64bits(v))
		}
		c.b.addFloat(v)
		k -= n
		c.endRows(n)
	}
}

// putBool adds k rows of v.
func (c *colEnc) putBool(v bool, k int) {
	for k > 0 {
		n := min(k, c.room())
		c.present(n)
		for range n {
			if c.nBits%8 == 0 {
				c.plain = append(c.plain, 0)
			}
			if v {
				c.plain[len(c.plain)-1] |= 1 << (c.nBits % 8)
			}
			c.nBits++
		}
		b := int64(0)
		if v {
			b = 1
		}
		c.b.addInt(b)
		k -= n
		c.endRows(n)
	}
}

// putBytes adds k rows of v (a dictionary index run, or k copies).
func (c *colEnc) putBytes(v []byte, k int) {
	var x int32
	if c.li.dict {
		var ok bool
		if x, ok = c.dict[string(v)]; !ok {
			x = int32(c.dictN)
			c.dict[string(v)] = x
			c.dictN++
			c.dictPl = binary.LittleEndian.AppendUint32(c.dictPl, uint32(len(v)))
			c.dictPl = append(c.dictPl, v...)
		}
	}
	for k > 0 {
		n := min(k, c.room())
		c.present(n)
		if c.li.dict {
			if r := len(c.runs) - 1; r >= c.runStart && c.runs[r].v == x {
				c.runs[r].n += int32(n)
			} else {
				c.runs = append(c.runs, idxRun{x, int32(n)})
			}
		} else {
			for range n {
				c.plain = append(c.plain, v...)
				c.offs = append(c.offs, uint32(len(c.plain)))
			}
		}
		c.b.addBytes(v)
		k -= n
		c.endRows(n)
	}
}

// value adds k rows of a label value of the column's kind.
func (c *colEnc) value(v parquet.Value, k int) {
	switch c.li.kind {
	case parquet.ByteArray:
		c.putBytes(v.ByteArray(), k)
	case parquet.Int64:
		c.putInt(v.Int64(), k)
	case parquet.Int32:
		c.putInt(int64(v.Int32()), k)
	case parquet.Double:
		c.putFloat(v.Double(), k)
	case parquet.Boolean:
		c.putBool(v.Boolean(), k)
	}
}

// listEmpty adds a row holding an empty list.
func (c *colEnc) listEmpty() {
	c.def.add(1, 1)
	c.rep.add(0, 1)
	c.nVals++
	c.nNulls++
	c.endRows(1)
}

// listUint64 adds a row holding the non-empty list vals.
func (c *colEnc) listUint64(vals []uint64) {
	c.listLevels(len(vals))
	for _, v := range vals {
		c.plain = binary.LittleEndian.AppendUint64(c.plain, v)
		c.b.addInt(int64(v))
	}
	c.endRows(1)
}

// listFloat64 adds a row holding the non-empty list vals.
func (c *colEnc) listFloat64(vals []float64) {
	c.listLevels(len(vals))
	for _, v := range vals {
		c.plain = binary.LittleEndian.AppendUint64(c.plain, math.Float64bits(v))
		c.b.addFloat(v)
	}
	c.endRows(1)
}

func (c *colEnc) listLevels(n int) {
	c.def.add(c.li.maxDef, n)
	c.rep.add(0, 1)
	if n > 1 {
		c.rep.add(1, n-1)
	}
	c.nVals += n
}

// pqFile writes a Parquet file chunk by chunk.
type pqFile struct {
	w      io.Writer
	off    int64
	codec  compress.Codec
	leaves []leafInfo
	rgs    []format.RowGroup
	cidx   [][]format.ColumnIndex
	oidx   [][]format.OffsetIndex
	cur    *format.RowGroup
	proto  thrift.CompactProtocol
	zbuf   []byte
	pbuf   []byte
	err    error
}

func newPQFile(w io.Writer, leaves []leafInfo) *pqFile {
	f := &pqFile{w: w, leaves: leaves, codec: &parquet.Zstd}
	f.write([]byte("PAR1"))
	return f
}

func (f *pqFile) write(b []byte) {
	if f.err != nil {
		return
	}
	n, err := f.w.Write(b)
	f.off += int64(n)
	f.err = err
}

func (f *pqFile) beginRowGroup(rows int) {
	f.rgs = append(f.rgs, format.RowGroup{NumRows: int64(rows), Ordinal: int16(len(f.rgs)), FileOffset: f.off})
	f.cur = &f.rgs[len(f.rgs)-1]
	f.cidx = append(f.cidx, nil)
	f.oidx = append(f.oidx, nil)
}

func (f *pqFile) fail(err error) {
	if f.err == nil {
		f.err = err
	}
}

// writePage writes a page header and its body parts; it returns the
// header length.
func (f *pqFile) writePage(h *format.PageHeader, parts ...[]byte) int {
	hb, err := thrift.Marshal(&f.proto, h)
	if err != nil {
		f.fail(err)
		return 0
	}
	f.write(hb)
	for _, p := range parts {
		f.write(p)
	}
	return len(hb)
}

// writeChunk ends c's last page, writes the dictionary and data pages
// still held and adds the chunk to the row group.
func (f *pqFile) writeChunk(c *colEnc) error {
	c.endPage()
	li := c.li
	if li.dict {
		c.md.DictionaryPageOffset = f.off
		var err error
		if f.zbuf, err = f.codec.Encode(f.zbuf[:0], c.dictPl); err != nil {
			return err
		}
		h := format.PageHeader{Type: format.DictionaryPage, UncompressedPageSize: int32(len(c.dictPl)),
			CompressedPageSize: int32(len(f.zbuf)), CRC: int32(crc32.ChecksumIEEE(f.zbuf))}
		h.DictionaryPageHeader = thrift.New(format.DictionaryPageHeader{NumValues: int32(c.dictN), Encoding: format.Plain})
		hl := f.writePage(&h, f.zbuf)
		c.md.TotalUncompressedSize += int64(hl + len(c.dictPl))
		c.md.EncodingStats = append(c.md.EncodingStats, format.PageEncodingStats{PageType: format.DictionaryPage, Encoding: format.Plain, Count: 1})
		c.md.DataPageOffset = f.off
		bitWidth := max(1, bits.Len(uint(max(c.dictN-1, 0))))
		w := (bitWidth + 7) / 8
		for i := range c.pages {
			p := &c.pages[i]
			f.pbuf = append(f.pbuf[:0], byte(bitWidth))
			for _, r := range p.runs {
				f.pbuf = binary.AppendUvarint(f.pbuf, uint64(r.n)<<1)
				for b := range w {
					f.pbuf = append(f.pbuf, byte(uint32(r.v)>>(8*b)))
				}
			}
			c.writePage(p, f.pbuf, format.RLEDictionary)
		}
	}
	if n := len(c.oi.PageLocations); n > 0 {
		enc := format.Plain
		switch {
		case li.dict:
			enc = format.RLEDictionary
		case li.delta:
			enc = format.DeltaLengthByteArray
		}
		c.md.EncodingStats = append(c.md.EncodingStats, format.PageEncodingStats{PageType: format.DataPageV2, Encoding: enc, Count: int32(n)})
	}
	c.md.TotalCompressedSize = f.off - c.start
	c.md.Statistics.MinValue, c.md.Statistics.MaxValue = c.cb.encode(li.kind)
	f.cur.Columns = append(f.cur.Columns, format.ColumnChunk{MetaData: c.md})
	f.cur.TotalByteSize += c.md.TotalUncompressedSize
	f.cur.TotalCompressedSize += c.md.TotalCompressedSize
	g := len(f.rgs) - 1
	f.cidx[g] = append(f.cidx[g], c.ci)
	f.oidx[g] = append(f.oidx[g], c.oi)
	return f.err
}

// close writes the page indexes and the footer: meta is parquet-go's
// footer of an empty file of the same schema and options.
func (f *pqFile) close(meta *format.FileMetaData) error {
	for g := range f.rgs {
		for c := range f.rgs[g].Columns {
			b, err := thrift.Marshal(&f.proto, &f.cidx[g][c])
			if err != nil {
				return err
			}
			f.rgs[g].Columns[c].ColumnIndexOffset, f.rgs[g].Columns[c].ColumnIndexLength = f.off, int32(len(b))
			f.write(b)
		}
	}
	for g := range f.rgs {
		for c := range f.rgs[g].Columns {
			b, err := thrift.Marshal(&f.proto, &f.oidx[g][c])
			if err != nil {
				return err
			}
			f.rgs[g].Columns[c].OffsetIndexOffset, f.rgs[g].Columns[c].OffsetIndexLength = f.off, int32(len(b))
			f.write(b)
		}
	}
	m := *meta
	m.NumRows = 0
	for _, rg := range f.rgs {
		m.NumRows += rg.NumRows
	}
	m.RowGroups = f.rgs
	b, err := thrift.Marshal(&f.proto, &m)
	if err != nil {
		return err
	}
	f.write(b)
	f.write(binary.LittleEndian.AppendUint32(nil, uint32(len(b))))
	f.write([]byte("PAR1"))
	return f.err
}
