package pqenc

// This file copies dictionary-encoded pages of a Chunk whose dictionary
// orders its values otherwise than the output chunk's (dictcopy.go takes
// only inputs whose dictionaries extend the output's): the page's indexes
// are decoded as runs, never one value each, mapped into the output's
// dictionary (values it lacks are added, only those the page uses), and
// held as the output's index runs, with the page's levels as they are
// (RLE bytes, never decoded into the window or encoded again). Like any
// page of index runs, it is compressed again when the chunk is written:
// a remap, not a verbatim copy. Its bounds are those of the dictionary
// values its runs use, exact whatever the input's column index cut.

// DictPagesRemapped is the number of dictionary-encoded pages of the
// chunk whose indexes were rewritten into its dictionary (remapPage)
// rather than copied row by row.
func (c *Column) DictPagesRemapped() int { return c.remapped }

// remapPage appends dictionary page k of src, which starts at src's read
// position and is not decoded yet, as a page of c's index runs, and
// advances src past it; false when it cannot (src is then unchanged, and
// the rows go through CopyRows). Call it only where c writes a
// dictionary (dictMode) and may copy src's pages (dictPagesOK).
func (c *Column) remapPage(src *Chunk, k int) bool {
	if k != src.next || src.row != src.wrows || !src.loadDict() {
		return false // decoded already, or not dictionary indexes
	}
	p := &src.raw.Pages[k]
	hl, rl, dl, ok := p.LevelSpans()
	if !ok {
		return false
	}
	pd := getPageDec()
	runs, err := pd.DictPageRuns(&src.raw, k)
	if err != nil {
		putPageDec(pd)
		src.err = err
		return false
	}
	nd := len(src.dictOffs) - 1
	if src.xlatEpoch != c.epoch {
		src.xlat = src.xlat[:0]
		for range nd {
			src.xlat = append(src.xlat, -1)
		}
		src.xlatEpoch = c.epoch
	}
	c.remapTmp = c.remapTmp[:0]
	for _, r := range runs {
		x := src.xlat[r.V] // r.V < nd: the decoder checked it
		if x < 0 {
			if x, ok = c.dictIndex(src.dictValue(r.V)); !ok {
				// The dictionary outgrew MaxDictBytes: the chunk is
				// plain now, and the page's rows are copied as values.
				putPageDec(pd)
				return false
			}
			src.xlat[r.V] = x
		}
		if n := len(c.remapTmp) - 1; n >= 0 && c.remapTmp[n].v == x {
			c.remapTmp[n].n += r.N
		} else {
			c.remapTmp = append(c.remapTmp, idxRun{x, r.N})
		}
	}
	putPageDec(pd)

	c.endPage() // the rows before this page end their page
	if c.err != nil || !c.dictMode() {
		return false // (endPage cannot fall back; a failure can)
	}
	raw := src.raw.Bytes[p.Off : p.Off+p.Len]
	// The levels alias c.levels, as endPage's do: later pages only
	// append, so what a page sees stays put.
	l0 := len(c.levels)
	c.levels = append(c.levels, raw[hl:hl+rl]...)
	l1 := len(c.levels)
	c.levels = append(c.levels, raw[hl+rl:hl+rl+dl]...)
	l2 := len(c.levels)
	rec := pageRec{nVals: int(p.Values), nNulls: int(p.Nulls), nRows: int(p.Rows), firstRow: c.rows}
	rec.rep, rec.def = c.levels[l0:l1:l1], c.levels[l1:l2:l2]
	r0 := len(c.runs)
	c.runs = append(c.runs, c.remapTmp...)
	rec.runs = c.runs[r0:]
	c.runStart = len(c.runs)
	for _, r := range rec.runs {
		c.see(r.v)
	}
	c.seenBounds()
	rec.b = c.b
	c.b = bounds{unsigned: c.li.unsigned}
	c.pages = append(c.pages, rec)
	c.rows += p.Rows
	c.startPage()
	c.remapped++
	src.skipPage(k)
	return true
}
