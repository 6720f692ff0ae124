package pqenc

import (
	"bytes"
	"fmt"

	"github.com/parquet-go/parquet-go/format"

	lakeformat "github.com/sluice-dev/sluice/internal/lake/format"
)

// This file copies dictionary-encoded (RLE_DICTIONARY) pages of a Chunk
// into a Column as they are. Their indexes point into the input chunk's
// dictionary, so a page can be copied only when the output chunk's
// dictionary gives every value of the input's the same index: the output
// chunk takes the input's dictionary (its values, in their order) when it
// has none yet, and an input whose dictionary starts with the output's
// (the output's values, in their order, then values it lacks, which are
// appended) is copied too. Inputs written from similar data (successive
// flushes of one source) often have such dictionaries; others are copied
// row by row as before, their indexes translated. The output's dictionary
// may then hold values no row of the chunk uses, which Parquet allows.
//
// A data page of a dictionary chunk is held until the chunk's dictionary
// page is written (it comes first): a copied page is held as its bytes
// (Column.held) among the pages of index runs, in order, and written as
// it is after the dictionary page. If the dictionary then outgrows
// MaxDictBytes, the held pages are written with their values after all:
// a copied page is decoded for its indexes (heldRuns).
//
// Dictionary copies are off unless the caller allows them for the chunk
// (AllowDictPages): a dictionary that holds unused values does not suit a
// column whose dictionary the caller reads as the set of the chunk's
// values (compaction's service and metric names).

// AllowDictPages lets CopyRowsPages copy dictionary-encoded pages of the
// chunk begun by the last Reset verbatim (off after each Reset).
func (c *Column) AllowDictPages(ok bool) { c.dictCopy = ok }

// DictPagesCopied is the number of dictionary-encoded pages of the chunk
// copied verbatim (counted in PagesCopied too).
func (c *Column) DictPagesCopied() int { return c.dictCopied }

// dictPagesOK reports whether c may copy dictionary pages of src: c
// writes a dictionary, without a bloom filter (whose hashes need the
// values), and src is decoded by the typed decoder.
func (c *Column) dictPagesOK(src *Chunk) bool {
	return c.dictCopy && c.dictMode() && !c.li.Bloom && src.typed
}

// dictIdentity reports whether every index of src's dictionary is the
// same value's index in c's dictionary, making it so when it can: when
// c's dictionary is a prefix of src's (or src's of c's), src's values it
// lacks are appended in order, unless they would take it past
// MaxDictBytes. Computed once per src chunk and c chunk.
func (c *Column) dictIdentity(src *Chunk) bool {
	if src.identEpoch == c.epoch {
		return src.identOK
	}
	src.identEpoch, src.identOK = c.epoch, false
	if !src.loadDict() {
		return false
	}
	nd, nc := len(src.dictOffs)-1, c.dict.len()
	for i := range int32(min(nd, nc)) {
		if !bytes.Equal(c.dict.value(i), src.dictValue(i)) {
			return false
		}
	}
	if nd > nc {
		add := 0
		for i := nc; i < nd; i++ {
			add += 4 + len(src.dictValue(int32(i)))
		}
		if c.li.MaxDictBytes > 0 && len(c.dict.vals)+add > c.li.MaxDictBytes {
			return false
		}
		for i := nc; i < nd; i++ {
			if c.dict.index(src.dictValue(int32(i))) != int32(i) {
				return false // src's dictionary repeats a value
			}
		}
	}
	// Rows of src copied one by one (CopyRows) translate through xlat:
	// the identity, whatever they translated to before (the same).
	src.xlat = src.xlat[:0]
	for i := range int32(nd) {
		src.xlat = append(src.xlat, i)
	}
	src.xlatEpoch = c.epoch
	src.identOK = true
	return true
}

// loadDict decodes src's dictionary page, if its chunk has one and no
// value was decoded yet; false when the chunk's values are not (or no
// longer) dictionary indexes.
func (ch *Chunk) loadDict() bool {
	if len(ch.dictOffs) > 0 {
		return ch.indexed
	}
	if ch.indexed || len(ch.offs) != 1 || ch.raw.DictValues() == 0 || ch.err != nil {
		return false
	}
	pd := getPageDec()
	defer putPageDec(pd)
	vals, offs, err := pd.DecodeDict(&ch.raw)
	if err == nil && len(offs) != ch.raw.DictValues()+1 {
		err = fmt.Errorf("%w: %d dictionary offsets for %d values", ErrCorrupt, len(offs), ch.raw.DictValues())
	}
	if err != nil {
		ch.err = err
		return false
	}
	ch.dict = append(ch.dict[:0], vals...)
	ch.dictOffs = append(ch.dictOffs[:0], offs...)
	ch.indexed = true
	return true
}

// checkIndexes decodes dictionary page k of the chunk, which is to be
// copied without being decoded into the window, to check its levels and
// its indexes against the chunk's dictionary and its header's counts.
func (ch *Chunk) checkIndexes(k int) error {
	pd := getPageDec()
	defer putPageDec(pd)
	var p lakeformat.DecodedPage
	if err := pd.DecodePage(&ch.raw, k, &p); err != nil {
		return err
	}
	rp := &ch.raw.Pages[k]
	if int64(p.N) != rp.Values || int64(p.NonNull) != rp.Values-rp.Nulls || !p.Indexed || len(p.Idx) != p.NonNull {
		return fmt.Errorf("%w: dictionary page %d decodes to %d values (%d present), its header says %d (%d nulls)",
			ErrCorrupt, k, p.N, p.NonNull, rp.Values, rp.Nulls)
	}
	return nil
}

// holdPage ends c's page and holds page p of src, copied verbatim, with
// bounds b as the chunk's next page.
func (c *Column) holdPage(src *Chunk, p *lakeformat.RawPage, b *bounds) bool {
	hl, rl, dl, ok := p.LevelSpans()
	if !ok {
		return false
	}
	c.endPage() // the rows before this page end their page
	if c.err != nil || !c.dictMode() {
		return false // (endPage cannot fall back; a failure can)
	}
	off := len(c.held)
	c.held = append(c.held, src.raw.Bytes[p.Off:p.Off+p.Len]...)
	raw := c.held[off : off+p.Len : off+p.Len]
	rec := pageRec{nVals: int(p.Values), nNulls: int(p.Nulls), nRows: int(p.Rows), firstRow: c.rows,
		rawOff: off, rawLen: p.Len, rawUnc: p.Uncompressed}
	rec.rep = raw[hl : hl+rl : hl+rl]
	rec.def = raw[hl+rl : hl+rl+dl : hl+rl+dl]
	// b aliases src's column index or page header, which the page
	// outlives: its bounds are held after it (held only grows until
	// the chunk ends, so what is held stays put).
	rec.b = bounds{unsigned: b.unsigned, ok: b.ok}
	if b.ok {
		l0 := len(c.held)
		c.held = append(c.held, b.bMin...)
		l1 := len(c.held)
		c.held = append(c.held, b.bMax...)
		rec.b.bMin, rec.b.bMax = c.held[l0:l1:l1], c.held[l1:len(c.held):len(c.held)]
	}
	c.pages = append(c.pages, rec)
	c.copied++
	c.dictCopied++
	c.rows += p.Rows
	c.startPage()
	return true
}

// writeHeld appends held page p to the chunk as it is, after its
// dictionary page.
func (c *Column) writeHeld(p *pageRec) {
	raw := c.held[p.rawOff : p.rawOff+p.rawLen]
	off := int64(len(c.out))
	c.out = append(c.out, raw...)
	c.nPages++
	c.md.TotalUncompressedSize += p.rawUnc
	c.md.NumValues += int64(p.nVals)
	c.md.Statistics.NullCount += int64(p.nNulls)
	lo, hi := p.b.encode(c.li.Kind)
	lo, hi = truncateIndexBounds(lo, hi)
	c.ci.NullPages = append(c.ci.NullPages, !p.b.has())
	c.ci.MinValues = append(c.ci.MinValues, lo)
	c.ci.MaxValues = append(c.ci.MaxValues, hi)
	c.ci.NullCounts = append(c.ci.NullCounts, int64(p.nNulls))
	c.oi.PageLocations = append(c.oi.PageLocations, format.PageLocation{Offset: off,
		CompressedPageSize: int32(p.rawLen), FirstRowIndex: p.firstRow})
	c.cb.merge(c.li.Kind, &p.b)
}

// heldRuns decodes held page p's indexes (into c's dictionary: the
// page's input dictionary was the identity) as runs, when the chunk falls
// back to plain values (toPlain).
func (c *Column) heldRuns(p *pageRec) []idxRun {
	var err error
	c.idxTmp, err = lakeformat.DictPageIndexes(c.held[p.rawOff:p.rawOff+p.rawLen], c.codec.CompressionCodec(),
		int(c.li.MaxDef), int(c.li.MaxRep), c.dict.len(), c.idxTmp[:0])
	if err == nil && len(c.idxTmp) != p.nVals-p.nNulls {
		err = fmt.Errorf("%w: %d indexes for %d values", ErrCorrupt, len(c.idxTmp), p.nVals-p.nNulls)
	}
	if err != nil {
		c.fail(fmt.Errorf("column %v: indexes of a copied page: %w", c.li.Path, err))
		return nil
	}
	var runs []idxRun
	for _, x := range c.idxTmp {
		if k := len(runs) - 1; k >= 0 && runs[k].v == x {
			runs[k].n++
		} else {
			runs = append(runs, idxRun{x, 1})
		}
	}
	return runs
}
