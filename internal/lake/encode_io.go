package lake

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/parquet-go/parquet-go"
	pformat "github.com/parquet-go/parquet-go/format"

	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/lake/pqenc"
	"github.com/sluice-dev/sluice/internal/signal"
	tenantpkg "github.com/sluice-dev/sluice/internal/tenant"
	"github.com/sluice-dev/sluice/internal/unsafex"
)

// TableIOEvents is the table of traced I/O syscalls (sluice trace).
const TableIOEvents = format.TableIOEvents

// io_events columns (format.IOEvents; docs/schema.md describes them), by
// their positions there.
var (
	ioTime     = position(format.IOEvents.Columns, format.ColTime)
	ioDuration = position(format.IOEvents.Columns, format.ColDurationNs)
	ioGap      = position(format.IOEvents.Columns, format.ColGapNs)
	ioPID      = position(format.IOEvents.Columns, format.ColPID)
	ioTID      = position(format.IOEvents.Columns, format.ColTID)
	ioComm     = position(format.IOEvents.Columns, format.ColComm)
	ioSyscall  = position(format.IOEvents.Columns, format.ColSyscall)
	ioFD       = position(format.IOEvents.Columns, format.ColFD)
	ioRet      = position(format.IOEvents.Columns, format.ColRet)
	ioErrno    = position(format.IOEvents.Columns, format.ColErrno)
	ioBytes    = position(format.IOEvents.Columns, format.ColBytes)
	ioPath     = position(format.IOEvents.Columns, format.ColPath)
	ioOldPath  = position(format.IOEvents.Columns, format.ColOldPath)
	ioFlags    = position(format.IOEvents.Columns, format.ColFlags)
	ioCgroup   = position(format.IOEvents.Columns, format.ColCgroupID)
	ioHost     = position(format.IOEvents.Columns, format.ColHostName)
)

// ioCols are the io_events columns; time is a required column: every row
// has one, and a required column takes the whole slice at once (pqenc
// Int64s) instead of a value and a level per row.
var ioCols = fixedCols(format.IOEvents.Columns)

// IOSortKey is the footer's sluice.sort of io_events files: rows are in
// the order the tracer saw them, which is time order per CPU.
var IOSortKey = format.IOEvents.Sort

var ioSchema = func() *parquet.Schema {
	g := make(parquet.Group, len(ioCols))
	for _, c := range ioCols {
		g[c.name] = c.kind.node()
	}
	return parquet.NewSchema(TableIOEvents, g)
}()

// ioEncoder writes IOEvents rows column by column with pqenc: a row group
// is built across any number of batches (its columns hold compressed pages
// until the group ends), so rows are never copied, and runs of equal
// values (the same path, pid, syscall on consecutive rows) cost one call.
type ioEncoder struct {
	leaves []pqenc.Leaf          // in schema order
	leafOf []int                 // io column -> leaf index
	cols   []pqenc.Column        // per leaf
	footer *pformat.FileMetaData // parquet-go's footer of an empty file
	file   *pqenc.File
	rgRows int
	inRG   int
	host   []byte
	rows   int64
	minT   int64
	maxT   int64
}

var ioFooterTemplate = sync.OnceValues(func() (*pformat.FileMetaData, error) {
	return pqenc.Footer(ioSchema, FileOptions(TableIOEvents)...)
})

func newIOEncoder(host string, rgRows int) (*ioEncoder, error) {
	footer, err := ioFooterTemplate()
	if err != nil {
		return nil, err
	}
	e := &ioEncoder{host: []byte(host), rgRows: rgRows, footer: footer}
	leafCols := ioSchema.Columns()
	e.leaves = make([]pqenc.Leaf, len(leafCols))
	e.cols = make([]pqenc.Column, len(leafCols))
	e.leafOf = make([]int, len(ioCols))
	for i, c := range ioCols {
		leaf, ok := ioSchema.Lookup(c.name)
		if !ok {
			return nil, fmt.Errorf("lake: io_events column %q missing", c.name)
		}
		li, err := pqenc.NewLeaf(leaf)
		if err != nil {
			return nil, err
		}
		li.MaxDictBytes = MaxDictBytes
		e.leaves[leaf.ColumnIndex] = li
		e.leafOf[i] = leaf.ColumnIndex
	}
	return e, nil
}

// begin starts a file on w.
func (e *ioEncoder) begin(w io.Writer) {
	e.file = pqenc.NewFile(w, e.leaves, Codec())
	e.inRG, e.rows, e.minT, e.maxT = 0, 0, 0, 0
	e.resetCols()
}

func (e *ioEncoder) resetCols() {
	for i := range e.cols {
		e.cols[i].Reset(&e.leaves[i], Codec())
	}
}

func (e *ioEncoder) col(c int) *pqenc.Column { return &e.cols[e.leafOf[c]] }

// runs calls add(from, to) for each run of rows [from, to) on which eq
// holds between neighbours.
func runs(from, to int, eq func(a, b int) bool, add func(i, k int)) {
	for a := from; a < to; {
		z := a + 1
		for z < to && eq(z-1, z) {
			z++
		}
		add(a, z-a)
		a = z
	}
}

// write appends rows [from, to) of b, ending row groups as they fill.
func (e *ioEncoder) write(b *signal.IOEvents, from, to int) error {
	for from < to {
		z := min(to, from+e.rgRows-e.inRG)
		e.add(b, from, z)
		e.inRG += z - from
		from = z
		if e.inRG >= e.rgRows {
			if err := e.endRowGroup(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *ioEncoder) add(b *signal.IOEvents, from, to int) {
	if to <= from {
		return
	}
	lo, hi := slices.Min(b.Time[from:to]), slices.Max(b.Time[from:to])
	if e.rows == 0 || lo < e.minT {
		e.minT = lo
	}
	if e.rows == 0 || hi > e.maxT {
		e.maxT = hi
	}
	e.rows += int64(to - from)

	e.col(ioTime).Int64s(b.Time[from:to])
	e.col(ioDuration).Int64s(b.Duration[from:to])
	e.col(ioGap).Int64s(b.Gap[from:to])
	e.col(ioRet).Int64s(b.Ret[from:to])
	e.col(ioBytes).Int64s(b.Bytes[from:to])
	c := e.col(ioPID)
	runs(from, to, func(x, y int) bool { return b.PID[x] == b.PID[y] }, func(i, k int) { c.Int(int64(b.PID[i]), k) })
	c2 := e.col(ioTID)
	runs(from, to, func(x, y int) bool { return b.TID[x] == b.TID[y] }, func(i, k int) { c2.Int(int64(b.TID[i]), k) })
	c3 := e.col(ioComm)
	runs(from, to, func(x, y int) bool { return b.Comm[x] == b.Comm[y] }, func(i, k int) { c3.Bytes(b.StrBytes(b.Comm[i]), k) })
	c4 := e.col(ioSyscall)
	runs(from, to, func(x, y int) bool { return b.Syscall[x] == b.Syscall[y] }, func(i, k int) { c4.Bytes(unsafex.Bytes(b.SyscallName(i)), k) })
	c5 := e.col(ioFD)
	runs(from, to, func(x, y int) bool { return b.FD[x] == b.FD[y] }, func(i, k int) { c5.Int(int64(b.FD[i]), k) })
	c6 := e.col(ioErrno)
	runs(from, to, func(x, y int) bool { return b.Errno[x] == b.Errno[y] }, func(i, k int) { c6.Int(int64(b.Errno[i]), k) })
	c7 := e.col(ioPath)
	runs(from, to, func(x, y int) bool { return b.Path[x] == b.Path[y] }, func(i, k int) { c7.Str(b.String(b.Path[i]), k) })
	c8 := e.col(ioOldPath)
	runs(from, to, func(x, y int) bool { return b.OldPath[x] == b.OldPath[y] }, func(i, k int) { c8.Str(b.String(b.OldPath[i]), k) })
	c9 := e.col(ioFlags)
	runs(from, to, func(x, y int) bool { return b.Flags[x] == b.Flags[y] }, func(i, k int) { c9.Int(int64(b.Flags[i]), k) })
	c10 := e.col(ioCgroup)
	runs(from, to, func(x, y int) bool { return b.Cgroup[x] == b.Cgroup[y] }, func(i, k int) { c10.Int(int64(b.Cgroup[i]), k) })
	e.col(ioHost).Bytes(e.host, to-from)
}

func (e *ioEncoder) endRowGroup() error {
	if e.inRG == 0 {
		return nil
	}
	e.file.BeginRowGroup(e.inRG)
	for i := range e.cols {
		if err := e.file.WriteChunk(&e.cols[i]); err != nil {
			return err
		}
	}
	e.inRG = 0
	e.resetCols()
	return nil
}

// finish ends the last row group and writes the footer of seg.
func (e *ioEncoder) finish(seg Segment) error {
	if err := e.endRowGroup(); err != nil {
		return err
	}
	meta := *e.footer
	meta.KeyValueMetadata = ioFooter(seg)
	return e.file.Close(&meta)
}

var errIOFileClosed = errors.New("lake: io_events file closed")

// IOFile writes io_events rows into one standalone Parquet file (sluice
// trace --out), in row groups of RowGroupRows so memory stays bounded
// however long the recording runs. It has the lake's schema and options,
// so a recording can be read like the table.
type IOFile struct {
	bw   *bufio.Writer
	enc  *ioEncoder
	rows int64
	err  error
}

// NewIOFile starts a file on w; host fills the host_name column.
func NewIOFile(w io.Writer, host string) *IOFile {
	return newIOFile(w, host, DefaultRowGroupRows)
}

func newIOFile(w io.Writer, host string, rgRows int) *IOFile {
	f := &IOFile{bw: bufio.NewWriterSize(w, 1<<20)}
	ioEncoders.Lock()
	if n := len(ioEncoders.free); n > 0 {
		f.enc, ioEncoders.free = ioEncoders.free[n-1], ioEncoders.free[:n-1]
	}
	ioEncoders.Unlock()
	if f.enc == nil {
		f.enc, f.err = newIOEncoder(host, rgRows)
	}
	if f.err == nil {
		f.enc.host, f.enc.rgRows = append(f.enc.host[:0], host...), rgRows
		f.enc.begin(f.bw)
	}
	return f
}

// ioEncoders keeps the encoders of closed IOFiles: their column buffers
// (compressed pages of a whole row group) are the bulk of a file's
// allocations. A plain list, not a sync.Pool, for the reason zstdCodec
// gives.
var ioEncoders struct {
	sync.Mutex
	free []*ioEncoder
}

// Write appends every row of b.
func (f *IOFile) Write(b *signal.IOEvents) error {
	if f.err != nil {
		return f.err
	}
	f.err = f.enc.write(b, 0, b.Len())
	f.rows += int64(b.Len())
	return f.err
}

// Rows is the number of rows written so far.
func (f *IOFile) Rows() int64 { return f.rows }

// Close writes the footer and flushes; it does not close the underlying
// writer.
func (f *IOFile) Close() error {
	if f.err != nil {
		return f.err
	}
	f.err = f.enc.finish(Segment{Table: TableIOEvents, MinTime: f.enc.minT, MaxTime: f.enc.maxT})
	if f.err == nil {
		f.err = f.bw.Flush()
	}
	e := f.enc
	e.file = nil
	ioEncoders.Lock()
	if len(ioEncoders.free) < maxIdleCoders {
		ioEncoders.free = append(ioEncoders.free, e)
	}
	ioEncoders.Unlock()
	if f.err == nil {
		f.err = errIOFileClosed
		return nil
	}
	return f.err
}

func ioFooter(seg Segment) []pformat.KeyValue {
	kvs := seg.FooterMetadata()
	for i := range kvs {
		if kvs[i].Key == MetaSort {
			kvs[i].Value = IOSortKey
		}
	}
	return kvs
}

// IOWriter writes io_events rows into the lake: one partition per (tenant,
// hour of the row's time), a file per partition when it reaches
// TargetFileBytes or on Flush, each committed through commit like the
// Writer's (package doc invariants 3-6 hold the same way: the file is
// durable under its final name before commit, a failure leaves no file).
//
// It is separate from Writer because io_events rows have no resources or
// attributes; what they share (store, file ids, partition layout, footer,
// catalog rows) is the same code.
type IOWriter struct {
	opts   Options
	host   string
	store  Store
	commit func(Segment) error
	parts  map[ioPartKey]*ioPartition
	enc    *ioEncoder
	bw     *bufio.Writer
	counts countingWriter
	lastID int64
	stats  WriterStats
	closed bool
}

type ioPartKey struct {
	tenant string
	hour   int64
}

type ioPartition struct {
	key  ioPartKey
	rows signal.IOEvents
}

// ioRowBytes estimates a buffered row's size without its strings.
const ioRowBytes = 100

func (p *ioPartition) bytes() int64 { return int64(len(p.rows.Buf)) + int64(p.rows.Len())*ioRowBytes }

// NewIOWriter returns an IOWriter; host fills the host_name column.
func NewIOWriter(opts Options, host string, commit func(Segment) error) (*IOWriter, error) {
	if err := opts.fileDefaults(); err != nil {
		return nil, err
	}
	if commit == nil {
		commit = func(Segment) error { return nil }
	}
	enc, err := newIOEncoder(host, opts.RowGroupRows)
	if err != nil {
		return nil, err
	}
	return &IOWriter{
		opts: opts, host: host, store: opts.Store, commit: commit,
		parts: make(map[ioPartKey]*ioPartition),
		enc:   enc,
		bw:    bufio.NewWriterSize(nil, 1<<20),
	}, nil
}

// Stats returns the counters so far.
func (w *IOWriter) Stats() WriterStats {
	s := w.stats
	s.OpenPartitions = len(w.parts)
	for _, p := range w.parts {
		s.BufferedBytes += p.bytes()
	}
	return s
}

// Write copies the rows of b into their partitions; b may be reused after.
func (w *IOWriter) Write(tenant string, b *signal.IOEvents) error {
	if w.closed {
		return ErrClosed
	}
	if !tenantpkg.Valid(tenant) {
		return fmt.Errorf("%w %q: want [A-Za-z0-9._-]{1,64}", ErrInvalidTenant, tenant)
	}
	for a := 0; a < b.Len(); {
		hour := b.Time[a] / hourNs
		z := a + 1
		for z < b.Len() && b.Time[z]/hourNs == hour {
			z++
		}
		k := ioPartKey{tenant, hour}
		p := w.parts[k]
		if p == nil {
			p = &ioPartition{key: k}
			w.parts[k] = p
		}
		p.rows.AppendRows(b, a, z)
		w.stats.Rows += int64(z - a)
		a = z
		if p.bytes() >= w.opts.TargetFileBytes {
			w.stats.SizeFlushes++
			if err := w.flushPartition(p); err != nil {
				return err
			}
		}
	}
	var total int64
	var big *ioPartition
	for _, p := range w.parts {
		total += p.bytes()
		if big == nil || p.bytes() > big.bytes() {
			big = p
		}
	}
	w.stats.PeakBufferedBytes = max(w.stats.PeakBufferedBytes, total)
	if total > w.opts.MaxBufferedBytes && big != nil {
		w.stats.MemoryFlushes++
		return w.flushPartition(big)
	}
	return nil
}

// Flush writes out every buffered partition.
func (w *IOWriter) Flush() error {
	parts := make([]*ioPartition, 0, len(w.parts))
	for _, p := range w.parts {
		parts = append(parts, p)
	}
	slices.SortFunc(parts, func(a, b *ioPartition) int {
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

// Close flushes; later writes fail with ErrClosed.
func (w *IOWriter) Close() error {
	if w.closed {
		return nil
	}
	err := w.Flush()
	w.closed = true
	return err
}

func (w *IOWriter) flushPartition(p *ioPartition) error {
	delete(w.parts, p.key)
	if p.rows.Len() == 0 {
		return nil
	}
	seg := newSegment(TableIOEvents, p.key.tenant, p.key.hour, w.opts.Level, w.opts.Now(), &w.lastID)
	seg.Rows = int64(p.rows.Len())
	seg.MinTime, seg.MaxTime = slices.Min(p.rows.Time), slices.Max(p.rows.Time)
	return writeSegment(w.store, w.commit, &w.stats, &seg, func(out io.Writer) error { return w.encodeFile(&p.rows, out, &seg) })
}

func (w *IOWriter) encodeFile(rows *signal.IOEvents, out io.Writer, seg *Segment) (err error) {
	w.counts = countingWriter{w: out}
	w.bw.Reset(&w.counts)
	w.enc.begin(w.bw)
	if err := w.enc.write(rows, 0, rows.Len()); err != nil {
		return err
	}
	if err := w.enc.finish(*seg); err != nil {
		return err
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	seg.Bytes = w.counts.n
	seg.SchemaHash = schemaHash(ioSchema)
	return nil
}
