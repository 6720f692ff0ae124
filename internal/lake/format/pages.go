package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// Bounds on one page of a lake file, checked before parquet-go decodes it.
// parquet-go trusts what a page says about itself: it allocates a page
// header's binary lengths, its uncompressed size, a zstd frame's content
// size and every RLE run's count before reading them, so one damaged page
// of a small file asked for gigabytes (FuzzOpen), a fatal error no recover
// catches. sluice's writer ends a page at pqenc.PageRows (64 Ki) rows or
// about 250 KiB of values, but writes a dictionary column that falls back
// to plain as one page per chunk (134 MB for the 300 large values of
// lake's TestJSONCacheFull): the byte cap is what one row group of the
// lake writer may buffer (lake.max_buffered_bytes' default).
const (
	// MaxPageBytes caps a page's compressed and uncompressed size.
	MaxPageBytes = 512 << 20
	// MaxPageValues caps the values (levels included) of one page and of a
	// dictionary page.
	MaxPageValues = 1 << 22
)

// ErrPage is wrapped (with ErrCorrupt) by the errors of pages that fail
// CheckChunk's bounds.
var ErrPage = errors.New("page out of bounds")

// pageErr returns an error wrapping ErrCorrupt and ErrPage.
func pageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrCorrupt, ErrPage, fmt.Sprintf(format, args...))
}

// Pages returns the pages of column chunk cc as parquet-go reads them,
// each checked by CheckChunk before parquet-go decodes it: a damaged page
// gives an error wrapping ErrCorrupt instead of exhausting memory. Every
// reader of lake pages goes through it (or through a File, which checks
// its row groups before reading them).
func Pages(cc parquet.ColumnChunk) parquet.Pages {
	return &checkedPages{cc: cc, to: math.MaxInt64}
}

// PagesRange is Pages for a reader that wants rows [a, b) of cc only: the
// pages outside them (found with the offset index, when the file has one)
// are neither checked nor read.
func PagesRange(cc parquet.ColumnChunk, a, b int64) parquet.Pages {
	return &checkedPages{cc: cc, from: a, to: b}
}

type checkedPages struct {
	cc       parquet.ColumnChunk
	pages    parquet.Pages
	from, to int64
	err      error
	buf      []byte // the chunk's bytes, when read whole
	mem      memReaderAt
}

func (p *checkedPages) open() error {
	if p.pages != nil || p.err != nil {
		return p.err
	}
	if fcc, ok := p.cc.(*parquet.FileColumnChunk); ok && p.from <= 0 && p.to == math.MaxInt64 {
		// The whole chunk: read it once, check it in memory and let
		// parquet-go decode it from there (one read of the store, not two).
		buf, base, err := readChunk(fcc, getChunkBuf())
		if err == nil {
			_, err = checkChunkIn(p.cc, 0, math.MaxInt64, buf, base)
		}
		if err != nil {
			putChunkBuf(buf)
			p.err = err
			return err
		}
		p.buf = buf
		p.mem = memReaderAt{b: buf, base: base}
		p.pages = fcc.PagesFrom(&p.mem)
		return nil
	}
	if _, err := checkChunk(p.cc, p.from, p.to); err != nil {
		p.err = err
		return err
	}
	p.pages = p.cc.Pages()
	return nil
}

// freeChunkBufs keeps the buffers of whole chunks read by Pages between
// chunks (a reader reads chunk after chunk); up to 16 MiB each.
var freeChunkBufs = FreeList[[]byte]{Max: maxIdleTmps}

func getChunkBuf() []byte {
	b, _ := freeChunkBufs.Get()
	return b
}

func putChunkBuf(b []byte) {
	if b == nil || cap(b) > 16<<20 {
		return
	}
	freeChunkBufs.Put(b[:0])
}

// memReaderAt serves the bytes of a column chunk read into memory at
// their offsets in the file.
type memReaderAt struct {
	b    []byte
	base int64
}

func (r *memReaderAt) ReadAt(p []byte, off int64) (int, error) {
	off -= r.base
	if off < 0 || off > int64(len(r.b)) {
		return 0, io.EOF
	}
	n := copy(p, r.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readChunk reads the bytes of column chunk fcc into buf (grown as
// needed), after checking the footer places them inside the file, and
// returns them and their offset in the file.
func readChunk(fcc *parquet.FileColumnChunk, buf []byte) ([]byte, int64, error) {
	ref, ok, err := refOf(fcc)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, 0, pageErr("column chunk not found in its file")
	}
	start, end, err := chunkRange(ref)
	if err != nil {
		return nil, 0, err
	}
	buf = grow(buf, int(end-start))
	if _, err := ref.pf.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, fmt.Errorf("read column %q: %w", ref.md.PathInSchema, err)
	}
	return buf, start, nil
}

// chunkRange is where the footer says ref's bytes are, checked to lie
// inside the file.
func chunkRange(ref chunkRef) (start, end int64, err error) {
	md := ref.md
	start = md.DataPageOffset
	if md.DictionaryPageOffset > 0 {
		start = min(start, md.DictionaryPageOffset)
	}
	end = start + md.TotalCompressedSize
	if start < 4 || md.TotalCompressedSize < 0 || end > ref.pf.Size()-8 || end < start {
		return 0, 0, pageErr("column %q: chunk bytes [%d, %d) outside the file's %d", md.PathInSchema, start, end, ref.pf.Size())
	}
	return start, end, nil
}

func (p *checkedPages) ReadPage() (parquet.Page, error) {
	if err := p.open(); err != nil {
		return nil, err
	}
	return p.pages.ReadPage()
}

func (p *checkedPages) SeekToRow(row int64) error {
	if p.pages == nil && p.err == nil {
		p.from = row
	} else if row < p.from {
		// Back before the checked pages: check again from there.
		p.from = row
		if _, err := checkChunk(p.cc, p.from, p.to); err != nil {
			p.err = err
			return err
		}
	}
	if err := p.open(); err != nil {
		return err
	}
	return p.pages.SeekToRow(row)
}

func (p *checkedPages) Close() error {
	// parquet-go copies what it reads into its own page buffers, so the
	// chunk's bytes may be reused once its pages are closed.
	putChunkBuf(p.buf)
	p.buf = nil
	if p.pages != nil {
		return p.pages.Close()
	}
	return nil
}

// CheckChunk checks every page of column chunk cc (a chunk of a file
// opened with Open) against the chunk's footer metadata and the caps
// above, and returns the rows its pages hold. It decompresses each page
// (with its claimed sizes as hard limits) and walks its level and
// dictionary-index runs without decoding them. An error wraps ErrCorrupt.
// Chunks of other kinds (not read from a file) are not checked.
func CheckChunk(cc parquet.ColumnChunk) (rows int64, err error) {
	return checkChunk(cc, 0, math.MaxInt64)
}

// chunkRef is what checkChunk needs to know of a column chunk.
type chunkRef struct {
	pf             *parquet.File
	md             *pqformat.ColumnMetaData
	rgRows         int64
	maxDef, maxRep int
	pageIndex      *pqformat.OffsetIndex // nil when not read
}

func refOf(cc parquet.ColumnChunk) (chunkRef, bool, error) {
	fcc, ok := cc.(*parquet.FileColumnChunk)
	if !ok {
		return chunkRef{}, false, nil
	}
	pf := fcc.File()
	col, ok := fcc.Node().(*parquet.Column)
	if pf == nil || !ok {
		return chunkRef{}, false, nil
	}
	ci := fcc.Column()
	meta := pf.Metadata()
	for i, rg := range pf.RowGroups() {
		ccs := rg.ColumnChunks()
		if ci >= len(ccs) || ccs[ci] != cc {
			continue
		}
		if i >= len(meta.RowGroups) || ci >= len(meta.RowGroups[i].Columns) {
			return chunkRef{}, false, pageErr("column %d of row group %d missing from the footer", ci, i)
		}
		ref := chunkRef{pf: pf, md: &meta.RowGroups[i].Columns[ci].MetaData, rgRows: meta.RowGroups[i].NumRows,
			maxDef: col.MaxDefinitionLevel(), maxRep: col.MaxRepetitionLevel()}
		if ois := pf.OffsetIndexes(); len(ois) == len(meta.RowGroups)*len(ccs) {
			ref.pageIndex = &ois[i*len(ccs)+ci]
		}
		return ref, true, nil
	}
	return chunkRef{}, false, nil
}

// pageScratch is the reused memory of checkChunk: page bytes and their
// decompressed form.
type pageScratch struct {
	hdr, body, out []byte
	zd, zs         *zstd.Decoder // DecodeAll, stream (page heads)
	rd             bytes.Reader
	br             thrift.BytesReader // page headers
	dec            *thrift.Decoder
}

// freeScratch keeps checkChunk's scratch (and its zstd decoders) between
// chunks.
var freeScratch = FreeList[*pageScratch]{Max: maxIdleTmps}

func getScratch() *pageScratch {
	if s, ok := freeScratch.Get(); ok {
		return s
	}
	return new(pageScratch)
}

func putScratch(s *pageScratch) {
	if cap(s.body) > 4<<20 || cap(s.out) > 4<<20 {
		// A rare large page: let its buffers go.
		s.body, s.out = nil, nil
	}
	if !freeScratch.Put(s) {
		for _, d := range []*zstd.Decoder{s.zd, s.zs} {
			if d != nil {
				d.Close()
			}
		}
	}
}

// maxHeaderBytes bounds a page header: a lake writer's page statistics cut
// byte arrays to 64 bytes (ColumnIndexSizeLimit); parquet-go's full ones
// are still far below it.
const maxHeaderBytes = 16 << 20

// checkChunk checks the pages of cc holding rows [from, to) (and its
// dictionary page) and returns how many rows the checked pages hold.
func checkChunk(cc parquet.ColumnChunk, from, to int64) (rows int64, err error) {
	return checkChunkIn(cc, from, to, nil, 0)
}

// checkChunkIn is checkChunk over the chunk's bytes in mem (at offset base
// of the file), or read from the file as needed when mem is nil.
func checkChunkIn(cc parquet.ColumnChunk, from, to int64, mem []byte, base int64) (rows int64, err error) {
	return checkChunkVisit(cc, from, to, mem, base, false, nil)
}

// checkChunkVisit is checkChunkIn that also calls visit with each checked
// page's offset in the file, its length (header included) and header
// (valid during the call only). lazyIdx leaves the dictionary indexes of
// data pages v2 unchecked (their compressed size is still bounded) for a
// caller that decodes such pages only with the typed decoder, which
// checks them as it decodes them (ReadRawChunk: they were decompressed
// twice).
func checkChunkVisit(cc parquet.ColumnChunk, from, to int64, mem []byte, base int64, lazyIdx bool,
	visit func(off, n int64, h *pqformat.PageHeader) error) (rows int64, err error) {
	defer Recover(&err, "check column chunk")
	ref, ok, err := refOf(cc)
	if !ok || err != nil {
		return 0, err
	}
	md := ref.md
	switch md.Codec {
	case pqformat.Uncompressed, pqformat.Snappy, pqformat.Zstd:
	default:
		return 0, fmt.Errorf("column %q: codec %s: %w", md.PathInSchema, md.Codec, ErrUnsupportedCodec)
	}
	start, end, err := chunkRange(ref)
	if err != nil {
		return 0, err
	}
	if mem != nil && (base != start || int64(len(mem)) != end-start) {
		return 0, pageErr("column %q: chunk bytes [%d, %d) read as [%d, %d)", md.PathInSchema, start, end, base, base+int64(len(mem)))
	}
	if ref.rgRows < 0 || md.NumValues < 0 || ref.maxRep == 0 && md.NumValues != ref.rgRows {
		return 0, pageErr("column %q: %d values in a row group of %d rows", md.PathInSchema, md.NumValues, ref.rgRows)
	}
	s := getScratch()
	defer putScratch(s)
	c := pageChecker{ref: ref, s: s, col: md.PathInSchema, mem: mem, base: base, lazyIdx: lazyIdx}
	off := start
	// The dictionary page comes first; then, when rows before from can be
	// skipped by the offset index, the walk jumps to the page holding from.
	var values int64
	jumped := from <= 0 || ref.pageIndex == nil
	for off < end {
		if !jumped && off > start {
			jumped = true
			if j, first := pageAt(ref.pageIndex, from); j > 0 {
				loc := ref.pageIndex.PageLocations[j]
				if loc.Offset < off || loc.Offset >= end {
					return 0, pageErr("column %q: page %d at %d outside the chunk", md.PathInSchema, j, loc.Offset)
				}
				off, rows, values = loc.Offset, first, -1 // values no longer add up
			}
		}
		n, pv, pr, dict, err := c.page(off, end)
		if err != nil {
			return 0, fmt.Errorf("column %q page at byte %d: %w", md.PathInSchema, off, err)
		}
		if visit != nil {
			if err := visit(off, n, &c.hdr); err != nil {
				return 0, err
			}
		}
		off += n
		if dict {
			continue
		}
		if values >= 0 {
			values += pv
			if values > md.NumValues {
				return 0, pageErr("column %q: pages hold over %d values, the footer says %d", md.PathInSchema, values-pv, md.NumValues)
			}
		}
		rows += pr
		if rows > ref.rgRows {
			return 0, pageErr("column %q: pages hold over %d rows, the row group %d", md.PathInSchema, rows-pr, ref.rgRows)
		}
		if rows >= to && pr > 0 {
			return rows, nil
		}
	}
	if values >= 0 && values != md.NumValues {
		return 0, pageErr("column %q: pages hold %d values, the footer says %d", md.PathInSchema, values, md.NumValues)
	}
	if values >= 0 && c.uncompressed != md.TotalUncompressedSize {
		return 0, pageErr("column %q: pages of %d bytes uncompressed, the footer says %d", md.PathInSchema, c.uncompressed, md.TotalUncompressedSize)
	}
	return rows, nil
}

// pageAt returns the page of the offset index holding row, and its first row.
func pageAt(oi *pqformat.OffsetIndex, row int64) (int, int64) {
	j := 0
	for k, loc := range oi.PageLocations {
		if loc.FirstRowIndex > row {
			break
		}
		j = k
	}
	if j >= len(oi.PageLocations) {
		return 0, 0
	}
	return j, oi.PageLocations[j].FirstRowIndex
}

type pageChecker struct {
	ref   chunkRef
	mem   []byte // the chunk's bytes, or nil: read them from the file
	base  int64  // mem's offset in the file
	s     *pageScratch
	col   []string
	dicts int
	// uncompressed sums the pages' headers and uncompressed sizes.
	uncompressed int64
	lazyIdx      bool // checkChunkVisit
	hdr          pqformat.PageHeader
	proto        thrift.CompactProtocol
}

// page checks the page at off and returns its length (header included),
// its values and rows (rows of repeated columns: list starts, known for
// data pages v2 and counted from the repetition levels otherwise), and
// whether it is the dictionary page.
func (c *pageChecker) page(off, end int64) (n, values, rows int64, dict bool, err error) {
	s, r := c.s, c.ref.pf
	// The header: read a window, grow it while thrift runs out of bytes.
	win := min(end-off, 4<<10)
	if c.mem != nil {
		win = end - off
	}
	var hlen int
	for {
		hdr := c.mem
		if hdr != nil {
			hdr = hdr[off-c.base : end-c.base]
		} else {
			s.hdr = grow(s.hdr, int(win))
			if _, err := r.ReadAt(s.hdr, off); err != nil && !errors.Is(err, io.EOF) {
				return 0, 0, 0, false, fmt.Errorf("read page header: %w", err)
			}
			hdr = s.hdr
		}
		c.hdr = pqformat.PageHeader{}
		if n, ok := fastPageHeader(hdr, &c.hdr); ok {
			hlen = n
			break
		}
		c.hdr = pqformat.PageHeader{} // parquet-go's answer (pagehdr.go)
		if s.br == nil {
			s.br = c.proto.NewReaderFromBytes(nil)
			s.dec = thrift.NewDecoder(s.br)
		}
		br := s.br
		br.ResetBytes(hdr)
		err := s.dec.Decode(&c.hdr)
		if err == nil {
			hlen = br.BytesRead()
			break
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) || win >= end-off || win >= maxHeaderBytes {
			return 0, 0, 0, false, pageErr("page header: %v", err)
		}
		win = min(end-off, win*4, maxHeaderBytes)
	}
	h := &c.hdr
	cs, us := int64(h.CompressedPageSize), int64(h.UncompressedPageSize)
	if cs < 0 || us < 0 || cs > MaxPageBytes || us > MaxPageBytes || int64(hlen)+cs > end-off {
		return 0, 0, 0, false, pageErr("page of %d bytes (%d uncompressed) in the %d bytes left of the chunk", cs, us, end-off-int64(hlen))
	}
	n = int64(hlen) + cs
	c.uncompressed += int64(hlen) + us
	var body []byte
	if c.mem != nil {
		b := off - c.base + int64(hlen)
		body = c.mem[b : b+cs]
	} else {
		s.body = grow(s.body, int(cs))
		if _, err := r.ReadAt(s.body, off+int64(hlen)); err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, 0, false, fmt.Errorf("read page: %w", err)
		}
		body = s.body
	}
	maxVals := int64(MaxPageValues)
	if c.ref.maxRep == 0 {
		maxVals = min(maxVals, c.ref.rgRows)
	}
	switch h.Type {
	case pqformat.DictionaryPage:
		if !h.DictionaryPageHeader.Valid {
			return 0, 0, 0, false, pageErr("dictionary page without its header")
		}
		d := &h.DictionaryPageHeader.V
		if c.dicts++; c.dicts > 1 || d.NumValues < 0 || d.NumValues > MaxPageValues {
			return 0, 0, 0, false, pageErr("dictionary page %d of %d values", c.dicts, d.NumValues)
		}
		if d.Encoding != pqformat.Plain && d.Encoding != pqformat.PlainDictionary {
			return 0, 0, 0, false, pageErr("dictionary encoding %s", d.Encoding)
		}
		if err := c.bound(body, us); err != nil {
			return 0, 0, 0, false, err
		}
		return n, 0, 0, true, nil
	case pqformat.DataPage:
		if !h.DataPageHeader.Valid {
			return 0, 0, 0, false, pageErr("data page without its header")
		}
		d := &h.DataPageHeader.V
		nv := int64(d.NumValues)
		if nv < 0 || nv > maxVals {
			return 0, 0, 0, false, pageErr("data page of %d values (at most %d)", nv, maxVals)
		}
		data, err := c.decompress(body, us)
		if err != nil {
			return 0, 0, 0, false, err
		}
		rows = nv
		present := nv
		if c.ref.maxRep > 0 {
			var starts int64
			if data, starts, err = c.levelsV1(data, d.RepetitionLevelEncoding, c.ref.maxRep, nv, 0); err != nil {
				return 0, 0, 0, false, fmt.Errorf("repetition levels: %w", err)
			}
			rows = starts
		}
		if c.ref.maxDef > 0 {
			var full int64
			if data, full, err = c.levelsV1(data, d.DefinitionLevelEncoding, c.ref.maxDef, nv, c.ref.maxDef); err != nil {
				return 0, 0, 0, false, fmt.Errorf("definition levels: %w", err)
			}
			present = full
		}
		if err := checkValues(data, d.Encoding, present); err != nil {
			return 0, 0, 0, false, err
		}
		return n, nv, rows, false, nil
	case pqformat.DataPageV2:
		if !h.DataPageHeaderV2.Valid {
			return 0, 0, 0, false, pageErr("data page v2 without its header")
		}
		d := &h.DataPageHeaderV2.V
		nv, nn, nr := int64(d.NumValues), int64(d.NumNulls), int64(d.NumRows)
		rl, dl := int64(d.RepetitionLevelsByteLength), int64(d.DefinitionLevelsByteLength)
		if nv < 0 || nv > maxVals || nn < 0 || nn > nv || nr < 0 || nr > nv || c.ref.maxRep == 0 && nr != nv {
			return 0, 0, 0, false, pageErr("data page v2 of %d values, %d nulls, %d rows (at most %d values)", nv, nn, nr, maxVals)
		}
		if rl < 0 || dl < 0 || rl+dl > cs || rl+dl > us {
			return 0, 0, 0, false, pageErr("data page v2 levels of %d+%d bytes in a page of %d", rl, dl, cs)
		}
		if c.ref.maxRep > 0 {
			if _, err := countRLE(body[:rl], bits.Len(uint(c.ref.maxRep)), nv); err != nil {
				return 0, 0, 0, false, fmt.Errorf("repetition levels: %w", err)
			}
		}
		if c.ref.maxDef > 0 {
			if _, err := countRLE(body[rl:rl+dl], bits.Len(uint(c.ref.maxDef)), nv); err != nil {
				return 0, 0, 0, false, fmt.Errorf("definition levels: %w", err)
			}
		}
		vals, vs := body[rl+dl:], us-rl-dl
		compressed := !d.IsCompressed.Valid || d.IsCompressed.V
		if c.lazyIdx && (d.Encoding == pqformat.RLEDictionary || d.Encoding == pqformat.PlainDictionary) {
			// Left to the typed decoder (checkChunkVisit), its size bounded.
			if !compressed && int64(len(vals)) != vs {
				return 0, 0, 0, false, pageErr("uncompressed page v2 of %d bytes, its header says %d", len(vals), vs)
			}
			if compressed {
				if err := c.bound(vals, vs); err != nil {
					return 0, 0, 0, false, err
				}
			}
			return n, nv, nr, false, nil
		}
		if !compressed {
			if int64(len(vals)) != vs {
				return 0, 0, 0, false, pageErr("uncompressed page v2 of %d bytes, its header says %d", len(vals), vs)
			}
		} else {
			// Only what parquet-go allocates by count needs the values
			// decompressed; plain values are bounded by their bytes,
			// delta ones by their header.
			switch d.Encoding {
			case pqformat.Plain, pqformat.ByteStreamSplit:
				err = c.bound(vals, vs)
			case pqformat.DeltaBinaryPacked, pqformat.DeltaLengthByteArray:
				vals, err = c.decompressHead(vals, vs, 64)
			default:
				vals, err = c.decompress(vals, vs)
			}
			if err != nil {
				return 0, 0, 0, false, err
			}
		}
		if err := checkValues(vals, d.Encoding, nv-nn); err != nil {
			return 0, 0, 0, false, err
		}
		return n, nv, nr, false, nil
	default:
		return 0, 0, 0, false, pageErr("page type %s", h.Type)
	}
}

// levelsV1 checks the length-prefixed levels at the start of a v1 page
// and returns the rest of it, and how many levels equal want.
func (c *pageChecker) levelsV1(data []byte, enc pqformat.Encoding, maxLevel int, nv int64, want int) ([]byte, int64, error) {
	if enc != pqformat.RLE {
		// BIT_PACKED: its length follows from the values, parquet-go
		// decodes no more than the bytes hold.
		return data, nv, pageErr("level encoding %s", enc)
	}
	if len(data) < 4 {
		return nil, 0, pageErr("levels past the page")
	}
	l := int64(binary.LittleEndian.Uint32(data))
	if l > int64(len(data)-4) {
		return nil, 0, pageErr("levels of %d bytes in a page of %d", l, len(data)-4)
	}
	lv := data[4 : 4+l]
	got, err := countRLEValue(lv, bits.Len(uint(maxLevel)), nv, want)
	return data[4+l:], got, err
}

// bound checks a page of the chunk's codec decompresses to no more than
// size bytes without decompressing it (what parquet-go allocates).
func (c *pageChecker) bound(src []byte, size int64) error {
	switch c.ref.md.Codec {
	case pqformat.Uncompressed:
		if int64(len(src)) != size {
			return pageErr("uncompressed page of %d bytes, its header says %d", len(src), size)
		}
	case pqformat.Snappy:
		n, err := snappy.DecodedLen(src)
		if err != nil || int64(n) != size {
			return pageErr("snappy page of %d bytes (%v), its header says %d", n, err, size)
		}
	default:
		return zstdBound(src, size)
	}
	return nil
}

// decompressHead is decompress for the first head bytes of the page
// only (the header of a delta encoding): zstd pages are decoded as a
// stream up to there.
func (c *pageChecker) decompressHead(src []byte, size int64, head int) ([]byte, error) {
	if c.ref.md.Codec != pqformat.Zstd {
		return c.decompress(src, size)
	}
	if err := zstdBound(src, size); err != nil {
		return nil, err
	}
	if c.s.zs == nil {
		// A stream decoder of its own: one mid-stream holds its block
		// decoder, which DecodeAll would wait for.
		zs, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxPageBytes),
			zstd.WithDecoderMaxWindow(MaxPageBytes))
		if err != nil {
			return nil, err
		}
		c.s.zs = zs
	}
	zd := c.s.zs
	c.s.rd.Reset(src)
	if err := zd.Reset(&c.s.rd); err != nil {
		return nil, pageErr("zstd: %v", err)
	}
	c.s.out = grow(c.s.out, int(min(int64(head), size)))
	k, err := io.ReadFull(zd, c.s.out)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, pageErr("zstd: %v", err)
	}
	return c.s.out[:k], nil
}

func (c *pageChecker) decoder() (*zstd.Decoder, error) {
	if c.s.zd == nil {
		zd, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxPageBytes),
			zstd.WithDecoderMaxWindow(MaxPageBytes))
		if err != nil {
			return nil, err
		}
		c.s.zd = zd
	}
	return c.s.zd, nil
}

// decompress decompresses a page of the chunk's codec into the scratch,
// refusing anything past size bytes, and requires exactly size bytes.
func (c *pageChecker) decompress(src []byte, size int64) ([]byte, error) {
	s := c.s
	switch c.ref.md.Codec {
	case pqformat.Uncompressed:
		if int64(len(src)) != size {
			return nil, pageErr("uncompressed page of %d bytes, its header says %d", len(src), size)
		}
		return src, nil
	case pqformat.Snappy:
		n, err := snappy.DecodedLen(src)
		if err != nil || int64(n) != size {
			return nil, pageErr("snappy page of %d bytes (%v), its header says %d", n, err, size)
		}
		s.out = grow(s.out, n)
		out, err := snappy.Decode(s.out, src)
		if err != nil {
			return nil, pageErr("snappy: %v", err)
		}
		return out, nil
	}
	if err := zstdBound(src, size); err != nil {
		return nil, err
	}
	zd, err := c.decoder()
	if err != nil {
		return nil, err
	}
	s.out = grow(s.out, int(size))
	out, err := zd.DecodeAll(src, s.out[:0])
	if err != nil {
		return nil, pageErr("zstd: %v", err)
	}
	if int64(len(out)) != size {
		return nil, pageErr("zstd page of %d bytes, its header says %d", len(out), size)
	}
	s.out = out[:cap(out)]
	return out, nil
}

// zstdBound walks the frames and blocks of src (RFC 8878) without
// decoding them and refuses a page that could decode to more than size
// bytes: a declared content size past it, or blocks that could: the
// decoder allocates a frame's declared content size before decoding it.
func zstdBound(src []byte, size int64) error {
	const blockMax = 128 << 10
	var bound int64
	for len(src) > 0 {
		if len(src) < 6 || binary.LittleEndian.Uint32(src) != 0xFD2FB528 {
			return pageErr("zstd: not a zstd frame")
		}
		fhd := src[4]
		p := 5
		single := fhd&0x20 != 0
		if fhd&0x08 != 0 {
			return pageErr("zstd: reserved frame header bit set")
		}
		if !single {
			p++
		}
		p += [4]int{0, 1, 2, 4}[fhd&3]
		fcsLen := [4]int{0, 2, 4, 8}[fhd>>6]
		if fcsLen == 0 && single {
			fcsLen = 1
		}
		if p+fcsLen > len(src) {
			return pageErr("zstd: frame header past the page")
		}
		fcs := int64(-1)
		switch fcsLen {
		case 1:
			fcs = int64(src[p])
		case 2:
			fcs = int64(binary.LittleEndian.Uint16(src[p:])) + 256
		case 4:
			fcs = int64(binary.LittleEndian.Uint32(src[p:]))
		case 8:
			u := binary.LittleEndian.Uint64(src[p:])
			if u > MaxPageBytes {
				return pageErr("zstd: frame of %d bytes in a page of %d", u, size)
			}
			fcs = int64(u)
		}
		p += fcsLen
		var blocks int64
		for {
			if p+3 > len(src) {
				return pageErr("zstd: block header past the page")
			}
			bh := uint32(src[p]) | uint32(src[p+1])<<8 | uint32(src[p+2])<<16
			p += 3
			last, typ, bs := bh&1 != 0, (bh>>1)&3, int(bh>>3)
			if bs > blockMax {
				return pageErr("zstd: block of %d bytes", bs)
			}
			switch typ {
			case 0: // raw
				p += bs
				blocks += int64(bs)
			case 1: // RLE
				p++
				blocks += int64(bs)
			case 2: // compressed
				p += bs
				blocks += blockMax
			default:
				return pageErr("zstd: reserved block type")
			}
			if p > len(src) {
				return pageErr("zstd: block past the page")
			}
			if last {
				break
			}
		}
		if fhd&0x04 != 0 {
			p += 4
			if p > len(src) {
				return pageErr("zstd: checksum past the page")
			}
		}
		if fcs >= 0 {
			bound += fcs
		} else {
			bound += blocks
		}
		if bound > size+blockMax {
			return pageErr("zstd: frames of up to %d bytes in a page of %d", bound, size)
		}
		src = src[p:]
	}
	return nil
}

// checkValues bounds the values section of a page of n non-null values:
// the runs of dictionary indexes and booleans and the counts of delta
// encodings, which parquet-go allocates as they say; plain values are
// bounded by their bytes.
func checkValues(data []byte, enc pqformat.Encoding, n int64) error {
	switch enc {
	case pqformat.Plain, pqformat.ByteStreamSplit:
		return nil
	case pqformat.RLEDictionary, pqformat.PlainDictionary:
		if n == 0 {
			return nil
		}
		if len(data) < 1 || data[0] > 32 {
			return pageErr("dictionary index bit width")
		}
		_, err := countRLE(data[1:], int(data[0]), n)
		return err
	case pqformat.RLE: // booleans
		if len(data) < 4 {
			return nil
		}
		l := int(binary.LittleEndian.Uint32(data))
		if l > len(data)-4 {
			return pageErr("boolean runs of %d bytes in %d", l, len(data)-4)
		}
		_, err := countRLE(data[4:4+l], 1, n)
		return err
	case pqformat.DeltaBinaryPacked, pqformat.DeltaLengthByteArray:
		return checkDeltaHeader(data, n)
	default:
		return pageErr("encoding %s (lake files do not use it)", enc)
	}
}

// checkDeltaHeader checks the header of a DELTA_BINARY_PACKED run (also
// the lengths of DELTA_LENGTH_BYTE_ARRAY) declares at most n values.
func checkDeltaHeader(data []byte, n int64) error {
	if len(data) == 0 {
		return nil
	}
	var vs [3]uint64
	for i := range vs {
		v, k := binary.Uvarint(data)
		if k <= 0 {
			return pageErr("delta header")
		}
		vs[i], data = v, data[k:]
	}
	if vs[2] > uint64(n) || vs[0] > 1<<20 || vs[1] > 1<<10 {
		return pageErr("delta run of %d values (block %d, %d mini blocks) in a page of %d", vs[2], vs[0], vs[1], n)
	}
	return nil
}

// countRLE walks the RLE/bit-packed hybrid runs of src (values of width
// bits) and returns how many values they hold, refusing more than max
// (bit-packed groups round up to 8).
func countRLE(src []byte, width int, max int64) (int64, error) {
	return countRLEValue(src, width, max, -1)
}

// countRLEValue is countRLE that also counts the values equal to want
// (want < 0: every value; bit-packed values count as not equal unless
// want is the only value the width allows).
func countRLEValue(src []byte, width int, max int64, want int) (int64, error) {
	var total, eq int64
	wb := (width + 7) / 8
	for i := 0; i < len(src); {
		u, k := binary.Uvarint(src[i:])
		if k <= 0 {
			return 0, pageErr("run header")
		}
		i += k
		cnt := int64(u >> 1)
		if u&1 != 0 { // bit-packed groups of 8
			if cnt > (max+7)/8 {
				return 0, pageErr("bit-packed run of %d groups past %d values", cnt, max)
			}
			nb := cnt * int64(width)
			if nb > int64(len(src)-i) {
				return 0, pageErr("bit-packed run past its bytes")
			}
			i += int(nb)
			total += cnt * 8
			if want < 0 {
				eq += cnt * 8
			} else {
				eq += bitPackedEqual(src[i-int(nb):i], width, cnt*8, want)
			}
		} else {
			if cnt > max {
				return 0, pageErr("run of %d values past %d", cnt, max)
			}
			if i+wb > len(src) {
				return 0, pageErr("run value past its bytes")
			}
			var v int
			for b := range wb {
				v |= int(src[i+b]) << (8 * b)
			}
			i += wb
			total += cnt
			if want < 0 || v == want {
				eq += cnt
			}
		}
		if total > max+7 {
			return 0, pageErr("runs of %d values past %d", total, max)
		}
	}
	if total < max {
		return 0, pageErr("runs of %d values, the page has %d", total, max)
	}
	return min(eq, max), nil
}

// bitPackedEqual counts the values equal to want among n values of width
// bits packed little-endian in b.
func bitPackedEqual(b []byte, width int, n int64, want int) int64 {
	var eq int64
	for j := int64(0); j < n; j++ {
		var v int
		for k := 0; k < width; k++ {
			bit := j*int64(width) + int64(k)
			if b[bit/8]>>(bit%8)&1 != 0 {
				v |= 1 << k
			}
		}
		if v == want {
			eq++
		}
	}
	return eq
}
