package pqenc

import (
	"bytes"

	"github.com/parquet-go/parquet-go/format"
)

// A byte-array page whose bounds the column index cuts to
// ColumnIndexSizeLimit bytes carries its exact min and max in its header
// (the data page v2 header's statistics, outside the page's CRC): a
// compaction that copies the page verbatim takes the chunk statistics'
// whole values from there instead of decoding the page (resolveCutPages),
// and the copy keeps them for the next compaction. Bounds longer than
// MaxPageStatBytes together are left out; such a page is decoded if it
// can hold its chunk's min or max.

// MaxPageStatBytes bounds the exact min and max, together, a page header
// carries.
const MaxPageStatBytes = 2048

// exactPageStats is the header statistics of a byte-array page of exact
// bounds lo and hi (as bounds.encode gives them) and nulls nulls: empty
// (not written) unless the column index cuts them and they fit
// MaxPageStatBytes. The values are copied: truncateIndexBounds changes hi.
func exactPageStats(lo, hi []byte, nulls int) format.Statistics {
	if lo == nil || hi == nil || len(lo) <= ColumnIndexSizeLimit && len(hi) <= ColumnIndexSizeLimit ||
		len(lo)+len(hi) > MaxPageStatBytes {
		return format.Statistics{}
	}
	v := make([]byte, 0, len(lo)+len(hi))
	v = append(append(v, lo...), hi...)
	return format.Statistics{NullCount: int64(nulls), MinValue: v[:len(lo):len(lo)], MaxValue: v[len(lo):]}
}

// headerBounds returns page k's exact bounds from its header statistics
// when they agree with its column index bounds ciLo and ciHi (each the
// header's value cut as truncateIndexBounds cuts it) and lie within the
// input chunk's statistics; otherwise ok is false and the page's bounds
// are settled as before (decoded if they matter).
func (ch *Chunk) headerBounds(k int, ciLo, ciHi []byte) (lo, hi []byte, ok bool) {
	lo, hi, ok = ch.raw.PageStats(k)
	if !ok || bytes.Compare(lo, hi) > 0 || !cutTo(lo, ciLo, false) || !cutTo(hi, ciHi, true) {
		return nil, nil, false
	}
	if clo, chi, has := ch.raw.ChunkBounds(); has && (bytes.Compare(lo, clo) < 0 || bytes.Compare(hi, chi) > 0) {
		return nil, nil, false
	}
	return lo, hi, true
}

// cutTo reports whether truncateIndexBounds cuts v (a lower bound, or an
// upper one when upper) to cut.
func cutTo(v, cut []byte, upper bool) bool {
	if len(v) <= ColumnIndexSizeLimit {
		return bytes.Equal(v, cut)
	}
	if len(cut) != ColumnIndexSizeLimit {
		return false
	}
	if !upper {
		return bytes.Equal(v[:ColumnIndexSizeLimit], cut)
	}
	var b [ColumnIndexSizeLimit]byte
	copy(b[:], v)
	roundUpCut(b[:])
	return bytes.Equal(b[:], cut)
}
