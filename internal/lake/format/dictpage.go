package format

import (
	"io"

	pqformat "github.com/parquet-go/parquet-go/format"
)

// This file gives a writer that copied dictionary-encoded pages verbatim
// (compaction: the output chunk took the input chunk's dictionary) their
// indexes back when it needs them after all: when the output chunk's
// dictionary outgrows its limit and the chunk falls back to plain values,
// its held pages are written again with their values.

// DictPageIndexes decodes one RLE_DICTIONARY data page of a byte-array
// column, page (header included, as it lies in its chunk, compressed with
// codec), and appends its dictionary indexes, each below dictLen, to idx
// (its levels are checked, not returned: a data page v2 holds them as
// they are, uncompressed, before its values). The page must have
// passed the page checks (ReadRawChunk) before; its decoding is still
// bounded by its own sizes, so a damaged page is an error wrapping
// ErrCorrupt, never a panic.
func DictPageIndexes(page []byte, codec pqformat.CompressionCodec, maxDef, maxRep, dictLen int, idx []int32) (_ []int32, err error) {
	defer Recover(&err, "decode dictionary indexes")
	d, release := onePageDec(page, codec, maxDef, maxRep, dictLen)
	defer release()
	if dictLen <= 0 {
		return idx, shapeErr("dictionary-encoded page of an empty dictionary")
	}
	p, err := d.next()
	if err == io.EOF {
		return idx, pageErr("no data page")
	}
	if err != nil {
		return idx, err
	}
	if p.nn > 0 && p.idx == nil {
		return idx, shapeErr("not a dictionary-encoded page")
	}
	if len(p.idx) != p.nn {
		return idx, shapeErr("a page of %d values decodes to %d indexes", p.nn, len(p.idx))
	}
	return append(idx, p.idx...), nil
}

// LevelSpans returns where the levels of a data page v2 lie in the page
// (RawChunk.Bytes[Off:Off+Len]): its header's length, then its repetition
// and definition levels' (uncompressed, RLE). ok is false for other pages.
func (p *RawPage) LevelSpans() (hdrLen, repLen, defLen int, ok bool) {
	if !p.V2 || p.hdrLen <= 0 || p.repLen < 0 || p.defLen < 0 || p.hdrLen+int(p.repLen)+int(p.defLen) > p.Len {
		return 0, 0, 0, false
	}
	return p.hdrLen, int(p.repLen), int(p.defLen), true
}
