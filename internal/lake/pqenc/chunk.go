package pqenc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/bloom/xxhash"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// Chunk is one column chunk of a row group, decoded: its levels and
// non-null values in memory, read front to back by Column.CopyRows. Its
// buffers are reused by the next Read.
type Chunk struct {
	kind           parquet.Kind
	maxDef, maxRep byte
	rows           int

	def, rep []byte  // one per level entry; nil when the max level is 0
	rowLvl   []int32 // repeated columns: first level entry of each row, and the end

	i64   []int64
	i32   []int32
	f64   []float64
	bools []bool
	// Byte arrays: plain values (data, offs; len(offs) = values + 1), or,
	// when every page of the chunk was dictionary encoded, dictionary
	// indexes into the chunk's dictionary.
	data     []byte
	offs     []uint32
	indexed  bool
	idx      []int32
	dict     []byte
	dictOffs []uint32

	// xlat maps dictionary indexes to those of the output chunk of epoch
	// xlatEpoch (-1: not yet added there).
	xlat      []int32
	xlatEpoch uint64
	// identOK: the output chunk of epoch identEpoch gives every value of
	// the chunk's dictionary its index here (dictcopy.go).
	identEpoch uint64
	identOK    bool

	// The read position in the window: next row, its first level entry
	// and value. The window holds the decoded rows [row0, row0+wrows) of
	// the chunk: pages [.., next) of raw.Pages, less the rows dropped
	// behind the read position (a chunk decoded whole: every row).
	row, lvl, val int
	row0, wrows   int
	next          int
	dec           parquet.Pages // decodes page next on; nil: open one there
	err           error
	skipped       int // pages skipped, not decoded (copied verbatim)

	expect int // the chunk's level entries, per its metadata

	// raw is the chunk's bytes and page spans (checked), for copying
	// whole pages verbatim (CopyRowsPages); hasRaw is false for chunks
	// not read from a file.
	raw     format.RawChunk
	hasRaw  bool
	pagesOK bool // raw's pages may be copied (checkPagesOK)
	typed   bool // raw's pages decode with format's typed decoder (decodeTyped)
	pg      int  // CopyRowsPages' cursor into raw.Pages
}

var one = []byte{1}

// ErrCorrupt is wrapped by errors of chunks whose pages disagree with
// their schema or with each other.
var ErrCorrupt = errors.New("pqenc: corrupt column chunk")

// Read reads cc, a chunk of a leaf with the given maximum levels, into ch
// and rewinds ch to its first row. A chunk of a file whose pages are all
// data pages v2 is read whole but decoded lazily, a page at a time as the
// read position reaches it; pages behind the read position are dropped,
// and pages copied verbatim (CopyRowsPages) are never decoded. Other
// chunks are decoded whole. sizeHint, the chunk's uncompressed size if
// known, sizes the buffers of a chunk decoded whole once instead of by
// doubling.
func (ch *Chunk) Read(cc parquet.ColumnChunk, maxDef, maxRep int, sizeHint int64) (err error) {
	defer func() {
		// parquet-go panics on some corrupt pages.
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
		if err != nil {
			ch.err = err
		}
	}()
	ch.closeDecoder()
	ch.err = nil
	ch.kind = cc.Type().Kind()
	ch.maxDef, ch.maxRep = byte(maxDef), byte(maxRep)
	ch.def, ch.rep, ch.rowLvl = ch.def[:0], ch.rep[:0], ch.rowLvl[:0]
	ch.i64, ch.i32, ch.f64, ch.bools = ch.i64[:0], ch.i32[:0], ch.f64[:0], ch.bools[:0]
	ch.data, ch.offs = ch.data[:0], append(ch.offs[:0], 0)
	ch.expect = 0
	ch.indexed, ch.idx, ch.dict, ch.dictOffs = false, ch.idx[:0], ch.dict[:0], ch.dictOffs[:0]
	ch.xlatEpoch, ch.identEpoch = 0, 0
	ch.row, ch.lvl, ch.val = 0, 0, 0
	ch.row0, ch.wrows, ch.next, ch.rows = 0, 0, 0, 0
	ch.pg, ch.pagesOK, ch.hasRaw, ch.skipped, ch.typed = 0, false, false, 0, false
	if _, ok := cc.(*parquet.FileColumnChunk); ok {
		if err := format.ReadRawChunk(cc, &ch.raw); err != nil {
			return err
		}
		ch.hasRaw = true
		if ch.checkPagesOK(); ch.pagesOK {
			ch.typed = ch.raw.Typed()
			if maxRep > 0 {
				ch.rowLvl = append(ch.rowLvl, 0)
			}
			return nil // decoded as read
		}
	}
	if cc.Type().Kind() == parquet.ByteArray && int64(cap(ch.data)) < sizeHint {
		// Headroom: the next input's chunk of this column is likely a
		// little larger.
		ch.data = make([]byte, 0, sizeHint+sizeHint/8)
	}
	// Size the level and value buffers once: growing them by doubling
	// copied every chunk several times.
	if nv := int(min(cc.NumValues(), 1<<24)); nv > 0 {
		if maxDef > 0 {
			ch.def = slices.Grow(ch.def, nv)
		}
		if maxRep > 0 {
			ch.rep = slices.Grow(ch.rep, nv)
		}
		switch cc.Type().Kind() {
		case parquet.Int64:
			ch.i64 = slices.Grow(ch.i64, nv)
		case parquet.Int32:
			ch.i32 = slices.Grow(ch.i32, nv)
		case parquet.Double:
			ch.f64 = slices.Grow(ch.f64, nv)
		}
		ch.expect = nv // byte arrays: offs or idx, on the first page
	}
	levels, values := 0, 0
	// Checked: a damaged page fails, never exhausts memory.
	var pages parquet.Pages
	if ch.hasRaw {
		pages = ch.raw.DecodePages()
	} else {
		pages = format.Pages(cc)
	}
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		n, nn, err := ch.addPage(p)
		parquet.Release(p)
		if err != nil {
			return err
		}
		levels += n
		values += nn
	}
	if got := ch.numValues(); got != values {
		return fmt.Errorf("%w: %d values for %d present levels", ErrCorrupt, got, values)
	}
	ch.rows = levels
	if maxRep > 0 {
		for i, r := range ch.rep {
			if r == 0 {
				ch.rowLvl = append(ch.rowLvl, int32(i))
			}
		}
		ch.rows = len(ch.rowLvl)
		ch.rowLvl = append(ch.rowLvl, int32(len(ch.rep)))
		if levels > 0 && (len(ch.rep) == 0 || ch.rep[0] != 0) {
			return fmt.Errorf("%w: a list starts with repetition level %d", ErrCorrupt, ch.rep[0])
		}
	}
	ch.wrows = ch.rows
	ch.next = len(ch.raw.Pages)
	if !ch.hasRaw {
		ch.next = 0
	}
	return nil
}

// Err is the error that stopped decoding the chunk's pages, if any: a
// page that passed the checks but failed to decode. The chunk's methods
// then do nothing; the caller fails its job with this error.
func (ch *Chunk) Err() error { return ch.err }

// need decodes pages until the window holds the next n rows; false (and
// ch.err set) when it cannot.
func (ch *Chunk) need(n int) bool {
	if ch.row+n <= ch.wrows && ch.err == nil {
		return true
	}
	return ch.decodeTo(n)
}

func (ch *Chunk) decodeTo(n int) bool {
	for ch.row+n > ch.wrows {
		if ch.err != nil {
			return false
		}
		if err := ch.decodeNext(); err != nil {
			ch.err = err
			return false
		}
	}
	return ch.err == nil
}

// decodeNext decodes the next page into the window, first dropping the
// rows behind the read position.
func (ch *Chunk) decodeNext() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	if !ch.pagesOK || ch.next >= len(ch.raw.Pages) {
		return fmt.Errorf("%w: rows past the chunk's %d", ErrCorrupt, ch.rows)
	}
	rp := &ch.raw.Pages[ch.next]
	var n, nn, l0 int
	if ch.typed {
		ch.dropConsumed()
		l0 = len(ch.rep)
		if n, nn, err = ch.decodeTyped(ch.next); err != nil {
			return err
		}
	} else {
		if ch.dec == nil {
			ch.dec = ch.raw.DecodePagesFrom(ch.next)
		}
		p, err := ch.dec.ReadPage()
		if err != nil {
			if err == io.EOF {
				err = fmt.Errorf("%w: page %d missing", ErrCorrupt, ch.next)
			}
			return err
		}
		ch.dropConsumed()
		l0 = len(ch.rep)
		n, nn, err = ch.addPage(p)
		parquet.Release(p)
		if err != nil {
			return err
		}
	}
	if int64(n) != rp.Values || int64(nn) != rp.Values-rp.Nulls {
		return fmt.Errorf("%w: page %d decodes to %d values (%d present), its header says %d (%d nulls)",
			ErrCorrupt, ch.next, n, nn, rp.Values, rp.Nulls)
	}
	rows := n
	if ch.maxRep > 0 {
		if n > 0 && ch.rep[l0] != 0 {
			return fmt.Errorf("%w: a list starts with repetition level %d", ErrCorrupt, ch.rep[l0])
		}
		ch.rowLvl = ch.rowLvl[:len(ch.rowLvl)-1] // the end
		r0 := len(ch.rowLvl)
		for i, r := range ch.rep[l0:] {
			if r == 0 {
				ch.rowLvl = append(ch.rowLvl, int32(l0+i))
			}
		}
		rows = len(ch.rowLvl) - r0
		ch.rowLvl = append(ch.rowLvl, int32(len(ch.rep)))
	}
	if int64(rows) != rp.Rows {
		return fmt.Errorf("%w: page %d holds %d rows, its header says %d", ErrCorrupt, ch.next, rows, rp.Rows)
	}
	ch.wrows += rows
	ch.next++
	if ch.next == len(ch.raw.Pages) {
		ch.closeDecoder()
	}
	return nil
}

// dropConsumed drops the window's rows before the read position.
func (ch *Chunk) dropConsumed() {
	r, l, v := ch.row, ch.lvl, ch.val
	if r == 0 {
		return
	}
	if ch.maxDef > 0 {
		ch.def = ch.def[:copy(ch.def, ch.def[l:])]
	}
	if ch.maxRep > 0 {
		ch.rep = ch.rep[:copy(ch.rep, ch.rep[l:])]
		k := copy(ch.rowLvl, ch.rowLvl[r:])
		ch.rowLvl = ch.rowLvl[:k]
		for i := range ch.rowLvl {
			ch.rowLvl[i] -= int32(l)
		}
	}
	switch ch.kind {
	case parquet.Int64:
		ch.i64 = ch.i64[:copy(ch.i64, ch.i64[v:])]
	case parquet.Int32:
		ch.i32 = ch.i32[:copy(ch.i32, ch.i32[v:])]
	case parquet.Double:
		ch.f64 = ch.f64[:copy(ch.f64, ch.f64[v:])]
	case parquet.Boolean:
		ch.bools = ch.bools[:copy(ch.bools, ch.bools[v:])]
	case parquet.ByteArray:
		if ch.indexed {
			ch.idx = ch.idx[:copy(ch.idx, ch.idx[v:])]
			break
		}
		base := ch.offs[v]
		ch.data = ch.data[:copy(ch.data, ch.data[base:])]
		k := copy(ch.offs, ch.offs[v:])
		ch.offs = ch.offs[:k]
		for i := range ch.offs {
			ch.offs[i] -= base
		}
	}
	ch.row0 += r
	ch.wrows -= r
	ch.row, ch.lvl, ch.val = 0, 0, 0
}

// skipPage moves the read position past page k, the next to decode, at
// which it stands with the window consumed, without decoding it.
func (ch *Chunk) skipPage(k int) {
	ch.dropConsumed()
	ch.row0 += int(ch.raw.Pages[k].Rows)
	ch.next++
	ch.skipped++
	ch.closeDecoder()
}

func (ch *Chunk) closeDecoder() {
	if ch.dec != nil {
		ch.dec.Close()
		ch.dec = nil
	}
}

// Release closes what reading the chunk holds besides its buffers (a
// page decoder mid-chunk); the next Read reopens it.
func (ch *Chunk) Release() { ch.closeDecoder() }

// maxAhead bounds the rows one call decodes ahead of a chunk's read
// position: longer calls go a step at a time, dropping the rows behind,
// so that a chunk read a page at a time holds at most about maxAhead rows
// and a page decoded, however long the merge's runs and blocks (a block
// of short runs is up to an output row group).
const maxAhead = 8192

// maxAheadBytes is how many uncompressed bytes of pages PresentSpan
// decodes ahead: a sparse column's pages (mostly nulls) are small, and
// their exact spans spare the merge looking at each run; a dense
// column's span is about its pages' anyway.
const maxAheadBytes = 256 << 10

// PresentSpan returns the first and last of the next n rows that are not
// null, relative to the read position, or -1, -1 when all are null. Of a
// chunk read a page at a time whose rows ahead not decoded yet are more
// than maxAhead, or whose pages ahead are larger than maxAheadBytes, the
// span is its pages': a page whose header counts only nulls is null, any
// other may hold values (the span may be wider than the rows', never
// narrower). (Dictionary pages take few bytes for many rows: bounded by
// bytes only, a block of short runs decoded an output row group of every
// dictionary column of every input ahead, 5 bytes a row.)
func (ch *Chunk) PresentSpan(n int) (first, last int) {
	if n > 1 && ch.pagesOK && ch.err == nil && (n-(ch.wrows-ch.row) > maxAhead || ch.bytesAhead(n) > maxAheadBytes) {
		return ch.pagesPresentSpan(n)
	}
	if n == 0 || !ch.need(n) {
		return -1, -1
	}
	if ch.maxDef == 0 {
		return 0, n - 1
	}
	if ch.maxRep == 0 && ch.maxDef == 1 {
		lv := ch.def[ch.row : ch.row+n]
		return bytes.IndexByte(lv, 1), bytes.LastIndexByte(lv, 1)
	}
	first, last = -1, -1
	for r := range n {
		if ch.def[ch.levelAt(ch.row+r)] != 0 {
			first = r
			break
		}
	}
	for r := n - 1; r > first && first >= 0; r-- {
		if ch.def[ch.levelAt(ch.row+r)] != 0 {
			last = r
			break
		}
	}
	if first >= 0 && last < 0 {
		last = first
	}
	return first, last
}

// bytesAhead is the uncompressed size of the pages not decoded yet that
// hold the next n rows.
func (ch *Chunk) bytesAhead(n int) int64 {
	end := int64(ch.Row() + n)
	var b int64
	for i := ch.next; i < len(ch.raw.Pages) && ch.raw.Pages[i].FirstRow < end; i++ {
		b += ch.raw.Pages[i].Uncompressed
	}
	return b
}

// pagesPresentSpan is PresentSpan from the page headers of the next n
// rows: the rows of the first and last page that may hold a value.
func (ch *Chunk) pagesPresentSpan(n int) (first, last int) {
	start := int64(ch.Row())
	end := start + int64(n)
	first, last = -1, -1
	for i := range ch.raw.Pages {
		p := &ch.raw.Pages[i]
		if p.FirstRow+p.Rows <= start {
			continue
		}
		if p.FirstRow >= end {
			break
		}
		if ch.maxDef == 1 && ch.maxRep == 0 && p.Nulls == p.Values {
			continue // every row null
		}
		if first < 0 {
			first = int(max(p.FirstRow, start) - start)
		}
		last = int(min(p.FirstRow+p.Rows, end) - start - 1)
	}
	return first, last
}

// SkipNullRows skips the next n rows, which the caller knows are null
// (PresentSpan).
func (ch *Chunk) SkipNullRows(n int) {
	for n > 0 && ch.err == nil {
		k := ch.stepRows(n)
		if !ch.need(k) {
			return
		}
		ch.row += k
		ch.lvl = ch.levelAt(ch.row)
		n -= k
	}
}

// SkipNulls skips the next n rows and reports true when they are all null
// (one level entry each); otherwise it does nothing and reports false.
// Past maxAhead rows it reports false without looking: the caller copies
// them, nulls as they are.
func (ch *Chunk) SkipNulls(n int) bool {
	if n > maxAhead && ch.pagesOK {
		return false
	}
	if !ch.need(n) {
		return true // the job fails with ch.Err
	}
	if ch.maxDef == 0 {
		return false
	}
	if ch.maxRep == 0 && n <= 2 {
		// Most runs of interleaved inputs are a row or two.
		if ch.def[ch.row] != 0 || (n == 2 && ch.def[ch.row+1] != 0) {
			return false
		}
		ch.row += n
		ch.lvl = ch.row
		return true
	}
	l1 := ch.row + n
	if ch.maxRep > 0 {
		if l1 = int(ch.rowLvl[l1]); l1-ch.lvl != n {
			return false
		}
	}
	lv := ch.def[ch.lvl:l1]
	if len(lv) > 16 && ch.maxDef == 1 {
		if bytes.IndexByte(lv, 1) >= 0 {
			return false
		}
	} else {
		for _, d := range lv {
			if d != 0 {
				return false
			}
		}
	}
	ch.row += n
	ch.lvl = l1
	return true
}

// Row is the read position: the next row CopyRows or a skip takes.
func (ch *Chunk) Row() int { return ch.row0 + ch.row }

// Rows is the number of rows of the chunk.
func (ch *Chunk) Rows() int { return ch.rows }

func (ch *Chunk) numValues() int {
	switch ch.kind {
	case parquet.Int64:
		return len(ch.i64)
	case parquet.Int32:
		return len(ch.i32)
	case parquet.Double:
		return len(ch.f64)
	case parquet.Boolean:
		return len(ch.bools)
	case parquet.ByteArray:
		if ch.indexed {
			return len(ch.idx)
		}
		return len(ch.offs) - 1
	}
	return 0
}

// addPage appends a page's levels and values; it returns its level entries
// and present values.
func (ch *Chunk) addPage(p parquet.Page) (n, nn int, err error) {
	n = int(p.NumValues())
	nn = n
	if ch.maxDef > 0 {
		def := p.DefinitionLevels()
		if len(def) != n {
			return 0, 0, fmt.Errorf("%w: %d definition levels for %d values", ErrCorrupt, len(def), n)
		}
		if ch.maxDef == 1 {
			// Levels of bit width 1 cannot exceed it.
			nn = bytes.Count(def, one)
		} else {
			nn = 0
			for _, d := range def {
				if d == ch.maxDef {
					nn++
				} else if d > ch.maxDef {
					return 0, 0, fmt.Errorf("%w: definition level %d above %d", ErrCorrupt, d, ch.maxDef)
				}
			}
		}
		ch.def = append(ch.def, def...)
	}
	if ch.maxRep > 0 {
		rep := p.RepetitionLevels()
		if len(rep) != n {
			return 0, 0, fmt.Errorf("%w: %d repetition levels for %d values", ErrCorrupt, len(rep), n)
		}
		ch.rep = append(ch.rep, rep...)
	}
	data := p.Data()
	switch ch.kind {
	case parquet.Int64:
		ch.i64 = append(ch.i64, data.Int64()...)
	case parquet.Int32:
		ch.i32 = append(ch.i32, data.Int32()...)
	case parquet.Double:
		ch.f64 = append(ch.f64, data.Double()...)
	case parquet.Boolean:
		bits := data.Boolean()
		if len(bits)*8 < nn {
			return 0, 0, fmt.Errorf("%w: %d boolean bytes for %d values", ErrCorrupt, len(bits), nn)
		}
		for i := range nn {
			ch.bools = append(ch.bools, bits[i>>3]>>(i&7)&1 != 0)
		}
	case parquet.ByteArray:
		if d := p.Dictionary(); d != nil {
			if err := ch.addIndexed(d, data.Int32()); err != nil {
				return 0, 0, err
			}
			break
		}
		vals, offs := data.ByteArray()
		if err := ch.addByteArrays(vals, offs, nn); err != nil {
			return 0, 0, err
		}
	default:
		return 0, 0, fmt.Errorf("pqenc: column type %s not supported", ch.kind)
	}
	return n, nn, nil
}

// addIndexed adds dictionary indexes of d, the chunk's dictionary.
func (ch *Chunk) addIndexed(d parquet.Dictionary, idx []int32) error {
	if !ch.indexed && len(ch.offs) == 1 && len(ch.dictOffs) == 0 {
		// The chunk's first values: take its dictionary.
		dv := d.Page().Data()
		vals, offs := dv.ByteArray()
		ch.dict = append(ch.dict[:0], vals...)
		ch.dictOffs = append(ch.dictOffs[:0], offs...)
		ch.indexed = true
	}
	return ch.addIdx(idx)
}

// addIdx adds dictionary indexes into the chunk's dictionary.
func (ch *Chunk) addIdx(idx []int32) error {
	nd := int32(len(ch.dictOffs) - 1)
	for _, x := range idx {
		if x < 0 || x >= nd {
			return fmt.Errorf("%w: dictionary index %d of %d values", ErrCorrupt, x, nd)
		}
	}
	if ch.indexed {
		if len(ch.idx) == 0 {
			ch.idx = slices.Grow(ch.idx, ch.expect)
		}
		ch.idx = append(ch.idx, idx...)
		return nil
	}
	for _, x := range idx {
		ch.data = append(ch.data, ch.dictValue(x)...)
		ch.offs = append(ch.offs, uint32(len(ch.data)))
	}
	return nil
}

// unindex turns the indexes read so far into plain values, when a chunk
// changes from dictionary to plain pages midway.
func (ch *Chunk) unindex() {
	for _, x := range ch.idx {
		ch.data = append(ch.data, ch.dictValue(x)...)
		ch.offs = append(ch.offs, uint32(len(ch.data)))
	}
	ch.indexed, ch.idx = false, ch.idx[:0]
}

func (ch *Chunk) dictValue(x int32) []byte {
	return ch.dict[ch.dictOffs[x]:ch.dictOffs[x+1]:ch.dictOffs[x+1]]
}

// value is byte array value i.
func (ch *Chunk) value(i int) []byte {
	if ch.indexed {
		return ch.dictValue(ch.idx[i])
	}
	return ch.data[ch.offs[i]:ch.offs[i+1]:ch.offs[i+1]]
}

// levelAt is the first level entry of row r (or the end).
func (ch *Chunk) levelAt(r int) int {
	if ch.maxRep > 0 {
		return int(ch.rowLvl[r])
	}
	return r
}

// Int64s appends each row's value of a non-repeated INT64 chunk to dst,
// 0 for nulls. Call it at the chunk's first row: it decodes the chunk
// whole, and keeps it so (no page is dropped or skipped after).
func (ch *Chunk) Int64s(dst []int64) []int64 {
	if !ch.need(ch.rows - ch.row0 - ch.row) {
		return dst
	}
	if ch.maxDef == 0 {
		return append(dst, ch.i64...)
	}
	v := 0
	for _, d := range ch.def {
		if d == ch.maxDef {
			dst = append(dst, ch.i64[v])
			v++
		} else {
			dst = append(dst, 0)
		}
	}
	return dst
}

// Strings appends each row's value of a non-repeated BYTE_ARRAY chunk to
// dst, "" for nulls; the strings alias ch until its next Read. Call it
// at the chunk's first row, as Int64s.
func (ch *Chunk) Strings(dst []string) []string {
	if !ch.need(ch.rows - ch.row0 - ch.row) {
		return dst
	}
	v := 0
	for r := range ch.wrows {
		if ch.maxDef > 0 && ch.def[r] != ch.maxDef {
			dst = append(dst, "")
			continue
		}
		b := ch.value(v)
		dst = append(dst, unsafe.String(unsafe.SliceData(b), len(b)))
		v++
	}
	return dst
}

// addLevels adds the runs of lv to r and returns how many equal max.
func addLevels(r *levelRuns, lv []byte, max byte) (present int) {
	cur, n := r.cur, r.n
	for _, v := range lv {
		if v != cur || n == 0 {
			if n > 0 {
				r.cur, r.n = cur, n
				r.flush()
			}
			cur, n = v, 0
		}
		n++
		if v == max {
			present++
		}
	}
	r.cur, r.n = cur, n
	return present
}

// asBytes views the values of s as their little-endian bytes.
func asBytes[T int32 | int64 | float64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// CopyRows copies the next n rows of src, a chunk of a leaf with the same
// type and levels as c's, to c: of a chunk read a page at a time, what
// its window holds, then a page at a time (stepRows), so that the window
// never holds more than about a page however long the run.
func (c *Column) CopyRows(src *Chunk, n int) {
	for n > 0 && src.err == nil && c.err == nil {
		k := src.stepRows(n)
		c.copyRows(src, k)
		n -= k
	}
}

// stepRows is how many of the next n rows one step takes: those decoded,
// else the next page's (at most maxAhead), all n for a chunk decoded whole.
func (ch *Chunk) stepRows(n int) int {
	if !ch.pagesOK {
		return n
	}
	k := ch.wrows - ch.row
	if k <= 0 && ch.next < len(ch.raw.Pages) {
		k = int(ch.raw.Pages[ch.next].Rows)
	}
	return min(n, max(k, 1), maxAhead)
}

func (c *Column) copyRows(src *Chunk, n int) {
	if !src.need(n) {
		c.fail(src.err)
		return
	}
	if n == 1 && c.li.MaxRep == 0 {
		c.copyRow(src)
		return
	}
	for n > 0 {
		k := min(n, c.room())
		l0, l1 := src.lvl, src.levelAt(src.row+k)
		nn := l1 - l0
		if c.li.MaxDef > 0 {
			nn = addLevels(&c.def, src.def[l0:l1], c.li.MaxDef)
		}
		if c.li.MaxRep > 0 {
			addLevels(&c.rep, src.rep[l0:l1], 0)
		}
		c.nVals += l1 - l0
		c.nNulls += l1 - l0 - nn
		v0, v1 := src.val, src.val+nn
		switch c.li.Kind {
		case parquet.Int64:
			vs := src.i64[v0:v1]
			c.plain = append(c.plain, asBytes(vs)...)
			if len(vs) > 0 {
				lo, hi := vs[0], vs[0]
				if c.li.unsigned {
					for _, v := range vs {
						if uint64(v) < uint64(lo) {
							lo = v
						}
						if uint64(v) > uint64(hi) {
							hi = v
						}
					}
				} else {
					for _, v := range vs {
						lo, hi = min(lo, v), max(hi, v)
					}
				}
				c.b.addInt(lo)
				c.b.addInt(hi)
			}
		case parquet.Int32:
			vs := src.i32[v0:v1]
			c.plain = append(c.plain, asBytes(vs)...)
			for _, v := range vs {
				if c.li.unsigned {
					c.b.addInt(int64(uint32(v)))
				} else {
					c.b.addInt(int64(v))
				}
			}
		case parquet.Double:
			vs := src.f64[v0:v1]
			c.plain = append(c.plain, asBytes(vs)...)
			for _, v := range vs {
				c.b.addFloat(v)
			}
		case parquet.Boolean:
			for _, v := range src.bools[v0:v1] {
				c.appendBool(v)
				if v {
					c.b.addInt(1)
				} else {
					c.b.addInt(0)
				}
			}
		case parquet.ByteArray:
			c.copyBytes(src, v0, v1)
		}
		src.row += k
		src.lvl, src.val = l1, v1
		c.endRows(k)
		n -= k
	}
}

// copyRow is CopyRows of one row of a non-repeated column: runs of
// interleaved inputs are mostly a row, and the loop's set-up cost more
// than the copy.
func (c *Column) copyRow(src *Chunk) {
	if c.li.MaxDef > 0 {
		d := src.def[src.row]
		if c.def.n > 0 && d == c.def.cur {
			c.def.n++
		} else {
			c.def.add(d, 1)
		}
		if d != c.li.MaxDef {
			c.nVals++
			c.nNulls++
			src.row++
			src.lvl++
			c.endRows(1)
			return
		}
	}
	c.nVals++
	v := src.val
	src.row++
	src.lvl++
	src.val++
	switch c.li.Kind {
	case parquet.Int64:
		x := src.i64[v]
		c.plain = binary.LittleEndian.AppendUint64(c.plain, uint64(x))
		c.b.addInt(x)
	case parquet.Int32:
		x := src.i32[v]
		c.plain = binary.LittleEndian.AppendUint32(c.plain, uint32(x))
		if c.li.unsigned {
			c.b.addInt(int64(uint32(x)))
		} else {
			c.b.addInt(int64(x))
		}
	case parquet.Double:
		x := src.f64[v]
		c.plain = binary.LittleEndian.AppendUint64(c.plain, math.Float64bits(x))
		c.b.addFloat(x)
	case parquet.Boolean:
		x := src.bools[v]
		c.appendBool(x)
		if x {
			c.b.addInt(1)
		} else {
			c.b.addInt(0)
		}
	case parquet.ByteArray:
		if src.indexed && src.xlatEpoch == c.epoch && !c.li.Bloom && c.dictMode() {
			if x := src.xlat[src.idx[v]]; x >= 0 {
				c.idxRun(x, 1)
				break
			}
		}
		c.copyBytes(src, v, v+1)
	}
	c.endRows(1)
}

// copyBytes copies byte array values [v0, v1) of src.
func (c *Column) copyBytes(src *Chunk, v0, v1 int) {
	if c.li.Bloom {
		for i := v0; i < v1; i++ {
			c.hashes = append(c.hashes, xxhash.Sum64(src.value(i)))
		}
	}
	i := v0
	if c.dictMode() && src.indexed {
		if src.xlatEpoch != c.epoch {
			src.xlat = src.xlat[:0]
			for range len(src.dictOffs) - 1 {
				src.xlat = append(src.xlat, -1)
			}
			src.xlatEpoch = c.epoch
		}
		for i < v1 {
			sx := src.idx[i]
			j := i + 1
			for j < v1 && src.idx[j] == sx {
				j++
			}
			x := src.xlat[sx]
			if x < 0 {
				var ok bool
				if x, ok = c.dictIndex(src.dictValue(sx)); !ok {
					break // fell back to plain: copy the rest as values
				}
				src.xlat[sx] = x
			}
			c.idxRun(x, j-i)
			i = j
		}
	}
	for ; i < v1 && c.dictMode(); i++ {
		x, ok := c.dictIndex(src.value(i))
		if !ok {
			break
		}
		c.idxRun(x, 1)
	}
	if i == v1 {
		return
	}
	if !src.indexed {
		// One copy of the values' bytes, then their offsets.
		base := uint32(len(c.plain)) - src.offs[i]
		c.plain = append(c.plain, src.data[src.offs[i]:src.offs[v1]]...)
		for _, o := range src.offs[i+1 : v1+1] {
			end := base + o
			c.b.addBytes(c.plain[c.offs[len(c.offs)-1]:end])
			c.offs = append(c.offs, end)
		}
		return
	}
	for ; i < v1; i++ {
		start := len(c.plain)
		c.plain = append(c.plain, src.value(i)...)
		c.offs = append(c.offs, uint32(len(c.plain)))
		c.b.addBytes(c.plain[start:])
	}
}

// Cap is the bytes of ch's buffers, which it keeps for the next Read.
func (ch *Chunk) Cap() int {
	return cap(ch.def) + cap(ch.rep) + 4*cap(ch.rowLvl) + 8*cap(ch.i64) + 4*cap(ch.i32) + 8*cap(ch.f64) +
		cap(ch.bools) + cap(ch.data) + 4*cap(ch.offs) + 4*cap(ch.idx) + cap(ch.dict) + 4*cap(ch.dictOffs) + 4*cap(ch.xlat) +
		cap(ch.raw.Bytes)
}

// addByteArrays appends nn plain byte-array values: vals with nn+1
// offsets into it, as a page decoder gives them.
func (ch *Chunk) addByteArrays(vals []byte, offs []uint32, nn int) error {
	if ch.indexed {
		ch.unindex()
	}
	if len(offs) != nn+1 || int(offs[nn]) > len(vals) || offs[0] > offs[nn] {
		return fmt.Errorf("%w: %d byte array offsets for %d values", ErrCorrupt, len(offs), nn)
	}
	if len(ch.offs) == 1 {
		ch.offs = slices.Grow(ch.offs, ch.expect)
	}
	base := uint32(len(ch.data)) - offs[0]
	ch.data = append(ch.data, vals[offs[0]:offs[nn]]...)
	for _, o := range offs[1:] {
		ch.offs = append(ch.offs, base+o)
	}
	return nil
}

// CopyFew copies the next n rows of src, a run of one or two rows of a
// flat column (interleaved inputs merge in such runs), as the caller's
// SkipNulls then CopyRows would, in one call: rows all null are not
// copied but added to *nulls, which the caller adds with Null (nulls of
// successive runs in one call); other rows are copied after the nulls
// pending in *nulls.
func (c *Column) CopyFew(src *Chunk, n int, nulls *int) {
	if n > 2 || c.li.MaxRep != 0 || src.row+n > src.wrows || src.err != nil {
		if c.li.MaxDef > 0 && src.SkipNulls(n) {
			*nulls += n
			return
		}
		if *nulls > 0 {
			c.Null(*nulls)
			*nulls = 0
		}
		c.CopyRows(src, n)
		return
	}
	if c.li.MaxDef > 0 && src.def[src.row] == 0 && (n == 1 || src.def[src.row+1] == 0) {
		src.row += n
		src.lvl = src.row
		*nulls += n
		return
	}
	if *nulls > 0 {
		c.Null(*nulls)
		*nulls = 0
	}
	for range n {
		c.copyRow(src)
	}
}
