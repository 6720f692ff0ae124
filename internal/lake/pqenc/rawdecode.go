package pqenc

import (
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// This file decodes a chunk's pages with format's typed page decoder
// (format.PageDecoder), from the spans and header fields its checks
// recorded, instead of parquet-go's page reader: a page header is parsed
// once, and a chunk holds no page reader and its buffers between pages;
// the decoders (and their decompression buffers) are shared.

// pageDecs keeps page decoders (and their zstd decoders) between pages,
// about one per concurrent merge.
var pageDecs = format.FreeList[*format.PageDecoder]{Max: 4}

func getPageDec() *format.PageDecoder {
	if pd, ok := pageDecs.Get(); ok {
		return pd
	}
	return new(format.PageDecoder)
}

func putPageDec(pd *format.PageDecoder) {
	if !pageDecs.Put(pd) {
		pd.Release()
	}
}

// decodeTyped decodes data page k of the chunk's raw pages and appends
// its levels and values, as addPage does for parquet-go's pages.
func (ch *Chunk) decodeTyped(k int) (n, nn int, err error) {
	pd := getPageDec()
	defer putPageDec(pd)
	var p format.DecodedPage
	if err := pd.DecodePage(&ch.raw, k, &p); err != nil {
		return 0, 0, err
	}
	n, nn = p.N, p.NonNull
	if ch.maxDef > 0 {
		if len(p.Defs) != n {
			return 0, 0, fmt.Errorf("%w: %d definition levels for %d values", ErrCorrupt, len(p.Defs), n)
		}
		ch.def = append(ch.def, p.Defs...)
	}
	if ch.maxRep > 0 {
		if len(p.Reps) != n {
			return 0, 0, fmt.Errorf("%w: %d repetition levels for %d values", ErrCorrupt, len(p.Reps), n)
		}
		ch.rep = append(ch.rep, p.Reps...)
	}
	if nn == 0 {
		return n, 0, nil // levels only
	}
	bad := false
	switch ch.kind {
	case parquet.Int64:
		bad = len(p.I64) != nn
		ch.i64 = append(ch.i64, p.I64...)
	case parquet.Int32:
		bad = len(p.I32) != nn
		ch.i32 = append(ch.i32, p.I32...)
	case parquet.Double:
		bad = len(p.F64) != nn
		ch.f64 = append(ch.f64, p.F64...)
	case parquet.Boolean:
		bad = len(p.Bools) != nn
		ch.bools = append(ch.bools, p.Bools...)
	case parquet.ByteArray:
		if p.Indexed {
			if len(p.Idx) != nn {
				bad = true
				break
			}
			if !ch.indexed && len(ch.offs) == 1 && len(ch.dictOffs) == 0 {
				// The chunk's first values: take its dictionary.
				vals, offs, err := pd.DecodeDict(&ch.raw)
				if err != nil {
					return 0, 0, err
				}
				if len(offs) != ch.raw.DictValues()+1 {
					return 0, 0, fmt.Errorf("%w: %d dictionary offsets for %d values", ErrCorrupt, len(offs), ch.raw.DictValues())
				}
				ch.dict = append(ch.dict[:0], vals...)
				ch.dictOffs = append(ch.dictOffs[:0], offs...)
				ch.indexed = true
			}
			if err := ch.addIdx(p.Idx); err != nil {
				return 0, 0, err
			}
			break
		}
		if err := ch.addByteArrays(p.Data, p.Offs, nn); err != nil {
			return 0, 0, err
		}
	default:
		return 0, 0, fmt.Errorf("pqenc: column type %s not supported", ch.kind)
	}
	if bad {
		return 0, 0, fmt.Errorf("%w: a page of %d values decodes to another number", ErrCorrupt, nn)
	}
	return n, nn, nil
}
