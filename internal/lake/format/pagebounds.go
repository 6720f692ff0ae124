package format

import (
	"bytes"
	"io"
	"sync"

	pqformat "github.com/parquet-go/parquet-go/format"
)

// This file gives a writer that copied byte-array pages verbatim
// (compaction) their exact bounds when it needs them after all: a page's
// column index bounds may be cut to 16 bytes, while chunk statistics hold
// whole values. The copier keeps the page's bytes, decides at the chunk's
// end which pages can hold its min or max, and decodes only those here.

// ByteArrayPageBounds decodes one data page of a byte-array column, page
// (header included, as it lies in its chunk; data page v1 or v2 of the
// lake's encodings, compressed with codec), and returns the least and
// greatest of its non-null values appended to lo and hi, and whether it
// has any. The page must have passed the page checks (ReadRawChunk)
// before; its decoding is still bounded by its own sizes, so a damaged
// page is an error wrapping ErrCorrupt, never a panic.
func ByteArrayPageBounds(page []byte, codec pqformat.CompressionCodec, maxDef, maxRep int, lo, hi []byte) (_, _ []byte, has bool, err error) {
	defer Recover(&err, "decode page bounds")
	d, release := onePageDec(page, codec, maxDef, maxRep, 0)
	defer release()
	p, err := d.next()
	if err == io.EOF {
		return lo, hi, false, pageErr("no data page")
	}
	if err != nil {
		return lo, hi, false, err
	}
	if p.idx != nil {
		return lo, hi, false, shapeErr("dictionary-encoded page without its dictionary")
	}
	if p.nn == 0 {
		return lo, hi, false, nil
	}
	if len(p.offs) != p.nn+1 {
		return lo, hi, false, shapeErr("%d byte array offsets for %d values", len(p.offs), p.nn)
	}
	l, h := p.bytesAt(0), p.bytesAt(0)
	for j := 1; j < p.nn; j++ {
		v := p.bytesAt(j)
		if bytes.Compare(v, l) < 0 {
			l = v
		} else if bytes.Compare(v, h) > 0 {
			h = v
		}
	}
	return append(lo, l...), append(hi, h...), true, nil
}

// boundsDecs keeps onePageDec's decoders (their page buffers).
var boundsDecs sync.Pool

// onePageDec returns a decoder of one byte-array data page (header
// included, as it lies in its chunk, compressed with codec), whose
// dictionary, when dictLen > 0, has dictLen entries, and the function that
// gives it back (its page buffers are kept, a rare large one let go).
func onePageDec(page []byte, codec pqformat.CompressionCodec, maxDef, maxRep, dictLen int) (*chunkDec, func()) {
	d, _ := boundsDecs.Get().(*chunkDec)
	if d == nil {
		d = new(chunkDec)
	}
	md := pqformat.ColumnMetaData{Type: pqformat.ByteArray, Codec: codec}
	d.buf, d.off, d.end = page, 0, len(page)
	d.typ, d.maxDef, d.maxRep, d.rgRows = pqformat.ByteArray, maxDef, maxRep, MaxPageValues
	d.c = pageChecker{ref: chunkRef{md: &md, maxDef: maxDef, maxRep: maxRep, rgRows: MaxPageValues}, s: getScratch()}
	d.hasDict, d.dict.n = dictLen > 0, max(dictLen, 0)
	return d, func() {
		putScratch(d.c.s)
		d.c = pageChecker{}
		d.buf = nil
		d.hasDict, d.dict.n = false, 0
		d.pg.data = nil // it may alias the page
		if cap(d.pg.dataBuf) > 4<<20 {
			d.pg.dataBuf, d.pg.offs = nil, nil // a rare large page: let it go
		}
		boundsDecs.Put(d)
	}
}

// ChunkBounds returns the min and max of the chunk's statistics, whole
// values as the lake's writers write them (both parquet-go's and pqenc's),
// when the footer has both: bounds of every page of the chunk.
func (rc *RawChunk) ChunkBounds() (lo, hi []byte, ok bool) {
	if rc.cc == nil || rc.ref.md == nil {
		return nil, nil, false
	}
	st := &rc.ref.md.Statistics
	if len(st.MinValue) == 0 || len(st.MaxValue) == 0 || bytes.Compare(st.MinValue, st.MaxValue) > 0 {
		return nil, nil, false
	}
	return st.MinValue, st.MaxValue, true
}
