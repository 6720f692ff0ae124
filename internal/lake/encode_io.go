package lake

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/signal"
	tenantpkg "github.com/sluice-dev/sluice/internal/tenant"
	"github.com/sluice-dev/sluice/internal/unsafex"
)

// TableIOEvents is the table of traced I/O syscalls (sluice trace).
const TableIOEvents = "io_events"

// io_events columns; docs/schema.md describes them.
const (
	ioTime = iota
	ioDuration
	ioGap
	ioPID
	ioTID
	ioComm
	ioSyscall
	ioFD
	ioRet
	ioErrno
	ioBytes
	ioPath
	ioOldPath
	ioFlags
	ioCgroup
	ioHost
	numIOCols
)

var ioCols = []fixedCol{
	ioTime:     {"time", kTime},
	ioDuration: {"duration_ns", kInt64},
	ioGap:      {"gap_ns", kInt64},
	ioPID:      {"pid", kUint32},
	ioTID:      {"tid", kUint32},
	ioComm:     {"comm", kDictReq},
	ioSyscall:  {"syscall", kDictReq},
	ioFD:       {"fd", kInt32},
	ioRet:      {"ret", kInt64},
	ioErrno:    {"errno", kInt32},
	ioBytes:    {"bytes", kInt64},
	ioPath:     {"path", kDict},
	ioOldPath:  {"old_path", kDict},
	ioFlags:    {"flags", kUint64},
	ioCgroup:   {"cgroup_id", kUint64},
	ioHost:     {"host_name", kDictReq},
}

// IOSortKey is the footer's sluice.sort of io_events files: rows are in
// the order the tracer saw them, which is time order per CPU.
const IOSortKey = "time"

var ioSchema = func() *parquet.Schema {
	g := make(parquet.Group, len(ioCols))
	for _, c := range ioCols {
		g[c.name] = c.kind.node()
	}
	return parquet.NewSchema(TableIOEvents, g)
}()

// ioEncoder writes IOEvents rows to a parquet.Writer of ioSchema, a chunk
// of rows at a time, reusing its value buffers.
type ioEncoder struct {
	cols [numIOCols]colBuf
	host []byte
}

func newIOEncoder(host string) *ioEncoder {
	e := &ioEncoder{host: []byte(host)}
	for i, c := range ioCols {
		leaf, ok := ioSchema.Lookup(c.name)
		if !ok {
			panic("lake: io_events column missing: " + c.name)
		}
		e.cols[i].setLeaf(leaf.ColumnIndex)
	}
	return e
}

// write writes rows [from, to) of b.
func (e *ioEncoder) write(pw *parquet.Writer, b *signal.IOEvents, from, to int) error {
	for a := from; a < to; a += chunkRows {
		z := min(a+chunkRows, to)
		for i := range e.cols {
			e.cols[i].v = e.cols[i].v[:0]
		}
		c := &e.cols
		for r := a; r < z; r++ {
			c[ioTime].time(b.Time[r])
			c[ioDuration].i64(b.Duration[r])
			c[ioGap].i64(b.Gap[r])
			c[ioPID].u32(b.PID[r])
			c[ioTID].u32(b.TID[r])
			c[ioComm].strReq(b.StrBytes(b.Comm[r]))
			c[ioSyscall].strReq(unsafex.Bytes(b.SyscallName(r)))
			c[ioFD].i32(b.FD[r])
			c[ioRet].i64(b.Ret[r])
			c[ioErrno].i32(b.Errno[r])
			c[ioBytes].i64(b.Bytes[r])
			c[ioPath].str(b.StrBytes(b.Path[r]))
			c[ioOldPath].str(b.StrBytes(b.OldPath[r]))
			c[ioFlags].u64(b.Flags[r])
			c[ioCgroup].u64(b.Cgroup[r])
			c[ioHost].strReq(e.host)
		}
		cws := pw.ColumnWriters()
		for i := range e.cols {
			if _, err := cws[e.cols[i].leaf].WriteRowValues(e.cols[i].v); err != nil {
				return err
			}
		}
	}
	return nil
}

// IOFile writes io_events rows into one standalone Parquet file (sluice
// trace --out), in row groups of RowGroupRows so memory stays bounded
// however long the recording runs. It has the lake's schema and options,
// so a recording can be read like the table.
type IOFile struct {
	bw     *bufio.Writer
	pw     *parquet.Writer
	enc    *ioEncoder
	rgRows int
	inRG   int
	rows   int64
	minT   int64
	maxT   int64
}

// NewIOFile starts a file on w; host fills the host_name column.
func NewIOFile(w io.Writer, host string) *IOFile {
	bw := bufio.NewWriterSize(w, 1<<20)
	f := &IOFile{
		bw:     bw,
		enc:    newIOEncoder(host),
		rgRows: DefaultRowGroupRows,
	}
	f.pw = parquet.NewWriter(bw, append([]parquet.WriterOption{ioSchema}, FileOptions(TableIOEvents)...)...)
	return f
}

// Write appends every row of b.
func (f *IOFile) Write(b *signal.IOEvents) error {
	for a := 0; a < b.Len(); {
		z := min(b.Len(), a+f.rgRows-f.inRG)
		if err := f.enc.write(f.pw, b, a, z); err != nil {
			return err
		}
		f.track(b, a, z)
		f.inRG += z - a
		a = z
		if f.inRG >= f.rgRows {
			if err := f.pw.Flush(); err != nil {
				return err
			}
			f.inRG = 0
		}
	}
	return nil
}

func (f *IOFile) track(b *signal.IOEvents, from, to int) {
	if to <= from {
		return
	}
	lo, hi := slices.Min(b.Time[from:to]), slices.Max(b.Time[from:to])
	if f.rows == 0 || lo < f.minT {
		f.minT = lo
	}
	if f.rows == 0 || hi > f.maxT {
		f.maxT = hi
	}
	f.rows += int64(to - from)
}

// Rows is the number of rows written so far.
func (f *IOFile) Rows() int64 { return f.rows }

// Close writes the footer and flushes; it does not close the underlying
// writer.
func (f *IOFile) Close() error {
	seg := Segment{Table: TableIOEvents, MinTime: f.minT, MaxTime: f.maxT}
	for _, kv := range ioFooter(seg) {
		f.pw.SetKeyValueMetadata(kv.Key, kv.Value)
	}
	if err := f.pw.Close(); err != nil {
		return err
	}
	return f.bw.Flush()
}

func ioFooter(seg Segment) []format.KeyValue {
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
	if opts.Store == nil {
		if opts.Root == "" {
			return nil, errors.New("lake: Options.Root or Options.Store is required")
		}
		opts.Store = NewLocalStore(opts.Root)
	}
	if opts.TargetFileBytes <= 0 {
		opts.TargetFileBytes = DefaultTargetFileBytes
	}
	if opts.MaxBufferedBytes <= 0 {
		opts.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if opts.RowGroupRows <= 0 {
		opts.RowGroupRows = DefaultRowGroupRows
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if commit == nil {
		commit = func(Segment) error { return nil }
	}
	return &IOWriter{
		opts: opts, host: host, store: opts.Store, commit: commit,
		parts: make(map[ioPartKey]*ioPartition),
		enc:   newIOEncoder(host),
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
	created := w.opts.Now()
	idTime := max(created.UnixNano(), w.lastID+1)
	w.lastID = idTime
	id := NewFileID(time.Unix(0, idTime))
	hourStart := time.Unix(0, p.key.hour*hourNs).UTC()
	seg := Segment{
		Table:   TableIOEvents,
		Tenant:  p.key.tenant,
		Day:     hourStart.Format("2006-01-02"),
		Hour:    hourStart.Hour(),
		Rows:    int64(p.rows.Len()),
		Level:   w.opts.Level,
		Created: created,
		MinTime: slices.Min(p.rows.Time),
		MaxTime: slices.Max(p.rows.Time),
	}
	seg.Path = catalog.PartitionDir(seg.Table, seg.Tenant, seg.Day, seg.Hour) + "/" + id + ".parquet"
	ow, err := w.store.Create(seg.Path)
	if err != nil {
		return fmt.Errorf("write %q: %w", seg.Path, err)
	}
	if err := w.encodeFile(&p.rows, ow, &seg); err != nil {
		_ = ow.Abort()
		return fmt.Errorf("write %q: %w", seg.Path, err)
	}
	if err := ow.Commit(); err != nil {
		return fmt.Errorf("write %q: %w", seg.Path, err)
	}
	if err := w.commit(seg); err != nil {
		if rerr := w.store.Remove(seg.Path); rerr != nil {
			return fmt.Errorf("commit %q: %w (and removing it: %v)", seg.Path, err, rerr)
		}
		return fmt.Errorf("commit %q: %w", seg.Path, err)
	}
	w.stats.Files++
	w.stats.FileBytes += seg.Bytes
	return nil
}

func (w *IOWriter) encodeFile(rows *signal.IOEvents, out io.Writer, seg *Segment) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("lake: parquet writer panic: %v", r)
		}
	}()
	w.counts = countingWriter{w: out}
	w.bw.Reset(&w.counts)
	pw := parquet.NewWriter(w.bw, append([]parquet.WriterOption{ioSchema}, FileOptions(TableIOEvents)...)...)
	for a := 0; a < rows.Len(); a += w.opts.RowGroupRows {
		z := min(a+w.opts.RowGroupRows, rows.Len())
		if err := w.enc.write(pw, rows, a, z); err != nil {
			return err
		}
		if err := pw.Flush(); err != nil {
			return err
		}
	}
	for _, kv := range ioFooter(*seg) {
		pw.SetKeyValueMetadata(kv.Key, kv.Value)
	}
	if err := pw.Close(); err != nil {
		return err
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	seg.Bytes = w.counts.n
	seg.SchemaHash = schemaHash(ioSchema)
	return nil
}
