package pqenc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/format"
)

// Leaf is how one leaf column is encoded.
type Leaf struct {
	Path           []string
	Kind           parquet.Kind
	MaxDef, MaxRep byte
	Dict           bool // RLE_DICTIONARY data pages and a PLAIN dictionary page
	Delta          bool // DELTA_LENGTH_BYTE_ARRAY (byte arrays without dictionary)
	// MaxDictBytes, when positive, is the dictionary size (PLAIN bytes)
	// past which a chunk falls back to DELTA_LENGTH_BYTE_ARRAY.
	MaxDictBytes int
	// Bloom adds a split block bloom filter per chunk (byte arrays), with
	// BloomBitsPerValue bits per value (default 10).
	Bloom             bool
	BloomBitsPerValue uint
	unsigned          bool // integer statistics compare unsigned
}

// NewLeaf describes leaf, or errors when its type or encoding is not one
// this package writes. Path is leaf.Path, which for a leaf from
// parquet.Schema.Lookup is its last element only: callers set Path to the
// whole path (schema.Columns()), which the chunk's path_in_schema needs.
func NewLeaf(leaf parquet.LeafColumn) (Leaf, error) {
	t := leaf.Node.Type()
	li := Leaf{Path: leaf.Path, Kind: t.Kind(), MaxDef: byte(leaf.MaxDefinitionLevel), MaxRep: byte(leaf.MaxRepetitionLevel)}
	if leaf.MaxDefinitionLevel > 8 || leaf.MaxRepetitionLevel > 1 {
		return li, fmt.Errorf("column %v: nesting too deep", leaf.Path)
	}
	enc := format.Plain
	if e := leaf.Node.Encoding(); e != nil {
		enc = e.Encoding()
	} else if li.Kind == parquet.ByteArray {
		enc = format.DeltaLengthByteArray // parquet-go's default for byte arrays
	}
	switch {
	case enc == format.RLEDictionary && li.Kind == parquet.ByteArray:
		li.Dict = true
	case enc == format.DeltaLengthByteArray && li.Kind == parquet.ByteArray:
		li.Delta = true
	case enc == format.Plain && (li.Kind == parquet.Int64 || li.Kind == parquet.Int32 ||
		li.Kind == parquet.Double || li.Kind == parquet.Boolean):
	default:
		return li, fmt.Errorf("column %v: %s with encoding %s not supported", leaf.Path, t, enc)
	}
	if li.Kind == parquet.Int64 || li.Kind == parquet.Int32 {
		li.unsigned = t.Compare(parquet.Int64Value(-1).Level(0, 0, 0), parquet.Int64Value(0)) > 0
	}
	return li, nil
}

// encodings lists the chunk's encodings as parquet-go does: sorted.
func (li *Leaf) encodings(fallback bool) []format.Encoding {
	var e []format.Encoding
	if li.MaxDef > 0 || li.MaxRep > 0 {
		e = append(e, format.RLE)
	}
	switch {
	case li.Dict && !fallback:
		e = append(e, format.Plain, format.RLEDictionary)
	case li.Dict || li.Delta:
		e = append(e, format.DeltaLengthByteArray)
	default:
		e = append(e, format.Plain)
	}
	slices.Sort(e)
	return slices.Compact(e)
}

// levelRuns appends RLE runs of one level (bit width at most 8).
type levelRuns struct {
	buf []byte
	cur byte
	n   int
}

func (e *levelRuns) add(v byte, k int) {
	if e.n > 0 && v == e.cur {
		e.n += k
		return
	}
	e.flush()
	e.cur, e.n = v, k
}

// pack re-encodes the page's runs as the RLE/bit-packed hybrid when bit
// packing is smaller: a run of one value costs two bytes, a packed value
// bitWidth bits, and a sparse attribute column alternates null and present
// row by row. Levels are outside a v2 page's compressed section, so this
// is what they cost in the file. tmp is scratch.
func (e *levelRuns) pack(bitWidth, nVals int, tmp *levelScratch) {
	if bitWidth == 0 || len(e.buf)*8 <= nVals*bitWidth+64 {
		return
	}
	lv := tmp.levels[:0]
	for b := e.buf; len(b) > 1; {
		h, n := binary.Uvarint(b)
		if n <= 0 || n >= len(b) {
			return // not ours; leave it
		}
		v := b[n]
		for range h >> 1 {
			lv = append(lv, v)
		}
		b = b[n+1:]
	}
	tmp.levels = lv
	enc := rle.Encoding{BitWidth: bitWidth}
	out, err := enc.EncodeLevels(tmp.packed[:0], lv)
	tmp.packed = out
	if err != nil || len(out) >= len(e.buf) {
		return // keep the runs, which are valid too
	}
	e.buf = append(e.buf[:0], out...)
}

// levelScratch is pack's scratch.
type levelScratch struct{ levels, packed []byte }

func (e *levelRuns) flush() {
	if e.n > 0 {
		e.buf = binary.AppendUvarint(e.buf, uint64(e.n)<<1)
		e.buf = append(e.buf, e.cur)
		e.n = 0
	}
}

// idxRun is a run of one dictionary index.
type idxRun struct{ v, n int32 }

// bounds are the min and max of a page's or chunk's non-null values.
// NaN is never a bound, unless all values are NaN, as parquet-go does.
type bounds struct {
	ok       bool // a non-NaN value was added
	nan      bool // a NaN was added
	iMin     int64
	iMax     int64
	fMin     float64
	fMax     float64
	bMin     []byte
	bMax     []byte
	unsigned bool
	// own: byte bounds are copied into minBuf and maxBuf (chunk bounds,
	// which outlive the pages their values came from).
	own            bool
	minBuf, maxBuf []byte
}

func (b *bounds) addInt(v int64) {
	switch {
	case !b.ok:
		b.iMin, b.iMax, b.ok = v, v, true
	case b.unsigned:
		if uint64(v) < uint64(b.iMin) {
			b.iMin = v
		}
		if uint64(v) > uint64(b.iMax) {
			b.iMax = v
		}
	default:
		b.iMin, b.iMax = min(b.iMin, v), max(b.iMax, v)
	}
}

func (b *bounds) addFloat(v float64) {
	switch {
	case v != v:
		b.nan = true
	case !b.ok:
		b.fMin, b.fMax, b.ok = v, v, true
	default:
		if v < b.fMin {
			b.fMin = v
		}
		if v > b.fMax {
			b.fMax = v
		}
	}
}

// addBytes adds v; the bounds alias it, so v must outlive them (values
// of the chunk's dictionary or of its page buffer).
func (b *bounds) addBytes(v []byte) {
	switch {
	case !b.ok:
		b.bMin, b.bMax, b.ok = v, v, true
	case bytes.Compare(v, b.bMin) < 0:
		b.bMin = v
	case bytes.Compare(v, b.bMax) > 0:
		b.bMax = v
	}
}

// has reports whether any non-null value was added.
func (b *bounds) has() bool { return b.ok || b.nan }

func (b *bounds) merge(kind parquet.Kind, o *bounds) {
	b.nan = b.nan || o.nan
	if !o.ok {
		return
	}
	switch kind {
	case parquet.Double:
		b.addFloat(o.fMin)
		b.addFloat(o.fMax)
	case parquet.ByteArray:
		if !b.own {
			b.addBytes(o.bMin)
			b.addBytes(o.bMax)
			break
		}
		if !b.ok || bytes.Compare(o.bMin, b.bMin) < 0 {
			b.minBuf = append(b.minBuf[:0], o.bMin...)
			b.bMin = b.minBuf
		}
		if !b.ok || bytes.Compare(o.bMax, b.bMax) > 0 {
			b.maxBuf = append(b.maxBuf[:0], o.bMax...)
			b.bMax = b.maxBuf
		}
		b.ok = true
	default:
		b.addInt(o.iMin)
		b.addInt(o.iMax)
	}
}

// encode returns the statistics encoding of the bounds (PLAIN, without
// length prefix), copied.
func (b *bounds) encode(kind parquet.Kind) (lo, hi []byte) {
	if !b.ok {
		if b.nan {
			nan := binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN()))
			return nan, bytes.Clone(nan)
		}
		return nil, nil
	}
	switch kind {
	case parquet.Boolean:
		return []byte{byte(b.iMin)}, []byte{byte(b.iMax)}
	case parquet.Int32:
		return binary.LittleEndian.AppendUint32(nil, uint32(b.iMin)), binary.LittleEndian.AppendUint32(nil, uint32(b.iMax))
	case parquet.Int64:
		return binary.LittleEndian.AppendUint64(nil, uint64(b.iMin)), binary.LittleEndian.AppendUint64(nil, uint64(b.iMax))
	case parquet.Double:
		return binary.LittleEndian.AppendUint64(nil, math.Float64bits(b.fMin)), binary.LittleEndian.AppendUint64(nil, math.Float64bits(b.fMax))
	}
	// Never nil: an empty string is a bound, written as an empty binary.
	return append([]byte{}, b.bMin...), append([]byte{}, b.bMax...)
}
