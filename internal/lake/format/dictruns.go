package format

import (
	"unsafe"

	pqformat "github.com/parquet-go/parquet-go/format"
)

// This file decodes a dictionary-encoded data page for its indexes as
// runs, for a writer that rewrites the page's indexes into another
// dictionary (compaction: an input chunk whose dictionary orders its
// values otherwise than the output chunk's, pqenc's dictremap.go). The
// page's levels are decoded only to be checked (a flat optional column's
// as runs), its indexes are never expanded one per value.

// IdxRun is N consecutive non-null values of dictionary index V.
type IdxRun struct{ V, N int32 }

// The decoder's runs are handed out as IdxRuns.
var _ = [1]struct{}{}[unsafe.Sizeof(IdxRun{})-unsafe.Sizeof(valRun{})]

// DictPageRuns decodes data page k of a Typed byte-array chunk, which
// must be dictionary-encoded, and returns its indexes as runs (equal
// neighbours merged), aliasing pd's buffers until its next call. The
// levels are checked against the page's header and every index against
// the chunk's dictionary (DictValues) as DecodePage checks them; an
// error wraps ErrCorrupt.
func (pd *PageDecoder) DictPageRuns(rc *RawChunk, k int) (runs []IdxRun, err error) {
	defer Recover(&err, "decode dictionary indexes")
	if rc.ref.md == nil || rc.ref.md.Type != pqformat.ByteArray {
		return nil, shapeErr("page %d is not a dictionary-encoded page of byte arrays", k)
	}
	d, p, err := pd.startV2(rc, k)
	if err != nil {
		return nil, err
	}
	if p.Encoding != pqformat.RLEDictionary && p.Encoding != pqformat.PlainDictionary {
		return nil, shapeErr("page %d is not a dictionary-encoded page of byte arrays", k)
	}
	// Runs only: levels of a flat optional column as runs, indexes as
	// runs without a value each (decode.go's attribute reads).
	d.defRuns = true
	err = d.dataV2(rc.Bytes[p.Off+p.hdrLen : p.Off+p.Len])
	d.defRuns = false
	if err != nil {
		return nil, err
	}
	pg := &d.pg
	if int64(pg.n) != p.Values || int64(pg.n-pg.nn) != p.Nulls {
		return nil, shapeErr("dictionary page %d decodes to %d values (%d present), its header says %d (%d nulls)",
			k, pg.n, pg.nn, p.Values, p.Nulls)
	}
	if pg.nn == 0 {
		return nil, nil
	}
	total := 0
	for _, r := range pg.runs {
		total += int(r.n)
	}
	if total != pg.nn {
		return nil, shapeErr("dictionary page %d: %d indexes for %d values", k, total, pg.nn)
	}
	return unsafe.Slice((*IdxRun)(unsafe.Pointer(unsafe.SliceData(pg.runs))), len(pg.runs)), nil
}
