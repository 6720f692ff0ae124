package format

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// Typed, projected column readers, for readers that need some columns of
// some rows (PromQL, search, rollups) rather than whole records (File).
// Chunks of the lake's own encodings are read through the typed decoder
// (rangetyped.go), others through parquet-go's pages (the functions
// ending in Pages, which TestRangedReadersMatch compares them with).
// Values that alias page memory are valid only during the callback, or
// until the next read.

// ScanPages walks the pages of column chunk cc covering rows [a, b) of its
// row group. fn gets each page sliced to start at the current row, the
// offset of that row from a, and how many of its rows lie before b. Seeking
// uses the offset index, so pages before a are not decompressed.
func ScanPages(cc parquet.ColumnChunk, a, b int64, fn func(p parquet.Page, off, n int64) error) error {
	pages := PagesRange(cc, a, b)
	defer pages.Close()
	if a > 0 {
		if err := pages.SeekToRow(a); err != nil {
			return fmt.Errorf("seek to row %d: %w", a, err)
		}
	}
	for cur := a; cur < b; {
		p, err := pages.ReadPage()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("column ends at row %d, want %d: %w", cur, b, io.ErrUnexpectedEOF)
			}
			return err
		}
		n := p.NumRows()
		if n > b-cur {
			n = b - cur
		}
		err = fn(p, cur-a, n)
		parquet.Release(p)
		if err != nil {
			return err
		}
		cur += n
		if n == 0 {
			return fmt.Errorf("empty page at row %d", cur)
		}
	}
	return nil
}

// ReadUint64s reads a required UINT64 column into out[0:b-a].
func ReadUint64s(cc parquet.ColumnChunk, a, b int64, out []uint64) error {
	if ok, err := typedRange(cc, pqformat.Int64, a, b, func(p *pageVals, first int64) error {
		spreadTyped(p, p.i64, first, a, b, out, nil)
		return nil
	}); ok {
		return err
	}
	return readUint64sPages(cc, a, b, out)
}

func readUint64sPages(cc parquet.ColumnChunk, a, b int64, out []uint64) error {
	return ScanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
		d := p.Data()
		vals := d.Uint64()
		if int64(len(vals)) < n {
			vals = int64sAsUint64s(d.Int64())
		}
		if int64(len(vals)) < n {
			return fmt.Errorf("page holds %d values for %d rows", len(vals), n)
		}
		copy(out[off:off+n], vals[:n])
		return nil
	})
}

func int64sAsUint64s(v []int64) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = uint64(x)
	}
	return out
}

// ReadOptInt64s reads an optional INT64 (or TIMESTAMP) column; valid[i]
// is false for nulls.
func ReadOptInt64s(cc parquet.ColumnChunk, a, b int64, out []int64, valid []bool) error {
	if ok, err := typedRange(cc, pqformat.Int64, a, b, func(p *pageVals, first int64) error {
		spreadTyped(p, p.i64, first, a, b, out, valid)
		return nil
	}); ok {
		return err
	}
	return readOptInt64sPages(cc, a, b, out, valid)
}

func readOptInt64sPages(cc parquet.ColumnChunk, a, b int64, out []int64, valid []bool) error {
	return ScanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
		d := p.Data()
		return spreadOptional(p.DefinitionLevels(), d.Int64(), out[off:off+n], valid[off:off+n])
	})
}

// ReadOptUint64s reads an optional UINT64 column.
func ReadOptUint64s(cc parquet.ColumnChunk, a, b int64, out []uint64, valid []bool) error {
	if ok, err := typedRange(cc, pqformat.Int64, a, b, func(p *pageVals, first int64) error {
		spreadTyped(p, p.i64, first, a, b, out, valid)
		return nil
	}); ok {
		return err
	}
	return readOptUint64sPages(cc, a, b, out, valid)
}

func readOptUint64sPages(cc parquet.ColumnChunk, a, b int64, out []uint64, valid []bool) error {
	return ScanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
		d := p.Data()
		return spreadOptional(p.DefinitionLevels(), d.Uint64(), out[off:off+n], valid[off:off+n])
	})
}

// ReadOptFloat64s reads an optional DOUBLE column.
func ReadOptFloat64s(cc parquet.ColumnChunk, a, b int64, out []float64, valid []bool) error {
	if ok, err := typedRange(cc, pqformat.Double, a, b, func(p *pageVals, first int64) error {
		spreadTyped(p, p.f64, first, a, b, out, valid)
		return nil
	}); ok {
		return err
	}
	return readOptFloat64sPages(cc, a, b, out, valid)
}

func readOptFloat64sPages(cc parquet.ColumnChunk, a, b int64, out []float64, valid []bool) error {
	return ScanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
		d := p.Data()
		return spreadOptional(p.DefinitionLevels(), d.Double(), out[off:off+n], valid[off:off+n])
	})
}

// spreadOptional places the packed non-null values of a page at their
// rows: defs holds one definition level per row (none for a required
// column).
func spreadOptional[T any](defs []byte, vals []T, out []T, valid []bool) error {
	n := len(out)
	if len(defs) == 0 {
		if len(vals) < n {
			return fmt.Errorf("page holds %d values for %d rows", len(vals), n)
		}
		copy(out, vals[:n])
		for i := range valid {
			valid[i] = true
		}
		return nil
	}
	if len(defs) < n {
		return fmt.Errorf("page holds %d levels for %d rows", len(defs), n)
	}
	j := 0
	for i := 0; i < n; i++ {
		if defs[i] != 0 {
			if j >= len(vals) {
				return fmt.Errorf("page holds %d values, fewer than its levels say", len(vals))
			}
			out[i] = vals[j]
			valid[i] = true
			j++
		} else {
			valid[i] = false
		}
	}
	return nil
}

// ReadListF64 reads a LIST<DOUBLE> column (required list, required
// elements): row i's elements are vals[offs[i]:offs[i+1]]. offs must have
// b-a+1 entries; vals is appended to and returned.
func ReadListF64(cc parquet.ColumnChunk, a, b int64, vals []float64, offs []int32) ([]float64, error) {
	vals = vals[:0]
	offs[0] = 0
	if ok, err := typedRange(cc, pqformat.Double, a, b, func(p *pageVals, first int64) error {
		var err error
		vals, err = spreadListTyped(p, p.f64, first, a, b, vals, offs)
		return err
	}); ok {
		return vals, err
	}
	return readListF64Pages(cc, a, b, vals, offs)
}

func readListF64Pages(cc parquet.ColumnChunk, a, b int64, vals []float64, offs []int32) ([]float64, error) {
	vals = vals[:0]
	offs[0] = 0
	err := ScanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
		d := p.Data()
		var err error
		vals, err = spreadList(p.RepetitionLevels(), p.DefinitionLevels(), d.Double(), n, vals, offs[off:off+n+1])
		return err
	})
	return vals, err
}

// ReadListU64 is ReadListF64 for LIST<UINT64>.
func ReadListU64(cc parquet.ColumnChunk, a, b int64, vals []uint64, offs []int32) ([]uint64, error) {
	vals = vals[:0]
	offs[0] = 0
	if ok, err := typedRange(cc, pqformat.Int64, a, b, func(p *pageVals, first int64) error {
		var err error
		vals, err = spreadListTyped(p, p.i64, first, a, b, vals, offs)
		return err
	}); ok {
		return vals, err
	}
	return readListU64Pages(cc, a, b, vals, offs)
}

func readListU64Pages(cc parquet.ColumnChunk, a, b int64, vals []uint64, offs []int32) ([]uint64, error) {
	vals = vals[:0]
	offs[0] = 0
	err := ScanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
		d := p.Data()
		v := d.Uint64()
		if len(v) == 0 {
			v = int64sAsUint64s(d.Int64())
		}
		var err error
		vals, err = spreadList(p.RepetitionLevels(), p.DefinitionLevels(), v, n, vals, offs[off:off+n+1])
		return err
	})
	return vals, err
}

// spreadList appends the elements of the first n rows of a list page to
// dst and records, in offs[1:], where each row ends; offs[0] is where they
// start and is already set.
func spreadList[T any](reps, defs []byte, src []T, n int64, dst []T, offs []int32) ([]T, error) {
	row := int64(-1)
	j := 0
	for i := range reps {
		if reps[i] == 0 {
			row++
			if row >= n {
				break
			}
			if row > 0 {
				offs[row] = int32(len(dst))
			}
		}
		if i < len(defs) && defs[i] != 0 {
			if j >= len(src) {
				return dst, fmt.Errorf("list page holds %d values, fewer than its levels say", len(src))
			}
			dst = append(dst, src[j])
			j++
		}
	}
	if row+1 < n {
		return dst, fmt.Errorf("list page holds %d rows, want %d", row+1, n)
	}
	offs[n] = int32(len(dst))
	return dst, nil
}

// ReadValuesAt reads the values of column cc at the given rows of its row
// group (sorted ascending, within [a, b)) with the generic reader: it is used
// for label columns, read once per series, not per sample. fn gets the
// index into rows and the value.
func ReadValuesAt(cc parquet.ColumnChunk, a, b int64, rows []int64, fn func(i int, v parquet.Value)) error {
	if len(rows) == 0 {
		return nil
	}
	if ok, err := valuesAtTyped(cc, rows, fn); ok {
		return err
	}
	return readValuesAtPages(cc, a, b, rows, fn)
}

func readValuesAtPages(cc parquet.ColumnChunk, a, b int64, rows []int64, fn func(i int, v parquet.Value)) error {
	if len(rows) == 0 {
		return nil
	}
	var buf [256]parquet.Value
	k := 0
	err := ScanPages(cc, rows[0], b, func(p parquet.Page, off, n int64) error {
		base := rows[0] + off
		if k >= len(rows) {
			return errStop
		}
		if rows[k] >= base+n {
			return nil
		}
		vr := p.Values()
		r := base
		for k < len(rows) && r < base+n {
			m, err := vr.ReadValues(buf[:])
			for i := 0; i < m && k < len(rows); i++ {
				if r+int64(i) == rows[k] {
					fn(k, buf[i])
					k++
				}
			}
			r += int64(m)
			if err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return err
			}
			if m == 0 {
				break
			}
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

var errStop = errors.New("stop")

// ReadCodes reads every row of a low-cardinality column (dictionary-encoded
// strings, or booleans) as codes into strs; -1 is null. Dictionary pages
// are read as indices, so a string is allocated once per dictionary entry;
// used to build an index, once per file.
func ReadCodes(cc parquet.ColumnChunk, n int64) ([]int32, []string, error) {
	if codes, strs, ok, err := readCodesTyped(cc, n); ok {
		return codes, strs, err
	}
	return readCodesPages(cc, n)
}

func readCodesPages(cc parquet.ColumnChunk, n int64) ([]int32, []string, error) {
	out := make([]int32, 0, n)
	var (
		strs  []string
		byStr = map[string]int32{}
		dict  parquet.Dictionary
		remap []int32
		buf   [512]parquet.Value
	)
	code := func(s string) int32 {
		c, ok := byStr[s]
		if !ok {
			c = int32(len(strs))
			strs = append(strs, s)
			byStr[s] = c
		}
		return c
	}
	err := ScanPages(cc, 0, n, func(p parquet.Page, off, m int64) error {
		defs := p.DefinitionLevels()
		if d := p.Dictionary(); d != nil && p.Type().Kind() == parquet.ByteArray {
			if d != dict {
				dict, remap = d, make([]int32, d.Len())
				for i := range remap {
					remap[i] = code(string(d.Index(int32(i)).ByteArray()))
				}
			}
			data := p.Data()
			idx := data.Int32()
			j := 0
			for i := int64(0); i < m; i++ {
				if len(defs) > 0 && defs[i] == 0 {
					out = append(out, -1)
					continue
				}
				if j >= len(idx) || int(idx[j]) >= len(remap) {
					return fmt.Errorf("dictionary page holds %d indexes for %d rows", len(idx), m)
				}
				out = append(out, remap[idx[j]])
				j++
			}
			return nil
		}
		if p.Type().Kind() == parquet.Boolean && len(defs) == 0 {
			data := p.Data()
			if bits := data.Boolean(); int64(len(bits))*8 >= m {
				f, t := code("false"), code("true")
				for i := int64(0); i < m; i++ {
					if bits[i>>3]>>(i&7)&1 != 0 {
						out = append(out, t)
					} else {
						out = append(out, f)
					}
				}
				return nil
			}
		}
		vr := p.Values()
		for got := int64(0); got < m; {
			k, err := vr.ReadValues(buf[:])
			for i := 0; i < k && got < m; i++ {
				v := buf[i]
				switch {
				case v.IsNull():
					out = append(out, -1)
				case v.Kind() == parquet.Boolean:
					out = append(out, code(strconv.FormatBool(v.Boolean())))
				default:
					out = append(out, code(string(v.ByteArray())))
				}
				got++
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return err
			}
			if k == 0 {
				break
			}
		}
		return nil
	})
	if err == nil && int64(len(out)) != n {
		err = fmt.Errorf("read %d of %d rows", len(out), n)
	}
	return out, strs, err
}

// EachValue calls fn with the values of flat column col of row group g, in
// row order; off is the row of vals[0]. The values (and their bytes) are
// valid only during the call.
func EachValue(cc parquet.ColumnChunk, buf []parquet.Value, fn func(off int, vals []parquet.Value) error) error {
	if ok, err := eachValueTyped(cc, buf, fn); ok {
		return err
	}
	return eachValuePages(cc, buf, fn)
}

func eachValuePages(cc parquet.ColumnChunk, buf []parquet.Value, fn func(off int, vals []parquet.Value) error) error {
	pages := Pages(cc)
	defer pages.Close()
	off := 0
	for {
		p, err := pages.ReadPage()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		vr := p.Values()
		for {
			n, err := vr.ReadValues(buf)
			if n > 0 {
				if ferr := fn(off, buf[:n]); ferr != nil {
					parquet.Release(p)
					return ferr
				}
				off += n
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				parquet.Release(p)
				return err
			}
			if n == 0 {
				break
			}
		}
		parquet.Release(p)
	}
}

// ValuesAt calls fn(i, v) for the value of column chunk cc at rows[i]
// (sorted ascending); v is valid only during the call.
func ValuesAt(cc parquet.ColumnChunk, buf []parquet.Value, rows []int64, fn func(i int, v parquet.Value)) error {
	if len(rows) == 0 {
		return nil
	}
	if ok, err := valuesAtTyped(cc, rows, fn); ok {
		return err
	}
	return valuesAtPages(cc, buf, rows, fn)
}

func valuesAtPages(cc parquet.ColumnChunk, buf []parquet.Value, rows []int64, fn func(i int, v parquet.Value)) error {
	if len(rows) == 0 {
		return nil
	}
	pages := PagesRange(cc, rows[0], rows[len(rows)-1]+1)
	defer pages.Close()
	if err := pages.SeekToRow(rows[0]); err != nil {
		return fmt.Errorf("seek to row %d: %w", rows[0], err)
	}
	k := 0
	r := rows[0]
	for k < len(rows) {
		p, err := pages.ReadPage()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("column ends at row %d before row %d: %w", r, rows[k], io.ErrUnexpectedEOF)
			}
			return err
		}
		if rows[k] >= r+p.NumRows() {
			r += p.NumRows()
			parquet.Release(p)
			continue
		}
		vr := p.Values()
		for k < len(rows) {
			n, err := vr.ReadValues(buf)
			for i := 0; i < n && k < len(rows); i++ {
				if r+int64(i) == rows[k] {
					fn(k, buf[i])
					k++
				}
			}
			r += int64(n)
			if err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				parquet.Release(p)
				return err
			}
			if n == 0 {
				break
			}
		}
		parquet.Release(p)
	}
	return nil
}

// ChunkReader reads whole column chunks into one reused value buffer.
// Byte-array values alias page memory, valid until the next read, which
// releases the pages back to parquet-go's pools: callers copy what they
// keep.
type ChunkReader struct {
	vals  []parquet.Value
	pages []parquet.Page
}

// Read returns every value of column col of rg; nil when the file has no
// such column (col < 0).
func (r *ChunkReader) Read(rg parquet.RowGroup, col int) ([]parquet.Value, error) {
	r.vals = r.vals[:0]
	for i, p := range r.pages {
		parquet.Release(p)
		r.pages[i] = nil
	}
	r.pages = r.pages[:0]
	if col < 0 {
		return nil, nil
	}
	pages := Pages(rg.ColumnChunks()[col])
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return r.vals, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read page of column %d: %w", col, err)
		}
		r.pages = append(r.pages, p)
		n := int(p.NumValues())
		off := len(r.vals)
		r.vals = grow(r.vals, off+n)
		vr := p.Values()
		got := 0
		for got < n {
			k, err := vr.ReadValues(r.vals[off+got : off+n])
			got += k
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read values of column %d: %w", col, err)
			}
			if k == 0 {
				break
			}
		}
		r.vals = r.vals[:off+got]
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	out := make([]T, n, max(n, 2*cap(s)))
	copy(out, s)
	return out
}
