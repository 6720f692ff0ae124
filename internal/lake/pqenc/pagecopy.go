package pqenc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/bloom/xxhash"
	"github.com/parquet-go/parquet-go/format"

	lakeformat "github.com/sluice-dev/sluice/internal/lake/format"
)

// This file copies whole pages of a Chunk into a Column as they are: the
// page header, its levels and its compressed values, never decompressed
// or re-encoded. A data page v2's CRC covers those bytes, which do not
// change; what changes is the chunk around it: its sizes and value
// counts, its statistics, and the page's entries in the column and offset
// indexes (its offset and first row in the output chunk).
//
// Only pages the Column would write the same way are copied: PLAIN pages
// of fixed-width columns and DELTA_LENGTH_BYTE_ARRAY pages of byte-array
// columns without a dictionary (or whose chunk fell back from one), in
// the Column's codec. A dictionary-encoded page would need the output
// chunk to take its input's dictionary; those are copied row by row
// (CopyRows), which translates their indexes.

// minPageCopyRows is the least run CopyRowsPages looks for whole pages in:
// a page holds at least a row, but runs of a row or two (interleaved
// inputs) go to CopyRows' fast path.
const minPageCopyRows = 8

// remapPages lets copyPage rewrite the indexes of dictionary pages whose
// input dictionary the output's cannot take (dictremap.go); tests turn
// it off to compare with the row copy.
var remapPages = true

// CopyRowsPages is CopyRows, except that the pages of src lying wholly
// within the next n rows are copied verbatim when c writes pages of their
// encoding and codec; the rows of partial pages are copied by CopyRows.
// A page copied before the read position reached it is never decoded.
// The output holds the same values either way (the tests hold it to it).
func (c *Column) CopyRowsPages(src *Chunk, n int) {
	if n < minPageCopyRows || !src.pagesOK || !c.pageEncodingOK(src) {
		c.CopyRows(src, n)
		return
	}
	if c.li.Kind == parquet.ByteArray && c.dictMode() && c.dict.len() == 0 {
		// The chunk's first values: take src's dictionary now, not the
		// values of the rows before src's first whole page in the order
		// they come, which would not be its dictionary's (dictcopy.go).
		c.dictIdentity(src)
	}
	pages := src.raw.Pages
	end := int64(src.Row() + n)
	for int64(src.Row()) < end && src.err == nil && c.err == nil {
		row := int64(src.Row())
		for src.pg < len(pages) && pages[src.pg].FirstRow+pages[src.pg].Rows <= row {
			src.pg++
		}
		if src.pg == len(pages) {
			c.CopyRows(src, int(end-row)) // not reached: pagesOK says the pages hold every row
			return
		}
		p := &pages[src.pg]
		pend := p.FirstRow + p.Rows
		if p.FirstRow == row && pend <= end && c.copyPage(src, src.pg) {
			src.pg++
			continue
		}
		c.CopyRows(src, int(min(end, pend)-row))
	}
	if src.err != nil {
		c.fail(src.err)
	}
}

// CanCopyPages reports whether CopyRowsPages may copy pages of src into c
// as they are now (src's pages and c's encoding, codec and dictionary
// state); when false it copies row by row.
func (c *Column) CanCopyPages(src *Chunk) bool { return src.pagesOK && c.pageEncodingOK(src) }

// pageEncodingOK reports whether c writes its data pages as src's pages
// may be: the same codec, PLAIN for fixed-width values, and
// DELTA_LENGTH_BYTE_ARRAY for byte arrays outside a dictionary.
func (c *Column) pageEncodingOK(src *Chunk) bool {
	if c.err != nil || c.codec == nil || src.raw.Codec != c.codec.CompressionCodec() {
		return false
	}
	if c.li.Kind == parquet.ByteArray && c.dictMode() {
		return c.dictPagesOK(src) // dictcopy.go
	}
	return true
}

// checkPagesOK checks, once per chunk, that its pages can be decoded one
// at a time and copied: data pages v2 only, each starting where the last
// ended, and sets the chunk's rows from them.
func (ch *Chunk) checkPagesOK() {
	ch.pagesOK = false
	if !ch.hasRaw {
		return
	}
	var rows int64
	for i := range ch.raw.Pages {
		p := &ch.raw.Pages[i]
		if !p.V2 || p.FirstRow != rows || p.Rows <= 0 || p.Nulls < 0 || p.Nulls > p.Values {
			return
		}
		rows += p.Rows
	}
	if rows > math.MaxInt32 {
		return
	}
	ch.rows = int(rows)
	ch.pagesOK = true
}

// copyPage copies page k of src, which starts at src's read position, and
// advances src past it; false when the page is not one c can take as it
// is (src is then unchanged). A page not decoded yet is skipped, not
// decoded, unless its bounds or bloom filter hashes need its values.
func (c *Column) copyPage(src *Chunk, k int) bool {
	p := &src.raw.Pages[k]
	want := format.Plain
	dict := c.li.Kind == parquet.ByteArray && c.dictMode()
	switch {
	case dict:
		want = format.RLEDictionary
	case c.li.Kind == parquet.ByteArray:
		want = format.DeltaLengthByteArray
	}
	if p.Encoding != want {
		return false
	}
	if dict && !c.dictIdentity(src) {
		// Its dictionary orders values otherwise: its indexes are
		// mapped into c's (dictremap.go).
		return remapPages && c.remapPage(src, k)
	}
	var b bounds
	b.unsigned = c.li.unsigned
	indexed, cut := c.indexBounds(src, k, &b)
	if k == src.next && src.row == src.wrows && indexed && !c.li.Bloom && !(dict && cut) {
		// Not decoded, and nothing before it left in the window: the
		// header's counts (checked against the chunk's footer) are all
		// the output needs; a byte-array page whose index bounds may be
		// cut is decoded at the chunk's end if it can hold the chunk's
		// min or max (resolveCutPages).
		if dict {
			// Its indexes are checked first (the page checks leave them
			// to the decoder): a damaged page fails the job, as it would
			// decoded, instead of being copied.
			if err := src.checkIndexes(k); err != nil {
				src.err = err
				return false
			}
			if !c.holdPage(src, p, &b) {
				return false
			}
		} else if !c.appendPage(src, p, &b, cut) {
			return false
		}
		src.skipPage(k)
		return true
	}
	if cut {
		indexed = false // decoded anyway: its exact bounds cost little
	}
	if !src.need(int(p.Rows)) {
		return false
	}
	// The page's levels and values in the window: they must agree with
	// its header, or the read position would drift after it.
	l0, l1 := src.lvl, src.levelAt(src.row+int(p.Rows))
	if int64(l1-l0) != p.Values {
		return false
	}
	present := l1 - l0
	if c.li.MaxDef > 0 {
		present = countPresent(src.def[l0:l1], c.li.MaxDef)
	}
	if int64(present) != p.Values-p.Nulls {
		return false
	}
	v0, v1 := src.val, src.val+present
	if !indexed {
		b = bounds{unsigned: c.li.unsigned}
		src.valueBounds(c.li.Kind, v0, v1, &b)
	}
	if dict {
		if !c.holdPage(src, p, &b) {
			return false
		}
	} else if !c.appendPage(src, p, &b, false) {
		return false
	}
	if c.li.Bloom {
		for i := v0; i < v1; i++ {
			c.hashes = append(c.hashes, xxhash.Sum64(src.value(i)))
		}
	}
	src.row += int(p.Rows)
	src.lvl, src.val = l1, v1
	return true
}

// appendPage ends c's page and appends p, with bounds b, as the next;
// cut says b are p's column index bounds, which may be cut (byte arrays):
// they go to the output's column index as they are, and to the chunk's
// statistics only once resolveCutPages knows the page's exact ones.
func (c *Column) appendPage(src *Chunk, p *lakeformat.RawPage, b *bounds, cut bool) bool {
	c.endPage() // the rows before this page end their page
	if c.err != nil {
		return false
	}
	off := int64(len(c.out))
	c.out = append(c.out, src.raw.Bytes[p.Off:p.Off+p.Len]...)
	c.nPages++
	c.copied++
	c.md.TotalUncompressedSize += p.Uncompressed
	c.md.NumValues += p.Values
	c.md.Statistics.NullCount += p.Nulls
	lo, hi := b.encode(c.li.Kind)
	if c.li.Kind == parquet.ByteArray {
		lo, hi = truncateIndexBounds(lo, hi)
	}
	c.ci.NullPages = append(c.ci.NullPages, !b.has())
	c.ci.MinValues = append(c.ci.MinValues, lo)
	c.ci.MaxValues = append(c.ci.MaxValues, hi)
	c.ci.NullCounts = append(c.ci.NullCounts, p.Nulls)
	c.oi.PageLocations = append(c.oi.PageLocations, format.PageLocation{Offset: off,
		CompressedPageSize: int32(p.Len), FirstRowIndex: c.rows})
	if cut {
		c.cut.add(&c.cb, int(off), p.Len, b, src)
	} else {
		c.cb.merge(c.li.Kind, b)
	}
	c.rows += p.Rows
	c.startPage()
	return true
}

// PagesCopied is the number of pages of the chunk copied verbatim.
func (c *Column) PagesCopied() int { return c.copied }

// countPresent counts the levels equal to max.
func countPresent(def []byte, max byte) int {
	if max == 1 {
		return bytes.Count(def, one)
	}
	n := 0
	for _, d := range def {
		if d == max {
			n++
		}
	}
	return n
}

// indexBounds sets b to page k's bounds from src's column index, when it
// has one: ok when they are exact (fixed-width values; byte arrays when
// neither bound was cut to ColumnIndexSizeLimit bytes, or when the page's
// header holds the exact ones: headerBounds), or cut when they
// are byte-array bounds that may have been (a lower bound that is a
// prefix of the page's min, an upper bound above its max).
func (c *Column) indexBounds(src *Chunk, k int, b *bounds) (ok, cut bool) {
	ci := src.raw.ColumnIndex()
	if ci == nil {
		return false, false
	}
	if ci.NullPages[k] {
		return true, false // no value, no bound
	}
	lo, hi := ci.MinValues[k], ci.MaxValues[k]
	switch c.li.Kind {
	case parquet.Int64:
		if len(lo) != 8 || len(hi) != 8 {
			return false, false
		}
		b.addInt(int64(binary.LittleEndian.Uint64(lo)))
		b.addInt(int64(binary.LittleEndian.Uint64(hi)))
	case parquet.Int32:
		if len(lo) != 4 || len(hi) != 4 {
			return false, false
		}
		for _, v := range [2][]byte{lo, hi} {
			u := binary.LittleEndian.Uint32(v)
			if c.li.unsigned {
				b.addInt(int64(u))
			} else {
				b.addInt(int64(int32(u)))
			}
		}
	case parquet.Double:
		if len(lo) != 8 || len(hi) != 8 {
			return false, false
		}
		flo, fhi := math.Float64frombits(binary.LittleEndian.Uint64(lo)), math.Float64frombits(binary.LittleEndian.Uint64(hi))
		if flo != flo || fhi != fhi {
			// NaN bounds: every value of the page is NaN, or the
			// writer was not ours; the values tell.
			return false, false
		}
		b.addFloat(flo)
		b.addFloat(fhi)
	case parquet.Boolean:
		if len(lo) != 1 || len(hi) != 1 || lo[0] > 1 || hi[0] > 1 {
			return false, false
		}
		b.addInt(int64(lo[0]))
		b.addInt(int64(hi[0]))
	case parquet.ByteArray:
		if len(lo) > ColumnIndexSizeLimit || len(hi) > ColumnIndexSizeLimit || bytes.Compare(lo, hi) > 0 {
			return false, false // not cut as ours are: decode the page
		}
		if len(lo) == ColumnIndexSizeLimit || len(hi) == ColumnIndexSizeLimit {
			if xlo, xhi, ok := src.headerBounds(k, lo, hi); ok {
				b.addBytes(xlo) // exact, from the page's header (pagestats.go)
				b.addBytes(xhi)
				return true, false
			}
			b.addBytes(lo)
			b.addBytes(hi)
			return true, true
		}
		b.addBytes(lo)
		b.addBytes(hi)
		return true, false
	default:
		return false, false
	}
	return true, false
}

// valueBounds adds the decoded values [v0, v1) to b.
func (ch *Chunk) valueBounds(kind parquet.Kind, v0, v1 int, b *bounds) {
	switch kind {
	case parquet.Int64:
		for _, v := range ch.i64[v0:v1] {
			b.addInt(v)
		}
	case parquet.Int32:
		for _, v := range ch.i32[v0:v1] {
			if b.unsigned {
				b.addInt(int64(uint32(v)))
			} else {
				b.addInt(int64(v))
			}
		}
	case parquet.Double:
		for _, v := range ch.f64[v0:v1] {
			b.addFloat(v)
		}
	case parquet.Boolean:
		for _, v := range ch.bools[v0:v1] {
			if v {
				b.addInt(1)
			} else {
				b.addInt(0)
			}
		}
	case parquet.ByteArray:
		for i := v0; i < v1; i++ {
			b.addBytes(ch.value(i))
		}
	}
}

// cutPages are the byte-array pages of a chunk copied verbatim without
// being decoded whose column index bounds may be cut to
// ColumnIndexSizeLimit bytes: a cut lower bound is a prefix of the page's
// min (no greater), a cut upper bound a prefix of its max incremented
// (greater), while chunk statistics hold whole values. Bounds that are
// whole (shorter than the limit) go to the chunk's statistics at once;
// the input chunk's statistics narrow the others (every page of it lies
// within them).
type cutPages struct {
	pages  []cutPage
	buf    []byte // the pages' bounds
	lo, hi []byte // scratch of decoded bounds
}

// cutPage is a page of Column.out, lo no greater than its min, hi no less
// than its max.
type cutPage struct {
	off, len int
	lo, hi   [2]int32 // in cutPages.buf
	loWhole  bool     // lo is the page's min (then it is in the chunk's statistics)
	hiWhole  bool
	hiInf    bool // no upper bound: a cut bound of all 0xff bytes, as parquet-go leaves it
	decoded  bool
}

func (cp *cutPages) reset() { cp.pages, cp.buf = cp.pages[:0], cp.buf[:0] }

func (cp *cutPages) bound(s [2]int32) []byte { return cp.buf[s[0]:s[1]:s[1]] }

func (cp *cutPages) keep(v []byte) [2]int32 {
	s := [2]int32{int32(len(cp.buf)), int32(len(cp.buf) + len(v))}
	cp.buf = append(cp.buf, v...)
	return s
}

// add records the page at off (n bytes) of c.out, with index bounds b, of
// input chunk src, and adds its whole bounds to the chunk's cb.
func (cp *cutPages) add(cb *bounds, off, n int, b *bounds, src *Chunk) {
	lo, hi := b.bMin, b.bMax
	p := cutPage{off: off, len: n, loWhole: len(lo) < ColumnIndexSizeLimit, hiWhole: len(hi) < ColumnIndexSizeLimit}
	for _, v := range [2][]byte{lo, hi} {
		if len(v) < ColumnIndexSizeLimit {
			cb.merge(parquet.ByteArray, &bounds{ok: true, bMin: v, bMax: v})
		}
	}
	p.hiInf = !p.hiWhole && bytes.Count(hi, []byte{0xff}) == len(hi)
	if clo, chi, ok := src.raw.ChunkBounds(); ok {
		if !p.loWhole && bytes.Compare(clo, lo) > 0 {
			lo = clo
		}
		if !p.hiWhole && (p.hiInf || bytes.Compare(chi, hi) < 0) {
			hi, p.hiInf = chi, false
		}
	}
	p.lo, p.hi = cp.keep(lo), cp.keep(hi)
	cp.pages = append(cp.pages, p)
}

// resolveCutPages completes the chunk's statistics with the exact bounds
// of the cut pages that can hold its min or max: while a page's lower
// bound is below the chunk's min so far (or its upper bound above the
// max), the page of the least lower bound (greatest upper) is decoded,
// from its copy in c.out, and its exact bounds added. Pages whose bounds
// cannot beat the values known are never decoded. Call it once the
// chunk's last page is ended.
func (c *Column) resolveCutPages() {
	cp := &c.cut
	for c.err == nil {
		best := -1
		for i := range cp.pages {
			p := &cp.pages[i]
			if p.decoded || p.loWhole || c.cb.ok && bytes.Compare(cp.bound(p.lo), c.cb.bMin) >= 0 {
				continue
			}
			if best < 0 || bytes.Compare(cp.bound(p.lo), cp.bound(cp.pages[best].lo)) < 0 {
				best = i
			}
		}
		if best < 0 {
			break
		}
		c.decodeCutPage(best)
	}
	for c.err == nil {
		best := -1
		for i := range cp.pages {
			p := &cp.pages[i]
			if p.decoded || p.hiWhole || !p.hiInf && c.cb.ok && bytes.Compare(cp.bound(p.hi), c.cb.bMax) <= 0 {
				continue
			}
			if b := &cp.pages[max(best, 0)]; best < 0 || p.hiInf && !b.hiInf ||
				p.hiInf == b.hiInf && bytes.Compare(cp.bound(p.hi), cp.bound(b.hi)) > 0 {
				best = i
			}
		}
		if best < 0 {
			break
		}
		c.decodeCutPage(best)
	}
}

// decodeCutPage adds the exact bounds of cut page i to the chunk's.
func (c *Column) decodeCutPage(i int) {
	cp := &c.cut
	p := &cp.pages[i]
	p.decoded = true
	lo, hi, has, err := lakeformat.ByteArrayPageBounds(c.out[p.off:p.off+p.len], c.codec.CompressionCodec(),
		int(c.li.MaxDef), int(c.li.MaxRep), cp.lo[:0], cp.hi[:0])
	cp.lo, cp.hi = lo, hi
	if err != nil {
		c.fail(fmt.Errorf("column %v: bounds of a copied page: %w", c.li.Path, err))
		return
	}
	if has {
		c.cb.merge(parquet.ByteArray, &bounds{ok: true, bMin: lo, bMax: hi})
	}
	c.cutDecoded++
}

// CutPagesDecoded is how many pages of the chunk copied without being
// decoded were decoded after all for the chunk's exact statistics.
func (c *Column) CutPagesDecoded() int { return c.cutDecoded }
