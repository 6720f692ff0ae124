package lake

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/format"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/signal"
	tenantpkg "github.com/sluice-dev/sluice/internal/tenant"
	"github.com/sluice-dev/sluice/internal/version"
)

// Options configure a Writer. Zero values take the defaults.
type Options struct {
	Root  string // lake root directory
	Store Store  // nil: a LocalStore at Root

	TargetFileBytes  int64 // roll a partition when its buffered estimate reaches this; default 128 MiB
	MaxBufferedBytes int64 // total over open partitions; past it the largest is flushed; default 512 MiB
	RowGroupRows     int   // rows per row group; default 128Ki
	MaxFutureSkew    time.Duration
	Now              func() time.Time
	Level            int // compaction level written to segments and footers; 0 = raw

	// MaxAttributeColumns caps the attribute columns of one file; the
	// attributes past it go to their scope's overflow column (keptColumns).
	// Default DefaultMaxAttributeColumns.
	MaxAttributeColumns int
	// Replaces, if set, is written to every file's footer under
	// catalog.MetaReplaces: the lineage of a compaction's outputs.
	Replaces string

	// PoisonKey is fault injection for tests of what fails to encode (the
	// lake loop's quarantine): a file with an attribute of this key fails
	// to encode. Empty in production.
	PoisonKey string
}

// Defaults of Options.
const (
	DefaultTargetFileBytes  = 128 << 20
	DefaultMaxBufferedBytes = 512 << 20
	DefaultRowGroupRows     = 128 << 10
	DefaultMaxFutureSkew    = 24 * time.Hour
)

// Segment describes one committed lake file.
type Segment struct {
	Table, Tenant    string
	Day              string // YYYY-MM-DD
	Hour             int
	Path             string // relative to Root, slash-separated
	MinTime, MaxTime int64  // ns, of partition times
	Rows, Bytes      int64
	Level            int
	SchemaHash       string // hex hash of the sorted column list
	Created          time.Time
	Services         []string // distinct service names, at most MaxSegmentNames
	MetricNames      []string // distinct metric names, at most MaxSegmentNames
}

// MaxSegmentNames caps Segment.Services and Segment.MetricNames; a file
// with more lists none of them, so pruning by name must not skip it.
const MaxSegmentNames = 64

// WriterStats counts what a Writer did.
type WriterStats struct {
	Rows              int64 // records accepted
	Files             int64 // files committed
	FileBytes         int64 // bytes of committed files
	ReplacedTimes     int64 // records whose partition time is not their own time
	SizeFlushes       int64 // partitions rolled at TargetFileBytes
	MemoryFlushes     int64 // partitions flushed for MaxBufferedBytes
	BufferedBytes     int64 // current estimate over open partitions
	PeakBufferedBytes int64
	OpenPartitions    int
}

// ErrInvalidTenant is returned for tenants outside [A-Za-z0-9._-]{1,64}.
var ErrInvalidTenant = errors.New("lake: invalid tenant")

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("lake: writer closed")

const hourNs = int64(time.Hour)

type partKey struct {
	kind   signal.Kind
	tenant string
	hour   int64 // partition time / hour
}

type partition struct {
	key     partKey
	logs    *signal.Logs
	metrics *signal.Metrics
	spans   *signal.Spans
	ptime   []int64
	bytes   int64 // size estimate: the file's data and the batch's interning tables
	tables  int64 // of bytes, the interning tables (memory, not file)
}

// fileBytes is the part of p's estimate that goes into its file: what
// TargetFileBytes bounds. The interning tables (16 KiB and up for any
// batch copied into) count toward the memory limit only, else a small
// target would roll a file per record.
func (p *partition) fileBytes() int64 { return p.bytes - p.tables }

// tableBytes is the interning tables' share of p's batch.
func (p *partition) tableBytes() int64 {
	switch {
	case p.logs != nil:
		return p.logs.CopyTableBytes()
	case p.metrics != nil:
		return p.metrics.CopyTableBytes()
	case p.spans != nil:
		return p.spans.CopyTableBytes()
	}
	return 0
}

// Writer buffers batches per (table, tenant, hour) partition and writes them
// out as Parquet files. See the package doc for its invariants.
type Writer struct {
	opts   Options
	store  Store
	commit func(Segment) error
	now    func() time.Time

	parts    map[partKey]*partition
	buffered int64
	stats    WriterStats
	closed   bool
	lastID   int64 // time of the last file id, ns

	// Scratch of place: partition times of the rows being written, and
	// the index lists of a batch that spans several hours.
	pts, gpts []int64
	hourIdx   []int64
	rowHour   []int32
	idx       []int32

	freeBytes   int64 // capacity of the free batches and partition times below
	freeLogs    []*signal.Logs
	freeMetrics []*signal.Metrics
	freeSpans   []*signal.Spans
	// freePtime holds the partition-time slices of released partitions
	// whose batches were kept: a new partition takes one instead of
	// growing its own from nothing by doubling (each checkpoint releases
	// every partition).
	freePtime [][]int64

	enc encoder
	sk  *sketcher
	// encodeWith, when set (tests), encodes files instead of enc: the
	// oracle tests write the same partitions through parquet-go with it.
	encodeWith func(w *Writer, p *partition, out io.Writer, seg *Segment) error
	bw         *bufio.Writer
	counts     countingWriter
}

// NewWriter returns a Writer; commit is called once per file after the file
// is durable under its final path (see Segment).
func NewWriter(opts Options, commit func(Segment) error) (*Writer, error) {
	if err := opts.fileDefaults(); err != nil {
		return nil, err
	}
	if opts.MaxFutureSkew <= 0 {
		opts.MaxFutureSkew = DefaultMaxFutureSkew
	}
	if opts.MaxAttributeColumns <= 0 {
		opts.MaxAttributeColumns = DefaultMaxAttributeColumns
	}
	if commit == nil {
		commit = func(Segment) error { return nil }
	}
	return &Writer{
		opts:   opts,
		store:  opts.Store,
		commit: commit,
		now:    opts.Now,
		parts:  make(map[partKey]*partition),
		sk:     newSketcher(),
		bw:     bufio.NewWriterSize(nil, 1<<20),
	}, nil
}

// Stats returns the counters so far.
func (w *Writer) Stats() WriterStats {
	s := w.stats
	s.BufferedBytes = w.buffered
	s.OpenPartitions = len(w.parts)
	return s
}

// validTime reports whether t may be a partition time.
func validTime(t, now, skew int64) bool { return t > 0 && t <= now+skew }

func (w *Writer) check(tenant string) error {
	if w.closed {
		return ErrClosed
	}
	if !tenantpkg.Valid(tenant) {
		return fmt.Errorf("%w %q: want [A-Za-z0-9._-]{1,64}", ErrInvalidTenant, tenant)
	}
	return nil
}

// WriteLogs buffers the records of b. It copies what it keeps, so the
// caller may reuse b when it returns.
func (w *Writer) WriteLogs(tenant string, b *signal.Logs) error {
	return w.WriteLogsRows(tenant, b, 0, b.Len())
}

// WriteLogsRows buffers records [from, to) of b; see WriteLogs. Compaction
// hands each run of merged rows straight from its decoded input with it,
// instead of copying them into a batch of its own first.
func (w *Writer) WriteLogsRows(tenant string, b *signal.Logs, from, to int) error {
	if err := w.check(tenant); err != nil {
		return err
	}
	now, skew := w.now().UnixNano(), int64(w.opts.MaxFutureSkew)
	pts := w.pts[:0]
	for i := from; i < to; i++ {
		pt := b.Time[i]
		if !validTime(pt, now, skew) {
			w.stats.ReplacedTimes++
			if pt = b.ObservedTime[i]; !validTime(pt, now, skew) {
				pt = now
			}
		}
		pts = append(pts, pt)
	}
	w.pts = pts
	return w.place(signal.KindLogs, tenant, from, estimateLogs(b),
		func(p *partition, r signal.Rows) { p.logs.CopyRows(b, r) },
		func(p *partition, i int) { p.logs.CopyFrom(b, i) },
		func(p *partition) int64 { return estimateLogs(p.logs) })
}

// WriteMetrics buffers the data points of b; see WriteLogs. Points whose
// SeriesID is 0 get one (signal.ComputeSeriesIDs) when their file is written.
func (w *Writer) WriteMetrics(tenant string, b *signal.Metrics) error {
	return w.WriteMetricsRows(tenant, b, 0, b.Len())
}

// WriteMetricsRows buffers data points [from, to) of b; see WriteMetrics
// and WriteLogsRows.
func (w *Writer) WriteMetricsRows(tenant string, b *signal.Metrics, from, to int) error {
	if err := w.check(tenant); err != nil {
		return err
	}
	now, skew := w.now().UnixNano(), int64(w.opts.MaxFutureSkew)
	pts := w.pts[:0]
	for i := from; i < to; i++ {
		pt := b.Time[i]
		if !validTime(pt, now, skew) {
			w.stats.ReplacedTimes++
			pt = now
		}
		pts = append(pts, pt)
	}
	w.pts = pts
	return w.place(signal.KindMetrics, tenant, from, estimateMetrics(b),
		func(p *partition, r signal.Rows) { p.metrics.CopyRows(b, r) },
		func(p *partition, i int) { p.metrics.CopyFrom(b, i) },
		func(p *partition) int64 { return estimateMetrics(p.metrics) })
}

// AppendMetrics buffers len(times) data points that fill appends straight
// to a partition's batch, instead of a batch that the writer copies
// (WriteMetrics): a decoder that holds a record's wire bytes (the lake
// loop's remote-write path, prw.Appender) interns values into the
// partition as it decodes. times are the points' times in the order fill
// appends them; srcEst bounds the size estimate of what fill adds (that
// of the record decoded into an empty batch, EstimateMetricsBytes), as a
// WriteMetrics of it would count it.
//
// It appends only when every point falls into one partition hour and the
// partition and the writer can take the whole record without reaching a
// limit; otherwise it appends nothing and returns false, and the caller
// writes the record with WriteMetrics, which copies it row by row and
// rolls files exactly where the limits say. fill must append exactly
// len(times) points (an error otherwise: the partition is then in
// doubt, as after a failed write), or return false: the partition's points
// are then cut back to what they were (signal.Metrics.Truncate; values and
// sets fill interned stay, unused) and AppendMetrics returns false, as for
// a record it does not take.
func (w *Writer) AppendMetrics(tenant string, times []int64, srcEst int64, fill func(dst *signal.Metrics) bool) (bool, error) {
	if err := w.check(tenant); err != nil {
		return false, err
	}
	if len(times) == 0 {
		return false, nil
	}
	now, skew := w.now().UnixNano(), int64(w.opts.MaxFutureSkew)
	pts := w.pts[:0]
	replaced := int64(0)
	for _, pt := range times {
		if !validTime(pt, now, skew) {
			replaced++
			pt = now
		}
		pts = append(pts, pt)
	}
	w.pts = pts
	hour := pts[0] / hourNs
	for _, pt := range pts {
		if pt/hourNs != hour {
			return false, nil
		}
	}
	add := srcEst + int64(len(pts))*8
	k := partKey{signal.KindMetrics, tenant, hour}
	if p := w.parts[k]; p != nil && p.fileBytes()+add >= w.opts.TargetFileBytes || w.buffered+add > w.opts.MaxBufferedBytes || add >= w.opts.TargetFileBytes {
		return false, nil
	}
	p := w.partition(signal.KindMetrics, tenant, hour)
	n0 := p.metrics.Len()
	if !fill(p.metrics) {
		p.metrics.Truncate(n0)
		return false, nil
	}
	if got := p.metrics.Len() - n0; got != len(pts) {
		return false, fmt.Errorf("lake: AppendMetrics: %d points appended for %d times", got, len(pts))
	}
	p.ptime = append(p.ptime, pts...)
	w.stats.Rows += int64(len(pts))
	w.stats.ReplacedTimes += replaced
	_, err := w.account(p, estimateMetrics(p.metrics))
	return true, err
}

// EstimateMetricsBytes is the writer's size estimate of a decoded metrics
// batch of points data points with attrs attributes, descs descriptors
// and arena bytes in its arena, one resource and one scope, no histogram
// buckets: what AppendMetrics's srcEst wants for a remote-write request.
func EstimateMetricsBytes(points, attrs, descs, arena int) int64 {
	return int64(arena) + int64(attrs)*13 + 24 + 40 + int64(points)*250 + int64(descs)*64
}

// WriteSpans buffers the spans of b, partitioned by start time; see WriteLogs.
func (w *Writer) WriteSpans(tenant string, b *signal.Spans) error {
	return w.WriteSpansRows(tenant, b, 0, b.Len())
}

// WriteSpansRows buffers spans [from, to) of b; see WriteSpans and
// WriteLogsRows.
func (w *Writer) WriteSpansRows(tenant string, b *signal.Spans, from, to int) error {
	if err := w.check(tenant); err != nil {
		return err
	}
	now, skew := w.now().UnixNano(), int64(w.opts.MaxFutureSkew)
	pts := w.pts[:0]
	for i := from; i < to; i++ {
		pt := b.StartTime[i]
		if !validTime(pt, now, skew) {
			w.stats.ReplacedTimes++
			pt = now
		}
		pts = append(pts, pt)
	}
	w.pts = pts
	return w.place(signal.KindTraces, tenant, from, estimateSpans(b),
		func(p *partition, r signal.Rows) { p.spans.CopyRows(b, r) },
		func(p *partition, i int) { p.spans.CopyFrom(b, i) },
		func(p *partition) int64 { return estimateSpans(p.spans) })
}

// place buffers rows from, from+1, ... of a batch whose partition times
// are w.pts. The rows of one partition hour are copied at once (bulk:
// one CopyRows, the whole batch in the usual case of one hour) when the
// partition and the writer can take the whole batch (srcEst, the batch's
// size estimate, bounds what a copy adds) without reaching a limit; else
// row by row (one: CopyFrom), accounting after each, so a partition rolls
// and memory flushes exactly where the limits say (package doc 5).
func (w *Writer) place(kind signal.Kind, tenant string, from int, srcEst int64,
	bulk func(*partition, signal.Rows), one func(*partition, int), est func(*partition) int64) error {
	pts := w.pts
	if len(pts) == 0 {
		return nil
	}
	h0 := pts[0] / hourNs
	single := true
	for _, pt := range pts {
		if pt/hourNs != h0 {
			single = false
			break
		}
	}
	if single {
		return w.placeGroup(kind, tenant, h0, signal.Rows{From: from, To: from + len(pts)}, pts, srcEst, bulk, one, est)
	}
	// Several hours: an index list per hour, hours in order of first row.
	w.hourIdx = w.hourIdx[:0]
	w.rowHour = slices.Grow(w.rowHour[:0], len(pts))[:len(pts)]
	lastH, lastG := int64(-1), -1
	for j, pt := range pts {
		h := pt / hourNs
		if h != lastH {
			lastH, lastG = h, slices.Index(w.hourIdx, h)
			if lastG < 0 {
				lastG = len(w.hourIdx)
				w.hourIdx = append(w.hourIdx, h)
			}
		}
		w.rowHour[j] = int32(lastG)
	}
	for g, h := range w.hourIdx {
		idx, gpts := w.idx[:0], w.gpts[:0]
		for j, rg := range w.rowHour {
			if int(rg) == g {
				idx = append(idx, int32(from+j))
				gpts = append(gpts, pts[j])
			}
		}
		w.idx, w.gpts = idx, gpts
		if err := w.placeGroup(kind, tenant, h, signal.Rows{Idx: idx}, gpts, srcEst, bulk, one, est); err != nil {
			return err
		}
	}
	return nil
}

// placeGroup buffers the rows r of one partition hour; pts are their
// partition times. See place.
func (w *Writer) placeGroup(kind signal.Kind, tenant string, hour int64, r signal.Rows, pts []int64, srcEst int64,
	bulk func(*partition, signal.Rows), one func(*partition, int), est func(*partition) int64) error {
	p := w.partition(kind, tenant, hour)
	add := srcEst + int64(len(pts))*8
	if p.fileBytes()+add < w.opts.TargetFileBytes && w.buffered+add <= w.opts.MaxBufferedBytes {
		bulk(p, r)
		p.ptime = append(p.ptime, pts...)
		w.stats.Rows += int64(len(pts))
		_, err := w.account(p, est(p))
		return err
	}
	for j := range pts {
		if p == nil {
			p = w.partition(kind, tenant, hour)
		}
		i := r.From + j
		if r.Idx != nil {
			i = int(r.Idx[j])
		}
		one(p, i)
		p.ptime = append(p.ptime, pts[j])
		w.stats.Rows++
		var err error
		if p, err = w.account(p, est(p)); err != nil {
			return err
		}
	}
	return nil
}

// account records p's new size estimate (est: its batch's data; account
// adds the partition times and the batch's interning tables) and flushes
// what the limits ask for. It returns p, or nil when p was flushed.
func (w *Writer) account(p *partition, est int64) (*partition, error) {
	p.tables = p.tableBytes()
	est += int64(len(p.ptime))*8 + p.tables
	w.buffered += est - p.bytes
	p.bytes = est
	w.stats.PeakBufferedBytes = max(w.stats.PeakBufferedBytes, w.buffered)
	if p.fileBytes() >= w.opts.TargetFileBytes {
		w.stats.SizeFlushes++
		return nil, w.flushPartition(p)
	}
	for w.buffered > w.opts.MaxBufferedBytes && len(w.parts) > 0 {
		var big *partition
		for _, q := range w.parts {
			if big == nil || q.bytes > big.bytes {
				big = q
			}
		}
		w.stats.MemoryFlushes++
		if err := w.flushPartition(big); err != nil {
			return nil, err
		}
		if big == p {
			p = nil
		}
	}
	return p, nil
}

func (w *Writer) partition(kind signal.Kind, tenant string, hour int64) *partition {
	k := partKey{kind, tenant, hour}
	if p := w.parts[k]; p != nil {
		return p
	}
	p := &partition{key: k}
	switch kind {
	case signal.KindLogs:
		// Logs and spans share resources and scopes (each input batch
		// brings its own copy of them; the encoder resolves every
		// resource of a file), not record attribute sets.
		p.logs = takeLargest(&w.freeLogs, logsCap, &w.freeBytes)
		p.logs.ShareResources = true
	case signal.KindMetrics:
		// A partition's attributes are only read (encoded), so points
		// with equal sets share one (signal.Common.ShareAttrSets): a
		// series' points are stored once and the encoder finds their runs
		// by Range. Logs and spans rarely repeat a set.
		p.metrics = takeLargest(&w.freeMetrics, metricsCap, &w.freeBytes)
		p.metrics.ShareAttrSets = true
	case signal.KindTraces:
		p.spans = takeLargest(&w.freeSpans, spansCap, &w.freeBytes)
		p.spans.ShareResources = true
	}
	p.ptime = w.takePtime()
	w.parts[k] = p
	return p
}

// takePtime removes and returns the free partition-time slice with the
// most capacity, emptied, or nil.
func (w *Writer) takePtime() []int64 {
	best := -1
	for i, pt := range w.freePtime {
		if best < 0 || cap(pt) > cap(w.freePtime[best]) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	pt := w.freePtime[best]
	w.freeBytes -= int64(cap(pt)) * 8
	w.freePtime = slices.Delete(w.freePtime, best, best+1)
	return pt[:0]
}

// keepPtime keeps a released partition's time slice for reuse, within the
// bound keepFree sets for its batch.
func (w *Writer) keepPtime(pt []int64) {
	size := int64(cap(pt)) * 8
	if size == 0 || len(w.freePtime) >= 3*maxFreeBatches || w.freeBytes+size+w.buffered > w.opts.MaxBufferedBytes {
		return
	}
	w.freePtime = append(w.freePtime, pt[:0])
	w.freeBytes += size
}

// takeLargest removes and returns the free batch with the most capacity, or
// a new one. Handing the largest to the partition opened first lets a
// writer whose partitions recur (one per hour, in the same order) give each
// the same batch every time, so the batches stop growing after a round or
// two; taking the last freed one swapped them around and regrew them for
// many rounds (a fifth of the bytes BenchmarkWriteMetrics allocated).
func takeLargest[T any](free *[]*T, size func(*T) int64, freeBytes *int64) *T {
	best := -1
	for i, b := range *free {
		if best < 0 || size(b) > size((*free)[best]) {
			best = i
		}
	}
	if best < 0 {
		return new(T)
	}
	b := (*free)[best]
	*freeBytes -= size(b)
	*free = slices.Delete(*free, best, best+1)
	return b
}

// keepFree keeps b for reuse only while the capacity kept for reuse stays
// within what the buffered data may still grow to: without that bound, a
// free list of batches grown to TargetFileBytes held memory that grew with
// the input (seen as peak RSS growing with input size).
func keepFree[T any](w *Writer, free *[]*T, b *T, size int64) bool {
	if len(*free) >= maxFreeBatches || w.freeBytes+size+w.buffered > w.opts.MaxBufferedBytes {
		return false
	}
	*free = append(*free, b)
	w.freeBytes += size
	return true
}

func logsCap(l *signal.Logs) int64 { return capBytes(&l.Common, cap(l.Time), 100) }
func metricsCap(m *signal.Metrics) int64 {
	return capBytes(&m.Common, cap(m.Time), 250) + int64(cap(m.U64)+cap(m.F64))*8
}
func spansCap(s *signal.Spans) int64 { return capBytes(&s.Common, cap(s.StartTime), 150) }

// capBytes approximates the capacity of a batch, like the size estimates.
func capBytes(c *signal.Common, rows, perRow int) int64 {
	return int64(cap(c.Buf) + cap(c.Attrs.Key)*13 + cap(c.Msgs)*8 + rows*perRow)
}

// maxFreeBatches bounds the batches kept for reuse after a flush; their
// capacity is outside MaxBufferedBytes, so keep it small.
const maxFreeBatches = 8

// release forgets p and keeps its batch for reuse. The partition's memory
// leaves the estimate either way, so a failed write cannot pin the limit.
func (w *Writer) release(p *partition) {
	delete(w.parts, p.key)
	w.buffered -= p.bytes
	var kept bool
	switch {
	case p.logs != nil:
		p.logs.Reset()
		kept = keepFree(w, &w.freeLogs, p.logs, logsCap(p.logs))
	case p.metrics != nil:
		p.metrics.Reset()
		kept = keepFree(w, &w.freeMetrics, p.metrics, metricsCap(p.metrics))
	case p.spans != nil:
		p.spans.Reset()
		kept = keepFree(w, &w.freeSpans, p.spans, spansCap(p.spans))
	}
	if kept {
		w.keepPtime(p.ptime)
	}
	p.ptime = nil
}

// Flush writes out every buffered partition.
func (w *Writer) Flush() error {
	parts := make([]*partition, 0, len(w.parts))
	for _, p := range w.parts {
		parts = append(parts, p)
	}
	// A stable order makes file ids and tests deterministic in sequence.
	slices.SortFunc(parts, func(a, b *partition) int {
		if a.key.kind != b.key.kind {
			return int(a.key.kind) - int(b.key.kind)
		}
		if a.key.tenant != b.key.tenant {
			if a.key.tenant < b.key.tenant {
				return -1
			}
			return 1
		}
		return int(a.key.hour - b.key.hour)
	})
	var errs []error
	for _, p := range parts {
		if err := w.flushPartition(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close flushes and releases the writer; later writes fail with ErrClosed.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	err := w.Flush()
	w.closed = true
	w.freeLogs, w.freeMetrics, w.freeSpans, w.freePtime, w.freeBytes = nil, nil, nil, nil, 0
	w.enc = encoder{}
	return err
}

// NewFileID returns a time-sortable unique id: UTC time to the nanosecond
// and 64 random bits. Lake files are named <id>.parquet.
func NewFileID(now time.Time) string {
	b := now.UTC().AppendFormat(make([]byte, 0, 48), "20060102T150405.000000000Z")
	b = append(b, '-')
	r := rand.Uint64()
	for i := 60; i >= 0; i -= 4 {
		b = append(b, hexDigits[(r>>uint(i))&15])
	}
	return string(b)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// flushPartition writes p as one file and commits it. The partition is
// released whatever happens; on error nothing of it is left in the lake.
func (w *Writer) flushPartition(p *partition) error {
	defer w.release(p)
	if len(p.ptime) == 0 {
		return nil
	}
	seg := newSegment(tableName(p.key.kind), p.key.tenant, p.key.hour, w.opts.Level, w.now(), &w.lastID)
	seg.Rows = int64(len(p.ptime))
	seg.MinTime, seg.MaxTime = slices.Min(p.ptime), slices.Max(p.ptime)
	return writeSegment(w.store, w.commit, &w.stats, &seg, func(out io.Writer) error { return w.encodeFile(p, out, &seg) })
}

// fileDefaults fills the Options that Writer and IOWriter share.
func (o *Options) fileDefaults() error {
	if o.Store == nil {
		if o.Root == "" {
			return errors.New("lake: Options.Root or Options.Store is required")
		}
		o.Store = NewLocalStore(o.Root)
	}
	if o.TargetFileBytes <= 0 {
		o.TargetFileBytes = DefaultTargetFileBytes
	}
	if o.MaxBufferedBytes <= 0 {
		o.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = DefaultRowGroupRows
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// newSegment names a new file of table in the partition (tenant, hour):
// its id is from created, after *lastID (ids of one writer strictly
// increase even when the clock does not). The caller fills Rows and the
// time range.
func newSegment(table, tenant string, hour int64, level int, created time.Time, lastID *int64) Segment {
	idTime := max(created.UnixNano(), *lastID+1)
	*lastID = idTime
	id := NewFileID(time.Unix(0, idTime))
	hourStart := time.Unix(0, hour*hourNs).UTC()
	seg := Segment{
		Table:   table,
		Tenant:  tenant,
		Day:     hourStart.Format("2006-01-02"),
		Hour:    hourStart.Hour(),
		Level:   level,
		Created: created,
	}
	seg.Path = catalog.PartitionDir(seg.Table, seg.Tenant, seg.Day, seg.Hour) + "/" + id + ".parquet"
	return seg
}

// writeSegment creates seg.Path in store, fills it with encode (which also
// sets seg.Bytes and seg.SchemaHash), makes it durable and then commits
// seg; a failure at any step leaves no file (package doc invariants 3-6).
func writeSegment(store Store, commit func(Segment) error, stats *WriterStats, seg *Segment, encode func(io.Writer) error) error {
	ow, err := store.Create(seg.Path)
	if err != nil {
		return fmt.Errorf("write %q: %w", seg.Path, err)
	}
	if err := encode(ow); err != nil {
		_ = ow.Abort()
		return fmt.Errorf("write %q: %w", seg.Path, err)
	}
	if err := ow.Commit(); err != nil {
		return fmt.Errorf("write %q: %w", seg.Path, err)
	}
	if err := commit(*seg); err != nil {
		if rerr := store.Remove(seg.Path); rerr != nil {
			return fmt.Errorf("commit %q: %w (and removing it: %v)", seg.Path, err, rerr)
		}
		return fmt.Errorf("commit %q: %w", seg.Path, err)
	}
	stats.Files++
	stats.FileBytes += seg.Bytes
	return nil
}

// encodeFile writes the Parquet bytes of p to out and completes seg.
func (w *Writer) encodeFile(p *partition, out io.Writer, seg *Segment) (err error) {
	if w.encodeWith != nil {
		return w.encodeWith(w, p, out, seg)
	}
	defer func() {
		// parquet-go (schema, footer) panics on some misuse; never let one
		// take down ingest.
		if r := recover(); r != nil {
			err = fmt.Errorf("lake: parquet writer panic: %v", r)
		}
	}()
	w.enc.maxCols = w.opts.MaxAttributeColumns
	if k := w.opts.PoisonKey; k != "" {
		if err := poisoned(p, k); err != nil {
			return err
		}
	}
	w.counts = countingWriter{w: out}
	w.bw.Reset(&w.counts)
	var schema *parquet.Schema
	switch {
	case p.logs != nil:
		schema, err = w.enc.encodeLogs(w.bw, p.logs, p.ptime, w.opts.RowGroupRows)
		seg.Services = distinctServices(&w.enc, &p.logs.Common)
	case p.metrics != nil:
		m := p.metrics
		if slices.Contains(m.SeriesID, 0) {
			m.ComputeSeriesIDs()
		}
		schema, err = w.enc.encodeMetrics(w.bw, m, w.opts.RowGroupRows, w.sk)
		seg.Services = distinctServices(&w.enc, &m.Common)
		seg.MetricNames = distinctMetricNames(m)
	case p.spans != nil:
		schema, err = w.enc.encodeSpans(w.bw, p.spans, p.ptime, w.opts.RowGroupRows)
		seg.Services = distinctServices(&w.enc, &p.spans.Common)
	}
	if err != nil {
		return err
	}
	if err := w.enc.finishFile(w.footerKV(seg)); err != nil {
		return err
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	seg.Bytes = w.counts.n
	seg.SchemaHash = schemaHash(schema)
	return nil
}

// footerKV is the key/value metadata of seg's file.
func (w *Writer) footerKV(seg *Segment) []format.KeyValue {
	kv := seg.FooterMetadata()
	if w.opts.Replaces != "" {
		kv = append(kv, format.KeyValue{Key: catalog.MetaReplaces, Value: w.opts.Replaces})
	}
	return kv
}

func distinctServices(e *encoder, c *signal.Common) []string {
	var out []string
	for ri := range c.Resources {
		if !e.resHasSvc[ri] {
			continue
		}
		s := c.String(e.resService[ri])
		if !slices.Contains(out, s) {
			if len(out) == MaxSegmentNames {
				return nil
			}
			out = append(out, string([]byte(s)))
		}
	}
	slices.Sort(out)
	return out
}

func distinctMetricNames(m *signal.Metrics) []string {
	var out []string
	for _, d := range m.Descs {
		s := m.String(d.Name)
		if !slices.Contains(out, s) {
			if len(out) == MaxSegmentNames {
				return nil
			}
			out = append(out, string([]byte(s)))
		}
	}
	slices.Sort(out)
	return out
}

// Size estimates of buffered batches: the arena plus the per-record,
// per-attribute and per-element slices.
func commonBytes(c *signal.Common) int64 {
	return int64(len(c.Buf)) + int64(c.Attrs.Len())*13 + int64(len(c.Resources))*24 + int64(len(c.Scopes))*40 + int64(len(c.Msgs))*8
}

func estimateLogs(l *signal.Logs) int64 {
	return commonBytes(&l.Common) + int64(l.Len())*100
}

func estimateMetrics(m *signal.Metrics) int64 {
	return commonBytes(&m.Common) + int64(m.Len())*250 + int64(len(m.U64)+len(m.F64))*8 + int64(len(m.Descs))*64
}

func estimateSpans(s *signal.Spans) int64 {
	return commonBytes(&s.Common) + int64(s.Len())*150
}

// CatalogRow is the catalog row for this segment; every writer of catalog
// rows (ingest, the lake loop, compaction) goes through it.
func (s Segment) CatalogRow() catalog.Segment {
	return catalog.Segment{
		Table: s.Table, Tenant: s.Tenant, Day: s.Day, Hour: s.Hour, Path: s.Path,
		MinTime: s.MinTime, MaxTime: s.MaxTime, Rows: s.Rows, Bytes: s.Bytes,
		Level: s.Level, SchemaHash: s.SchemaHash, Created: s.Created,
		Services: s.Services, MetricNames: s.MetricNames,
	}
}

// FileOptions are the parquet-go writer options of every raw-table lake
// file of table (schema aside): compaction writes its files' footers
// with them too.
func FileOptions(table string) []parquet.WriterOption {
	opts := []parquet.WriterOption{
		parquet.Compression(sharedZstd),
		parquet.DataPageStatistics(false),
		parquet.CreatedBy("sluice", version.String(), ""),
		parquet.PageBufferSize(256 << 10),
		// High-cardinality strings (ids, urls) fall back to plain
		// instead of growing a dictionary without bound.
		parquet.DictionaryMaxBytes(MaxDictBytes),
	}
	if col := bloomColumn(table); col != "" {
		opts = append(opts, parquet.BloomFilters(parquet.SplitBlockFilter(BloomBitsPerValue, col)))
	}
	return opts
}

// Dictionary and bloom filter settings of lake files (FileOptions).
const (
	MaxDictBytes      = 1 << 20
	BloomBitsPerValue = 10
)

// BloomColumn is the traces table's bloom filter column (format.Table.Bloom).
var BloomColumn = bloomColumn(TableTraces)

// Codec is the zstd codec lake files are compressed with.
func Codec() compress.Codec { return sharedZstd }

// SortKey is the footer's sluice.sort of table's files: the columns rows
// are sorted by (format.Table.Sort).
func SortKey(table string) string { return sortKey(table) }

// FooterMetadata is the key/value metadata of the segment's file footer.
func (s Segment) FooterMetadata() []format.KeyValue {
	return []format.KeyValue{
		{Key: MetaTable, Value: s.Table},
		{Key: MetaTenant, Value: s.Tenant},
		{Key: MetaLevel, Value: strconv.Itoa(s.Level)},
		{Key: MetaSchemaVersion, Value: strconv.Itoa(SchemaVersion)},
		{Key: MetaMinTime, Value: strconv.FormatInt(s.MinTime, 10)},
		{Key: MetaMaxTime, Value: strconv.FormatInt(s.MaxTime, 10)},
		{Key: MetaSort, Value: SortKey(s.Table)},
	}
}

// poisoned implements Options.PoisonKey.
func poisoned(p *partition, key string) error {
	var c *signal.Common
	switch {
	case p.logs != nil:
		c = &p.logs.Common
	case p.metrics != nil:
		c = &p.metrics.Common
	default:
		c = &p.spans.Common
	}
	for i := range c.Attrs.Len() {
		if c.Keys.Name(c.Attrs.Key[i]) == key {
			return fmt.Errorf("lake: attribute %q is poison (Options.PoisonKey fault injection)", key)
		}
	}
	return nil
}
