package format

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// This file gives a writer that copies pages verbatim (compaction) the
// bytes of a column chunk and where each of its pages lies, after every
// page passed the checks of pages.go (invariant 5: nothing unchecked is
// decoded, and nothing unchecked is copied either).

// RawChunk is a column chunk's bytes, read whole and checked, and the
// spans of its data pages. ReadRawChunk reuses its buffers.
type RawChunk struct {
	Bytes []byte // the chunk's bytes, dictionary page included
	Base  int64  // file offset of Bytes[0]
	Codec pqformat.CompressionCodec
	Pages []RawPage // data pages, in order
	// dict is the dictionary page (Len 0: none), its values in Values.
	dict RawPage
	// stats holds the pages' header min and max values (PageStats).
	stats []byte
	// deferred: dictionary indexes not checked yet (checkDeferred).
	deferred bool
	// typedState caches Typed: 0 not known yet, 1 true, -1 false.
	typedState int8

	cc   *parquet.FileColumnChunk
	ref  chunkRef
	mem  memReaderAt
	view viewReaderAt
	ci   pqformat.ColumnIndex
	// ciState: 0 not read, 1 read and usable, -1 absent or unusable.
	ciState int
	proto   thrift.CompactProtocol
}

// RawPage is where one data page lies in its RawChunk and what its
// header says.
type RawPage struct {
	Off, Len int // the page, header included, in RawChunk.Bytes
	// FirstRow is the page's first row in its row group; Rows, Values
	// (level entries) and Nulls are its header's.
	FirstRow            int64
	Rows, Values, Nulls int64
	// Uncompressed is what the page adds to its chunk's
	// total_uncompressed_size: header plus uncompressed size.
	Uncompressed int64
	Encoding     pqformat.Encoding
	V2           bool // a data page v2 (levels outside the compressed values)

	// What decoding the page needs of its header (RawChunk.DecodePage),
	// so that it is parsed once: its length, the page's uncompressed
	// size, and a v2 page's level lengths and compression flag.
	hdrLen               int
	uncompressed         int32
	repLen, defLen       int32
	notCompressed, typed bool
	// The min and max of a data page v2 header's statistics, in
	// RawChunk.stats (PageStats), when it has both.
	stats    [4]int32
	hasStats bool
}

// ReadRawChunk reads column chunk cc of a file opened with Open whole into
// rc, checks every page as Pages does and against its CRC (when the
// header has one), and lists its data pages. An error
// wraps ErrCorrupt when a page is damaged. Chunks not read from a file
// are refused.
func ReadRawChunk(cc parquet.ColumnChunk, rc *RawChunk) (err error) {
	defer Recover(&err, "read column chunk")
	fcc, ok := cc.(*parquet.FileColumnChunk)
	if !ok {
		return fmt.Errorf("read column chunk: %T is not a column chunk of a file", cc)
	}
	rc.Pages, rc.cc, rc.ciState, rc.dict, rc.stats = rc.Pages[:0], nil, 0, RawPage{}, rc.stats[:0]
	rc.typedState, rc.deferred = 0, false
	buf, base, err := readChunk(fcc, rc.Bytes)
	if err != nil {
		return err
	}
	rc.Bytes, rc.Base = buf, base
	ref, ok, err := refOf(cc)
	if err != nil {
		return err
	}
	if !ok {
		return pageErr("column chunk not found in its file")
	}
	rc.cc, rc.ref, rc.Codec = fcc, ref, ref.md.Codec
	rc.mem = memReaderAt{b: rc.Bytes, base: base}
	// Record each page's span as the checks walk them.
	var row int64
	visit := func(foff, n int64, h *pqformat.PageHeader) error {
		off := int(foff - base)
		hlen := int(n) - int(h.CompressedPageSize)
		// The CRC covers the page's bytes after its header: a page copied
		// without being decoded is still checked. 0 is taken as no CRC.
		if h.CRC != 0 && int32(crc32.ChecksumIEEE(buf[off+hlen:off+int(n)])) != h.CRC {
			return pageErr("column %q page at byte %d: CRC mismatch", ref.md.PathInSchema, foff)
		}
		p := RawPage{Off: off, Len: int(n), FirstRow: row, Uncompressed: int64(hlen) + int64(h.UncompressedPageSize),
			hdrLen: hlen, uncompressed: h.UncompressedPageSize}
		switch h.Type {
		case pqformat.DictionaryPage:
			if h.DictionaryPageHeader.Valid {
				p.Values, p.Encoding, p.typed = int64(h.DictionaryPageHeader.V.NumValues), h.DictionaryPageHeader.V.Encoding, true
			}
			rc.dict = p
			return nil
		case pqformat.DataPageV2:
			d := &h.DataPageHeaderV2.V
			p.Rows, p.Values, p.Nulls, p.Encoding, p.V2 = int64(d.NumRows), int64(d.NumValues), int64(d.NumNulls), d.Encoding, true
			p.repLen, p.defLen, p.typed = d.RepetitionLevelsByteLength, d.DefinitionLevelsByteLength, true
			p.notCompressed = d.IsCompressed.Valid && !d.IsCompressed.V
			rc.keepStats(&p, &d.Statistics)
		case pqformat.DataPage:
			// v1 pages say no rows or nulls: they are never copied,
			// only decoded. Rows of a flat column are its values.
			d := &h.DataPageHeader.V
			p.Values, p.Encoding, p.Rows, p.Nulls = int64(d.NumValues), d.Encoding, -1, -1
			if ref.maxRep == 0 {
				p.Rows = p.Values
			}
		}
		if row < 0 {
			p.FirstRow = -1 // after a page of unknown rows
		}
		rc.Pages = append(rc.Pages, p)
		if p.Rows < 0 {
			row = -1
		} else if row >= 0 {
			row += p.Rows
		}
		return nil
	}
	if _, err := checkChunkVisit(cc, 0, math.MaxInt64, buf, base, true, visit); err != nil {
		rc.Pages, rc.cc = rc.Pages[:0], nil
		return err
	}
	rc.typedState = 0 // the pages are known now
	// Dictionary indexes were left to the typed decoder (lazyIdx): a
	// chunk it does not decode is checked whole now, and one decoded by
	// parquet-go after all (DecodePages) then.
	rc.deferred = false
	for i := range rc.Pages {
		if e := rc.Pages[i].Encoding; rc.Pages[i].V2 && (e == pqformat.RLEDictionary || e == pqformat.PlainDictionary) {
			rc.deferred = true
			break
		}
	}
	if rc.deferred && !rc.Typed() {
		if err := rc.checkDeferred(); err != nil {
			rc.Pages, rc.cc, rc.typedState = rc.Pages[:0], nil, -1
			return err
		}
	}
	return nil
}

// checkDeferred checks the dictionary indexes ReadRawChunk left to the
// typed decoder, before anything else decodes the chunk.
func (rc *RawChunk) checkDeferred() error {
	if !rc.deferred {
		return nil
	}
	if _, err := checkChunkIn(rc.cc, 0, math.MaxInt64, rc.Bytes, rc.Base); err != nil {
		return err
	}
	rc.deferred = false
	return nil
}

// DecodePages returns parquet-go's pages of the chunk, decoded from
// rc.Bytes (valid until the next ReadRawChunk).
func (rc *RawChunk) DecodePages() parquet.Pages {
	if rc.cc == nil {
		return emptyPages{}
	}
	if err := rc.checkDeferred(); err != nil {
		return errPages{err}
	}
	return rc.cc.PagesFrom(&rc.mem)
}

// DecodePagesFrom returns parquet-go's pages of the chunk from data page k
// on (its dictionary page first, when it has one), decoded from rc.Bytes:
// the pages before k are neither read nor decoded. Valid until the next
// ReadRawChunk.
func (rc *RawChunk) DecodePagesFrom(k int) parquet.Pages {
	if rc.cc == nil || k >= len(rc.Pages) {
		return emptyPages{}
	}
	if k == 0 {
		return rc.DecodePages()
	}
	if err := rc.checkDeferred(); err != nil {
		return errPages{err}
	}
	// parquet-go reads the chunk as one stream from its first page: serve
	// it the dictionary page, then page k and those after it, at the
	// offsets where it expects the chunk.
	rc.view = viewReaderAt{head: rc.Bytes[:rc.Pages[0].Off], tail: rc.Bytes[rc.Pages[k].Off:], base: rc.Base}
	return rc.cc.PagesFrom(&rc.view)
}

// viewReaderAt serves head then tail as if they were one chunk at base.
type viewReaderAt struct {
	head, tail []byte
	base       int64
}

func (r *viewReaderAt) ReadAt(p []byte, off int64) (int, error) {
	off -= r.base
	if off < 0 {
		return 0, io.EOF
	}
	n := 0
	if off < int64(len(r.head)) {
		n = copy(p, r.head[off:])
		off = int64(len(r.head))
	}
	if t := off - int64(len(r.head)); n < len(p) && t < int64(len(r.tail)) {
		n += copy(p[n:], r.tail[t:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// maxColumnIndexBytes bounds a chunk's column index read by
// ColumnIndex: a lake writer's byte bounds are cut to 16 bytes, so even a
// chunk of MaxPageValues one-value pages stays far below it.
const maxColumnIndexBytes = 64 << 20

// ColumnIndex returns the chunk's column index (page bounds and null
// counts), read from its file on the first call, or nil when the file has
// none for the chunk or it does not match the chunk's pages (a reader
// then computes the bounds from the values). Its slices are valid until
// the next ReadRawChunk.
func (rc *RawChunk) ColumnIndex() *pqformat.ColumnIndex {
	if rc.ciState == 0 {
		rc.ciState = -1
		if err := rc.readColumnIndex(); err == nil {
			rc.ciState = 1
		}
	}
	if rc.ciState < 0 {
		return nil
	}
	return &rc.ci
}

func (rc *RawChunk) readColumnIndex() (err error) {
	defer Recover(&err, "read column index")
	if rc.cc == nil {
		return errors.New("no chunk")
	}
	meta := rc.ref.pf.Metadata()
	var cc *pqformat.ColumnChunk
	for g := range meta.RowGroups {
		cols := meta.RowGroups[g].Columns
		if c := rc.cc.Column(); c < len(cols) && &cols[c].MetaData == rc.ref.md {
			cc = &cols[c]
			break
		}
	}
	if cc == nil || cc.ColumnIndexLength <= 0 || cc.ColumnIndexLength > maxColumnIndexBytes ||
		cc.ColumnIndexOffset < 4 || cc.ColumnIndexOffset+int64(cc.ColumnIndexLength) > rc.ref.pf.Size()-8 {
		return errors.New("no column index")
	}
	b := make([]byte, cc.ColumnIndexLength)
	if _, err := rc.ref.pf.ReadAt(b, cc.ColumnIndexOffset); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	rc.ci = pqformat.ColumnIndex{}
	if err := thrift.Unmarshal(&rc.proto, b, &rc.ci); err != nil {
		return err
	}
	n := len(rc.Pages)
	if len(rc.ci.NullPages) != n || len(rc.ci.MinValues) != n || len(rc.ci.MaxValues) != n ||
		(len(rc.ci.NullCounts) != 0 && len(rc.ci.NullCounts) != n) {
		return errors.New("column index does not match the pages")
	}
	return nil
}

// errPages are the pages of a chunk that failed its checks.
type errPages struct{ err error }

func (p errPages) ReadPage() (parquet.Page, error) { return nil, p.err }
func (p errPages) SeekToRow(int64) error           { return p.err }
func (errPages) Close() error                      { return nil }

type emptyPages struct{}

func (emptyPages) ReadPage() (parquet.Page, error) { return nil, io.EOF }
func (emptyPages) SeekToRow(int64) error           { return io.EOF }
func (emptyPages) Close() error                    { return nil }
