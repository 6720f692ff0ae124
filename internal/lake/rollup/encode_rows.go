package rollup

import (
	"encoding/binary"
	"math"

	"github.com/parquet-go/parquet-go"
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
	c        colEnc
	runs     []serRun
	byLabel  [][]labelAt
	tierName []byte
}

// encodeRows writes o's rows to f in row groups of rowGroupRows.
func (e *rowEncoder) encodeRows(f *pqFile, h *hour, o *tierOut, srcs []colSrc) error {
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
		f.beginRowGroup(g1 - g0)
		for col, src := range srcs {
			e.c.reset(&f.leaves[col], f)
			if src.fixed >= 0 {
				e.fixed(h, o, g0, g1, src.fixed)
			} else {
				e.label(g0, g1, e.byLabel[src.label])
			}
			if err := f.writeChunk(&e.c); err != nil {
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
			c.null(gap)
		}
		c.value(*a.v, int(r.end-r.start))
		pos = int(r.end)
	}
	if pos < g1 {
		c.null(g1 - pos)
	}
}

// str adds a run of a string column, null when empty and nullable.
func (c *colEnc) str(s string, k int) {
	if s == "" && c.li.maxDef > 0 {
		c.null(k)
		return
	}
	c.putBytes(unsafeBytes(s), k)
}

// fixed encodes fixed column fc of windows [g0, g1).
func (e *rowEncoder) fixed(h *hour, o *tierOut, g0, g1, fc int) {
	c := &e.c
	switch fc {
	case cTier:
		c.putBytes(e.tierName, g1-g0)
	case cMetricName, cMetricType, cUnit, cTemporality, cMonotonic, cSeriesID:
		// Per-series columns: one run per series.
		for _, r := range e.runs {
			s, k := &h.ser[r.ser], int(r.end-r.start)
			switch fc {
			case cMetricName:
				c.str(s.name, k)
			case cMetricType:
				c.putBytes(unsafeBytes(s.typ), k)
			case cUnit:
				c.str(s.unit, k)
			case cTemporality:
				c.putBytes(unsafeBytes(s.temporality), k)
			case cMonotonic:
				c.putBool(s.monotonic, k)
			case cSeriesID:
				c.putInt(int64(s.sid), k)
			}
		}
	case cWindowStart:
		c.ints(o.start[g0:g1])
	case cFirstTS:
		c.ints(o.firstT[g0:g1])
	case cLastTS:
		c.ints(o.lastT[g0:g1])
	case cPoints:
		c.uints(o.points[g0:g1], nil, 0)
	case cCount:
		c.uints(o.count[g0:g1], o.flags[g0:g1], wCount)
	case cSum:
		c.floats(o.sum[g0:g1], o.flags[g0:g1], wSum)
	case cMin:
		c.floats(o.min[g0:g1], o.flags[g0:g1], wMin)
	case cMax:
		c.floats(o.max[g0:g1], o.flags[g0:g1], wMax)
	case cIncrease:
		c.floats(o.increase[g0:g1], o.flags[g0:g1], wIncrease)
	case cFirst, cLast, cResets, cMismatch:
		// Present only for some kinds of series.
		for _, r := range e.runs {
			s := &h.ser[r.ser]
			i, j := int(r.start), int(r.end)
			switch fc {
			case cFirst, cLast:
				if !s.kind.numeric() {
					c.null(j - i)
				} else if fc == cFirst {
					c.floats(o.first[i:j], o.flags[i:j], wFirst)
				} else {
					c.floats(o.last[i:j], o.flags[i:j], wFirst)
				}
			case cResets:
				if s.kind == KindDeltaSum {
					c.null(j - i)
				} else {
					c.uints(o.resets[i:j], o.flags[i:j], wIncrease)
				}
			case cMismatch:
				if s.kind != KindDeltaDist {
					c.null(j - i)
					continue
				}
				for _, f := range o.flags[i:j] {
					c.putBool(f&wMismatch != 0, 1)
				}
			}
		}
	case cSketch:
		for _, r := range o.sk[g0:g1] {
			if r.end > r.start {
				c.putBytes(o.bytes[r.start:r.end], 1)
			} else {
				c.null(1)
			}
		}
	case cBuckets, cBounds:
		for i := g0; i < g1; i++ {
			bk, bd := o.bk[i], o.bd[i]
			switch {
			case o.flags[i]&wBuckets == 0:
				c.null(1)
			case fc == cBuckets && bk.end > bk.start:
				c.listUint64(o.u64[bk.start:bk.end])
			case fc == cBounds && bd.end > bd.start:
				c.listFloat64(o.f64[bd.start:bd.end])
			default:
				c.listEmpty()
			}
		}
	}
}

func (c *colEnc) optInt(v int64, ok bool) {
	if ok {
		c.putInt(v, 1)
	} else {
		c.null(1)
	}
}

func (c *colEnc) optFloat(v float64, ok bool) {
	if ok {
		c.putFloat(v, 1)
	} else {
		c.null(1)
	}
}

// ints adds one row per value of a required INT64 column.
func (c *colEnc) ints(vs []int64) {
	for len(vs) > 0 {
		n := min(len(vs), c.room())
		c.present(n)
		lo, hi := vs[0], vs[0]
		for _, v := range vs[:n] {
			c.plain = binary.LittleEndian.AppendUint64(c.plain, uint64(v))
			lo, hi = min(lo, v), max(hi, v)
		}
		c.b.addInt(lo)
		c.b.addInt(hi)
		vs = vs[n:]
		c.endRows(n)
	}
}

// uints adds one row per value of an INT64 column; with flags, rows
// without bit are null.
func (c *colEnc) uints(vs []uint64, flags []uint8, bit uint8) {
	for len(vs) > 0 {
		n := min(len(vs), c.room())
		for i, v := range vs[:n] {
			if flags != nil && flags[i]&bit == 0 {
				c.def.add(0, 1)
				c.nNulls++
			} else {
				if c.li.maxDef > 0 {
					c.def.add(c.li.maxDef, 1)
				}
				c.plain = binary.LittleEndian.AppendUint64(c.plain, v)
				c.b.addInt(int64(v))
			}
		}
		c.nVals += n
		vs = vs[n:]
		if flags != nil {
			flags = flags[n:]
		}
		c.endRows(n)
	}
}

// floats adds one row per value of an optional DOUBLE column; rows
// without bit in flags are null.
func (c *colEnc) floats(vs []float64, flags []uint8, bit uint8) {
	for len(vs) > 0 {
		n := min(len(vs), c.room())
		for i, v := range vs[:n] {
			if flags[i]&bit == 0 {
				c.def.add(0, 1)
				c.nNulls++
			} else {
				c.def.add(c.li.maxDef, 1)
				c.plain = binary.LittleEndian.AppendUint64(c.plain, math.Float64bits(v))
				c.b.addFloat(v)
			}
		}
		c.nVals += n
		vs, flags = vs[n:], flags[n:]
		c.endRows(n)
	}
}
