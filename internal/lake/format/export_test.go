package format

import (
	"errors"
	"io"

	"github.com/parquet-go/parquet-go"
)

// SetLegacyRead makes f read every column chunk through parquet-go's page
// reader instead of the typed decoder (the oracle of TestTypedReadMatches).
func SetLegacyRead(f *File, on bool) { f.legacy = on }

// DecodeUnchecked decodes every page of every column chunk of pf that the
// typed decoder reads, without checking the chunks first (CheckChunk):
// the decoder alone must turn any damage into an error (FuzzDecodePages).
// It returns the values decoded.
func DecodeUnchecked(pf *parquet.File) (n int, err error) {
	var d chunkDec
	for _, rg := range pf.RowGroups() {
		for _, cc := range rg.ColumnChunks() {
			fcc, ok := cc.(*parquet.FileColumnChunk)
			if !ok {
				continue
			}
			ref, ok := typedChunk(fcc)
			if !ok {
				continue
			}
			if err := d.openChecked(fcc, ref, false); err != nil {
				return n, err
			}
			for {
				p, err := d.next()
				if err != nil {
					d.close()
					if errors.Is(err, io.EOF) {
						break
					}
					return n, err
				}
				n += p.n
			}
		}
	}
	return n, nil
}

// The column readers through parquet-go's pages only: the oracle of
// TestRangedReadersMatch for the typed ones.
var (
	ReadUint64sPages     = readUint64sPages
	ReadOptInt64sPages   = readOptInt64sPages
	ReadOptUint64sPages  = readOptUint64sPages
	ReadOptFloat64sPages = readOptFloat64sPages
	ReadOptInt32sPages   = readOptInt32sPages
	ReadListF64Pages     = readListF64Pages
	ReadListU64Pages     = readListU64Pages
	ReadValuesAtPages    = readValuesAtPages
	ValuesAtPages        = valuesAtPages
	EachValuePages       = eachValuePages
	ReadCodesPages       = readCodesPages
)

// TypedChunk reports whether the typed decoder reads cc.
func TypedChunk(cc parquet.ColumnChunk) bool {
	fcc, ok := cc.(*parquet.FileColumnChunk)
	if !ok {
		return false
	}
	_, ok = typedChunk(fcc)
	return ok
}
