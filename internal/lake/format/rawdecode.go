package format

import (
	pqformat "github.com/parquet-go/parquet-go/format"
)

// This file decodes the data pages of a RawChunk one at a time with the
// typed page decoder (decode.go), from the spans and header fields that
// ReadRawChunk recorded as it checked them: a page's header is parsed
// once, and no parquet-go page reader (with its buffers) is opened per
// chunk. Compaction's chunks (pqenc.Chunk) decode through it.

// DecodedPage is one data page decoded: its levels and its non-null
// values, in the slice of the column's physical type. The slices alias
// the PageDecoder's buffers, valid until its next call.
type DecodedPage struct {
	N       int     // level entries (values including nulls)
	NonNull int     // non-null values
	Defs    []uint8 // one per level; nil when the max definition level is 0
	Reps    []uint8 // one per level; nil for a flat column

	I64   []int64
	I32   []int32
	F64   []float64
	Bools []bool
	// Byte arrays: value j is Data[Offs[j]:Offs[j+1]], or, for a page of
	// dictionary indexes, the chunk's dictionary value Idx[j].
	Data    []byte
	Offs    []uint32
	Idx     []int32
	Indexed bool // a page of dictionary indexes (Idx; Data and Offs unset)
}

// PageDecoder decodes pages of RawChunks; its buffers are reused page
// after page and chunk after chunk (Release returns the decompression
// scratch). One decoder is used by one goroutine at a time.
type PageDecoder struct {
	d  chunkDec
	md pqformat.ColumnMetaData
}

// Typed reports whether DecodePage decodes the chunk's pages: data pages
// v2 of the lake's encodings (PLAIN; DELTA_LENGTH_BYTE_ARRAY and
// dictionary indexes of byte arrays) and codecs, levels of at most 2 and
// 1. Other chunks go through parquet-go (DecodePages).
func (rc *RawChunk) Typed() bool {
	if rc.typedState == 0 {
		rc.typedState = -1
		if rc.typedChunk() {
			rc.typedState = 1
		}
	}
	return rc.typedState > 0
}

// typedChunk is Typed, computed (once per ReadRawChunk: it looks the
// chunk up in its file's metadata).
func (rc *RawChunk) typedChunk() bool {
	if rc.cc == nil {
		return false
	}
	if _, ok := typedChunk(rc.cc); !ok {
		return false
	}
	isBytes := rc.ref.md.Type == pqformat.ByteArray
	if rc.dict.Len > 0 && (!isBytes || !rc.dict.typed ||
		rc.dict.Encoding != pqformat.Plain && rc.dict.Encoding != pqformat.PlainDictionary) {
		return false
	}
	for i := range rc.Pages {
		p := &rc.Pages[i]
		if !p.V2 || !p.typed {
			return false
		}
		switch p.Encoding {
		case pqformat.Plain:
		case pqformat.DeltaLengthByteArray, pqformat.RLEDictionary, pqformat.PlainDictionary:
			if !isBytes {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// DictValues is the number of values of the chunk's dictionary page, 0
// when it has none.
func (rc *RawChunk) DictValues() int {
	if rc.dict.Len == 0 {
		return 0
	}
	return int(rc.dict.Values)
}

// DecodeDict decodes the dictionary page of a byte-array chunk (Typed)
// and returns its values as data and n+1 offsets, aliasing pd's buffers
// until its next call.
func (pd *PageDecoder) DecodeDict(rc *RawChunk) (data []byte, offs []uint32, err error) {
	defer Recover(&err, "decode dictionary page")
	if rc.dict.Len == 0 || rc.ref.md == nil || rc.ref.md.Type != pqformat.ByteArray {
		return nil, nil, shapeErr("no dictionary page of byte arrays")
	}
	d := pd.start(rc)
	p := &rc.dict
	d.hdr = pqformat.PageHeader{Type: pqformat.DictionaryPage, UncompressedPageSize: p.uncompressed}
	d.hdr.DictionaryPageHeader.Valid = true
	d.hdr.DictionaryPageHeader.V.NumValues = int32(p.Values)
	d.hdr.DictionaryPageHeader.V.Encoding = p.Encoding
	if err := d.readDict(rc.Bytes[p.Off+p.hdrLen : p.Off+p.Len]); err != nil {
		return nil, nil, err
	}
	return d.dict.data, d.dict.offs, nil
}

// DecodePage decodes data page k of a Typed chunk into out; dictionary
// indexes are checked against the chunk's dictionary (DictValues), which
// DecodeDict decodes. An error wraps ErrCorrupt.
func (pd *PageDecoder) DecodePage(rc *RawChunk, k int, out *DecodedPage) (err error) {
	defer Recover(&err, "decode page")
	d, p, err := pd.startV2(rc, k)
	if err != nil {
		return err
	}
	if err := d.dataV2(rc.Bytes[p.Off+p.hdrLen : p.Off+p.Len]); err != nil {
		return err
	}
	pg := &d.pg
	*out = DecodedPage{N: pg.n, NonNull: pg.nn, Defs: pg.defs, Reps: pg.reps}
	switch d.typ {
	case pqformat.Int64:
		out.I64 = pg.i64
	case pqformat.Int32:
		out.I32 = pg.i32
	case pqformat.Double:
		out.F64 = pg.f64
	case pqformat.Boolean:
		out.Bools = pg.bools
	case pqformat.ByteArray:
		// The encoding tells, not pg.idx, which is nil for a page of
		// no values.
		if p.Encoding == pqformat.RLEDictionary || p.Encoding == pqformat.PlainDictionary {
			out.Idx, out.Indexed = pg.idx, true
		} else {
			out.Data, out.Offs = pg.data, pg.offs
		}
	}
	if pg.nn == 0 {
		// The value slices may hold an earlier page's values.
		out.I64, out.I32, out.F64, out.Bools, out.Data, out.Offs, out.Idx = nil, nil, nil, nil, nil, nil, nil
	}
	return nil
}

// start readies the decoder for a page of rc.
// startV2 sets pd's decoder up for data page k of rc as the page's header
// says, with the chunk's dictionary, or fails unless the page is a typed
// data page v2.
func (pd *PageDecoder) startV2(rc *RawChunk, k int) (*chunkDec, *RawPage, error) {
	if k < 0 || k >= len(rc.Pages) || !rc.Pages[k].V2 || !rc.Pages[k].typed {
		return nil, nil, shapeErr("page %d of %d is not a data page v2", k, len(rc.Pages))
	}
	d := pd.start(rc)
	p := &rc.Pages[k]
	d.hdr = pqformat.PageHeader{Type: pqformat.DataPageV2, UncompressedPageSize: p.uncompressed}
	h := &d.hdr.DataPageHeaderV2
	h.Valid = true
	h.V.NumValues, h.V.NumNulls, h.V.NumRows = int32(p.Values), int32(p.Nulls), int32(p.Rows)
	h.V.Encoding = p.Encoding
	h.V.RepetitionLevelsByteLength, h.V.DefinitionLevelsByteLength = p.repLen, p.defLen
	h.V.IsCompressed.Valid, h.V.IsCompressed.V = true, !p.notCompressed
	d.hasDict = rc.dict.Len > 0
	d.dict.n = rc.DictValues()
	return d, p, nil
}

func (pd *PageDecoder) start(rc *RawChunk) *chunkDec {
	d := &pd.d
	pd.md = pqformat.ColumnMetaData{Type: rc.ref.md.Type, Codec: rc.ref.md.Codec}
	d.typ, d.maxDef, d.maxRep, d.rgRows = rc.ref.md.Type, rc.ref.maxDef, rc.ref.maxRep, rc.ref.rgRows
	s := d.c.s
	if s == nil {
		s = getScratch()
	}
	d.c = pageChecker{ref: chunkRef{md: &pd.md, maxDef: rc.ref.maxDef, maxRep: rc.ref.maxRep, rgRows: rc.ref.rgRows}, s: s}
	d.hasDict = false
	d.dict.n = 0
	return d
}

// Release returns the decompression scratch (buffers, zstd decoders) the
// decoder holds; it may be used again after.
func (pd *PageDecoder) Release() {
	if pd.d.c.s != nil {
		putScratch(pd.d.c.s)
		pd.d.c.s = nil
	}
}
