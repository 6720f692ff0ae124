package pqenc

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/bloom/xxhash"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// A data page ends at PageRows rows or once its values take PageBytes,
// about where parquet-go's writer (PageBufferSize 256 KiB) ends one:
// fewer, larger pages compress better.
const (
	PageRows  = 64 * 1024
	PageBytes = 250 << 10
)

// pageRows is PageRows, smaller in tests of chunks of many pages.
var pageRows = PageRows

// DictPageRows is where a data page of a dictionary-encoded chunk ends
// (its indexes take a few bytes however many rows): short pages let a
// reader hold a page of each column at a time in little memory, and let
// compaction copy them whole where a merge run covers them (dictcopy.go).
const DictPageRows = 8 * 1024

// pageRec is a data page of a dictionary-encoded chunk, kept until the
// chunk's dictionary page is written.
type pageRec struct {
	nVals, nNulls, nRows int
	rep, def             []byte // RLE levels, aliasing Column.levels
	runs                 []idxRun
	firstRow             int64
	b                    bounds
	// A page copied verbatim (dictcopy.go): its bytes, header included,
	// are held[rawOff:rawOff+rawLen] of its Column; rep and def alias
	// its levels, runs is nil.
	rawOff, rawLen int
	rawUnc         int64 // what it adds to the chunk's uncompressed size
}

// epochs numbers Column chunks, so that a Chunk's dictionary translation
// is known to belong to the output chunk being built (see CopyRows).
var epochs atomic.Uint64

// Column builds one column chunk page by page. Pages of plain columns are
// compressed as they fill; those of dictionary columns are held as index
// runs until the chunk is written, after its dictionary page. It is reused
// for chunk after chunk.
type Column struct {
	li    *Leaf
	codec compress.Codec
	epoch uint64

	// current page
	def, rep      levelRuns
	nVals, nNulls int
	nRows         int
	maxRows       int      // rows at which a page ends (pageRows, DictPageRows)
	pageEnd       int      // rows at which this page ends: maxRows, or fewer before a cut
	plain         []byte   // PLAIN values, or concatenated byte arrays (delta)
	offs          []uint32 // byte array offsets (delta)
	nBits         int      // booleans in plain
	runStart      int      // first of the page's runs
	b             bounds
	seen          []uint64 // dictionary indexes the page uses (bounds)
	seenList      []int32

	// chunk
	rows     int64  // rows before the current page
	out      []byte // data pages written so far
	dictOut  []byte // the dictionary page, once written
	md       format.ColumnMetaData
	ci       format.ColumnIndex
	oi       format.OffsetIndex
	cb       bounds
	pages    []pageRec
	levels   []byte // levels of held pages
	runs     []idxRun
	dict     dictTable
	fallback bool // a dictionary column that outgrew MaxDictBytes
	// dictCopy lets CopyRowsPages copy dictionary-encoded pages verbatim
	// (dictcopy.go); held holds those pages' bytes until the chunk ends.
	dictCopy   bool
	dictCopied int
	held       []byte
	idxTmp     []int32
	hashes     []uint64
	nPages     int
	copied     int // pages copied verbatim (CopyRowsPages)
	// byte-array pages copied with maybe-cut bounds (pagecopy.go), and
	// how many of them resolveCutPages decoded
	cut        cutPages
	cutDecoded int
	// dictionary pages remapped into the chunk's dictionary (dictremap.go)
	remapped int
	remapTmp []idxRun

	zbuf, pbuf []byte
	xbuf       []byte // expanded dictionary values (toPlain)
	tmpOffs    []uint32
	lvTmp      levelScratch
	proto      thrift.CompactProtocol
	hdr        pageHeaderEncoder
	err        error

	// cuts are the chunk's rows where a page must start (SetCuts).
	cuts []int64
}

// Reset starts a new chunk of leaf li compressed with codec.
func (c *Column) Reset(li *Leaf, codec compress.Codec) {
	c.li, c.codec = li, codec
	c.epoch = epochs.Add(1)
	c.def, c.rep = levelRuns{buf: c.def.buf[:0]}, levelRuns{buf: c.rep.buf[:0]}
	c.nVals, c.nNulls, c.nRows, c.nBits = 0, 0, 0, 0
	c.maxRows = pageRows
	if li.Dict {
		c.maxRows = min(pageRows, DictPageRows)
	}
	c.plain, c.offs = c.plain[:0], append(c.offs[:0], 0)
	c.runStart, c.rows = 0, 0
	c.b = bounds{unsigned: li.unsigned}
	c.cb = bounds{unsigned: li.unsigned, own: true, minBuf: c.cb.minBuf, maxBuf: c.cb.maxBuf}
	c.out, c.dictOut = c.out[:0], c.dictOut[:0]
	c.md = format.ColumnMetaData{Type: format.Type(li.Kind), PathInSchema: li.Path, Codec: codec.CompressionCodec()}
	c.ci = format.ColumnIndex{BoundaryOrder: format.Unordered}
	c.oi = format.OffsetIndex{}
	c.pages, c.levels, c.runs = c.pages[:0], c.levels[:0], c.runs[:0]
	c.dict.reset()
	clear(c.seen)
	c.seenList = c.seenList[:0]
	c.fallback = false
	c.dictCopy, c.dictCopied, c.held = false, 0, c.held[:0]
	c.remapped = 0
	c.hashes = c.hashes[:0]
	c.nPages, c.copied = 0, 0
	c.cut.reset()
	c.cutDecoded = 0
	c.err = nil
	c.cuts = c.cuts[:0]
	c.startPage()
}

// SetCuts makes the chunk's pages start at each of cuts (rows of the
// chunk, increasing), besides where they fill: the lake writer starts a
// page where the sort key's service or metric changes, so that a run of
// one service's rows of a file is whole pages in every column, which
// compaction copies as they are. cuts are copied; a cut at or before the
// rows added so far ends the current page now. Reset forgets them.
func (c *Column) SetCuts(cuts []int64) {
	c.cuts = append(c.cuts[:0], cuts...)
	if c.nRows > 0 {
		if k, _ := slices.BinarySearch(c.cuts, c.rows+1); k < len(c.cuts) && c.cuts[k] <= c.Rows() {
			c.endPage()
		}
	}
	c.startPage()
}

// startPage sets where the page begun at row c.rows ends: at maxRows
// rows, or at the first cut after its first row.
func (c *Column) startPage() {
	c.pageEnd = c.maxRows
	if len(c.cuts) == 0 {
		return
	}
	if k, _ := slices.BinarySearch(c.cuts, c.rows+1); k < len(c.cuts) {
		c.pageEnd = int(min(int64(c.maxRows), c.cuts[k]-c.rows))
	}
}

// Rows is the number of rows added to the chunk.
func (c *Column) Rows() int64 { return c.rows + int64(c.nRows) }

// DictValues calls fn with each value of the chunk's dictionary and
// reports true, or false when the chunk has none (not a dictionary
// column, or it fell back to plain). Call it after File.WriteChunk.
func (c *Column) DictValues(fn func(v []byte)) bool {
	if !c.li.Dict || c.fallback {
		return false
	}
	for x := range int32(c.dict.len()) {
		fn(c.dict.value(x))
	}
	return true
}

func (c *Column) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// endRows counts k finished rows and closes the page when full.
func (c *Column) endRows(k int) {
	c.nRows += k
	if c.nRows >= c.pageEnd || len(c.plain) >= PageBytes {
		c.endPage()
	}
}

// room is how many more rows fit in the current page.
func (c *Column) room() int { return max(c.pageEnd-c.nRows, 1) }

// dictMode reports whether values go to the dictionary.
func (c *Column) dictMode() bool { return c.li.Dict && !c.fallback }

// see records that the page uses dictionary index x.
func (c *Column) see(x int32) {
	w := int(x) >> 6
	for w >= len(c.seen) {
		c.seen = append(c.seen, 0)
	}
	if m := uint64(1) << (x & 63); c.seen[w]&m == 0 {
		c.seen[w] |= m
		c.seenList = append(c.seenList, x)
	}
}

// seenBounds adds the values of the page's dictionary indexes to its
// bounds and forgets them.
func (c *Column) seenBounds() {
	for _, x := range c.seenList {
		c.b.addBytes(c.dict.value(x))
		c.seen[x>>6] = 0
	}
	c.seenList = c.seenList[:0]
}

func (c *Column) endPage() {
	if c.nVals == 0 {
		return
	}
	c.def.flush()
	c.rep.flush()
	c.def.pack(bits.Len8(c.li.MaxDef), c.nVals, &c.lvTmp)
	c.rep.pack(bits.Len8(c.li.MaxRep), c.nVals, &c.lvTmp)
	p := pageRec{nVals: c.nVals, nNulls: c.nNulls, nRows: c.nRows, firstRow: c.rows}
	switch {
	case c.dictMode():
		c.seenBounds()
		p.b = c.b
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
	case c.li.Dict || c.li.Delta:
		p.b = c.b
		p.rep, p.def = c.rep.buf, c.def.buf
		c.writeDelta(&p, c.plain, c.offs)
	default:
		p.b = c.b
		p.rep, p.def = c.rep.buf, c.def.buf
		c.writePage(&p, c.plain, format.Plain)
	}
	c.rows += int64(c.nRows)
	c.def.buf, c.rep.buf = c.def.buf[:0], c.rep.buf[:0]
	c.nVals, c.nNulls, c.nRows, c.nBits = 0, 0, 0, 0
	c.plain, c.offs = c.plain[:0], append(c.offs[:0], 0)
	c.b = bounds{unsigned: c.li.unsigned}
	c.startPage()
}

func (c *Column) writeDelta(p *pageRec, data []byte, offs []uint32) {
	var err error
	if c.pbuf, err = parquet.DeltaLengthByteArray.EncodeByteArray(c.pbuf[:0], data, offs); err != nil {
		c.fail(err)
		return
	}
	c.writePage(p, c.pbuf, format.DeltaLengthByteArray)
}

// writePage compresses one data page with its encoded values and appends
// it to the chunk; page locations are relative to the chunk's data pages
// until File.WriteChunk places them.
func (c *Column) writePage(p *pageRec, vals []byte, enc format.Encoding) {
	var err error
	if c.zbuf, err = c.codec.Encode(c.zbuf[:0], vals); err != nil {
		c.fail(err)
		return
	}
	crc := crc32.Update(0, crc32.IEEETable, p.rep)
	crc = crc32.Update(crc, crc32.IEEETable, p.def)
	crc = crc32.Update(crc, crc32.IEEETable, c.zbuf)
	lv := len(p.rep) + len(p.def)
	h := format.PageHeader{Type: format.DataPageV2, UncompressedPageSize: int32(lv + len(vals)),
		CompressedPageSize: int32(lv + len(c.zbuf)), CRC: int32(crc)}
	lo, hi := p.b.encode(c.li.Kind)
	d := format.DataPageHeaderV2{NumValues: int32(p.nVals), NumNulls: int32(p.nNulls),
		NumRows: int32(p.nRows), Encoding: enc, DefinitionLevelsByteLength: int32(len(p.def)),
		RepetitionLevelsByteLength: int32(len(p.rep)), IsCompressed: thrift.New(true)}
	if c.li.Kind == parquet.ByteArray {
		// Exact bounds in the header when the column index cuts them
		// (pagestats.go): a copy of the page needs no decoding.
		d.Statistics = exactPageStats(lo, hi, p.nNulls)
		lo, hi = truncateIndexBounds(lo, hi)
	}
	h.DataPageHeaderV2 = thrift.New(d)
	off := int64(len(c.out))
	hb, err := c.header(&h)
	if err != nil {
		c.fail(err)
		return
	}
	c.out = append(c.out, hb...)
	c.out = append(c.out, p.rep...)
	c.out = append(c.out, p.def...)
	c.out = append(c.out, c.zbuf...)
	c.nPages++
	c.md.TotalUncompressedSize += int64(len(hb) + lv + len(vals))
	c.md.NumValues += int64(p.nVals)
	c.md.Statistics.NullCount += int64(p.nNulls)
	c.ci.NullPages = append(c.ci.NullPages, !p.b.has())
	c.ci.MinValues = append(c.ci.MinValues, lo)
	c.ci.MaxValues = append(c.ci.MaxValues, hi)
	c.ci.NullCounts = append(c.ci.NullCounts, int64(p.nNulls))
	c.oi.PageLocations = append(c.oi.PageLocations, format.PageLocation{Offset: off,
		CompressedPageSize: int32(int64(len(c.out)) - off), FirstRowIndex: p.firstRow})
	c.cb.merge(c.li.Kind, &p.b)
}

// toPlain turns a dictionary chunk that outgrew MaxDictBytes into a
// DELTA_LENGTH_BYTE_ARRAY one: its held pages are written with their
// values, the current page continues with values.
func (c *Column) toPlain() {
	c.seenBounds()
	cur := c.runs[c.runStart:]
	c.fallback = true
	c.maxRows = pageRows
	c.startPage()
	for i := range c.pages {
		p := &c.pages[i]
		runs := p.runs
		if p.rawLen > 0 {
			runs = c.heldRuns(p) // its indexes, decoded (dictcopy.go)
		}
		data, offs := c.expand(runs)
		c.writeDelta(p, data, offs)
	}
	c.plain, c.offs = c.plain[:0], append(c.offs[:0], 0)
	for _, r := range cur {
		v := c.dict.value(r.v)
		for range r.n {
			c.plain = append(c.plain, v...)
			c.offs = append(c.offs, uint32(len(c.plain)))
		}
	}
	c.pages, c.runs, c.runStart = c.pages[:0], c.runs[:0], 0
}

// expand returns the values of dictionary runs as byte arrays and offsets
// (scratch, valid until the next call).
func (c *Column) expand(runs []idxRun) ([]byte, []uint32) {
	c.xbuf, c.tmpOffs = c.xbuf[:0], append(c.tmpOffs[:0], 0)
	for _, r := range runs {
		v := c.dict.value(r.v)
		for range r.n {
			c.xbuf = append(c.xbuf, v...)
			c.tmpOffs = append(c.tmpOffs, uint32(len(c.xbuf)))
		}
	}
	return c.xbuf, c.tmpOffs
}

// finish ends the last page and writes the dictionary and data pages
// still held.
func (c *Column) finish() {
	c.endPage()
	li := c.li
	if c.dictMode() {
		var err error
		if c.zbuf, err = c.codec.Encode(c.zbuf[:0], c.dict.vals); err != nil {
			c.fail(err)
			return
		}
		h := format.PageHeader{Type: format.DictionaryPage, UncompressedPageSize: int32(len(c.dict.vals)),
			CompressedPageSize: int32(len(c.zbuf)), CRC: int32(crc32.ChecksumIEEE(c.zbuf))}
		h.DictionaryPageHeader = thrift.New(format.DictionaryPageHeader{NumValues: int32(c.dict.len()), Encoding: format.Plain})
		hb, err := c.header(&h)
		if err != nil {
			c.fail(err)
			return
		}
		c.dictOut = append(append(c.dictOut[:0], hb...), c.zbuf...)
		c.md.TotalUncompressedSize += int64(len(hb) + len(c.dict.vals))
		c.md.EncodingStats = append(c.md.EncodingStats, format.PageEncodingStats{PageType: format.DictionaryPage, Encoding: format.Plain, Count: 1})
		bitWidth := max(1, bits.Len(uint(max(c.dict.len()-1, 0))))
		w := (bitWidth + 7) / 8
		for i := range c.pages {
			p := &c.pages[i]
			if p.rawLen > 0 {
				c.writeHeld(p) // copied verbatim (dictcopy.go)
				continue
			}
			c.pbuf = append(c.pbuf[:0], byte(bitWidth))
			for _, r := range p.runs {
				c.pbuf = binary.AppendUvarint(c.pbuf, uint64(r.n)<<1)
				for b := range w {
					c.pbuf = append(c.pbuf, byte(uint32(r.v)>>(8*b)))
				}
			}
			c.writePage(p, c.pbuf, format.RLEDictionary)
		}
	}
	if c.nPages > 0 {
		enc := format.Plain
		switch {
		case c.dictMode():
			enc = format.RLEDictionary
		case li.Dict || li.Delta:
			enc = format.DeltaLengthByteArray
		}
		c.md.EncodingStats = append(c.md.EncodingStats, format.PageEncodingStats{PageType: format.DataPageV2, Encoding: enc, Count: int32(c.nPages)})
	}
	c.md.Encoding = li.encodings(c.fallback)
	c.md.Statistics.MinValue, c.md.Statistics.MaxValue = c.cb.encode(li.Kind)
}

// Null adds k null rows (a null list for list columns).
func (c *Column) Null(k int) {
	for k > 0 {
		n := min(k, c.room())
		if c.li.MaxDef > 0 {
			c.def.add(0, n)
		}
		if c.li.MaxRep > 0 {
			c.rep.add(0, n)
		}
		c.nVals += n
		c.nNulls += n
		k -= n
		c.endRows(n)
	}
}

// present adds the levels of k present top-level values.
func (c *Column) present(k int) {
	if c.li.MaxDef > 0 {
		c.def.add(c.li.MaxDef, k)
	}
	if c.li.MaxRep > 0 {
		c.rep.add(0, k)
	}
	c.nVals += k
}

func (c *Column) appendInt(v int64) {
	if c.li.Kind == parquet.Int32 {
		c.plain = binary.LittleEndian.AppendUint32(c.plain, uint32(v))
	} else {
		c.plain = binary.LittleEndian.AppendUint64(c.plain, uint64(v))
	}
}

// Int adds k rows of integer v.
func (c *Column) Int(v int64, k int) {
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

// Float adds k rows of v.
func (c *Column) Float(v float64, k int) {
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

func (c *Column) appendBool(v bool) {
	if c.nBits%8 == 0 {
		c.plain = append(c.plain, 0)
	}
	if v {
		c.plain[len(c.plain)-1] |= 1 << (c.nBits % 8)
	}
	c.nBits++
}

// Bool adds k rows of v.
func (c *Column) Bool(v bool, k int) {
	for k > 0 {
		n := min(k, c.room())
		c.present(n)
		for range n {
			c.appendBool(v)
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

// dictIndex adds v to the dictionary, falling back to plain when it grows
// too big; ok is false after a fall back.
func (c *Column) dictIndex(v []byte) (x int32, ok bool) {
	x = c.dict.index(v)
	if c.li.MaxDictBytes > 0 && len(c.dict.vals) > c.li.MaxDictBytes {
		c.toPlain()
		return 0, false
	}
	return x, true
}

// idxRun adds n present rows of dictionary index x to the page.
func (c *Column) idxRun(x int32, n int) {
	c.see(x)
	if r := len(c.runs) - 1; r >= c.runStart && c.runs[r].v == x {
		c.runs[r].n += int32(n)
	} else {
		c.runs = append(c.runs, idxRun{x, int32(n)})
	}
}

// Bytes adds k rows of v.
func (c *Column) Bytes(v []byte, k int) {
	if c.li.Bloom {
		c.hashes = append(c.hashes, xxhash.Sum64(v))
	}
	var x int32
	dict := c.dictMode()
	if dict {
		x, dict = c.dictIndex(v)
	}
	c.bytesAt(v, x, dict, k)
}

// ValueRef remembers what BytesRef found for a value in a chunk: its
// dictionary index and its hash for the bloom filter.
type ValueRef struct {
	epoch uint64 // the chunk's (Column.epoch); 0: nothing remembered
	x     int32
	h     uint64
}

// BytesRef is Bytes for a value the caller may add many times to a
// chunk (an interned attribute value that starts many runs): ref holds
// what an earlier BytesRef of the same bytes in this chunk found, so the
// dictionary lookup and the hash are not done again; a ref of another
// chunk (or zero) is filled in. The caller passes one ref per distinct
// value only: a ref of other bytes would add the wrong value.
func (c *Column) BytesRef(v []byte, k int, ref *ValueRef) {
	if ref.epoch != c.epoch || !c.dictMode() {
		var h uint64
		if c.li.Bloom {
			h = xxhash.Sum64(v)
			c.hashes = append(c.hashes, h)
		}
		var x int32
		dict := c.dictMode()
		if dict {
			x, dict = c.dictIndex(v)
		}
		if dict {
			*ref = ValueRef{epoch: c.epoch, x: x, h: h}
		}
		c.bytesAt(v, x, dict, k)
		return
	}
	if c.li.Bloom {
		c.hashes = append(c.hashes, ref.h)
	}
	c.bytesAt(v, ref.x, true, k)
}

// bytesAt adds k rows of v, of dictionary index x when dict.
func (c *Column) bytesAt(v []byte, x int32, dict bool, k int) {
	for k > 0 {
		n := min(k, c.room())
		c.present(n)
		if dict {
			c.idxRun(x, n)
		} else {
			start := len(c.plain)
			for range n {
				c.plain = append(c.plain, v...)
				c.offs = append(c.offs, uint32(len(c.plain)))
			}
			c.b.addBytes(c.plain[start : start+len(v)])
		}
		k -= n
		c.endRows(n)
	}
}

// Str adds k rows of s, null when s is empty and the column nullable.
func (c *Column) Str(s string, k int) {
	if s == "" && c.li.MaxDef > 0 {
		c.Null(k)
		return
	}
	c.Bytes([]byte(s), k)
}

// Value adds k rows of v, a value of the column's kind.
func (c *Column) Value(v parquet.Value, k int) {
	switch c.li.Kind {
	case parquet.ByteArray:
		c.Bytes(v.ByteArray(), k)
	case parquet.Int64:
		c.Int(v.Int64(), k)
	case parquet.Int32:
		c.Int(int64(v.Int32()), k)
	case parquet.Double:
		c.Float(v.Double(), k)
	case parquet.Boolean:
		c.Bool(v.Boolean(), k)
	}
}

// Int64s adds one row per value of a required INT64 column.
func (c *Column) Int64s(vs []int64) {
	for len(vs) > 0 {
		n := min(len(vs), c.room())
		c.present(n)
		lo, hi := vs[0], vs[0]
		for _, v := range vs[:n] {
			c.plain = binary.LittleEndian.AppendUint64(c.plain, uint64(v))
			lo, hi = min(lo, v), max(hi, v)
		}
		c.b.addInt(lo)
		c.b.addInt(hi)
		vs = vs[n:]
		c.endRows(n)
	}
}

// Int64sNonZero adds one row per value of an optional INT64 column, null
// where the value is 0 (OTLP's unset time): the same column as Int and
// Null row by row, in one pass.
func (c *Column) Int64sNonZero(vs []int64) {
	width := 8
	if c.li.Kind == parquet.Int32 {
		width = 4
	}
	for len(vs) > 0 {
		// Pages end where row by row they would: at PageBytes of values.
		n := min(len(vs), c.room(), (PageBytes-len(c.plain)+width-1)/width)
		for _, v := range vs[:n] {
			if v == 0 {
				c.def.add(0, 1)
				c.nNulls++
				continue
			}
			c.def.add(c.li.MaxDef, 1)
			c.appendInt(v)
			c.b.addInt(v)
		}
		c.nVals += n
		vs = vs[n:]
		c.endRows(n)
	}
}

// Uint64s adds one present row per value of an INT64 column (required or
// optional): the same column as Int row by row (pages end at PageBytes of
// values, as they would), in one pass.
func (c *Column) Uint64s(vs []uint64) {
	if c.li.Kind != parquet.Int64 {
		for _, v := range vs {
			c.Int(int64(v), 1)
		}
		return
	}
	for len(vs) > 0 {
		n := min(len(vs), c.room(), (PageBytes-len(c.plain)+7)/8)
		c.present(n)
		for _, v := range vs[:n] {
			c.plain = binary.LittleEndian.AppendUint64(c.plain, v)
			c.b.addInt(int64(v))
		}
		vs = vs[n:]
		c.endRows(n)
	}
}

// Float64s adds one present row per value of a DOUBLE column (required
// or optional): the same column as Float row by row, in one pass.
func (c *Column) Float64s(vs []float64) {
	if c.li.Kind != parquet.Double {
		for _, v := range vs {
			c.Float(v, 1)
		}
		return
	}
	for len(vs) > 0 {
		n := min(len(vs), c.room(), (PageBytes-len(c.plain)+7)/8)
		c.present(n)
		for _, v := range vs[:n] {
			c.plain = binary.LittleEndian.AppendUint64(c.plain, math.Float64bits(v))
			c.b.addFloat(v)
		}
		vs = vs[n:]
		c.endRows(n)
	}
}

// Uint64sIf adds one row per value of an INT64 column; with flags, rows
// without bit are null.
func (c *Column) Uint64sIf(vs []uint64, flags []uint8, bit uint8) {
	for len(vs) > 0 {
		n := min(len(vs), c.room())
		for i, v := range vs[:n] {
			if flags != nil && flags[i]&bit == 0 {
				c.def.add(0, 1)
				c.nNulls++
			} else {
				if c.li.MaxDef > 0 {
					c.def.add(c.li.MaxDef, 1)
				}
				c.plain = binary.LittleEndian.AppendUint64(c.plain, v)
				c.b.addInt(int64(v))
			}
		}
		c.nVals += n
		vs = vs[n:]
		if flags != nil {
			flags = flags[n:]
		}
		c.endRows(n)
	}
}

// Float64sIf adds one row per value of an optional DOUBLE column; rows
// without bit in flags are null.
func (c *Column) Float64sIf(vs []float64, flags []uint8, bit uint8) {
	for len(vs) > 0 {
		n := min(len(vs), c.room())
		for i, v := range vs[:n] {
			if flags[i]&bit == 0 {
				c.def.add(0, 1)
				c.nNulls++
			} else {
				c.def.add(c.li.MaxDef, 1)
				c.plain = binary.LittleEndian.AppendUint64(c.plain, math.Float64bits(v))
				c.b.addFloat(v)
			}
		}
		c.nVals += n
		vs, flags = vs[n:], flags[n:]
		c.endRows(n)
	}
}

// ListEmpty adds a row holding an empty list.
func (c *Column) ListEmpty() {
	c.def.add(1, 1)
	c.rep.add(0, 1)
	c.nVals++
	c.nNulls++
	c.endRows(1)
}

// ListUint64 adds a row holding the non-empty list vals.
func (c *Column) ListUint64(vals []uint64) {
	c.listLevels(len(vals))
	for _, v := range vals {
		c.plain = binary.LittleEndian.AppendUint64(c.plain, v)
		c.b.addInt(int64(v))
	}
	c.endRows(1)
}

// ListFloat64 adds a row holding the non-empty list vals.
func (c *Column) ListFloat64(vals []float64) {
	c.listLevels(len(vals))
	for _, v := range vals {
		c.plain = binary.LittleEndian.AppendUint64(c.plain, math.Float64bits(v))
		c.b.addFloat(v)
	}
	c.endRows(1)
}

func (c *Column) listLevels(n int) {
	c.def.add(c.li.MaxDef, n)
	c.rep.add(0, 1)
	if n > 1 {
		c.rep.add(1, n-1)
	}
	c.nVals += n
}

// ColumnIndexSizeLimit is the longest byte array bound a column index
// holds, as parquet-go's default: a longer min is cut, a longer max cut and
// incremented, so the bounds still hold every value of the page.
const ColumnIndexSizeLimit = 16

// truncateIndexBounds cuts page bounds for the column index as parquet-go
// does (chunk statistics keep the whole values).
func truncateIndexBounds(lo, hi []byte) ([]byte, []byte) {
	if len(lo) > ColumnIndexSizeLimit {
		lo = lo[:ColumnIndexSizeLimit]
	}
	if len(hi) > ColumnIndexSizeLimit {
		hi = hi[:ColumnIndexSizeLimit]
		roundUpCut(hi)
	}
	return lo, hi
}

// roundUpCut makes hi, an upper bound cut short, an upper bound again: its
// last byte that is not 0xff is incremented and the bytes after it wrap to
// zero, as parquet-go does.
func roundUpCut(hi []byte) {
	for i := len(hi) - 1; ; i-- {
		if i < 0 {
			// All 0xff: parquet-go keeps them (its quirk, kept so both
			// write the same index).
			for j := range hi {
				hi[j] = 0xff
			}
			return
		}
		if hi[i]++; hi[i] != 0 {
			return
		}
	}
}
