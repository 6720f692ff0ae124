package rollup

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/lake/pqenc"
	"github.com/sluice-dev/sluice/internal/version"
)

// Table is the rollup table's name.
const Table = format.TableRollup

// Footer keys of metrics_rollup files, besides the lake's own.
const (
	MetaTier       = format.MetaRollupTier       // tier name, e.g. "5m"
	MetaSourceRows = format.MetaRollupSourceRows // live raw rows of the hour the rollup was computed from
)

// Fixed columns of metrics_rollup; the label columns follow the raw
// table's names and types.
const (
	cTier = iota
	cWindowStart
	cMetricName
	cMetricType
	cUnit
	cTemporality
	cMonotonic
	cSeriesID
	cPoints
	cCount
	cSum
	cMin
	cMax
	cFirst
	cLast
	cFirstTS
	cLastTS
	cIncrease
	cResets
	cBuckets
	cBounds
	cMismatch
	cSketch
	cCountFloat
	cBucketsFloat
	numFixed
)

// fixedNames are the names of format.Rollup's columns, whose order the
// constants above follow (TestFixedColumnsFollowFormat).
var fixedNames = func() (n [numFixed]string) {
	for i, c := range format.Rollup.Columns {
		n[i] = c.Name
	}
	return n
}()

func fixedNode(c int) parquet.Node { return format.Rollup.Columns[c].Kind.Node() }

// fileMeta is what a written rollup file records.
type fileMeta struct {
	tenant, day string
	hour        int
	created     time.Time
	sourceRows  int64
	replaces    string // lineage: catalog.Lineage of the rollups replaced
}

// writeTier writes one tier's rows as a metrics_rollup file and returns
// its catalog row (Created left for the caller).
func writeTier(store lake.Store, h *hour, o *tierOut, m fileMeta, re *rowEncoder) (catalog.Segment, error) {
	dir := catalog.PartitionDir(Table, m.tenant, m.day, m.hour)
	p := dir + "/" + lake.NewFileID(m.created) + ".parquet"
	schema, fixedIdx, labelIdx, err := tierSchema(h, o)
	if err != nil {
		return catalog.Segment{}, err
	}

	seg := catalog.Segment{Table: Table, Tenant: m.tenant, Day: m.day, Hour: m.hour, Path: p,
		Rows: int64(o.len()), Level: Level(o.tier)}
	names := map[string]struct{}{}
	services := map[string]struct{}{}
	for i, start := range o.start {
		if i == 0 || start < seg.MinTime {
			seg.MinTime = start
		}
		seg.MaxTime = max(seg.MaxTime, start+int64(o.tier)-1)
		if i > 0 && o.ser[i-1] == o.ser[i] {
			continue
		}
		s := &h.ser[o.ser[i]]
		names[s.name] = struct{}{}
		for _, l := range s.labels {
			if h.labelCols[l.col].name != format.ColServiceName {
				continue
			}
			if b := l.v.ByteArray(); !hasKey(services, b) {
				services[string(b)] = struct{}{}
			}
		}
	}
	for n := range names {
		seg.MetricNames = append(seg.MetricNames, n)
	}
	if len(services) <= lake.MaxSegmentNames {
		for n := range services {
			seg.Services = append(seg.Services, n)
		}
	}
	if len(seg.MetricNames) > lake.MaxSegmentNames {
		seg.MetricNames = nil
	}

	opts := []parquet.WriterOption{
		parquet.Compression(&parquet.Zstd),
		parquet.CreatedBy("sluice", version.String(), ""),
		parquet.PageBufferSize(256 << 10),
		parquet.DataPageStatistics(false),
		parquet.KeyValueMetadata(lake.MetaTable, Table),
		parquet.KeyValueMetadata(lake.MetaTenant, m.tenant),
		parquet.KeyValueMetadata(lake.MetaLevel, strconv.Itoa(seg.Level)),
		parquet.KeyValueMetadata(lake.MetaSchemaVersion, strconv.Itoa(lake.SchemaVersion)),
		parquet.KeyValueMetadata(lake.MetaMinTime, strconv.FormatInt(seg.MinTime, 10)),
		parquet.KeyValueMetadata(lake.MetaMaxTime, strconv.FormatInt(seg.MaxTime, 10)),
		parquet.KeyValueMetadata(lake.MetaSort, format.Rollup.Sort),
		parquet.KeyValueMetadata(MetaTier, TierName(o.tier)),
		parquet.KeyValueMetadata(MetaSourceRows, strconv.FormatInt(m.sourceRows, 10)),
		parquet.KeyValueMetadata(catalog.MetaReplaces, m.replaces),
	}
	ow, err := store.Create(p)
	if err != nil {
		return catalog.Segment{}, fmt.Errorf("create %q: %w", p, err)
	}
	cw := &countWriter{w: ow}
	bw := bufio.NewWriterSize(cw, 256<<10)
	fail := func(err error) (catalog.Segment, error) {
		_ = ow.Abort()
		return catalog.Segment{}, fmt.Errorf("write %q: %w", p, err)
	}
	if err := encodeTier(bw, h, o, schema, fixedIdx, labelIdx, opts, re); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := ow.Commit(); err != nil {
		return catalog.Segment{}, fmt.Errorf("commit %q: %w", p, err)
	}
	seg.Bytes = cw.n
	seg.SchemaHash = catalog.ParquetSchemaHash(schema)
	return seg, nil
}

// tierSchema returns the schema of o's file (the fixed columns and the
// label columns o's series use) and the leaf index of each fixed and label
// column (-1 for labels not used).
func tierSchema(h *hour, o *tierOut) (*parquet.Schema, []int, []int, error) {
	g := parquet.Group{}
	for c := range numFixed {
		g[fixedNames[c]] = fixedNode(c)
	}
	// Label columns used by this tier's series.
	used := make([]bool, len(h.labelCols))
	for i, si := range o.ser {
		if i > 0 && o.ser[i-1] == si {
			continue
		}
		for _, l := range h.ser[si].labels {
			used[l.col] = true
		}
	}
	for i, lc := range h.labelCols {
		if used[i] {
			g[lc.name] = lc.node
		}
	}
	schema := parquet.NewSchema(Table, g)
	// Leaf index of each fixed column and label column.
	var fixedIdx [numFixed]int
	for c := range numFixed {
		path := []string{fixedNames[c]}
		if c == cBuckets || c == cBounds || c == cBucketsFloat {
			path = append(path, "list", "element")
		}
		leaf, ok := schema.Lookup(path...)
		if !ok {
			return nil, nil, nil, fmt.Errorf("rollup: schema lacks %v", path)
		}
		fixedIdx[c] = leaf.ColumnIndex
	}
	labelIdx := make([]int, len(h.labelCols))
	for i, lc := range h.labelCols {
		labelIdx[i] = -1
		if used[i] {
			leaf, _ := schema.Lookup(lc.name)
			labelIdx[i] = leaf.ColumnIndex
		}
	}

	return schema, fixedIdx[:], labelIdx, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// Rows per column chunk handed to the column writers, and per row group.
const (
	chunkRows    = 2048
	rowGroupRows = 128 * 1024
)

// encodeTier writes o's rows as a Parquet file of schema to w: with re
// when it can encode every column, else (or when re is nil) with
// parquet-go's writer.
func encodeTier(w io.Writer, h *hour, o *tierOut, schema *parquet.Schema, fixedIdx, labelIdx []int,
	opts []parquet.WriterOption, re *rowEncoder) error {
	var enc *tierEncoding
	if re != nil {
		var err error
		if enc, err = newTierEncoding(schema, fixedIdx, labelIdx, opts); err != nil {
			return err
		}
	}
	if enc == nil {
		pw := parquet.NewWriter(w, append([]parquet.WriterOption{schema}, opts...)...)
		if err := writeRows(pw, h, o, fixedIdx, labelIdx, len(schema.Columns())); err != nil {
			return err
		}
		return pw.Close()
	}
	f := pqenc.NewFile(w, enc.leaves, &parquet.Zstd)
	if err := re.encodeRows(f, h, o, enc.srcs); err != nil {
		return err
	}
	return f.Close(enc.footer)
}

// tierEncoding is how encodeRows writes a tier's file: each leaf's
// encoding and source, and the footer parquet-go writes for the schema.
type tierEncoding struct {
	leaves []pqenc.Leaf
	srcs   []colSrc
	footer *pqformat.FileMetaData
}

// newTierEncoding returns nil, without error, when a column has a type or
// encoding encodeRows does not write (writeRows writes those files).
func newTierEncoding(schema *parquet.Schema, fixedIdx, labelIdx []int, opts []parquet.WriterOption) (*tierEncoding, error) {
	cols := schema.Columns()
	e := &tierEncoding{leaves: make([]pqenc.Leaf, len(cols)), srcs: make([]colSrc, len(cols))}
	for i := range e.srcs {
		e.srcs[i] = colSrc{fixed: -1, label: -1}
	}
	for c, col := range fixedIdx {
		e.srcs[col].fixed = c
	}
	for l, col := range labelIdx {
		if col >= 0 {
			e.srcs[col].label = int32(l)
		}
	}
	for i, path := range cols {
		leaf, ok := schema.Lookup(path...)
		if !ok || e.srcs[i] == (colSrc{fixed: -1, label: -1}) {
			return nil, fmt.Errorf("rollup: column %v has no source", path)
		}
		li, err := pqenc.NewLeaf(leaf)
		if err != nil || (e.srcs[i].label >= 0 && li.MaxDef == 0) {
			// A type the encoder does not write, or a required label
			// column that series without the label could not fill.
			return nil, nil
		}
		li.Path = path // Lookup's leaf path is its last element only
		e.leaves[i] = li
	}
	footer, err := pqenc.Footer(schema, opts...)
	if err != nil {
		return nil, err
	}
	e.footer = footer
	return e, nil
}

// writeRows writes the tier's rows column by column, a chunk of rows at a
// time: fixed columns value by value, label columns prefilled with nulls
// and set from each row's series (a series has a few of the many label
// columns).
func writeRows(pw *parquet.Writer, h *hour, o *tierOut, fixedIdx []int, labelIdx []int, ncol int) error {
	cols := make([][]parquet.Value, ncol)
	nulls := make([][]parquet.Value, ncol)
	tierName := parquet.ByteArrayValue([]byte(TierName(o.tier)))
	type cell struct {
		col int
		v   parquet.Value
	}
	var leveled []cell
	var rows []outRow
	inGroup := 0
	for c0 := 0; c0 < o.len(); c0 += chunkRows {
		rows = o.appendRows(rows[:0], c0, min(c0+chunkRows, o.len()))
		n := len(rows)
		for c := range cols {
			cols[c] = cols[c][:0]
		}
		req := func(c int, f func(r *outRow, s *series) parquet.Value) {
			col := fixedIdx[c]
			for i := range rows {
				r := &rows[i]
				cols[col] = append(cols[col], f(r, &h.ser[r.ser]).Level(0, 0, col))
			}
		}
		opt := func(c int, f func(r *outRow, s *series) (parquet.Value, bool)) {
			col := fixedIdx[c]
			null := parquet.NullValue().Level(0, 0, col)
			for i := range rows {
				r := &rows[i]
				if v, ok := f(r, &h.ser[r.ser]); ok {
					cols[col] = append(cols[col], v.Level(0, 1, col))
				} else {
					cols[col] = append(cols[col], null)
				}
			}
		}
		req(cTier, func(*outRow, *series) parquet.Value { return tierName })
		req(cWindowStart, func(r *outRow, _ *series) parquet.Value { return parquet.Int64Value(r.w.Start) })
		opt(cMetricName, func(_ *outRow, s *series) (parquet.Value, bool) {
			return parquet.ByteArrayValue(unsafeBytes(s.name)), s.name != ""
		})
		req(cMetricType, func(_ *outRow, s *series) parquet.Value { return parquet.ByteArrayValue(unsafeBytes(s.typ)) })
		opt(cUnit, func(_ *outRow, s *series) (parquet.Value, bool) {
			return parquet.ByteArrayValue(unsafeBytes(s.unit)), s.unit != ""
		})
		req(cTemporality, func(_ *outRow, s *series) parquet.Value { return parquet.ByteArrayValue(unsafeBytes(s.temporality)) })
		req(cMonotonic, func(_ *outRow, s *series) parquet.Value { return parquet.BooleanValue(s.monotonic) })
		req(cSeriesID, func(_ *outRow, s *series) parquet.Value { return parquet.Int64Value(int64(s.sid)) })
		req(cPoints, func(r *outRow, _ *series) parquet.Value { return parquet.Int64Value(int64(r.w.Points)) })
		opt(cCount, func(r *outRow, _ *series) (parquet.Value, bool) {
			return parquet.Int64Value(int64(r.w.Count)), r.w.HasCount
		})
		opt(cCountFloat, func(r *outRow, _ *series) (parquet.Value, bool) {
			return parquet.DoubleValue(r.w.CountF), r.w.HasCountF
		})
		opt(cSum, func(r *outRow, _ *series) (parquet.Value, bool) { return parquet.DoubleValue(r.w.Sum), r.w.HasSum })
		opt(cMin, func(r *outRow, _ *series) (parquet.Value, bool) { return parquet.DoubleValue(r.w.Min), r.w.HasMin })
		opt(cMax, func(r *outRow, _ *series) (parquet.Value, bool) { return parquet.DoubleValue(r.w.Max), r.w.HasMax })
		opt(cFirst, func(r *outRow, s *series) (parquet.Value, bool) {
			return parquet.DoubleValue(r.w.First), r.w.HasFirst && s.kind.numeric()
		})
		opt(cLast, func(r *outRow, s *series) (parquet.Value, bool) {
			return parquet.DoubleValue(r.w.Last), r.w.HasFirst && s.kind.numeric()
		})
		req(cFirstTS, func(r *outRow, _ *series) parquet.Value { return parquet.Int64Value(r.w.FirstT) })
		req(cLastTS, func(r *outRow, _ *series) parquet.Value { return parquet.Int64Value(r.w.LastT) })
		opt(cIncrease, func(r *outRow, _ *series) (parquet.Value, bool) {
			return parquet.DoubleValue(r.w.Increase), r.w.HasIncrease
		})
		opt(cResets, func(r *outRow, s *series) (parquet.Value, bool) {
			return parquet.Int64Value(int64(r.w.Resets)), r.w.HasIncrease && s.kind != KindDeltaSum
		})
		opt(cMismatch, func(r *outRow, s *series) (parquet.Value, bool) {
			return parquet.BooleanValue(r.w.Mismatch), s.kind == KindDeltaDist
		})
		opt(cSketch, func(r *outRow, _ *series) (parquet.Value, bool) {
			sk := o.bytes[r.sk.start:r.sk.end]
			return parquet.ByteArrayValue(sk), len(sk) > 0
		})
		for _, c := range [...]int{cBuckets, cBounds, cBucketsFloat} {
			col := fixedIdx[c]
			for i := range rows {
				r := &rows[i]
				var k int
				switch c {
				case cBuckets:
					k = int(r.bk.end - r.bk.start)
				case cBounds:
					k = int(r.bd.end - r.bd.start)
				default:
					k = int(r.bf.end - r.bf.start)
				}
				switch {
				// A window's buckets are integer or float: the other
				// kind's column is null.
				case !r.w.HasBuckets || (c == cBuckets && r.w.FloatBuckets) || (c == cBucketsFloat && !r.w.FloatBuckets):
					cols[col] = append(cols[col], parquet.NullValue().Level(0, 0, col))
				case k == 0:
					cols[col] = append(cols[col], parquet.NullValue().Level(0, 1, col))
				default:
					for j := range k {
						var v parquet.Value
						switch c {
						case cBuckets:
							v = parquet.Int64Value(int64(o.u64[int(r.bk.start)+j]))
						case cBounds:
							v = parquet.DoubleValue(o.f64[int(r.bd.start)+j])
						default:
							v = parquet.DoubleValue(o.f64[int(r.bf.start)+j])
						}
						cols[col] = append(cols[col], v.Level(min(j, 1), 2, col))
					}
				}
			}
		}
		// Label columns: nulls, then each row's own labels.
		for _, col := range labelIdx {
			if col < 0 {
				continue
			}
			if len(nulls[col]) < n {
				nulls[col] = make([]parquet.Value, chunkRows)
				for i := range nulls[col] {
					nulls[col][i] = parquet.NullValue().Level(0, 0, col)
				}
			}
			cols[col] = append(cols[col][:0], nulls[col][:n]...)
		}
		// Rows of a series are adjacent: level its labels once per run.
		prev := int32(-1)
		for i := range rows {
			if si := rows[i].ser; si != prev {
				prev = si
				leveled = leveled[:0]
				for _, l := range h.ser[si].labels {
					if col := labelIdx[l.col]; col >= 0 {
						leveled = append(leveled, cell{col, l.v.Level(0, 1, col)})
					}
				}
			}
			for _, c := range leveled {
				cols[c.col][i] = c.v
			}
		}
		cws := pw.ColumnWriters()
		for col := range cols {
			if _, err := cws[col].WriteRowValues(cols[col]); err != nil {
				return fmt.Errorf("column %d: %w", col, err)
			}
		}
		if inGroup += n; inGroup >= rowGroupRows {
			if err := pw.Flush(); err != nil {
				return err
			}
			inGroup = 0
		}
	}
	return nil
}

// unsafeBytes views s as bytes for a parquet value that is copied by the
// column writer before s could change (s is immutable anyway).
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// hasKey looks b up without allocating a string.
func hasKey(m map[string]struct{}, b []byte) bool {
	_, ok := m[string(b)]
	return ok
}
