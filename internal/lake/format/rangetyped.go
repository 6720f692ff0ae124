package format

import (
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// The column readers of columns.go (PromQL, search) read chunks of the
// lake's own encodings through the typed decoder (decode.go): rows [a, b)
// of a chunk, the pages before a skipped with the offset index when the
// file's is loaded, each page decoded once into typed slices. Chunks of
// other encodings go through parquet-go's page reader as before; the two
// give the same values (TestRangedReadersMatch).

// freeDecs keeps the ranged readers' decoders (and their page buffers)
// between calls: a query reads a few columns of many row groups.
var freeDecs = FreeList[*chunkDec]{Max: maxIdleTmps}

func getDec() *chunkDec {
	if d, ok := freeDecs.Get(); ok {
		return d
	}
	return new(chunkDec)
}

func putDec(d *chunkDec) { freeDecs.Put(d) }

// anyType is typedRange's want for a chunk of any physical type.
const anyType pqformat.Type = -1

// typedRange calls fn with each page of chunk cc that holds rows of
// [a, b) of its row group (b < 0: to its end), decoded, and the row of
// the page's first value. ok is false, and nothing is read, when cc is
// not a chunk the typed decoder reads, or not of physical type want
// (unless anyType); the caller then reads it
// through parquet-go. Pages hold whole rows (lists included), as the lake
// writer and parquet-go write them.
func typedRange(cc parquet.ColumnChunk, want pqformat.Type, a, b int64, fn func(p *pageVals, first int64) error) (ok bool, err error) {
	fcc, isFile := cc.(*parquet.FileColumnChunk)
	if !isFile {
		return false, nil
	}
	ref, typed := typedChunk(fcc)
	if !typed || want != anyType && ref.md.Type != want {
		return false, nil
	}
	if b < 0 {
		b = ref.rgRows
	}
	ok = true // from here on the typed decoder answers, errors included
	defer Recover(&err, "read column %q", ref.md.PathInSchema)
	d := getDec()
	defer putDec(d)
	first, err := d.openRange(fcc, ref, a, b)
	if err != nil {
		return true, err
	}
	defer d.close()
	cur := first
	for cur < b {
		p, err := d.next()
		if err == io.EOF {
			return true, fmt.Errorf("column ends at row %d, want %d: %w", cur, b, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return true, err
		}
		rows := int64(p.n)
		if p.reps != nil {
			rows = 0
			for _, r := range p.reps {
				if r == 0 {
					rows++
				}
			}
			if p.n > 0 && p.reps[0] != 0 {
				return true, shapeErr("list page starting inside a row")
			}
		}
		if rows == 0 {
			return true, fmt.Errorf("empty page at row %d", cur)
		}
		if cur+rows > a {
			if err := fn(p, cur); err != nil {
				return true, err
			}
		}
		cur += rows
	}
	return true, nil
}

// openRange is open for the pages holding rows [a, b): with the chunk's
// offset index, its dictionary page (the bytes before the first data
// page) and the data pages from the one holding a to the one holding
// b-1; else the whole chunk. It returns the first row of the first data
// page read. Only a whole chunk is checked against the footer's totals.
func (d *chunkDec) openRange(cc *parquet.FileColumnChunk, ref chunkRef, a, b int64) (int64, error) {
	oi := ref.pageIndex
	if oi == nil || len(oi.PageLocations) == 0 || a <= 0 && b >= ref.rgRows {
		return 0, d.open(cc, ref)
	}
	start, end, err := chunkRange(ref)
	if err != nil {
		return 0, err
	}
	locs := oi.PageLocations
	j, first := pageAt(oi, a)
	k := j
	for k+1 < len(locs) && locs[k+1].FirstRowIndex < b {
		k++
	}
	dictEnd := locs[0].Offset
	from, to := locs[j].Offset, locs[k].Offset+int64(locs[k].CompressedPageSize)
	if dictEnd < start || from < dictEnd || to < from || to > end || locs[k].CompressedPageSize < 0 {
		return 0, pageErr("column %q: offset index pages [%d, %d) outside the chunk [%d, %d)", ref.md.PathInSchema, from, to, start, end)
	}
	buf := grow(getChunkBuf()[:0], int(dictEnd-start+to-from))
	if err := readFull(ref.pf, buf[:dictEnd-start], start); err != nil {
		putChunkBuf(buf)
		return 0, err
	}
	if err := readFull(ref.pf, buf[dictEnd-start:], from); err != nil {
		putChunkBuf(buf)
		return 0, err
	}
	d.start(buf, ref, false)
	return first, nil
}

func readFull(r io.ReaderAt, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	if _, err := r.ReadAt(p, off); err != nil && err != io.EOF {
		return fmt.Errorf("read pages at %d: %w", off, err)
	}
	return nil
}

// rowsOf calls fn(row, i, j) for each row of page p (first is the row of
// its first value) in [a, b): i its level, j its value (-1 for a null)
// among the page's non-null values; flat columns only.
func rowsOf(p *pageVals, first, a, b int64, fn func(row int64, i, j int)) {
	lo, hi := max(a-first, 0), min(b-first, int64(p.n))
	if p.defs == nil {
		for i := lo; i < hi; i++ {
			fn(first+i, int(i), int(i))
		}
		return
	}
	j := 0
	for i := range int(hi) {
		if p.defs[i] == 0 {
			if int64(i) >= lo {
				fn(first+int64(i), i, -1)
			}
			continue
		}
		if int64(i) >= lo {
			fn(first+int64(i), i, j)
		}
		j++
	}
}

// spreadTyped places the values of rows [a, b) of page p in out[row-a]
// and their presence in valid (when not nil); nulls are zero.
func spreadTyped[S, T int32 | int64 | uint64 | float64](p *pageVals, src []S, first, a, b int64, out []T, valid []bool) {
	rowsOf(p, first, a, b, func(row int64, _, j int) {
		if j < 0 {
			out[row-a] = 0
		} else {
			out[row-a] = T(src[j])
		}
		if valid != nil {
			valid[row-a] = j >= 0
		}
	})
}

// spreadListTyped appends the elements of the list rows [a, b) of page p to
// dst and records in offs[row-a+1] where each row ends.
func spreadListTyped[S, T uint64 | float64 | int64](p *pageVals, src []S, first, a, b int64, dst []T, offs []int32) ([]T, error) {
	row := first - 1
	j := 0
	for i := range p.n {
		if p.reps[i] == 0 {
			row++
			if row >= b {
				break
			}
			if row > a {
				offs[row-a] = int32(len(dst))
			}
		}
		if p.defs[i] != p.maxDef {
			continue
		}
		if j >= len(src) {
			return dst, shapeErr("list page holds %d values, fewer than its levels say", len(src))
		}
		if row >= a {
			dst = append(dst, T(src[j]))
		}
		j++
	}
	if end := min(row+1, b); end > a {
		offs[end-a] = int32(len(dst))
	}
	return dst, nil
}

// valueAt is the j-th non-null value of page p, at level i, as
// parquet-go gives it (a flat column, index col), or a null for j < 0.
func (p *pageVals) valueAt(i, j, col int) parquet.Value {
	var v parquet.Value
	if j >= 0 {
		switch p.typ {
		case pqformat.ByteArray:
			v = parquet.ByteArrayValue(p.bytesAt(j))
		case pqformat.Int64:
			v = parquet.Int64Value(p.i64[j])
		case pqformat.Int32:
			v = parquet.Int32Value(p.i32[j])
		case pqformat.Double:
			v = parquet.DoubleValue(p.f64[j])
		case pqformat.Boolean:
			v = parquet.BooleanValue(p.bools[j])
		}
	}
	def := 0
	if p.defs != nil {
		def = int(p.defs[i])
	}
	return v.Level(0, def, col)
}

// valuesAtTyped is ValuesAt (and ReadValuesAt) through the typed decoder.
func valuesAtTyped(cc parquet.ColumnChunk, rows []int64, fn func(i int, v parquet.Value)) (bool, error) {
	col := cc.Column()
	k := 0
	return typedRange(cc, anyType, rows[0], rows[len(rows)-1]+1, func(p *pageVals, first int64) error {
		if p.reps != nil {
			return shapeErr("values of a repeated column")
		}
		rowsOf(p, first, rows[k], first+int64(p.n), func(row int64, i, j int) {
			for k < len(rows) && rows[k] == row {
				fn(k, p.valueAt(i, j, col))
				k++
			}
		})
		return nil
	})
}

// eachValueTyped is EachValue through the typed decoder.
func eachValueTyped(cc parquet.ColumnChunk, buf []parquet.Value, fn func(off int, vals []parquet.Value) error) (bool, error) {
	col := cc.Column()
	var ferr error
	return typedRange(cc, anyType, 0, -1, func(p *pageVals, first int64) error {
		if p.reps != nil {
			return shapeErr("values of a repeated column")
		}
		off, m := first, 0
		rowsOf(p, first, first, first+int64(p.n), func(row int64, i, j int) {
			if ferr != nil {
				return
			}
			buf[m] = p.valueAt(i, j, col)
			if m++; m == len(buf) {
				ferr = fn(int(off), buf[:m])
				off, m = off+int64(m), 0
			}
		})
		if ferr == nil && m > 0 {
			ferr = fn(int(off), buf[:m])
		}
		return ferr
	})
}

// readCodesTyped is ReadCodes through the typed decoder, for chunks of
// byte arrays and booleans.
func readCodesTyped(cc parquet.ColumnChunk, n int64) ([]int32, []string, bool, error) {
	fcc, isFile := cc.(*parquet.FileColumnChunk)
	if !isFile {
		return nil, nil, false, nil
	}
	ref, typed := typedChunk(fcc)
	if !typed || ref.md.Type != pqformat.ByteArray && ref.md.Type != pqformat.Boolean {
		return nil, nil, false, nil
	}
	out := make([]int32, 0, n)
	var (
		strs  []string
		byStr = map[string]int32{}
		remap []int32
	)
	code := func(b []byte) int32 {
		c, ok := byStr[string(b)]
		if !ok {
			c = int32(len(strs))
			strs = append(strs, string(b))
			byStr[strs[c]] = c
		}
		return c
	}
	ok, err := typedRange(cc, ref.md.Type, 0, n, func(p *pageVals, first int64) error {
		if p.reps != nil {
			return shapeErr("codes of a repeated column")
		}
		if p.idx != nil && remap == nil {
			remap = make([]int32, p.dict.n)
			for i := range remap {
				remap[i] = code(p.dict.value(int32(i)))
			}
		}
		rowsOf(p, first, 0, n, func(_ int64, _, j int) {
			switch {
			case j < 0:
				out = append(out, -1)
			case p.idx != nil:
				out = append(out, remap[p.idx[j]])
			case p.typ == pqformat.Boolean:
				if p.bools[j] {
					out = append(out, code(trueBytes))
				} else {
					out = append(out, code(falseBytes))
				}
			default:
				out = append(out, code(p.bytesAt(j)))
			}
		})
		return nil
	})
	if err == nil && int64(len(out)) != n {
		err = fmt.Errorf("read %d of %d rows", len(out), n)
	}
	return out, strs, ok, err
}

var trueBytes, falseBytes = []byte("true"), []byte("false")
