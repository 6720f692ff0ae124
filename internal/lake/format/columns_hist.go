package format

import (
	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// ReadOptInt32s reads an optional INT32 column (exp_scale and the
// exponential histogram offsets); valid[i] is false for nulls.
func ReadOptInt32s(cc parquet.ColumnChunk, a, b int64, out []int32, valid []bool) error {
	if ok, err := typedRange(cc, pqformat.Int32, a, b, func(p *pageVals, first int64) error {
		spreadTyped(p, p.i32, first, a, b, out, valid)
		return nil
	}); ok {
		return err
	}
	return readOptInt32sPages(cc, a, b, out, valid)
}

func readOptInt32sPages(cc parquet.ColumnChunk, a, b int64, out []int32, valid []bool) error {
	return ScanPages(cc, a, b, func(p parquet.Page, off, n int64) error {
		d := p.Data()
		return spreadOptional(p.DefinitionLevels(), d.Int32(), out[off:off+n], valid[off:off+n])
	})
}
