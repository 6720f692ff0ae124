package format

import (
	pqformat "github.com/parquet-go/parquet-go/format"
)

// fastPageHeader decodes a page header (thrift compact protocol) from the
// front of b into h, which must be zero, without reflection: parquet-go's
// decoder was a tenth of compacting small files, a header a page. It
// returns the header's length, or ok false for anything it does not take
// as written (an unknown or repeated field, a field of another type, a
// missing required field, an integer out of range, b too short): the
// caller then decodes b with parquet-go's decoder, which gives its own
// answer, error or not. When ok, h is what parquet-go's decoder gives
// (FuzzFastPageHeader); its byte arrays alias b.
func fastPageHeader(b []byte, h *pqformat.PageHeader) (n int, ok bool) {
	r := thriftReader{b: b}
	var seen uint32
	r.fields(func(id int16, typ byte) bool {
		if id < 1 || id > 8 || seen&(1<<id) != 0 {
			return false
		}
		seen |= 1 << id
		switch id {
		case 1:
			v, ok := r.i32(typ)
			h.Type = pqformat.PageType(v)
			return ok
		case 2:
			v, ok := r.i32(typ)
			h.UncompressedPageSize = v
			return ok
		case 3:
			v, ok := r.i32(typ)
			h.CompressedPageSize = v
			return ok
		case 4:
			v, ok := r.i32(typ)
			h.CRC = v
			return ok
		case 5:
			h.DataPageHeader.Valid = true
			return typ == tStruct && r.dataPageHeader(&h.DataPageHeader.V)
		case 7:
			h.DictionaryPageHeader.Valid = true
			return typ == tStruct && r.dictPageHeader(&h.DictionaryPageHeader.V)
		case 8:
			h.DataPageHeaderV2.Valid = true
			return typ == tStruct && r.dataPageHeaderV2(&h.DataPageHeaderV2.V)
		}
		return false // 6: index pages, never in a lake file
	})
	if r.bad || seen&0b1110 != 0b1110 {
		return 0, false
	}
	return r.off, true
}

// Thrift compact protocol types.
const (
	tTrue   = 1
	tFalse  = 2
	tI32    = 5
	tI64    = 6
	tBinary = 8
	tStruct = 12
)

// thriftReader reads the thrift compact protocol from b; bad is set on
// anything fastPageHeader does not take.
type thriftReader struct {
	b     []byte
	off   int
	bad   bool
	depth int
}

func (r *thriftReader) uvarint() uint64 {
	var x uint64
	for s := uint(0); s < 64; s += 7 {
		if r.off >= len(r.b) {
			r.bad = true
			return 0
		}
		c := r.b[r.off]
		r.off++
		x |= uint64(c&0x7f) << s
		if c < 0x80 {
			return x
		}
	}
	r.bad = true
	return 0
}

func (r *thriftReader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *thriftReader) i32(typ byte) (int32, bool) {
	if typ != tI32 {
		return 0, false
	}
	v := r.varint()
	if r.bad || v != int64(int32(v)) {
		return 0, false
	}
	return int32(v), true
}

func (r *thriftReader) i64(typ byte) (int64, bool) {
	if typ != tI64 {
		return 0, false
	}
	v := r.varint()
	return v, !r.bad
}

func (r *thriftReader) bool(typ byte) (bool, bool) {
	return typ == tTrue, typ == tTrue || typ == tFalse
}

func (r *thriftReader) binary(typ byte) ([]byte, bool) {
	if typ != tBinary {
		return nil, false
	}
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)-r.off) {
		return nil, false
	}
	v := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return v, true
}

// fields reads a struct's fields up to its stop, calling field with each
// field's id and type; field reads the value and reports whether it took
// it.
func (r *thriftReader) fields(field func(id int16, typ byte) bool) {
	if r.depth++; r.depth > 3 {
		r.bad = true
	}
	var last int16
	for !r.bad {
		if r.off >= len(r.b) {
			r.bad = true
			return
		}
		c := r.b[r.off]
		r.off++
		if c == 0 {
			r.depth--
			return
		}
		typ, delta := c&0x0f, int16(c>>4)
		id := last + delta
		if delta == 0 {
			v := r.varint()
			if v != int64(int16(v)) {
				r.bad = true
				return
			}
			id = int16(v)
		}
		if !field(id, typ) {
			r.bad = true
			return
		}
		last = id
	}
}

func (r *thriftReader) dataPageHeader(d *pqformat.DataPageHeader) bool {
	var seen uint32
	r.fields(func(id int16, typ byte) bool {
		if id < 1 || id > 5 || seen&(1<<id) != 0 {
			return false
		}
		seen |= 1 << id
		var v int32
		ok := true
		if id < 5 {
			v, ok = r.i32(typ)
		}
		switch id {
		case 1:
			d.NumValues = v
		case 2:
			d.Encoding = pqformat.Encoding(v)
		case 3:
			d.DefinitionLevelEncoding = pqformat.Encoding(v)
		case 4:
			d.RepetitionLevelEncoding = pqformat.Encoding(v)
		case 5:
			return typ == tStruct && r.statistics(&d.Statistics)
		}
		return ok
	})
	return !r.bad && seen&0b11110 == 0b11110
}

func (r *thriftReader) dictPageHeader(d *pqformat.DictionaryPageHeader) bool {
	var seen uint32
	r.fields(func(id int16, typ byte) bool {
		if id < 1 || id > 3 || seen&(1<<id) != 0 {
			return false
		}
		seen |= 1 << id
		var ok bool
		switch id {
		case 1:
			d.NumValues, ok = r.i32(typ)
		case 2:
			var v int32
			v, ok = r.i32(typ)
			d.Encoding = pqformat.Encoding(v)
		case 3:
			d.IsSorted, ok = r.bool(typ)
		}
		return ok
	})
	return !r.bad && seen&0b110 == 0b110
}

func (r *thriftReader) dataPageHeaderV2(d *pqformat.DataPageHeaderV2) bool {
	var seen uint32
	r.fields(func(id int16, typ byte) bool {
		if id < 1 || id > 8 || seen&(1<<id) != 0 {
			return false
		}
		seen |= 1 << id
		var v int32
		ok := true
		if id < 7 {
			v, ok = r.i32(typ)
		}
		switch id {
		case 1:
			d.NumValues = v
		case 2:
			d.NumNulls = v
		case 3:
			d.NumRows = v
		case 4:
			d.Encoding = pqformat.Encoding(v)
		case 5:
			d.DefinitionLevelsByteLength = v
		case 6:
			d.RepetitionLevelsByteLength = v
		case 7:
			d.IsCompressed.V, ok = r.bool(typ)
			d.IsCompressed.Valid = ok
		case 8:
			return typ == tStruct && r.statistics(&d.Statistics)
		}
		return ok
	})
	return !r.bad && seen&0b1111110 == 0b1111110
}

func (r *thriftReader) statistics(s *pqformat.Statistics) bool {
	var seen uint32
	r.fields(func(id int16, typ byte) bool {
		if id < 1 || id > 6 || seen&(1<<id) != 0 {
			return false
		}
		seen |= 1 << id
		var ok bool
		switch id {
		case 1:
			s.Max, ok = r.binary(typ)
		case 2:
			s.Min, ok = r.binary(typ)
		case 3:
			s.NullCount, ok = r.i64(typ)
		case 4:
			s.DistinctCount, ok = r.i64(typ)
		case 5:
			s.MaxValue, ok = r.binary(typ)
		case 6:
			s.MinValue, ok = r.binary(typ)
		}
		return ok
	})
	return !r.bad
}
