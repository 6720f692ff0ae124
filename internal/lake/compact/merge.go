package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/signal"
)

// roundRows is how many merged rows are handed to the writer at a time.
// Each input collects its merged rows in its own batch during a round:
// CopyFrom copies a resource once per source binding, so alternating
// sources in one batch would copy resources once per switch.
const roundRows = 16 << 10

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
	// out collects this input's merged rows of the current round.
	outLogs    *signal.Logs
	outMetrics *signal.Metrics
	outSpans   *signal.Spans

	// Sort key of the current row: service or metric name (aliasing the
	// batch arena, valid until the next refill), series id, time.
	key string
	sid uint64
	t   int64
}

type merger struct {
	table     string
	tenant    string
	now, skew int64 // the output writer's clock and skew, for partition times
	heap      []*cursor
	w         *lake.Writer
	pending   int
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
	}
	i := c.row
	switch m.table {
	case lake.TableLogs:
		l := c.logs
		c.key = l.ServiceName(l.Resource[i])
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
		c.key = s.ServiceName(s.Resource[i])
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

// take copies the current row of c into its round batch.
func (m *merger) take(c *cursor) {
	switch m.table {
	case lake.TableLogs:
		c.outLogs.CopyFrom(c.logs, c.row)
	case lake.TableMetrics:
		c.outMetrics.CopyFrom(c.metrics, c.row)
	case lake.TableTraces:
		c.outSpans.CopyFrom(c.spans, c.row)
	}
	c.row++
	m.pending++
}

// flushRound hands every input's round batch to the writer, in input order
// so that ties keep input order through the writer's stable sort.
func (m *merger) flushRound(all []*cursor) error {
	for _, c := range all {
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
	m.pending = 0
	return nil
}

// merge streams the inputs of job through a k-way merge into a lake writer.
// It returns the files the writer committed, also on error, so the caller
// can remove them; it never touches the catalog.
func merge(ctx context.Context, store lake.Store, job Job, opts Options) (res Result, written []lake.Segment, err error) {
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

	m.w, err = lake.NewWriter(lake.Options{
		Store:            store,
		TargetFileBytes:  opts.TargetBytes,
		MaxBufferedBytes: opts.MaxBufferedBytes,
		RowGroupRows:     opts.RowGroupRows,
		MaxFutureSkew:    opts.MaxFutureSkew,
		Now:              func() time.Time { return clock },
		Level:            level + 1,
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
		m.take(c)
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
		if m.pending >= roundRows {
			opts.Progress.Add(0, 0, int64(m.pending))
			if err := m.flushRound(cursors); err != nil {
				return res, written, err
			}
			if err := ctx.Err(); err != nil {
				return res, written, err
			}
		}
	}
	opts.Progress.Add(0, 0, int64(m.pending))
	if err := m.flushRound(cursors); err != nil {
		return res, written, err
	}
	if err := m.w.Close(); err != nil {
		return res, written, err
	}

	for _, c := range cursors {
		res.RowsIn += c.rows
		if c.rows != c.f.NumRows() {
			return res, written, fmt.Errorf("%w: read %d rows of %q, its footer says %d", ErrRowMismatch, c.rows, job.Inputs[c.ord].Path, c.f.NumRows())
		}
	}
	for _, s := range written {
		res.RowsOut += s.Rows
		res.BytesOut += s.Bytes
	}
	if res.RowsIn != wantRows || res.RowsOut != res.RowsIn {
		return res, written, fmt.Errorf("%w: catalog %d, read %d, written %d", ErrRowMismatch, wantRows, res.RowsIn, res.RowsOut)
	}
	return res, written, nil
}
