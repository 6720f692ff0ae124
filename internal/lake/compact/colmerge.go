package compact

import (
	"bufio"
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/lake/pqenc"
)

// This file merges a partition column by column: the sort-key columns of
// the inputs decide the order of rows, as runs of consecutive rows of one
// input, and every column of the output is then built by copying those
// runs of level and value bytes from the decoded input chunks (pqenc),
// never materialising a row. Rows keep their partition (they are not
// re-partitioned by their times, invariant 7).

// verbatimPages lets the column merge copy the input pages a run covers
// whole as they are (pqenc.Column.CopyRowsPages); tests turn it off to
// hold the output to the one built value by value.
var verbatimPages = true

// errColumnMerge wraps why a job's inputs cannot be merged by columns
// (a column type pqenc does not write, inputs whose columns disagree);
// merge then falls back to the row merge.
var errColumnMerge = errors.New("column merge not possible")

// colInput is one input of a column merge: its file, the decoded chunks
// of its current row group and that row group's sort keys.
type colInput struct {
	ord   int
	seg   catalog.Segment
	f     *lake.File
	pf    *parquet.File
	rg    int            // next row group to read
	leaf  []int          // input leaf of each output leaf, -1 when absent
	chunk []*pqenc.Chunk // by output leaf; nil where leaf is -1
	rows  int            // rows of the current row group
	row   int            // next row to merge
	read  int64          // rows read so far

	// The current block's runs of this input (indexes into its runs) and
	// their rows.
	bruns []int32
	bcum  []int32 // rows of this input in the block before each of bruns
	brows int

	// Sort keys of the current row group's rows: name (service or metric
	// name, aliasing the chunks), series id, sort time; and the partition
	// time of each row.
	name []string
	sid  []int64
	key  []int64 // the sort time: t or pt
	t    []int64 // timestamp (logs, metrics) or start_timestamp (spans)
	obs  []int64 // observed_timestamp (logs)
	pt   []int64
}

// run is n consecutive merged rows of one input: its rows from on, at
// out in the block.
type run struct {
	in   *colInput
	n    int
	from int
	out  int
}

// colMerger is one job's column merge.
type colMerger struct {
	ctx        context.Context
	job        Job
	opts       Options
	store      lake.Store
	hourStart  int64
	hourEnd    int64 // last nanosecond of the hour
	schema     *parquet.Schema
	leaves     []pqenc.Leaf
	footer     *pqformat.FileMetaData
	schemaHash string
	level      int
	keyLeaf    [4]int // output leaves of the key columns (-1: none)
	nameLeaf   [2]int // output leaves whose dictionaries name the file: services, metric names

	inputs      []*colInput
	chunks      *chunkSet // decoded chunk buffers, from chunkSets
	heap        inputHeap
	runs        []run // the current block: rows merged, not yet copied
	block       int   // rows in runs
	blockInputs []*colInput

	// output
	cols    []pqenc.Column
	rgRows  int // rows copied into cols
	file    *pqenc.File
	ow      lake.ObjectWriter
	bw      *bufio.Writer
	seg     lake.Segment
	names   [2]map[string]struct{}
	lastID  int64
	written []lake.Segment
	pending int // rows merged since the last progress update
	copied  int64
	// dictionary-encoded pages among copied
	dictCopied int64
	// dictionary-encoded pages remapped into the output's dictionary
	remapped int64

	// Page cuts (blockCuts): the output's rows where every column starts
	// a page, as the lake writer cuts them, for the current block; the
	// name of the output's last group of one service or metric name and
	// its rows so far.
	cuts       []int64
	groupName  string
	groupRows  int
	groupSplit []int // scratch: the block's rows where the name changes
}

// Key column slots of colMerger.keyLeaf.
const (
	keyName = iota // service_name or metric_name
	keySeries
	keyTime
	keyTime2 // observed_timestamp of logs
)

// columnMerge merges job's inputs by columns; it returns errColumnMerge
// (wrapped) before writing anything when the inputs do not allow it.
func columnMerge(ctx context.Context, store lake.Store, job Job, opts Options) (res Result, written []lake.Segment, err error) {
	hour := catalog.PartitionStart(job.Day, job.Hour)
	if hour.IsZero() || job.Hour < 0 || job.Hour > 23 {
		return res, nil, fmt.Errorf("bad partition day %q hour %d", job.Day, job.Hour)
	}
	m := &colMerger{ctx: ctx, job: job, opts: opts, store: store, hourStart: hour.UnixNano()}
	m.hourEnd = m.hourStart + int64(time.Hour) - 1
	var wantRows int64
	for _, s := range job.Inputs {
		if s.Table != job.Table || s.Tenant != job.Tenant || s.Day != job.Day || s.Hour != job.Hour {
			return res, nil, fmt.Errorf("input segment %d (%q) is not in the job's partition", s.ID, s.Path)
		}
		m.level = max(m.level, s.Level)
		wantRows += s.Rows
		res.InputIDs = append(res.InputIDs, s.ID)
		res.BytesIn += s.Bytes
	}
	m.chunks, _ = chunkSets.Get().(*chunkSet)
	if m.chunks == nil {
		m.chunks = new(chunkSet)
	}
	defer func() {
		// Keep this job's chunks for the next one, not what this job
		// left of the previous set (see chunkSets).
		kept := &chunkSet{max: int(min(m.opts.MaxMergeRows, 1<<24)) * keptBytesPerRow}
		for _, in := range m.inputs {
			for j, ch := range in.chunk {
				if ch != nil {
					ch.Release()
				}
				kept.put(strings.Join(m.leaves[j].Path, "."), ch)
			}
			if cerr := in.f.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("close %q: %w", in.seg.Path, cerr)
			}
			in.f, in.pf, in.chunk, in.key = nil, nil, nil, nil
			colInputs.Put(in)
		}
		if m.ow != nil {
			_ = m.ow.Abort()
		}
		chunkSets.Put(kept)
		if m.cols != nil {
			columnSets.Put(&m.cols)
		}
	}()
	for i, s := range job.Inputs {
		f, err := lake.OpenObject(store, s.Path)
		if err != nil {
			return res, nil, err
		}
		in, _ := colInputs.Get().(*colInput)
		if in == nil {
			in = new(colInput)
		}
		*in = colInput{ord: i, seg: s, f: f, pf: f.Parquet(),
			name: in.name[:0], sid: in.sid[:0], t: in.t[:0], obs: in.obs[:0], pt: in.pt[:0],
			bruns: in.bruns[:0], bcum: in.bcum[:0]}
		m.inputs = append(m.inputs, in)
		if f.Table() != job.Table {
			return res, nil, fmt.Errorf("segment %q: table %q, want %q", s.Path, f.Table(), job.Table)
		}
	}
	if err := m.plan(); err != nil {
		return res, nil, err
	}
	err = m.run()
	written = m.written
	res.PagesCopied, res.DictPagesCopied, res.DictPagesRemapped = m.copied, m.dictCopied, m.remapped
	if err != nil {
		return res, written, err
	}
	for _, in := range m.inputs {
		if err := res.addInput(in.seg.Path, in.read, in.pf.NumRows()); err != nil {
			return res, written, err
		}
	}
	return res, written, res.checkRows(wantRows, written)
}

// plan builds the union schema of the inputs and maps every input's
// leaves onto it.
func (m *colMerger) plan() error {
	g := parquet.Group{}
	for _, in := range m.inputs {
		for _, f := range in.pf.Schema().Fields() {
			if prev, ok := g[f.Name()]; ok {
				if !parquet.EqualNodes(prev, f) {
					return fmt.Errorf("%w: column %q differs between inputs", errColumnMerge, f.Name())
				}
				continue
			}
			g[f.Name()] = f
		}
	}
	// Bounded schema: the union of the inputs' attribute columns may pass
	// the cap that each input keeps; the row merge re-applies it.
	attrCols := 0
	for name := range g {
		if lake.IsAttributeColumn(name) {
			attrCols++
		}
	}
	if limit := cmp.Or(m.opts.MaxAttributeColumns, lake.DefaultMaxAttributeColumns); attrCols > limit {
		return fmt.Errorf("%w: %d attribute columns, past the cap of %d", errColumnMerge, attrCols, limit)
	}
	m.schema = parquet.NewSchema(m.job.Table, g)
	m.schemaHash = catalog.ParquetSchemaHash(m.schema)
	footer, err := pqenc.Footer(m.schema, lake.FileOptions(m.job.Table)...)
	if err != nil {
		return err
	}
	m.footer = footer

	paths := m.schema.Columns()
	m.leaves = make([]pqenc.Leaf, len(paths))
	m.keyLeaf = [4]int{-1, -1, -1, -1}
	m.nameLeaf = [2]int{-1, -1}
	for j, p := range paths {
		leaf, _ := m.schema.Lookup(p...)
		li, err := pqenc.NewLeaf(leaf)
		if err != nil {
			return fmt.Errorf("%w: %w", errColumnMerge, err)
		}
		li.Path = p // Lookup's leaf path is its last element only
		if li.Dict {
			li.MaxDictBytes = lake.MaxDictBytes
		}
		if m.job.Table == lake.TableTraces && len(p) == 1 && p[0] == lake.BloomColumn {
			li.Bloom, li.BloomBitsPerValue = true, lake.BloomBitsPerValue
		}
		m.leaves[j] = li
		if len(p) != 1 {
			continue
		}
		switch col := p[0]; {
		case col == format.ColServiceName:
			m.nameLeaf[0] = j
			if m.job.Table != lake.TableMetrics {
				m.keyLeaf[keyName] = j
			}
		case col == format.ColMetricName && m.job.Table == lake.TableMetrics:
			m.nameLeaf[1] = j
			m.keyLeaf[keyName] = j
		case col == format.ColSeriesID && m.job.Table == lake.TableMetrics:
			m.keyLeaf[keySeries] = j
		case col == format.ColTimestamp && m.job.Table != lake.TableTraces,
			col == format.ColStartTimestamp && m.job.Table == lake.TableTraces,
			col == format.ColTime && m.job.Table == lake.TableIOEvents:
			m.keyLeaf[keyTime] = j
		case col == format.ColObservedTimestamp && m.job.Table == lake.TableLogs:
			m.keyLeaf[keyTime2] = j
		}
	}
	// io_events rows have no service: they sort by time alone.
	if (m.keyLeaf[keyName] < 0 && m.job.Table != lake.TableIOEvents) || m.keyLeaf[keyTime] < 0 {
		return fmt.Errorf("%w: the inputs lack the sort key columns", errColumnMerge)
	}
	for _, in := range m.inputs {
		in.leaf = make([]int, len(paths))
		in.chunk = make([]*pqenc.Chunk, len(paths))
		s := in.pf.Schema()
		for j, p := range paths {
			in.leaf[j] = -1
			leaf, ok := s.Lookup(p...)
			if !ok {
				if m.leaves[j].MaxDef == 0 {
					return fmt.Errorf("%w: %q lacks required column %s", errColumnMerge, in.seg.Path, strings.Join(p, "."))
				}
				continue
			}
			if leaf.MaxDefinitionLevel != int(m.leaves[j].MaxDef) || leaf.MaxRepetitionLevel != int(m.leaves[j].MaxRep) {
				return fmt.Errorf("%w: column %s of %q has other levels", errColumnMerge, strings.Join(p, "."), in.seg.Path)
			}
			in.leaf[j] = leaf.ColumnIndex
			in.chunk[j] = m.chunks.get(strings.Join(p, "."))
		}
		for _, k := range m.keyLeaf {
			if k >= 0 && in.leaf[k] < 0 && k != m.keyLeaf[keyTime2] {
				return fmt.Errorf("%w: %q lacks a sort key column", errColumnMerge, in.seg.Path)
			}
		}
	}
	if cols, ok := columnSets.Get().(*[]pqenc.Column); ok {
		m.cols = (*cols)[:cap(*cols)] // the last job may have had fewer columns, or more
	}
	if len(m.cols) < len(paths) {
		m.cols = append(m.cols, make([]pqenc.Column, len(paths)-len(m.cols))...)
	}
	m.cols = m.cols[:len(paths)]
	return nil
}

// chunkSets keeps the decoded chunks of the last job for the next one, by
// column, so that a column's buffers come back sized for it: a job's
// inputs hold a row group of every column decoded, and allocating them
// afresh for each job was a tenth to a fifth of the merge. Only the last
// job's are kept: buffers only grow, and a set that gathered every job's
// chunks held every table's largest buffers for good (9 GB of RSS
// compacting a 239 MB lake).
var chunkSets sync.Pool

type chunkSet struct {
	byCol map[string][]*pqenc.Chunk
	bytes int // buffer bytes held in byCol
	max   int // bound of bytes
}

// columnSets and colInputs keep the output columns' page buffers and the
// inputs' sort-key buffers from one job to the next, as chunkSets does
// for decoded chunks; both are bounded by one row group per column or
// input.
var columnSets, colInputs sync.Pool

// SoftMemoryLimit is a soft memory limit (debug.SetMemoryLimit) for a
// process that compacts with opts and does little else: what a job's
// inputs take at most, as kept between jobs, plus room for the decoded
// pages, the output row group and the rest of the process. Inputs are
// decoded a page at a time, so a job holds about its inputs' compressed
// row groups and sort keys, not their decoded rows: 448 MiB by default.
func SoftMemoryLimit(opts Options) int64 {
	opts = opts.withDefaults()
	return min(opts.MaxMergeRows, 1<<24)*keptBytesPerRow + 320<<20
}

// keptBytesPerRow bounds the buffers kept between jobs by the job size
// (MaxMergeRows): an input row of the corpus takes 60-250 bytes compressed
// and about 40 decoded in the sort keys, so a job of DefaultMaxMergeRows
// keeps at most 128 MiB. (Before inputs were decoded a page at a time,
// decoded rows took 0.3-1.3 KB, and 2 KiB per row were kept: 1 GiB.)
const keptBytesPerRow = 256

func (s *chunkSet) get(col string) *pqenc.Chunk {
	if l := s.byCol[col]; len(l) > 0 {
		ch := l[len(l)-1]
		s.byCol[col] = l[:len(l)-1]
		s.bytes -= ch.Cap()
		return ch
	}
	return new(pqenc.Chunk)
}

func (s *chunkSet) put(col string, ch *pqenc.Chunk) {
	if ch == nil || s.bytes+ch.Cap() > s.max {
		return // the garbage collector takes it
	}
	if s.byCol == nil {
		s.byCol = make(map[string][]*pqenc.Chunk)
	}
	s.byCol[col] = append(s.byCol[col], ch)
	s.bytes += ch.Cap()
}

// inHour reports whether t is a time of the job's hour.
func (m *colMerger) inHour(t int64) bool { return t >= m.hourStart && t <= m.hourEnd }

// load reads in's next non-empty row group; false at the end of in.
func (m *colMerger) load(in *colInput) (bool, error) {
	rgs := in.pf.RowGroups()
	for in.rg < len(rgs) {
		rg := rgs[in.rg]
		in.rg++
		n := rg.NumRows()
		if n == 0 {
			continue
		}
		chunks := rg.ColumnChunks()
		meta := in.pf.Metadata().RowGroups[in.rg-1].Columns
		for j, l := range in.leaf {
			if l < 0 {
				continue
			}
			if l >= len(chunks) {
				return false, fmt.Errorf("read %q: row group %d has %d columns", in.seg.Path, in.rg-1, len(chunks))
			}
			// Reading a row group may take long on a slow store: a run
			// whose lease is lost stops here.
			if err := m.ctx.Err(); err != nil {
				return false, err
			}
			// Chunk.Read checks the pages (format.Pages) before
			// parquet-go decodes them; the hint, the footer's word only
			// (checked against the pages after it is used), is capped at
			// what one page may hold. A cap by the compression ratio
			// (64x) grew buffers on repetitive inputs: +25% allocation.
			ch := in.chunk[j]
			var hint int64
			if l < len(meta) {
				hint = min(meta[l].MetaData.TotalUncompressedSize, format.MaxPageBytes)
			}
			if err := ch.Read(chunks[l], int(m.leaves[j].MaxDef), int(m.leaves[j].MaxRep), hint); err != nil {
				return false, fmt.Errorf("read %q: row group %d column %s: %w", in.seg.Path, in.rg-1, strings.Join(m.leaves[j].Path, "."), err)
			}
			if int64(ch.Rows()) != n {
				return false, fmt.Errorf("read %q: row group %d column %s: %d rows, want %d", in.seg.Path, in.rg-1,
					strings.Join(m.leaves[j].Path, "."), ch.Rows(), n)
			}
		}
		in.rows, in.row = int(n), 0
		in.read += n
		m.keys(in)
		return true, nil
	}
	return false, nil
}

// keys computes the sort keys and partition times of in's row group.
// A row's partition time is its own time when in the hour, else (logs)
// its observed time when in the hour, else the hour's last nanosecond:
// what the ingest writer chose, up to its clock, which is not recorded.
func (m *colMerger) keys(in *colInput) {
	in.name = in.name[:0]
	if k := m.keyLeaf[keyName]; k >= 0 {
		in.name = in.chunk[k].Strings(in.name)
	}
	in.t = in.chunk[m.keyLeaf[keyTime]].Int64s(in.t[:0])
	in.sid, in.obs = in.sid[:0], in.obs[:0]
	if k := m.keyLeaf[keySeries]; k >= 0 {
		in.sid = in.chunk[k].Int64s(in.sid)
	}
	if k := m.keyLeaf[keyTime2]; k >= 0 && in.leaf[k] >= 0 {
		in.obs = in.chunk[k].Int64s(in.obs)
	}
	in.pt = in.pt[:0]
	for i, t := range in.t {
		if !m.inHour(t) {
			if len(in.obs) > 0 && m.inHour(in.obs[i]) {
				t = in.obs[i]
			} else {
				t = m.hourEnd
			}
		}
		in.pt = append(in.pt, t)
	}
	// Metric points sort by their own time, logs and spans by partition
	// time (lake.SortKey).
	in.key = in.pt
	if m.job.Table == lake.TableMetrics {
		in.key = in.t
	}
}

// before reports whether row i of a merges before row j of b.
func before(a *colInput, i int, b *colInput, j int) bool {
	if len(a.name) > 0 && a.name[i] != b.name[j] {
		return a.name[i] < b.name[j]
	}
	if len(a.sid) > 0 && a.sid[i] != b.sid[j] {
		return uint64(a.sid[i]) < uint64(b.sid[j])
	}
	if a.key[i] != b.key[j] {
		return a.key[i] < b.key[j]
	}
	return a.ord < b.ord
}

// inputHeap orders inputs by their next row.
type inputHeap []*colInput

func (h inputHeap) Len() int           { return len(h) }
func (h inputHeap) Less(i, j int) bool { return before(h[i], h[i].row, h[j], h[j].row) }
func (h inputHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *inputHeap) Push(x any)        { *h = append(*h, x.(*colInput)) }
func (h *inputHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// runLen is how many rows of a, from its next one and at most limit, merge
// before b's next row (at least one: a's next row is the heap's least).
// Rows of an input are sorted, so it gallops, then bisects.
func runLen(a, b *colInput, limit int) int {
	if b == nil {
		return limit
	}
	lo, step := 1, 1 // rows [a.row, a.row+lo) merge before b
	for lo+step <= limit && before(a, a.row+lo+step-1, b, b.row) {
		lo += step
		step *= 2
	}
	hi := min(lo+step, limit+1) // a.row+hi-1 does not merge before b, or is past limit
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if before(a, a.row+mid-1, b, b.row) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

func (m *colMerger) run() error {
	ctx := m.ctx
	for _, in := range m.inputs {
		ok, err := m.load(in)
		if err != nil {
			return err
		}
		if ok {
			m.heap = append(m.heap, in)
		} else {
			m.opts.Progress.Add(1, in.seg.Bytes, 0)
		}
	}
	heap.Init(&m.heap)
	rgMax := m.opts.RowGroupRows
	if rgMax <= 0 {
		rgMax = lake.DefaultRowGroupRows
	}
	for len(m.heap) > 0 {
		a := m.heap[0]
		var b *colInput
		if len(m.heap) > 1 {
			b = m.heap[1]
			if len(m.heap) > 2 && m.heap.Less(2, 1) {
				b = m.heap[2]
			}
		}
		limit := min(a.rows-a.row, rgMax-m.rgRows-m.block)
		n := runLen(a, b, limit)
		if n == limit && limit < a.rows-a.row && 2*(m.rgRows+m.block) >= rgMax && runLen(a, b, limit+1) > limit {
			// a's run goes on past the row group's end: the row group
			// (half full at least) ends before it, so that the run's
			// pages are copied whole into the next one rather than cut
			// in two and copied row by row (a fifth of logs/flushes).
			if err := m.closeRowGroup(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			continue
		}
		m.take(a, n)
		switch {
		case a.row == a.rows:
			// a's chunks are about to be replaced: copy what was merged.
			if err := m.copyBlock(); err != nil {
				return err
			}
			ok, err := m.load(a)
			if err != nil {
				return err
			}
			if ok {
				heap.Fix(&m.heap, 0)
			} else {
				heap.Pop(&m.heap)
				m.opts.Progress.Add(1, a.seg.Bytes, 0)
			}
		default:
			heap.Fix(&m.heap, 0)
		}
		if m.rgRows+m.block >= rgMax {
			if err := m.closeRowGroup(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	if err := m.closeRowGroup(); err != nil {
		return err
	}
	m.opts.Progress.Add(0, 0, int64(m.pending))
	return m.endFile()
}

// take merges the next n rows of in.
func (m *colMerger) take(in *colInput, n int) {
	if k := len(m.runs) - 1; k >= 0 && m.runs[k].in == in {
		m.runs[k].n += n
	} else {
		m.runs = append(m.runs, run{in: in, n: n, from: in.row, out: m.block})
	}
	s := &m.seg
	for _, t := range in.pt[in.row : in.row+n] {
		if s.Rows == 0 {
			s.MinTime, s.MaxTime = t, t
		}
		s.Rows++
		s.MinTime, s.MaxTime = min(s.MinTime, t), max(s.MaxTime, t)
	}
	in.row += n
	m.block += n
}

// copyBlock copies the merged runs into the output columns, column by
// column.
func (m *colMerger) copyBlock() error {
	if m.block == 0 {
		return nil
	}
	if m.rgRows == 0 {
		for j := range m.cols {
			m.cols[j].Reset(&m.leaves[j], lake.Codec())
			// Dictionary pages are copied verbatim where the output
			// chunk's dictionary can take their input's, except into the
			// columns whose dictionaries name the file's services and
			// metrics (endRowGroup): a taken dictionary may hold values
			// the chunk's rows do not.
			m.cols[j].AllowDictPages(verbatimPages && j != m.nameLeaf[0] && j != m.nameLeaf[1])
		}
	}
	m.blockCuts()
	for j := range m.cols {
		m.cols[j].SetCuts(m.cuts)
	}
	m.blockInputs = m.blockInputs[:0]
	for k, r := range m.runs {
		if r.in.brows == 0 {
			m.blockInputs = append(m.blockInputs, r.in)
		}
		r.in.bruns = append(r.in.bruns, int32(k))
		r.in.bcum = append(r.in.bcum, int32(r.in.brows))
		r.in.brows += r.n
	}
	for j := range m.cols {
		if err := m.copyColumn(j); err != nil {
			return err
		}
	}
	for _, in := range m.blockInputs {
		in.bruns, in.bcum, in.brows = in.bruns[:0], in.bcum[:0], 0
	}
	m.rgRows += m.block
	m.pending += m.block
	if err := m.ctx.Err(); err != nil {
		return err
	}
	m.runs, m.block = m.runs[:0], 0
	if m.pending >= progressRows {
		m.opts.Progress.Add(0, 0, int64(m.pending))
		m.pending = 0
	}
	return nil
}

// pageCutRows is the least number of rows of one service that start
// pages of their own in the output of logs and spans, as the lake writer
// does (lake.PageCutRows): compacted files compact again by whole pages.
var pageCutRows = lake.PageCutRows

// blockCuts sets m.cuts to the output chunk's rows in the block where
// every column starts a page: the start of each group of one service
// whose rows in the block are pageCutRows or more, and
// the end of each group of that many rows in the output so far. A group
// that started in an earlier block, with fewer rows there, gets no cut at
// its start (its rows there are written); the lake writer, which sees the
// whole file at once, cuts both ends (lake's pageCuts).
func (m *colMerger) blockCuts() {
	m.cuts = m.cuts[:0]
	if m.keyLeaf[keyName] < 0 || m.job.Table == lake.TableMetrics {
		return // metrics files are not cut (lake.PageCutRows)
	}
	// The block's rows where a group starts; runs of one input are
	// sorted, so a run whose last name is the current one holds no more.
	split := m.groupSplit[:0]
	name := m.groupName
	fresh := m.rgRows == 0 // the block's first row starts a group
	for _, r := range m.runs {
		if len(r.in.name) < r.from+r.n {
			m.groupName, m.groupRows = "", 0
			return // an input without names: no cuts
		}
		names := r.in.name[r.from : r.from+r.n]
		for i := 0; i < len(names); {
			if fresh || names[i] != name {
				split = append(split, r.out+i)
				name, fresh = names[i], false
			}
			if names[len(names)-1] == name {
				break
			}
			for i < len(names) && names[i] == name {
				i++
			}
		}
	}
	m.groupSplit = split
	carried := m.groupRows
	if m.rgRows == 0 {
		carried = 0
	}
	bounds := append(split, m.block)
	if bounds[0] > 0 {
		// The block's first rows continue the output's last group.
		carried += bounds[0]
		if bounds[0] < m.block && carried >= pageCutRows {
			m.addCut(bounds[0])
		}
	} else if m.rgRows > 0 && carried >= pageCutRows {
		m.addCut(0) // the last group ended with the last block
	}
	rows := carried
	for k := 0; k+1 < len(bounds); k++ {
		s, e := bounds[k], bounds[k+1]
		if e-s >= pageCutRows {
			if s > 0 || m.rgRows > 0 {
				m.addCut(s)
			}
			if e < m.block {
				m.addCut(e)
			}
		}
		rows = e - s
	}
	m.groupName, m.groupRows = strings.Clone(name), rows
}

// addCut adds the block's row out to m.cuts, once.
func (m *colMerger) addCut(out int) {
	x := int64(m.rgRows + out)
	if k := len(m.cuts); k == 0 || m.cuts[k-1] != x {
		m.cuts = append(m.cuts, x)
	}
}

// copyColumn copies the block's rows of output column j. Rows of sparse
// columns (attributes of some series or services only) are mostly null,
// and sorted rows put the others together: only the runs between the
// block's first and last non-null row are looked at one by one, the null
// rows around them are added and skipped in one step. A block of long
// runs (inputs that do not interleave) instead copies the pages its runs
// cover whole as they are, when the column allows it, without looking at
// (or decoding) their rows.
func (m *colMerger) copyColumn(j int) error {
	c := &m.cols[j]
	if verbatimPages && m.block >= longRuns*len(m.runs) && m.pagesCopyable(j) {
		m.copyRunsPages(j)
		return m.chunkErr(j)
	}
	lo, hi := m.block, -1 // output rows of the first and last non-null row
	for _, in := range m.blockInputs {
		if in.leaf[j] < 0 {
			continue
		}
		f, l := in.chunk[j].PresentSpan(in.brows)
		if f < 0 {
			continue
		}
		lo = min(lo, in.outRow(m.runs, in.chunk[j].Row()+f))
		hi = max(hi, in.outRow(m.runs, in.chunk[j].Row()+l))
	}
	if hi < 0 {
		c.Null(m.block)
		for _, in := range m.blockInputs {
			if in.leaf[j] >= 0 {
				in.chunk[j].SkipNullRows(in.brows)
			}
		}
		return m.chunkErr(j)
	}
	k0 := m.runAt(lo)
	k1 := m.runAt(hi)
	if out := m.runs[k0].out; out > 0 {
		c.Null(out)
		for _, in := range m.blockInputs {
			if in.leaf[j] >= 0 {
				in.chunk[j].SkipNullRows(in.rowsBefore(m.runs, out))
			}
		}
	}
	// Null rows of successive runs add up to one call.
	nulls := 0
	optional := m.leaves[j].MaxDef > 0
	flat := m.leaves[j].MaxRep == 0
	for _, r := range m.runs[k0 : k1+1] {
		ch := r.in.chunk[j]
		if r.n <= 2 && flat && ch != nil {
			c.CopyFew(ch, r.n, &nulls) // the runs of interleaved inputs
			continue
		}
		if ch == nil || optional && ch.SkipNulls(r.n) {
			nulls += r.n
			continue
		}
		if nulls > 0 {
			c.Null(nulls)
			nulls = 0
		}
		if verbatimPages {
			c.CopyRowsPages(ch, r.n)
		} else {
			c.CopyRows(ch, r.n)
		}
	}
	if end := m.runs[k1].out + m.runs[k1].n; end < m.block {
		nulls += m.block - end
		for _, in := range m.blockInputs {
			if in.leaf[j] >= 0 {
				in.chunk[j].SkipNullRows(in.brows - in.rowsBefore(m.runs, end))
			}
		}
	}
	if nulls > 0 {
		c.Null(nulls)
	}
	return m.chunkErr(j)
}

// longRuns is the mean run length from which a block copies pages
// verbatim (copyRunsPages) rather than looking at null stretches first.
const longRuns = 64

// pagesCopyable reports whether output column j may take some pages of
// the block's inputs as they are.
func (m *colMerger) pagesCopyable(j int) bool {
	for _, in := range m.blockInputs {
		if ch := in.chunk[j]; ch != nil && m.cols[j].CanCopyPages(ch) {
			return true
		}
	}
	return false
}

// copyRunsPages copies the block's runs of column j in order, the pages
// they cover whole as they are; inputs without the column add nulls.
func (m *colMerger) copyRunsPages(j int) {
	c := &m.cols[j]
	nulls := 0
	for _, r := range m.runs {
		ch := r.in.chunk[j]
		if ch == nil {
			nulls += r.n
			continue
		}
		if nulls > 0 {
			c.Null(nulls)
			nulls = 0
		}
		c.CopyRowsPages(ch, r.n)
	}
	if nulls > 0 {
		c.Null(nulls)
	}
}

// chunkErr is the error of a block input's chunk of column j that failed
// to decode.
func (m *colMerger) chunkErr(j int) error {
	for _, in := range m.blockInputs {
		if ch := in.chunk[j]; ch != nil && ch.Err() != nil {
			return fmt.Errorf("read %q: column %s: %w", in.seg.Path, strings.Join(m.leaves[j].Path, "."), ch.Err())
		}
	}
	return nil
}

// cmpSpan orders a span [start, start+n) against x: -1 before it, 1
// after, 0 holding it.
func cmpSpan(start, n, x int) int {
	switch {
	case start+n <= x:
		return -1
	case start > x:
		return 1
	}
	return 0
}

// runAt is the index of the block's run holding output row out.
func (m *colMerger) runAt(out int) int {
	k, _ := slices.BinarySearchFunc(m.runs, out, func(r run, out int) int { return cmpSpan(r.out, r.n, out) })
	return k
}

// outRow is the block's output row of in's row, one of its block rows.
func (in *colInput) outRow(runs []run, row int) int {
	k, _ := slices.BinarySearchFunc(in.bruns, row, func(k int32, row int) int { return cmpSpan(runs[k].from, runs[k].n, row) })
	r := &runs[in.bruns[k]]
	return r.out + row - r.from
}

// rowsBefore is how many of in's block rows come before output row out.
func (in *colInput) rowsBefore(runs []run, out int) int {
	k, _ := slices.BinarySearchFunc(in.bruns, out, func(k int32, out int) int { return cmpSpan(runs[k].out, runs[k].n, out) })
	if k == len(in.bruns) {
		return in.brows
	}
	return int(in.bcum[k]) + max(0, out-runs[in.bruns[k]].out)
}

// closeRowGroup copies the block merged so far and ends the row group.
func (m *colMerger) closeRowGroup() error {
	if err := m.copyBlock(); err != nil {
		return err
	}
	return m.endRowGroup()
}

// endRowGroup writes the output row group, starting a file if needed and
// ending it once it reaches the target size.
func (m *colMerger) endRowGroup() error {
	if m.rgRows == 0 {
		return nil
	}
	if m.file == nil {
		if err := m.startFile(); err != nil {
			return err
		}
	}
	m.file.BeginRowGroup(m.rgRows)
	for j := range m.cols {
		c := &m.cols[j]
		if err := m.file.WriteChunk(c); err != nil {
			return fmt.Errorf("write %q: column %s: %w", m.seg.Path, strings.Join(m.leaves[j].Path, "."), err)
		}
		m.copied += int64(c.PagesCopied())
		m.dictCopied += int64(c.DictPagesCopied())
		m.remapped += int64(c.DictPagesRemapped())
		for k, l := range m.nameLeaf {
			if l != j || m.names[k] == nil {
				continue
			}
			if !c.DictValues(func(v []byte) {
				if _, ok := m.names[k][string(v)]; !ok {
					m.names[k][string(v)] = struct{}{}
				}
			}) || len(m.names[k]) > lake.MaxSegmentNames {
				m.names[k] = nil // too many to list
			}
		}
	}
	m.rgRows = 0
	if m.file.Size() >= m.opts.TargetBytes {
		return m.endFile()
	}
	return nil
}

func (m *colMerger) startFile() error {
	// See invariant 7: file ids carry the hour's last nanosecond.
	idTime := max(m.hourEnd, m.lastID+1)
	m.lastID = idTime
	s := &m.seg
	s.Table, s.Tenant, s.Day, s.Hour = m.job.Table, m.job.Tenant, m.job.Day, m.job.Hour
	s.Level = m.level + 1
	s.Created = time.Unix(0, m.hourEnd).UTC()
	s.SchemaHash = m.schemaHash
	s.Path = catalog.PartitionDir(s.Table, s.Tenant, s.Day, s.Hour) + "/" + lake.NewFileID(time.Unix(0, idTime)) + ".parquet"
	ow, err := m.store.Create(s.Path)
	if err != nil {
		return fmt.Errorf("write %q: %w", s.Path, err)
	}
	m.ow = ow
	if m.bw == nil {
		m.bw = bufio.NewWriterSize(ow, 256<<10)
	} else {
		m.bw.Reset(ow)
	}
	m.file = pqenc.NewFile(m.bw, m.leaves, lake.Codec())
	m.names = [2]map[string]struct{}{}
	for k, l := range m.nameLeaf {
		if l >= 0 {
			m.names[k] = make(map[string]struct{})
		}
	}
	return nil
}

// endFile writes the footer of the current file and commits it.
func (m *colMerger) endFile() error {
	if m.file == nil {
		return nil
	}
	s := &m.seg
	s.Services = sortedNames(m.names[0])
	if m.job.Table == lake.TableMetrics {
		s.MetricNames = sortedNames(m.names[1])
	}
	footer := *m.footer
	footer.KeyValueMetadata = append(s.FooterMetadata(),
		pqformat.KeyValue{Key: catalog.MetaReplaces, Value: catalog.Lineage(m.job.Inputs)})
	if err := m.file.Close(&footer); err != nil {
		return fmt.Errorf("write %q: %w", s.Path, err)
	}
	if err := m.bw.Flush(); err != nil {
		return fmt.Errorf("write %q: %w", s.Path, err)
	}
	s.Bytes = m.file.Size()
	ow := m.ow
	m.ow, m.file = nil, nil
	if err := ow.Commit(); err != nil {
		return fmt.Errorf("write %q: %w", s.Path, err)
	}
	m.written = append(m.written, *s)
	m.seg = lake.Segment{}
	return nil
}

func sortedNames(set map[string]struct{}) []string {
	if set == nil {
		return nil
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
