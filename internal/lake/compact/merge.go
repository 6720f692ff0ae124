package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/signal"
)

// progressRows is how many merged rows pass between progress updates and
// cancellation checks.
const progressRows = 16 << 10

// Short runs are staged: each input copies its short runs into a batch of
// its own, and the staged batches go to the writer, in input order, at
// least every roundRows rows and before every long run. Handing short runs
// to the writer directly would rebind its copier to another source for
// every run, copying the run's resources and scopes again each time (the
// writer's sort restores merge order; ties keep input order, see
// invariant 6). A run of directRunRows or more goes to the writer straight
// from the decoded row group, with no intermediate copy.
const (
	roundRows     = 16 << 10
	directRunRows = 128
)

// cursor is one input's current row group and its position in it, with
// the sort key of the current row cached for the heap.
type cursor struct {
	f    *lake.File
	ord  int // input order, the tie-break
	row  int
	n    int
	rows int64 // rows read so far

	logs    *signal.Logs
	metrics *signal.Metrics
	spans   *signal.Spans
	// svc is the service name of each resource of the current row group
	// (logs and spans), aliasing the batch arena: looking it up per row
	// scanned the resource's attributes every time.
	svc []string
	// out stages this input's short runs; see directRunRows.
	outLogs    *signal.Logs
	outMetrics *signal.Metrics
	outSpans   *signal.Spans

	// Sort key of the current row: service or metric name (aliasing the
	// batch arena, valid until the next refill), series id, time.
	key string
	sid uint64
	t   int64
}

// merger runs the k-way merge. Merged rows go to the writer in runs: rows
// [runStart, run.row) of one input's current row group, taken while that
// input stayed the smallest. Rows of successive flushes interleave in long
// runs, so the writer copies them straight from the decoded row group,
// with no intermediate batch.
type merger struct {
	table     string
	tenant    string
	now, skew int64 // the output writer's clock and skew, for partition times
	heap      []*cursor
	w         *lake.Writer
	pending   int // rows merged since the last progress update
	all       []*cursor
	staged    int // rows in the inputs' out batches

	run      *cursor
	runStart int
}

func validTime(t, now, skew int64) bool { return t > 0 && t <= now+skew }

// fill makes c.row a valid row, reading the next row group when the current
// one is used up; false at the end of the input.
func (m *merger) fill(c *cursor) (bool, error) {
	for c.row >= c.n {
		var err error
		switch m.table {
		case lake.TableLogs:
			c.logs.Reset()
			err = c.f.NextLogs(c.logs)
			c.n = c.logs.Len()
		case lake.TableMetrics:
			c.metrics.Reset()
			err = c.f.NextMetrics(c.metrics)
			c.n = c.metrics.Len()
		case lake.TableTraces:
			c.spans.Reset()
			err = c.f.NextSpans(c.spans)
			c.n = c.spans.Len()
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		c.row = 0
		c.rows += int64(c.n)
		switch m.table {
		case lake.TableLogs:
			c.svc = serviceNames(c.svc[:0], &c.logs.Common)
		case lake.TableTraces:
			c.svc = serviceNames(c.svc[:0], &c.spans.Common)
		}
	}
	i := c.row
	switch m.table {
	case lake.TableLogs:
		l := c.logs
		c.key = c.svc[l.Resource[i]]
		c.t = l.Time[i]
		if !validTime(c.t, m.now, m.skew) {
			if c.t = l.ObservedTime[i]; !validTime(c.t, m.now, m.skew) {
				c.t = m.now
			}
		}
	case lake.TableMetrics:
		mt := c.metrics
		c.key = mt.String(mt.Descs[mt.Desc[i]].Name)
		c.sid = mt.SeriesID[i]
		c.t = mt.Time[i]
	case lake.TableTraces:
		s := c.spans
		c.key = c.svc[s.Resource[i]]
		if c.t = s.StartTime[i]; !validTime(c.t, m.now, m.skew) {
			c.t = m.now
		}
	}
	return true, nil
}

func less(a, b *cursor) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	if a.sid != b.sid {
		return a.sid < b.sid
	}
	if a.t != b.t {
		return a.t < b.t
	}
	return a.ord < b.ord
}

func (m *merger) up(i int) {
	h := m.heap
	for i > 0 {
		p := (i - 1) / 2
		if !less(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (m *merger) down(i int) {
	h := m.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && less(h[r], h[l]) {
			c = r
		}
		if !less(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

func serviceNames(dst []string, c *signal.Common) []string {
	for r := range c.Resources {
		dst = append(dst, c.ServiceName(uint32(r)))
	}
	return dst
}

// flushRun hands the current run to the writer, or stages it when short.
func (m *merger) flushRun() error {
	c := m.run
	m.run = nil
	if c == nil || c.row == m.runStart {
		return nil
	}
	from, to := m.runStart, c.row
	m.pending += to - from
	if to-from < directRunRows {
		switch m.table {
		case lake.TableLogs:
			for i := from; i < to; i++ {
				c.outLogs.CopyFrom(c.logs, i)
			}
		case lake.TableMetrics:
			for i := from; i < to; i++ {
				c.outMetrics.CopyFrom(c.metrics, i)
			}
		case lake.TableTraces:
			for i := from; i < to; i++ {
				c.outSpans.CopyFrom(c.spans, i)
			}
		}
		if m.staged += to - from; m.staged >= roundRows {
			return m.flushStaged()
		}
		return nil
	}
	// Staged rows all precede the run in merge order.
	if err := m.flushStaged(); err != nil {
		return err
	}
	switch m.table {
	case lake.TableLogs:
		return m.w.WriteLogsRows(m.tenant, c.logs, from, to)
	case lake.TableMetrics:
		return m.w.WriteMetricsRows(m.tenant, c.metrics, from, to)
	case lake.TableTraces:
		return m.w.WriteSpansRows(m.tenant, c.spans, from, to)
	}
	return nil
}

// flushStaged hands every input's staged batch to the writer, in input
// order, so that ties keep input order through the writer's stable sort.
func (m *merger) flushStaged() error {
	if m.staged == 0 {
		return nil
	}
	m.staged = 0
	for _, c := range m.all {
		var err error
		switch m.table {
		case lake.TableLogs:
			if c.outLogs.Len() > 0 {
				err = m.w.WriteLogs(m.tenant, c.outLogs)
			}
			c.outLogs.Reset()
		case lake.TableMetrics:
			if c.outMetrics.Len() > 0 {
				err = m.w.WriteMetrics(m.tenant, c.outMetrics)
			}
			c.outMetrics.Reset()
		case lake.TableTraces:
			if c.outSpans.Len() > 0 {
				err = m.w.WriteSpans(m.tenant, c.outSpans)
			}
			c.outSpans.Reset()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// merge merges the inputs of job into new files: by columns
// (columnMerge), or, when the inputs' columns do not allow that, by rows.
// It returns the files it committed, also on error, so the caller can
// remove them; it never touches the catalog.
func merge(ctx context.Context, store lake.Store, job Job, opts Options) (Result, []lake.Segment, error) {
	res, written, err := columnMerge(ctx, store, job, opts)
	if errors.Is(err, errColumnMerge) && job.Table == lake.TableIOEvents {
		// The row merge decodes logs, metrics and spans only.
		return res, written, fmt.Errorf("io_events are merged by columns only: %w", err)
	}
	if errors.Is(err, errColumnMerge) {
		opts.Logger.Warn("compaction falls back to the row merge", "partition", job.Dir(), "reason", err)
		return rowMerge(ctx, store, job, opts)
	}
	return res, written, err
}

// rowMerge streams the inputs of job through a k-way merge of decoded
// rows into a lake writer; see merge.
func rowMerge(ctx context.Context, store lake.Store, job Job, opts Options) (res Result, written []lake.Segment, err error) {
	hourStart, perr := time.Parse("2006-01-02", job.Day)
	if perr != nil || job.Hour < 0 || job.Hour > 23 {
		return res, nil, fmt.Errorf("bad partition day %q hour %d", job.Day, job.Hour)
	}
	hourStart = hourStart.Add(time.Duration(job.Hour) * time.Hour)
	// See invariant 7: the clock is pinned inside the hour.
	clock := hourStart.Add(time.Hour - 1)

	level := 0
	var wantRows int64
	for _, s := range job.Inputs {
		if s.Table != job.Table || s.Tenant != job.Tenant || s.Day != job.Day || s.Hour != job.Hour {
			return res, nil, fmt.Errorf("input segment %d (%q) is not in the job's partition", s.ID, s.Path)
		}
		level = max(level, s.Level)
		wantRows += s.Rows
		res.InputIDs = append(res.InputIDs, s.ID)
		res.BytesIn += s.Bytes
	}

	m := &merger{table: job.Table, tenant: job.Tenant, now: clock.UnixNano(), skew: int64(opts.MaxFutureSkew)}
	cursors := make([]*cursor, 0, len(job.Inputs))
	defer func() {
		for _, c := range cursors {
			if cerr := c.f.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("close %q: %w", job.Inputs[c.ord].Path, cerr)
			}
		}
	}()
	for i, s := range job.Inputs {
		f, err := lake.OpenObject(store, s.Path)
		if err != nil {
			return res, nil, err
		}
		c := &cursor{f: f, ord: i}
		cursors = append(cursors, c)
		if f.Table() != job.Table {
			return res, nil, fmt.Errorf("segment %q: table %q, want %q", s.Path, f.Table(), job.Table)
		}
		switch job.Table {
		case lake.TableLogs:
			c.logs, c.outLogs = new(signal.Logs), new(signal.Logs)
		case lake.TableMetrics:
			c.metrics, c.outMetrics = new(signal.Metrics), new(signal.Metrics)
		case lake.TableTraces:
			c.spans, c.outSpans = new(signal.Spans), new(signal.Spans)
		default:
			return res, nil, fmt.Errorf("unknown table %q", job.Table)
		}
	}

	m.all = cursors
	m.w, err = lake.NewWriter(lake.Options{
		Store:            store,
		TargetFileBytes:  opts.TargetBytes,
		MaxBufferedBytes: opts.MaxBufferedBytes,
		RowGroupRows:     opts.RowGroupRows,
		MaxFutureSkew:    opts.MaxFutureSkew,
		Now:              func() time.Time { return clock },
		Level:            level + 1,

		MaxAttributeColumns: opts.MaxAttributeColumns,
		Replaces:            catalog.Lineage(job.Inputs),
	}, func(s lake.Segment) error {
		written = append(written, s)
		return nil
	})
	if err != nil {
		return res, nil, err
	}

	for _, c := range cursors {
		ok, err := m.fill(c)
		if err != nil {
			return res, written, fmt.Errorf("read %q: %w", job.Inputs[c.ord].Path, err)
		}
		if ok {
			m.heap = append(m.heap, c)
			m.up(len(m.heap) - 1)
		} else {
			opts.Progress.Add(1, job.Inputs[c.ord].Bytes, 0)
		}
	}
	for len(m.heap) > 0 {
		c := m.heap[0]
		if c != m.run {
			if err := m.flushRun(); err != nil {
				return res, written, err
			}
			m.run, m.runStart = c, c.row
		}
		c.row++
		if c.row >= c.n {
			// The run aliases the row group fill is about to replace.
			if err := m.flushRun(); err != nil {
				return res, written, err
			}
		}
		ok, err := m.fill(c)
		if err != nil {
			return res, written, fmt.Errorf("read %q: %w", job.Inputs[c.ord].Path, err)
		}
		if ok {
			m.down(0)
		} else {
			opts.Progress.Add(1, job.Inputs[c.ord].Bytes, 0)
			last := len(m.heap) - 1
			m.heap[0] = m.heap[last]
			m.heap = m.heap[:last]
			m.down(0)
		}
		if m.pending >= progressRows {
			opts.Progress.Add(0, 0, int64(m.pending))
			m.pending = 0
			if err := ctx.Err(); err != nil {
				return res, written, err
			}
		}
	}
	if err := m.flushRun(); err != nil {
		return res, written, err
	}
	if err := m.flushStaged(); err != nil {
		return res, written, err
	}
	opts.Progress.Add(0, 0, int64(m.pending))
	if err := m.w.Close(); err != nil {
		return res, written, err
	}

	for _, c := range cursors {
		if err := res.addInput(job.Inputs[c.ord].Path, c.rows, c.f.NumRows()); err != nil {
			return res, written, err
		}
	}
	return res, written, res.checkRows(wantRows, written)
}

// addInput counts the rows read of an input and checks them against its
// footer (invariant 4).
func (res *Result) addInput(path string, read, footer int64) error {
	res.RowsIn += read
	if read != footer {
		return fmt.Errorf("%w: read %d rows of %q, its footer says %d", ErrRowMismatch, read, path, footer)
	}
	return nil
}

// checkRows counts the written files and checks that they hold the rows
// read, which are the inputs' catalog rows (invariant 4).
func (res *Result) checkRows(wantRows int64, written []lake.Segment) error {
	for _, s := range written {
		res.RowsOut += s.Rows
		res.BytesOut += s.Bytes
	}
	if res.RowsIn != wantRows || res.RowsOut != res.RowsIn {
		return fmt.Errorf("%w: catalog %d, read %d, written %d", ErrRowMismatch, wantRows, res.RowsIn, res.RowsOut)
	}
	return nil
}
