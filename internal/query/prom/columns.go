package prom

import (
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// scanPages walks the pages of column chunk cc covering rows [a, b) of its
// row group. fn gets each page sliced to start at the current row, the
// offset of that row from a, and how many of its rows lie before b. Seeking
// uses the offset index, so pages before a are not decompressed.
func scanPages(cc parquet.ColumnChunk, a, b int64, fn func(p parquet.Page, off, n int64) error) error {
	pages := cc.Pages()
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

// readUint64s reads a required UINT64 column into out[0:b-a].
func readUint64s(cc parquet.ColumnChunk, a, b int64, out []uint64) error {
	return scanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
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

// readOptInt64s reads an optional INT64 (or TIMESTAMP) column; valid[i]
// is false for nulls.
func readOptInt64s(cc parquet.ColumnChunk, a, b int64, out []int64, valid []bool) error {
	return scanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
		d := p.Data()
		return spreadOptional(p.DefinitionLevels(), d.Int64(), out[off:off+n], valid[off:off+n])
	})
}

// readOptUint64s reads an optional UINT64 column.
func readOptUint64s(cc parquet.ColumnChunk, a, b int64, out []uint64, valid []bool) error {
	return scanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
		d := p.Data()
		return spreadOptional(p.DefinitionLevels(), d.Uint64(), out[off:off+n], valid[off:off+n])
	})
}

// readOptFloat64s reads an optional DOUBLE column.
func readOptFloat64s(cc parquet.ColumnChunk, a, b int64, out []float64, valid []bool) error {
	return scanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
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

// readListF64 reads a LIST<DOUBLE> column (required list, required
// elements): row i's elements are vals[offs[i]:offs[i+1]]. offs must have
// b-a+1 entries; vals is appended to and returned.
func readListF64(cc parquet.ColumnChunk, a, b int64, vals []float64, offs []int32) ([]float64, error) {
	vals = vals[:0]
	offs[0] = 0
	err := scanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
		d := p.Data()
		var err error
		vals, err = spreadList(p.RepetitionLevels(), p.DefinitionLevels(), d.Double(), n, vals, offs[off:off+n+1])
		return err
	})
	return vals, err
}

// readListU64 is readListF64 for LIST<UINT64>.
func readListU64(cc parquet.ColumnChunk, a, b int64, vals []uint64, offs []int32) ([]uint64, error) {
	vals = vals[:0]
	offs[0] = 0
	err := scanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
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

// readValuesAt reads the values of column cc at the given rows of its row
// group (sorted ascending, within [a, b)) with the generic reader: it is used
// for label columns, read once per series, not per sample. fn gets the
// index into rows and the value.
func readValuesAt(cc parquet.ColumnChunk, a, b int64, rows []int64, fn func(i int, v parquet.Value)) error {
	if len(rows) == 0 {
		return nil
	}
	var buf [256]parquet.Value
	k := 0
	err := scanPages(cc, rows[0], b, func(p parquet.Page, off, n int64) error {
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
