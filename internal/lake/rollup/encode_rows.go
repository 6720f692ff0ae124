package rollup

import (
	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake/pqenc"
)

// serRun is the rows [start, end) of one series within a row group.
type serRun struct {
	ser        int32
	start, end int32
}

// colSrc says where a leaf column's values come from: a fixed column
// (fixed >= 0) or a label column of the hour (label >= 0).
type colSrc struct {
	fixed int
	label int32
}

// labelAt is a series run's value of one label column.
type labelAt struct {
	run int32
	v   *parquet.Value
}

// rowEncoder encodes the rows of one tier column by column; its buffers
// are reused across row groups and columns.
type rowEncoder struct {
	c        pqenc.Column
	runs     []serRun
	byLabel  [][]labelAt
	tierName []byte
}

// encodeRows writes o's rows to f in row groups of rowGroupRows.
func (e *rowEncoder) encodeRows(f *pqenc.File, h *hour, o *tierOut, srcs []colSrc) error {
	e.tierName = []byte(TierName(o.tier))
	if len(e.byLabel) < len(h.labelCols) {
		e.byLabel = make([][]labelAt, len(h.labelCols))
	}
	for g0 := 0; g0 < o.len(); g0 += rowGroupRows {
		g1 := min(g0+rowGroupRows, o.len())
		// Runs are absolute window indexes of o.
		e.runs = e.runs[:0]
		for i := g0; i < g1; i++ {
			if n := len(e.runs); n > 0 && e.runs[n-1].ser == o.ser[i] {
				e.runs[n-1].end++
			} else {
				e.runs = append(e.runs, serRun{o.ser[i], int32(i), int32(i + 1)})
			}
		}
		for i := range e.byLabel {
			e.byLabel[i] = e.byLabel[i][:0]
		}
		for ri, r := range e.runs {
			ls := h.ser[r.ser].labels
			for j := range ls {
				e.byLabel[ls[j].col] = append(e.byLabel[ls[j].col], labelAt{int32(ri), &ls[j].v})
			}
		}
		f.BeginRowGroup(g1 - g0)
		for col, src := range srcs {
			e.c.Reset(&f.Leaves[col], f.Codec())
			if src.fixed >= 0 {
				e.fixed(h, o, g0, g1, src.fixed)
			} else {
				e.label(g0, g1, e.byLabel[src.label])
			}
			if err := f.WriteChunk(&e.c); err != nil {
				return err
			}
		}
	}
	return nil
}

// label encodes a label column: the runs of series that have it, nulls
// between them.
func (e *rowEncoder) label(g0, g1 int, at []labelAt) {
	c := &e.c
	pos := g0
	for _, a := range at {
		r := e.runs[a.run]
		if gap := int(r.start) - pos; gap > 0 {
			c.Null(gap)
		}
		c.Value(*a.v, int(r.end-r.start))
		pos = int(r.end)
	}
	if pos < g1 {
		c.Null(g1 - pos)
	}
}

// fixed encodes fixed column fc of windows [g0, g1).
func (e *rowEncoder) fixed(h *hour, o *tierOut, g0, g1, fc int) {
	c := &e.c
	switch fc {
	case cTier:
		c.Bytes(e.tierName, g1-g0)
	case cMetricName, cMetricType, cUnit, cTemporality, cMonotonic, cSeriesID:
		// Per-series columns: one run per series.
		for _, r := range e.runs {
			s, k := &h.ser[r.ser], int(r.end-r.start)
			switch fc {
			case cMetricName:
				c.Str(s.name, k)
			case cMetricType:
				c.Bytes(unsafeBytes(s.typ), k)
			case cUnit:
				c.Str(s.unit, k)
			case cTemporality:
				c.Bytes(unsafeBytes(s.temporality), k)
			case cMonotonic:
				c.Bool(s.monotonic, k)
			case cSeriesID:
				c.Int(int64(s.sid), k)
			}
		}
	case cWindowStart:
		c.Int64s(o.start[g0:g1])
	case cFirstTS:
		c.Int64s(o.firstT[g0:g1])
	case cLastTS:
		c.Int64s(o.lastT[g0:g1])
	case cPoints:
		c.Uint64sIf(o.points[g0:g1], nil, 0)
	case cCount:
		c.Uint64sIf(o.count[g0:g1], o.flags[g0:g1], wCount)
	case cCountFloat:
		c.Float64sIf(o.countF[g0:g1], o.flags2[g0:g1], wCountF)
	case cSum:
		c.Float64sIf(o.sum[g0:g1], o.flags[g0:g1], wSum)
	case cMin:
		c.Float64sIf(o.min[g0:g1], o.flags[g0:g1], wMin)
	case cMax:
		c.Float64sIf(o.max[g0:g1], o.flags[g0:g1], wMax)
	case cIncrease:
		c.Float64sIf(o.increase[g0:g1], o.flags[g0:g1], wIncrease)
	case cFirst, cLast, cResets, cMismatch:
		// Present only for some kinds of series.
		for _, r := range e.runs {
			s := &h.ser[r.ser]
			i, j := int(r.start), int(r.end)
			switch fc {
			case cFirst, cLast:
				if !s.kind.numeric() {
					c.Null(j - i)
				} else if fc == cFirst {
					c.Float64sIf(o.first[i:j], o.flags[i:j], wFirst)
				} else {
					c.Float64sIf(o.last[i:j], o.flags[i:j], wFirst)
				}
			case cResets:
				if s.kind == KindDeltaSum {
					c.Null(j - i)
				} else {
					c.Uint64sIf(o.resets[i:j], o.flags[i:j], wIncrease)
				}
			case cMismatch:
				if s.kind != KindDeltaDist {
					c.Null(j - i)
					continue
				}
				for _, f := range o.flags[i:j] {
					c.Bool(f&wMismatch != 0, 1)
				}
			}
		}
	case cSketch:
		for _, r := range o.sk[g0:g1] {
			if r.end > r.start {
				c.Bytes(o.bytes[r.start:r.end], 1)
			} else {
				c.Null(1)
			}
		}
	case cBuckets, cBounds, cBucketsFloat:
		for i := g0; i < g1; i++ {
			bk, bd, bf := o.bk[i], o.bd[i], o.bf[i]
			float := o.flags2[i]&wFloatBuckets != 0
			switch {
			// A window's buckets are integer or float: the other kind's
			// column is null.
			case o.flags[i]&wBuckets == 0 || (fc == cBuckets && float) || (fc == cBucketsFloat && !float):
				c.Null(1)
			case fc == cBuckets && bk.end > bk.start:
				c.ListUint64(o.u64[bk.start:bk.end])
			case fc == cBounds && bd.end > bd.start:
				c.ListFloat64(o.f64[bd.start:bd.end])
			case fc == cBucketsFloat && bf.end > bf.start:
				c.ListFloat64(o.f64[bf.start:bf.end])
			default:
				c.ListEmpty()
			}
		}
	}
}
