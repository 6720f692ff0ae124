package rollup

import (
	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// chunkReader reads whole column chunks (format.ChunkReader).
type chunkReader struct{ format.ChunkReader }

// read returns every value of column col of rg; nil when col < 0.
func (r *chunkReader) read(rg parquet.RowGroup, col int) ([]parquet.Value, error) {
	return r.Read(rg, col)
}

// rawCols are the metrics columns a rollup reads, by leaf index (-1 when
// absent from the file).
type rawCols struct {
	name, typ, unit, temporality, monotonic, sid, ts, value, valueInt int
	count, sum, min, max, buckets, bounds, sketch                     int
	countF, bucketsF                                                  int // float histograms
}

func lookupCols(s *parquet.Schema) rawCols {
	idx := func(name string) int {
		if leaf, ok := s.Lookup(name); ok {
			return leaf.ColumnIndex
		}
		if leaf, ok := s.Lookup(name, "list", "element"); ok {
			return leaf.ColumnIndex
		}
		return -1
	}
	return rawCols{
		name: idx(format.ColMetricName), typ: idx(format.ColMetricType), unit: idx(format.ColUnit),
		temporality: idx(format.ColTemporality), monotonic: idx(format.ColIsMonotonic), sid: idx(format.ColSeriesID),
		ts: idx(format.ColTimestamp), value: idx(format.ColValue), valueInt: idx(format.ColValueInt),
		count: idx(format.ColCount), sum: idx(format.ColSum), min: idx(format.ColMin), max: idx(format.ColMax),
		buckets: idx(format.ColBucketCounts), bounds: idx(format.ColExplicitBounds), sketch: idx(format.ColSketch),
		countF: idx(format.ColCountFloat), bucketsF: idx(format.ColBucketCountsFloat),
	}
}

// isLabel reports whether a raw metrics column is one of a series' label
// columns, copied into metrics_rollup from the series' first point.
func isLabel(name string) bool {
	switch name {
	case format.ColServiceName, format.ColScopeName, format.ColScopeVersion:
		return true
	}
	// Overflow columns hold the labels past the raw file's column cap.
	return format.IsAttrColumn(name) || format.IsOverflowColumn(name)
}

// listOffsets splits the values of a LIST column into rows: row r's
// elements are vals[off[r]:off[r+1]] (a null or empty list has none).
func listOffsets(vals []parquet.Value, maxDef int, off []int32) []int32 {
	off = off[:0]
	for i, v := range vals {
		if v.RepetitionLevel() == 0 {
			off = append(off, int32(i))
		}
	}
	off = append(off, int32(len(vals)))
	_ = maxDef
	return off
}
