package format

import (
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// SetLegacyRead makes f read every column chunk through parquet-go's page
// reader instead of the typed decoder (the oracle of TestTypedReadMatches).
func SetLegacyRead(f *File, on bool) { f.legacy = on }

// DecodeUnchecked decodes every page of every column chunk of pf that the
// typed decoder reads, without checking the chunks first (CheckChunk):
// the decoder alone must turn any damage into an error (FuzzDecodePages).
// A flat optional chunk is decoded a second time with its definition
// levels as runs, which must count the same values. It returns the
// values decoded.
// ErrLevelRunsDiffer is DecodeUnchecked's error for a page whose levels
// as runs and as bytes disagree.
var ErrLevelRunsDiffer = errors.New("definition levels as runs differ from the levels as bytes")

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
			var nns []int
			for pass := range 2 {
				if pass == 1 && (ref.maxDef != 1 || ref.maxRep != 0) {
					break
				}
				if err := d.openChecked(fcc, ref, false); err != nil {
					return n, err
				}
				d.defRuns = pass == 1
				for k := 0; ; k++ {
					p, err := d.next()
					if err != nil {
						d.close()
						if errors.Is(err, io.EOF) {
							break
						}
						if pass == 1 && k < len(nns) {
							return n, fmt.Errorf("%w: page %d: %w, as bytes %d values", ErrLevelRunsDiffer, k, err, nns[k])
						}
						return n, err
					}
					if pass == 0 {
						n += p.n
						nns = append(nns, p.nn)
					} else if k >= len(nns) || p.nn != nns[k] {
						return n, fmt.Errorf("%w: page %d: %d values", ErrLevelRunsDiffer, k, p.nn)
					}
				}
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
