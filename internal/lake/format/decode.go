package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// The typed page decoder: File reads the column chunks of the lake's own
// encodings (PLAIN, RLE_DICTIONARY, DELTA_LENGTH_BYTE_ARRAY values; RLE
// levels; zstd, snappy or no compression) straight from their checked,
// decompressed pages into typed slices, without a parquet.Value per cell
// and with a dictionary's strings kept once per chunk (rows hold indexes).
// Chunks of anything else go through parquet-go's page reader (typedChunk
// says which). The decoder checks each page as it decodes it, against the
// bounds checkChunk holds pages to (pages.go) and against the chunk's
// footer (its values and uncompressed bytes add up to what the footer
// says, at most one dictionary page, no page of another type), so a page
// is decompressed once: checking the chunk whole first decompressed every
// page twice, a tenth of reading a file. Every decoding step is bounded by
// the page's own sizes, so a damaged page is an error, never a panic or an
// allocation past the page caps, with or without the footer checks
// (FuzzDecodePages).

// errPageShape is wrapped (with ErrCorrupt) by the decoder's errors for
// pages whose contents disagree with their header or their chunk.
var errPageShape = errors.New("page contents do not match the page header")

func shapeErr(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrCorrupt, errPageShape, fmt.Sprintf(format, args...))
}

// pageVals is one data page decoded: its levels and its non-null values,
// in one typed slice by the column's physical type. Slices are reused
// page after page; byte arrays may alias the decompressed page, valid
// until the next page is read.
type pageVals struct {
	n      int           // levels: values including nulls (rows, for a flat column)
	defs   []uint8       // one per level; nil when the column's max definition level is 0
	maxDef uint8         // the column's max definition level
	typ    pqformat.Type // the column's physical type
	reps   []uint8       // one per level; nil for a flat column
	nn     int           // non-null values

	i32   []int32
	i64   []int64
	f64   []float64
	bools []bool
	// Byte arrays: value j is data[offs[j]:offs[j+1]], or, for a
	// dictionary page, dict.value(idx[j]). data is dataBuf (PLAIN values,
	// copied out of their length prefixes) or the decompressed page
	// itself (DELTA_LENGTH_BYTE_ARRAY values lie back to back).
	data []byte
	offs []uint32
	idx  []int32
	dict *dictVals
	// runs are idx as runs of one index (dictionary pages of byte arrays).
	runs []valRun
	// defRuns are the definition levels as runs of 0 (null) and 1, in
	// place of defs (nil), where the decoder was asked for them
	// (chunkDec.defRuns: the attribute columns File reads, which are
	// sparse: a null run costs one step instead of a byte per row).
	defRuns []valRun

	// The buffers behind defs, reps, idx and data (nil when a page has
	// none).
	dataBuf          []byte
	defsBuf, repsBuf []uint8
	idxBuf           []int32
	runsBuf          []valRun
	defRunsBuf       []valRun
}

// dictVals is the dictionary page of a chunk, decoded.
type dictVals struct {
	n     int
	data  []byte
	offs  []uint32 // n+1 offsets into data (byte arrays)
	i32   []int32
	i64   []int64
	f64   []float64
	bools []bool
}

func (d *dictVals) value(k int32) []byte { return d.data[d.offs[k]:d.offs[k+1]] }

// bytesAt is the j-th non-null byte-array value of the page.
func (p *pageVals) bytesAt(j int) []byte {
	if p.idx != nil {
		return p.dict.value(p.idx[j])
	}
	return p.data[p.offs[j]:p.offs[j+1]]
}

// present reports whether level i holds a value (flat columns).
func (p *pageVals) present(i int) bool { return p.defs == nil || p.defs[i] != 0 }

// chunkDec decodes the pages of one column chunk read whole into memory.
type chunkDec struct {
	buf      []byte // the chunk's bytes (a pooled chunk buffer)
	off, end int    // the next page, the end of the chunk, in buf
	typ      pqformat.Type
	maxDef   int
	maxRep   int
	rgRows   int64
	c        pageChecker // its scratch decompresses (decompress)
	hdr      pqformat.PageHeader
	proto    thrift.CompactProtocol
	br       thrift.BytesReader
	tdec     *thrift.Decoder
	pg       pageVals
	dict     dictVals
	hasDict  bool
	lv       []uint8 // scratch of RLE-encoded booleans
	// defRuns: the definition levels of a flat optional column's pages
	// are decoded as runs (pageVals.defRuns), not one byte per level.
	// start clears it; the caller sets it after opening the chunk.
	defRuns bool

	// The footer checks (check set): the values and uncompressed bytes
	// (headers included) of the pages so far, against md's.
	check        bool
	md           *pqformat.ColumnMetaData
	nvals        int64
	uncompressed int64
}

// typedChunk reports whether cc is a chunk the typed decoder reads: a
// chunk of a file, of a physical type, codec and encodings it decodes.
func typedChunk(cc parquet.ColumnChunk) (chunkRef, bool) {
	fcc, ok := cc.(*parquet.FileColumnChunk)
	if !ok {
		return chunkRef{}, false
	}
	ref, ok, err := refOf(fcc)
	if !ok || err != nil {
		return chunkRef{}, false
	}
	md := ref.md
	switch md.Codec {
	case pqformat.Uncompressed, pqformat.Snappy, pqformat.Zstd:
	default:
		return chunkRef{}, false
	}
	switch md.Type {
	case pqformat.Boolean, pqformat.Int32, pqformat.Int64, pqformat.Double, pqformat.ByteArray:
	default:
		return chunkRef{}, false
	}
	if ref.maxDef > 2 || ref.maxRep > 1 {
		return chunkRef{}, false
	}
	for _, e := range md.Encoding {
		switch e {
		case pqformat.Plain, pqformat.RLE, pqformat.RLEDictionary, pqformat.PlainDictionary:
		case pqformat.DeltaLengthByteArray:
			if md.Type != pqformat.ByteArray {
				return chunkRef{}, false
			}
		default:
			return chunkRef{}, false
		}
	}
	return ref, true
}

// open reads the chunk of ref (from cc) and readies its first page; its
// pages are checked against the footer as they are decoded.
func (d *chunkDec) open(cc *parquet.FileColumnChunk, ref chunkRef) error {
	return d.openChecked(cc, ref, true)
}

// openChecked is open; check false skips the checks against the footer
// (the fuzz test of the decoder alone).
func (d *chunkDec) openChecked(cc *parquet.FileColumnChunk, ref chunkRef, check bool) error {
	md := ref.md
	if check && (ref.rgRows < 0 || md.NumValues < 0 || ref.maxRep == 0 && md.NumValues != ref.rgRows) {
		return pageErr("column %q: %d values in a row group of %d rows", md.PathInSchema, md.NumValues, ref.rgRows)
	}
	buf, _, err := readChunk(cc, getChunkBuf())
	if err != nil {
		putChunkBuf(buf)
		return err
	}
	d.start(buf, ref, check)
	return nil
}

// start readies the decoder for the pages in buf (a pooled chunk buffer,
// returned by close), pages of ref's chunk.
func (d *chunkDec) start(buf []byte, ref chunkRef, check bool) {
	md := ref.md
	d.buf, d.off, d.end = buf, 0, len(buf)
	d.typ, d.maxDef, d.maxRep, d.rgRows = md.Type, ref.maxDef, ref.maxRep, ref.rgRows
	d.c = pageChecker{ref: ref, s: getScratch()}
	d.hasDict = false
	d.dict.n = 0
	d.check, d.md, d.nvals, d.uncompressed = check, md, 0, 0
	d.defRuns = false
}

// close returns the chunk's buffers; the decoder may be opened again.
func (d *chunkDec) close() {
	putChunkBuf(d.buf)
	d.buf = nil
	if d.c.s != nil {
		putScratch(d.c.s)
		d.c.s = nil
	}
}

// next decodes the next data page (reading the dictionary page first when
// the chunk has one); io.EOF after the last.
func (d *chunkDec) next() (*pageVals, error) {
	for d.off < d.end {
		body, err := d.header()
		if err != nil {
			return nil, err
		}
		h := &d.hdr
		switch h.Type {
		case pqformat.DictionaryPage:
			if err := d.readDict(body); err != nil {
				return nil, err
			}
		case pqformat.DataPageV2:
			if err := d.dataV2(body); err != nil {
				return nil, err
			}
			return &d.pg, nil
		case pqformat.DataPage:
			if err := d.dataV1(body); err != nil {
				return nil, err
			}
			return &d.pg, nil
		default:
			return nil, pageErr("page type %s", h.Type)
		}
	}
	if d.check && (d.nvals != d.md.NumValues || d.uncompressed != d.md.TotalUncompressedSize) {
		return nil, pageErr("column %q: pages hold %d values (%d bytes uncompressed), the footer says %d (%d bytes)",
			d.md.PathInSchema, d.nvals, d.uncompressed, d.md.NumValues, d.md.TotalUncompressedSize)
	}
	return nil, io.EOF
}

// header decodes the page header at d.off and returns the page's body
// (compressed as stored); d.off moves past the page.
func (d *chunkDec) header() ([]byte, error) {
	if d.br == nil {
		d.br = d.proto.NewReaderFromBytes(nil)
		d.tdec = thrift.NewDecoder(d.br)
	}
	d.hdr = pqformat.PageHeader{}
	hl, ok := fastPageHeader(d.buf[d.off:d.end], &d.hdr)
	if !ok { // parquet-go's answer (pagehdr.go)
		d.hdr = pqformat.PageHeader{}
		d.br.ResetBytes(d.buf[d.off:d.end])
		if err := d.tdec.Decode(&d.hdr); err != nil {
			return nil, pageErr("page header: %v", err)
		}
		hl = d.br.BytesRead()
	}
	cs := int(d.hdr.CompressedPageSize)
	us := int64(d.hdr.UncompressedPageSize)
	if cs < 0 || int64(cs) > MaxPageBytes || us < 0 || us > MaxPageBytes || hl+cs > d.end-d.off {
		return nil, pageErr("page of %d bytes (%d uncompressed) in the %d bytes left of its chunk", cs, us, d.end-d.off-hl)
	}
	body := d.buf[d.off+hl : d.off+hl+cs]
	d.off += hl + cs
	d.uncompressed += int64(hl) + us
	return body, nil
}

func (d *chunkDec) readDict(body []byte) error {
	h := &d.hdr
	if !h.DictionaryPageHeader.Valid || d.hasDict {
		return shapeErr("dictionary page")
	}
	if e := h.DictionaryPageHeader.V.Encoding; e != pqformat.Plain && e != pqformat.PlainDictionary {
		return pageErr("dictionary encoding %s", e)
	}
	n := int(h.DictionaryPageHeader.V.NumValues)
	if n < 0 || n > MaxPageValues {
		return pageErr("dictionary page of %d values", n)
	}
	src, err := d.c.decompress(body, int64(h.UncompressedPageSize))
	if err != nil {
		return err
	}
	dv := &d.dict
	dv.n = n
	switch d.typ {
	case pqformat.ByteArray:
		dv.data, dv.offs, err = plainByteArrays(src, n, dv.data[:0], dv.offs[:0])
	case pqformat.Int32:
		dv.i32, err = plainInt32s(src, n, dv.i32)
	case pqformat.Int64:
		dv.i64, err = plainInt64s(src, n, dv.i64)
	case pqformat.Double:
		dv.f64, err = plainFloat64s(src, n, dv.f64)
	case pqformat.Boolean:
		dv.bools, err = plainBools(src, n, dv.bools)
	}
	if err != nil {
		return fmt.Errorf("dictionary page: %w", err)
	}
	d.hasDict = true
	return nil
}

// startPage sizes the page's levels for nv values.
func (d *chunkDec) startPage(nv int) error {
	maxVals := MaxPageValues
	if d.maxRep == 0 {
		maxVals = int(min(int64(maxVals), d.rgRows))
	}
	if nv < 0 || nv > maxVals {
		return pageErr("data page of %d values (at most %d)", nv, maxVals)
	}
	if d.nvals += int64(nv); d.check && d.nvals > d.md.NumValues {
		return pageErr("column %q: pages hold over %d values, the footer says %d", d.md.PathInSchema, d.nvals-int64(nv), d.md.NumValues)
	}
	p := &d.pg
	p.n, p.nn = nv, nv
	p.maxDef, p.typ = uint8(d.maxDef), d.typ
	p.defs, p.reps, p.idx, p.dict, p.runs, p.defRuns = nil, nil, nil, nil, nil, nil
	return nil
}

func (d *chunkDec) dataV2(body []byte) error {
	h := &d.hdr
	if !h.DataPageHeaderV2.Valid {
		return shapeErr("data page v2 without its header")
	}
	v := &h.DataPageHeaderV2.V
	nv := int(v.NumValues)
	if err := d.startPage(nv); err != nil {
		return err
	}
	if v.NumNulls < 0 || int(v.NumNulls) > nv || v.NumRows < 0 || int(v.NumRows) > nv {
		return pageErr("data page v2 of %d values, %d nulls, %d rows", nv, v.NumNulls, v.NumRows)
	}
	rl, dl := int(v.RepetitionLevelsByteLength), int(v.DefinitionLevelsByteLength)
	if rl < 0 || dl < 0 || rl+dl > len(body) || int64(rl+dl) > int64(h.UncompressedPageSize) {
		return pageErr("data page v2 levels of %d+%d bytes in a page of %d", rl, dl, len(body))
	}
	if err := d.levels(body[:rl], body[rl:rl+dl]); err != nil {
		return err
	}
	if d.maxRep == 0 && int(v.NumRows) != nv {
		return shapeErr("data page v2 of %d rows and %d values", v.NumRows, nv)
	}
	// The header's nulls are what CheckChunk holds the values to: a page
	// whose levels say otherwise is refused, not read by its levels.
	if d.maxRep == 0 && int(v.NumNulls) != d.pg.n-d.pg.nn {
		return shapeErr("data page v2 of %d nulls, its levels hold %d", v.NumNulls, d.pg.n-d.pg.nn)
	}
	vals := body[rl+dl:]
	size := int64(h.UncompressedPageSize) - int64(rl+dl)
	if !v.IsCompressed.Valid || v.IsCompressed.V {
		var err error
		if vals, err = d.c.decompress(vals, size); err != nil {
			return err
		}
	} else if int64(len(vals)) != size {
		return pageErr("uncompressed page v2 of %d bytes, its header says %d", len(vals), size)
	}
	return d.values(vals, v.Encoding)
}

func (d *chunkDec) dataV1(body []byte) error {
	h := &d.hdr
	if !h.DataPageHeader.Valid {
		return shapeErr("data page without its header")
	}
	v := &h.DataPageHeader.V
	nv := int(v.NumValues)
	if err := d.startPage(nv); err != nil {
		return err
	}
	data, err := d.c.decompress(body, int64(h.UncompressedPageSize))
	if err != nil {
		return err
	}
	var reps, defs []byte
	if d.maxRep > 0 {
		if reps, data, err = levelsV1(data, v.RepetitionLevelEncoding); err != nil {
			return fmt.Errorf("repetition levels: %w", err)
		}
	}
	if d.maxDef > 0 {
		if defs, data, err = levelsV1(data, v.DefinitionLevelEncoding); err != nil {
			return fmt.Errorf("definition levels: %w", err)
		}
	}
	if err := d.levels(reps, defs); err != nil {
		return err
	}
	return d.values(data, v.Encoding)
}

// levelsV1 splits the length-prefixed RLE levels off the front of a v1
// page.
func levelsV1(data []byte, enc pqformat.Encoding) (lv, rest []byte, err error) {
	if enc != pqformat.RLE {
		return nil, nil, pageErr("level encoding %s", enc)
	}
	if len(data) < 4 {
		return nil, nil, pageErr("levels past the page")
	}
	l := binary.LittleEndian.Uint32(data)
	if int64(l) > int64(len(data)-4) {
		return nil, nil, pageErr("levels of %d bytes in a page of %d", l, len(data)-4)
	}
	return data[4 : 4+l], data[4+l:], nil
}

// levels decodes the page's repetition and definition levels and counts
// its non-null values.
func (d *chunkDec) levels(reps, defs []byte) error {
	p := &d.pg
	if d.maxRep > 0 {
		p.repsBuf = grow(p.repsBuf[:0], p.n)
		p.reps = p.repsBuf
		if err := decodeHybrid(reps, bits.Len(uint(d.maxRep)), p.reps, uint8(d.maxRep)); err != nil {
			return fmt.Errorf("repetition levels: %w", err)
		}
	}
	if d.maxDef == 1 && d.maxRep == 0 && d.defRuns {
		var err error
		if p.defRunsBuf, p.nn, err = decodeDefRuns(defs, p.n, p.defRunsBuf[:0]); err != nil {
			return fmt.Errorf("definition levels: %w", err)
		}
		p.defRuns = p.defRunsBuf
		return nil
	}
	if d.maxDef > 0 {
		p.defsBuf = grow(p.defsBuf[:0], p.n)
		p.defs = p.defsBuf
		if err := decodeHybrid(defs, bits.Len(uint(d.maxDef)), p.defs, uint8(d.maxDef)); err != nil {
			return fmt.Errorf("definition levels: %w", err)
		}
		if d.maxDef == 1 {
			p.nn = p.n - bytes.Count(p.defs, zeroLevel)
		} else {
			nn := 0
			top := uint8(d.maxDef)
			for _, l := range p.defs {
				if l == top {
					nn++
				}
			}
			p.nn = nn
		}
	}
	return nil
}

// values decodes the page's p.nn non-null values.
func (d *chunkDec) values(src []byte, enc pqformat.Encoding) error {
	p := &d.pg
	n := p.nn
	var err error
	switch enc {
	case pqformat.Plain:
		switch d.typ {
		case pqformat.ByteArray:
			p.dataBuf, p.offs, err = plainByteArrays(src, n, p.dataBuf[:0], p.offs[:0])
			p.data = p.dataBuf
		case pqformat.Int32:
			p.i32, err = plainInt32s(src, n, p.i32)
		case pqformat.Int64:
			p.i64, err = plainInt64s(src, n, p.i64)
		case pqformat.Double:
			p.f64, err = plainFloat64s(src, n, p.f64)
		case pqformat.Boolean:
			p.bools, err = plainBools(src, n, p.bools)
		}
	case pqformat.RLEDictionary, pqformat.PlainDictionary:
		err = d.indexes(src, n)
	case pqformat.RLE:
		if d.typ != pqformat.Boolean {
			return shapeErr("RLE values of type %s", d.typ)
		}
		if len(src) < 4 {
			return shapeErr("boolean runs past the page")
		}
		l := binary.LittleEndian.Uint32(src)
		if int64(l) > int64(len(src)-4) {
			return shapeErr("boolean runs of %d bytes in %d", l, len(src)-4)
		}
		d.lv = grow(d.lv[:0], n)
		if err = decodeHybrid(src[4:4+l], 1, d.lv, 1); err == nil {
			p.bools = grow(p.bools[:0], n)
			for i, b := range d.lv {
				p.bools[i] = b != 0
			}
		}
	case pqformat.DeltaLengthByteArray:
		if d.typ != pqformat.ByteArray {
			return shapeErr("DELTA_LENGTH_BYTE_ARRAY values of type %s", d.typ)
		}
		p.data, p.offs, err = deltaLengthByteArrays(src, n, p.offs)
	default:
		return shapeErr("encoding %s (lake files do not use it)", enc)
	}
	return err
}

// indexes decodes the dictionary indexes of a page; values of types other
// than byte arrays are looked up at once.
func (d *chunkDec) indexes(src []byte, n int) error {
	if !d.hasDict {
		return shapeErr("dictionary-encoded page without a dictionary page")
	}
	p := &d.pg
	p.idxBuf = grow(p.idxBuf[:0], n)
	p.idx = p.idxBuf
	if n > 0 {
		if len(src) < 1 || src[0] > 32 {
			return shapeErr("dictionary index bit width")
		}
		var err error
		mode := storeAndRuns
		if d.defRuns && d.typ == pqformat.ByteArray {
			mode = runsOnly // attrTyped reads the runs alone
		}
		if p.runsBuf, err = decodeHybridRuns(src[1:], int(src[0]), p.idx, int32(d.dict.n-1), p.runsBuf[:0], mode); err != nil {
			return fmt.Errorf("dictionary indexes: %w", err)
		}
		p.runs = p.runsBuf
		if mode == runsOnly {
			p.idx = nil
		}
	}
	dv := &d.dict
	switch d.typ {
	case pqformat.ByteArray:
		p.dict = dv
		return nil
	case pqformat.Int32:
		p.i32 = gather(p.i32, dv.i32, p.idx)
	case pqformat.Int64:
		p.i64 = gather(p.i64, dv.i64, p.idx)
	case pqformat.Double:
		p.f64 = gather(p.f64, dv.f64, p.idx)
	case pqformat.Boolean:
		p.bools = gather(p.bools, dv.bools, p.idx)
	}
	p.idx = nil
	return nil
}

func gather[T any](dst, dict []T, idx []int32) []T {
	dst = grow(dst[:0], len(idx))
	for i, k := range idx {
		dst[i] = dict[k]
	}
	return dst
}

// plainInt32s, plainInt64s and plainFloat64s decode n PLAIN values
// (little-endian), each a load: a generic decoder with a function per
// value cost a call per value, a tenth of reading spans.
func plainInt32s(src []byte, n int, dst []int32) ([]int32, error) {
	if len(src) < n*4 {
		return dst, shapeErr("%d bytes hold fewer than %d values", len(src), n)
	}
	dst = grow(dst[:0], n)
	for i := range dst {
		dst[i] = int32(binary.LittleEndian.Uint32(src[i*4:]))
	}
	return dst, nil
}

func plainInt64s(src []byte, n int, dst []int64) ([]int64, error) {
	if len(src) < n*8 {
		return dst, shapeErr("%d bytes hold fewer than %d values", len(src), n)
	}
	dst = grow(dst[:0], n)
	for i := range dst {
		dst[i] = int64(binary.LittleEndian.Uint64(src[i*8:]))
	}
	return dst, nil
}

func plainFloat64s(src []byte, n int, dst []float64) ([]float64, error) {
	if len(src) < n*8 {
		return dst, shapeErr("%d bytes hold fewer than %d values", len(src), n)
	}
	dst = grow(dst[:0], n)
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(src[i*8:]))
	}
	return dst, nil
}

// plainBools decodes n bit-packed PLAIN booleans.
func plainBools(src []byte, n int, dst []bool) ([]bool, error) {
	if len(src)*8 < n {
		return dst, shapeErr("%d bytes hold fewer than %d booleans", len(src), n)
	}
	dst = grow(dst[:0], n)
	for i := range dst {
		dst[i] = src[i>>3]>>(i&7)&1 != 0
	}
	return dst, nil
}

// plainByteArrays decodes n PLAIN byte arrays (length-prefixed) into
// contiguous data and n+1 offsets.
func plainByteArrays(src []byte, n int, data []byte, offs []uint32) ([]byte, []uint32, error) {
	if n > len(src)/4 {
		return data, offs, shapeErr("%d bytes hold fewer than %d byte arrays", len(src), n)
	}
	offs = append(offs, 0)
	for range n {
		if len(src) < 4 {
			return data, offs, shapeErr("byte array length past the page")
		}
		l := binary.LittleEndian.Uint32(src)
		if int64(l) > int64(len(src)-4) {
			return data, offs, shapeErr("byte array of %d bytes past the page", l)
		}
		data = append(data, src[4:4+l]...)
		offs = append(offs, uint32(len(data)))
		src = src[4+l:]
	}
	return data, offs, nil
}

var zeroLevel = []byte{0}

// fill sets every element of s to v: runs of levels and indexes are long
// (the lake writer writes RLE runs only), so by doubling copies.
func fill[T uint8 | int32](s []T, v T) {
	if len(s) < 16 {
		for i := range s {
			s[i] = v
		}
		return
	}
	if v == 0 {
		clear(s)
		return
	}
	s[0] = v
	for k := 1; k < len(s); k *= 2 {
		copy(s[k:], s[:k])
	}
}

// unpack1 sets dst to the bits of packed, least significant first
// (len(packed)*8 >= len(dst)), 8 at a time.
func unpack1[T uint8 | int32](dst []T, packed []byte) {
	full := len(dst) / 8
	packed = packed[:(len(dst)+7)/8]
	for g, b := range packed[:full] {
		d := dst[g*8 : g*8+8 : g*8+8]
		d[0], d[1], d[2], d[3] = T(b&1), T(b>>1&1), T(b>>2&1), T(b>>3&1)
		d[4], d[5], d[6], d[7] = T(b>>4&1), T(b>>5&1), T(b>>6&1), T(b>>7)
	}
	for j := full * 8; j < len(dst); j++ {
		dst[j] = T(packed[j>>3] >> (j & 7) & 1)
	}
}

// decodeHybrid decodes len(dst) values of width bits from the RLE /
// bit-packed hybrid runs of src; each must be at most maxV. The runs may
// hold up to 7 values past len(dst) (a bit-packed group's padding), as
// checkChunk allows; runs after the page's values are ignored.
func decodeHybrid[T uint8 | int32](src []byte, width int, dst []T, maxV T) error {
	_, err := decodeHybridRuns(src, width, dst, maxV, nil, storeOnly)
	return err
}

// valRun is a run of n equal values v (dictionary indexes).
type valRun struct{ v, n int32 }

func appendRun(runs []valRun, v int32, m int) []valRun {
	if k := len(runs) - 1; k >= 0 && runs[k].v == v {
		runs[k].n += int32(m)
		return runs
	}
	return append(runs, valRun{v: v, n: int32(m)})
}

// What decodeHybridRuns gives: the values in dst, as runs, or both.
type hybridMode uint8

const (
	storeOnly hybridMode = iota
	storeAndRuns
	runsOnly // dst only counts the values
)

// decodeHybridRuns is decodeHybrid that also (or only, leaving dst as it
// is) appends the values as runs to runs (consecutive equal values
// merged), as mode says.
func decodeHybridRuns[T uint8 | int32](src []byte, width int, dst []T, maxV T, runs []valRun, mode hybridMode) ([]valRun, error) {
	store, wantRuns := mode != runsOnly, mode != storeOnly

	if width > 32 {
		return runs, shapeErr("bit width %d", width)
	}
	wb := (width + 7) / 8
	mask := uint64(1)<<width - 1
	i, o := 0, 0
	limit := uint64(len(dst)) + 7 // the values the runs may hold
	for o < len(dst) {
		u, k := binary.Uvarint(src[i:])
		if k <= 0 {
			return runs, shapeErr("runs of %d values, the page has %d", o, len(dst))
		}
		i += k
		if u&1 == 0 { // RLE run
			cnt := u >> 1
			if cnt > uint64(len(dst)) || cnt > limit-uint64(o) {
				return runs, shapeErr("run of %d values past the page's %d", cnt, len(dst)-o)
			}
			if i+wb > len(src) {
				return runs, shapeErr("run value past its bytes")
			}
			var v uint64
			for b := range wb {
				v |= uint64(src[i+b]) << (8 * b)
			}
			i += wb
			if v > uint64(maxV) || maxV < 0 {
				return runs, shapeErr("level or index %d past %d", v, maxV)
			}
			m := int(min(cnt, uint64(len(dst)-o)))
			if store {
				fill(dst[o:o+m], T(v))
			}
			if wantRuns && m > 0 {
				runs = appendRun(runs, int32(v), m)
			}
			o += m
			continue
		}
		groups := u >> 1
		if groups > uint64(len(src)) || groups*8 > limit-uint64(o) {
			return runs, shapeErr("bit-packed run of %d groups past the page's %d values", groups, len(dst)-o)
		}
		nb := int(groups) * width
		if nb > len(src)-i {
			return runs, shapeErr("bit-packed run past its bytes")
		}
		packed := src[i : i+nb]
		i += nb
		m := int(min(groups*8, uint64(len(dst)-o)))
		if width == 1 && maxV >= 1 && !wantRuns {
			// Levels of an optional or repeated column: a byte holds 8,
			// every one of them a valid level.
			unpack1(dst[o:o+m], packed)
			o += m
			continue
		}
		var acc uint64
		var have int
		p := 0
		for j := range m {
			for have < width {
				acc |= uint64(packed[p]) << have
				p++
				have += 8
			}
			v := acc & mask
			acc >>= width
			have -= width
			if v > uint64(maxV) || maxV < 0 {
				return runs, shapeErr("level or index %d past %d", v, maxV)
			}
			if store {
				dst[o+j] = T(v)
			}
			if wantRuns {
				runs = appendRun(runs, int32(v), 1)
			}
		}
		o += m
	}
	return runs, nil
}
