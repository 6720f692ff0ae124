package format

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Bounds of a File's cache of array and map values (protoOf).
const (
	maxJSONCacheEntries = 8192
	maxJSONCacheBytes   = 8 << 20
)

// ErrNotLakeFile is returned for Parquet files without sluice footer
// metadata or with columns this package does not understand.
var ErrNotLakeFile = errors.New("lake: not a sluice lake file")

// File is an opened lake Parquet file. Reads append to caller batches; the
// streaming Next* methods read one row group per call.
type File struct {
	name              string
	closer            io.Closer
	pf                *parquet.File
	table             string
	cols              []readCol
	nattr             int
	resSlots, scSlots []uint32 // attribute slots of resource and scope columns
	hasOvf            bool     // the file has an overflow column
	nextRG            int
	closed            bool
	// legacy reads every chunk through parquet-go's page reader (the
	// tests' oracle for the typed decoder).
	legacy bool
	// t is the read scratch of one row group, borrowed from freeTmps for
	// the duration of readGroup: a merge reads from many open files one
	// at a time, and scratch held per file was half of its peak heap.
	t                   *rowTmp
	sink                msgSink
	addMsg              func([]byte)
	sigBuf              []byte
	prevRes             []byte
	prevSc              []byte
	resIDs              map[string]uint32
	scIDs               map[string]uint32
	descIDs             map[string]uint32
	slotKey             []signal.KeyID
	prevResID, prevScID uint32

	// protoOf caches the protobuf (in the destination arena) of record
	// array and map values by their JSON: the same values recur row after
	// row, and JSON → protobuf was half of reading a logs file.
	protoOf      map[string]signal.Str
	protoOfBytes int
}

// readCol is the role of one leaf column.
type readCol struct {
	fixed int // fixed column index, or -1 for attribute and unknown columns
	kind  Kind
	slot  int // attribute slot, or -1
	ovf   int // 1 + the scope of an overflow column, or 0
	scope Scope
	key   string
	typ   signal.ValueType
	// The leaf's levels and physical type (checked against the format at
	// open), for pages read through parquet-go (pageFromValues).
	maxDef, maxRep uint8
	ptype          pqformat.Type
}

// OpenCloser is OpenReader for an r the File owns: Close closes it, and
// so does a failed open.
func OpenCloser(r interface {
	io.ReaderAt
	io.Closer
}, size int64, name string) (*File, error) {
	f, err := OpenReader(r, size, name)
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	f.closer = r
	return f, nil
}

// OpenReader opens a lake file held by r; name is used in errors. The
// caller keeps r open while the File is used.
func OpenReader(r io.ReaderAt, size int64, name string) (f *File, err error) {
	defer func() {
		if err != nil {
			f = nil
		}
	}()
	defer Recover(&err, "open %q", name)
	pf, err := Open(r, size, name, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, err
	}
	f = &File{name: name, pf: pf}
	table, _ := pf.Lookup(MetaTable)
	tb := Lookup(table)
	if tb == nil || table == TableRollup {
		return nil, fmt.Errorf("open %q: %w: table %q", name, ErrNotLakeFile, table)
	}
	fixed := tb.Columns
	f.table = table
	byName := make(map[string]int, len(fixed))
	for i, c := range fixed {
		byName[c.Name] = i
	}
	schema := pf.Schema()
	for leafIdx, p := range schema.Columns() {
		leaf, _ := schema.Lookup(p...)
		if leaf.ColumnIndex != leafIdx {
			return nil, fmt.Errorf("open %q: %w: column order", name, ErrNotLakeFile)
		}
		rc := readCol{fixed: -1, slot: -1, maxDef: uint8(leaf.MaxDefinitionLevel), maxRep: uint8(leaf.MaxRepetitionLevel),
			ptype: pqformat.Type(leaf.Node.Type().Kind())}
		if i, ok := byName[p[0]]; ok {
			rc.fixed, rc.kind = i, fixed[i].Kind
			if !sameLayout(leaf, p, fixed[i].Kind) {
				return nil, fmt.Errorf("open %q: %w: column %q has an unexpected type", name, ErrNotLakeFile, p[0])
			}
		} else if ac, ok := ParseAttrName(p[0]); ok && len(p) == 1 {
			s, key, t := ac.Scope, ac.Key, ac.Type
			if leaf.MaxRepetitionLevel != 0 || leaf.MaxDefinitionLevel != 1 || leaf.Node.Type().Kind() != AttrKind(t) {
				return nil, fmt.Errorf("open %q: %w: column %q has an unexpected type", name, ErrNotLakeFile, p[0])
			}
			rc.slot, rc.scope, rc.key, rc.typ = f.nattr, s, key, t
			switch s {
			case ScopeResource:
				f.resSlots = append(f.resSlots, uint32(f.nattr))
			case ScopeScope:
				f.scSlots = append(f.scSlots, uint32(f.nattr))
			}
			f.nattr++
		} else if s, ok := ParseOverflowName(p[0]); ok && len(p) == 1 {
			if leaf.MaxRepetitionLevel != 0 || leaf.MaxDefinitionLevel != 1 || leaf.Node.Type().Kind() != parquet.ByteArray {
				return nil, fmt.Errorf("open %q: %w: column %q has an unexpected type", name, ErrNotLakeFile, p[0])
			}
			rc.ovf, f.hasOvf = int(s)+1, true
		}
		// Other columns are ignored: files may gain columns.
		f.cols = append(f.cols, rc)
	}
	f.addMsg = f.sink.add
	return f, nil
}

func sameLayout(leaf parquet.LeafColumn, p []string, k Kind) bool {
	kind, rep, def := k.Layout()
	if rep == 1 && len(p) != 3 || rep == 0 && len(p) != 1 {
		return false
	}
	return leaf.Node.Type().Kind() == kind && leaf.MaxRepetitionLevel == rep && leaf.MaxDefinitionLevel == def
}

// Table is the table of the file: logs, metrics, traces or io_events.
func (f *File) Table() string { return f.table }

// Parquet is the file's parquet-go view, for column-level readers
// (compaction); it is valid until Close.
func (f *File) Parquet() *parquet.File { return f.pf }

// NumRows is the number of rows in the file.
func (f *File) NumRows() int64 { return f.pf.NumRows() }

// Lookup returns a footer key/value.
func (f *File) Lookup(key string) (string, bool) { return f.pf.Lookup(key) }

// freeTmps keeps read scratch between files: compaction opens many. A
// plain free list, not a sync.Pool: a pool drops its items at every GC, and
// regrowing the scratch of a row group was a tenth of reading one.
var freeTmps = FreeList[*rowTmp]{Max: maxIdleTmps}

// maxIdleTmps bounds the idle scratch kept on each of the package's free
// lists; more only exist while that many files are read at once.
const maxIdleTmps = 4

func getRowTmp() *rowTmp {
	if t, ok := freeTmps.Get(); ok {
		return t
	}
	return &rowTmp{vbuf: make([]parquet.Value, 1024)}
}

func putRowTmp(t *rowTmp) { freeTmps.Put(t) }

// Close releases the file.
func (f *File) Close() error {
	f.closed = true
	if f.closer != nil {
		err := f.closer.Close()
		f.closer = nil
		return err
	}
	return nil
}

// Rewind makes the Next* methods start again from the first row group.
func (f *File) Rewind() { f.nextRG = 0 }

func (f *File) want(table string) error {
	if f.closed {
		return fmt.Errorf("read %q: file is closed", f.name)
	}
	if f.table != table {
		return fmt.Errorf("read %q: file holds %s, not %s", f.name, f.table, table)
	}
	return nil
}

// ReadLogs appends every record of the file to dst.
func (f *File) ReadLogs(dst *signal.Logs) error { return f.readAll(TableLogs, &dst.Common, dst) }

// NextLogs appends the records of the next row group to dst; io.EOF after
// the last one.
func (f *File) NextLogs(dst *signal.Logs) error { return f.nextOf(TableLogs, &dst.Common, dst) }

// ReadMetrics appends every data point of the file to dst.
func (f *File) ReadMetrics(dst *signal.Metrics) error {
	return f.readAll(TableMetrics, &dst.Common, dst)
}

// NextMetrics is NextLogs for metrics.
func (f *File) NextMetrics(dst *signal.Metrics) error {
	return f.nextOf(TableMetrics, &dst.Common, dst)
}

// ReadSpans appends every span of the file to dst.
func (f *File) ReadSpans(dst *signal.Spans) error { return f.readAll(TableTraces, &dst.Common, dst) }

// NextSpans is NextLogs for spans.
func (f *File) NextSpans(dst *signal.Spans) error { return f.nextOf(TableTraces, &dst.Common, dst) }

// readAll reads every row group of a file of table into dst, whose Common
// is c.
func (f *File) readAll(table string, c *signal.Common, dst any) error {
	if err := f.want(table); err != nil {
		return err
	}
	f.startCall()
	for i := range f.pf.RowGroups() {
		if err := f.readGroup(i, c, dst); err != nil {
			return err
		}
	}
	return nil
}

// nextOf is next for a file that must hold table.
func (f *File) nextOf(table string, c *signal.Common, dst any) error {
	if err := f.want(table); err != nil {
		return err
	}
	return f.next(c, dst)
}

func (f *File) next(c *signal.Common, dst any) error {
	if f.nextRG >= len(f.pf.RowGroups()) {
		return io.EOF
	}
	f.startCall()
	i := f.nextRG
	f.nextRG++
	return f.readGroup(i, c, dst)
}

// startCall forgets the resources, scopes and descriptors shared so far:
// a call may append to a batch that was reset in between.
func (f *File) startCall() {
	clear(f.resIDs)
	clear(f.scIDs)
	clear(f.descIDs)
	if f.resIDs == nil {
		f.resIDs = make(map[string]uint32)
		f.scIDs = make(map[string]uint32)
		f.descIDs = make(map[string]uint32)
	}
	f.prevRes, f.prevSc = f.prevRes[:0], f.prevSc[:0]
	f.slotKey = f.slotKey[:0]
	clear(f.protoOf)
	f.protoOfBytes = 0
}

// anyValueProto appends the protobuf of the OTLP JSON AnyValue js to c's
// arena, or returns the Str of an identical value appended earlier in this
// call (arena strings are immutable, so sharing them is safe).
func (f *File) anyValueProto(c *signal.Common, js []byte) (signal.Str, error) {
	if s, ok := f.protoOf[string(js)]; ok {
		return s, nil
	}
	off := len(c.Buf)
	var err error
	if c.Buf, err = otlp.AppendAnyValueProto(c.Buf, js); err != nil {
		c.Buf = c.Buf[:off]
		return 0, err
	}
	s := signal.MakeStr(off, len(c.Buf)-off)
	if len(f.protoOf) < maxJSONCacheEntries && f.protoOfBytes+len(js) <= maxJSONCacheBytes {
		if f.protoOf == nil {
			f.protoOf = make(map[string]signal.Str)
		}
		f.protoOf[string(js)] = s
		f.protoOfBytes += len(js)
	}
	return s, nil
}

// entry is one non-null attribute value of one row.
type entry struct {
	row  uint32
	slot uint32
	val  uint64
}

// rowTmp holds per-row values of one row group that are assembled after
// all columns were read. Strings in arena unless noted.
type rowTmp struct {
	arena      []byte
	svc        []signal.Str
	svcOK      []bool
	scName     []signal.Str
	scVersion  []signal.Str
	scURL      []signal.Str
	scDropped  []uint32
	resURL     []signal.Str
	resDropped []uint32
	resEnt     []entry                 // resource, scope and record values where they change (attrSet)
	ovf        [NumScopes][]signal.Str // per row: overflow JSON, 0 when null
	prevOvf    [NumScopes]signal.Str
	scEnt      []entry
	lastSet    []bool   // per slot: the previous row had a value
	lastVal    []uint64 // per slot: that value
	curEnt     []entry
	recEnt     []entry // strings already in the destination arena
	recSegs    []int32 // where each record attribute column's entries start in recEnt
	segCur     []int32
	segOf      []int32      // recordAttrs: per attribute slot, its column's segment of recEnt
	chgBits    []uint64     // recordAttrs: per row of a block, a bit per slot that changes
	recSet     []uint64     // recordAttrs: a bit per attribute slot set in the current record
	slotPos    []int32      // recordAttrs: per slot, its entry in the set last written
	recJSON    []signal.Str // per record array or map slot: the JSON of its last value (arena)
	recJSONOf  []uint64     // per such slot: the value recJSON converted to
	sorted     []entry
	starts     []int32
	cursor     []int32
	slotCols   []readCol
	slotTypes  []signal.ValueType // by attribute slot, with slotCols
	prevAttr   []signal.Str       // per attribute slot: last string kept in arena
	prevFixed  [numCommonCols]signal.Str
	prevDesc   [6]signal.Str
	vbuf       []parquet.Value

	// The typed decoder (decode.go) and, per chunk, the cache of its
	// dictionary's values (dictReady: sized for the current chunk).
	dec       chunkDec
	pv        pageVals // a page read through parquet-go (fromValues)
	dictReady bool
	dictX     []uint64
	dictOK    []bool
	// attrTyped: definition levels as runs, for a page that has them
	// as bytes (a page parquet-go decoded).
	defRunsBuf []valRun

	// logs
	bodyType []signal.Str
	bodyNull []bool
	// metrics
	name, desc, unit, mtype, temp, meta []signal.Str
	mono                                []bool
	valueInt                            []uint64
	valueIntOK                          []bool
	quant, quantVal                     []signal.Range // into f64
	f64                                 []float64
	// float histograms (count_float non-null) and the reset hint
	countF, zeroF        []float64
	countFOK             []bool
	bucketsF, posF, negF []signal.Range // into f64
	hint                 []signal.Str
	prevHint             signal.Str
	floatScratch         []float64
}

func (t *rowTmp) reset(n, nattr int) {
	t.arena = t.arena[:0]
	t.prevAttr = resize(t.prevAttr, nattr)
	t.lastSet = resize(t.lastSet, nattr)
	t.lastVal = resize(t.lastVal, nattr)
	t.prevFixed = [numCommonCols]signal.Str{}
	t.prevDesc = [6]signal.Str{}
	t.prevHint = 0
	t.svc = resize(t.svc, n)
	t.svcOK = resize(t.svcOK, n)
	t.scName = resize(t.scName, n)
	t.scVersion = resize(t.scVersion, n)
	t.scURL = resize(t.scURL, n)
	t.scDropped = resize(t.scDropped, n)
	t.resURL = resize(t.resURL, n)
	t.resDropped = resize(t.resDropped, n)
	t.resEnt, t.scEnt, t.recEnt = t.resEnt[:0], t.scEnt[:0], t.recEnt[:0]
	t.recSegs = t.recSegs[:0]
	t.recJSON = resize(t.recJSON, nattr)
	t.recJSONOf = resize(t.recJSONOf, nattr)
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

func (t *rowTmp) str(b []byte) signal.Str {
	off := len(t.arena)
	t.arena = append(t.arena, b...)
	return signal.MakeStr(off, len(b))
}

// strRun is str for columns whose values repeat row after row (resource and
// scope fields, sorted together): a value equal to the previous one shares
// its Str, which also lets assemble compare rows by Str alone.
func (t *rowTmp) strRun(prev *signal.Str, b []byte) signal.Str {
	if p := *prev; p.Len() == len(b) && p != 0 && bytes.Equal(t.bytes(p), b) {
		return p
	}
	*prev = t.str(b)
	return *prev
}

func (t *rowTmp) bytes(s signal.Str) []byte {
	return t.arena[s.Off() : s.Off()+s.Len()]
}

var errRows = errors.New("column row count does not match the row group")

// readGroup appends row group i to dst (a *signal.Logs, *signal.Metrics or
// *signal.Spans whose Common is c).
func (f *File) readGroup(i int, c *signal.Common, dst any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("read %q: corrupt parquet: %v", f.name, p)
		}
	}()
	f.t = getRowTmp()
	defer func() {
		f.t.slotCols, f.t.slotTypes = f.t.slotCols[:0], f.t.slotTypes[:0] // per file
		putRowTmp(f.t)
		f.t = nil
	}()
	rg := f.pf.RowGroups()[i]
	nr := rg.NumRows()
	if nr < 0 || nr > math.MaxInt32 || nr > f.pf.NumRows() {
		return fmt.Errorf("read %q: bad row count %d", f.name, nr)
	}
	n := int(nr)
	// Hold the footer's row count to the pages of a flat column before
	// sizing anything by it; every column's pages are checked as it is
	// read (readColumn, through Pages).
	chunks := rg.ColumnChunks()
	if len(chunks) != len(f.cols) {
		return fmt.Errorf("read %q: row group %d has %d columns, want %d", f.name, i, len(chunks), len(f.cols))
	}
	for j := range f.cols {
		if rc := &f.cols[j]; rc.fixed < 0 || rc.kind.IsList() {
			continue
		}
		rows, err := CheckChunk(chunks[j])
		if err != nil {
			return fmt.Errorf("read %q: row group %d: %w", f.name, i, err)
		}
		if rows != nr {
			return fmt.Errorf("read %q: row group %d column %d: %w: pages hold %d rows, the row group %d", f.name, i, j, ErrCorrupt, rows, nr)
		}
		break
	}
	for len(f.slotKey) < f.nattr {
		f.slotKey = append(f.slotKey, 0)
	}
	for j := range f.cols {
		if rc := &f.cols[j]; rc.slot >= 0 {
			f.slotKey[rc.slot] = c.Keys.IDString(rc.key)
		}
	}
	f.t.reset(n, f.nattr)
	for s := range f.t.ovf { // pooled: never a previous file's
		f.t.ovf[s], f.t.prevOvf[s] = f.t.ovf[s][:0], 0
		if f.hasOvf {
			f.t.ovf[s] = resize(f.t.ovf[s], n)
		}
	}
	var base int
	switch d := dst.(type) {
	case *signal.Logs:
		base = d.AppendRecords(n, 0, 0)
		f.t.bodyType = resize(f.t.bodyType, n)
		f.t.bodyNull = resize(f.t.bodyNull, n)
	case *signal.Metrics:
		base = d.AppendPoints(n, 0, 0, 0)
		t := f.t
		t.name, t.desc, t.unit = resize(t.name, n), resize(t.desc, n), resize(t.unit, n)
		t.mtype, t.temp, t.meta = resize(t.mtype, n), resize(t.temp, n), resize(t.meta, n)
		t.mono = resize(t.mono, n)
		t.valueInt, t.valueIntOK = resize(t.valueInt, n), resize(t.valueIntOK, n)
		t.quant, t.quantVal = resize(t.quant, n), resize(t.quantVal, n)
		t.countF, t.zeroF, t.countFOK = resize(t.countF, n), resize(t.zeroF, n), resize(t.countFOK, n)
		t.bucketsF, t.posF, t.negF = resize(t.bucketsF, n), resize(t.posF, n), resize(t.negF, n)
		t.hint = resize(t.hint, n)
		t.f64 = t.f64[:0]
	case *signal.Spans:
		base = d.AppendSpans(n, 0, 0)
	}
	for j := range f.cols {
		rc := &f.cols[j]
		if rc.fixed < 0 && rc.slot < 0 && rc.ovf == 0 || rc.fixed >= 0 && skipTyped(f.table, rc.fixed) {
			continue
		}
		if rc.slot >= 0 && rc.scope == ScopeRecord {
			f.t.recSegs = append(f.t.recSegs, int32(len(f.t.recEnt)))
		}
		if err := f.readColumn(chunks[j], rc, n, c, base, dst); err != nil {
			return fmt.Errorf("read %q: row group %d column %d: %w", f.name, i, j, err)
		}
	}
	if err := f.assemble(c, base, n, dst); err != nil {
		return fmt.Errorf("read %q: row group %d: %w", f.name, i, err)
	}
	return nil
}

var errBadID = errors.New("bad hex id")

// hexDecode decodes the hex digits of src (either case, two per byte of
// dst) into dst, as hex.Decode does: 8 digits at a time, every byte of
// the word checked at once, the rest by one table lookup per digit.
//
// 8 digits (the bytes of x, first digit lowest) become 4 bytes, first
// byte lowest: each byte must be below 0x80 and in '0'-'9', or, with 0x20
// set (lower case), in 'a'-'f'. A byte b < 0x80 plus 0x80-lo has its top
// bit set iff b >= lo, plus 0x7f-hi iff b > hi (no carries between bytes;
// a word with a top bit set is refused whatever its sums hold).
func hexDecode(dst, src []byte) error {
	if len(src) != 2*len(dst) {
		return errBadID
	}
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	var bad uint64
	for len(src) >= 8 {
		x := binary.LittleEndian.Uint64(src)
		lower := x | 0x20*ones
		digit := (x + (0x80-'0')*ones) &^ (x + (0x7f-'9')*ones) & tops
		letter := (lower + (0x80-'a')*ones) &^ (lower + (0x7f-'f')*ones) & tops
		bad |= x&tops | ((digit | letter) ^ tops)
		v := x&(0x0f*ones) + (letter>>7)*9 // each byte's value, 0-15
		// Byte 2i is the high nibble of output byte i, byte 2i+1 the low.
		v = (v&0x000f000f000f000f)<<4 | (v>>8)&0x000f000f000f000f
		v = (v | v>>8) & 0x0000ffff0000ffff
		v = (v | v>>16) & 0xffffffff
		binary.LittleEndian.PutUint32(dst, uint32(v))
		src, dst = src[8:], dst[4:]
	}
	var badTail uint8
	for i := range dst {
		hi, lo := hexVal[src[2*i]], hexVal[src[2*i+1]]
		badTail |= hi | lo
		dst[i] = hi<<4 | lo
	}
	if bad != 0 || badTail > 0xf {
		return errBadID
	}
	return nil
}

// hexTraceID decodes the 32 hex digits of x into id.
func hexTraceID(id *signal.TraceID, x []byte) bool {
	return len(x) == 32 && hexDecode(id[:], x) == nil
}

// hexSpanID decodes the 16 hex digits of x into id.
func hexSpanID(id *signal.SpanID, x []byte) bool {
	return len(x) == 16 && hexDecode(id[:], x) == nil
}

// hexVal is the value of each hex digit, 0xff for other bytes.
var hexVal = func() (t [256]uint8) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range 10 {
		t['0'+i] = uint8(i)
	}
	for i := range 6 {
		t['a'+i], t['A'+i] = uint8(10+i), uint8(10+i)
	}
	return t
}()

// listTarget is where a LIST column's elements go: the row ranges, and
// whether the values are uint64 (else float64) and go to the file's
// temporary quantile lists (else the batch); ok is false for a column
// that is not read into a batch.
func (f *File) listTarget(rc *readCol, d *signal.Metrics) (ranges []signal.Range, u64, tmp, ok bool) {
	switch rc.fixed {
	case mBucketCounts:
		return d.BucketCounts, true, false, true
	case mExpPosCounts:
		return d.PosCounts, true, false, true
	case mExpNegCounts:
		return d.NegCounts, true, false, true
	case mBounds:
		return d.Bounds, false, false, true
	case mQuantiles:
		return f.t.quant, false, true, true
	case mQuantileValues:
		return f.t.quantVal, false, true, true
	case mBucketCountsFloat:
		return f.t.bucketsF, false, true, true
	case mExpPosCountsFloat:
		return f.t.posF, false, true, true
	case mExpNegCountsFloat:
		return f.t.negF, false, true, true
	}
	return nil, false, false, false
}

// attrBytes stores the value of a string, bytes, array or map attribute:
// record values in the destination arena (JSON as protobuf), resource and
// scope values in the tmp arena until assemble. A value equal to the
// previous row's is that value (the same Str), so attrSet sees no change.
func (f *File) attrBytes(rc *readCol, c *signal.Common, b []byte) (uint64, error) {
	t := f.t
	slot := rc.slot
	if rc.scope != ScopeRecord {
		return uint64(t.strRun(&t.prevAttr[slot], b)), nil
	}
	if rc.typ == signal.ValueString || rc.typ == signal.ValueBytes {
		if t.lastSet[slot] {
			if p := signal.Str(t.lastVal[slot]); p.Len() == len(b) && bytes.Equal(c.Bytes(p), b) {
				return uint64(p), nil
			}
		}
		return uint64(c.AppendBytes(b)), nil
	}
	// Array and map values are stored as protobuf: the previous row's
	// JSON is kept to tell an equal value without converting it.
	if t.lastSet[slot] && t.recJSONOf[slot] == t.lastVal[slot] && bytes.Equal(t.bytes(t.recJSON[slot]), b) {
		return t.lastVal[slot], nil
	}
	s, err := f.anyValueProto(c, b)
	if err == nil {
		t.recJSON[slot], t.recJSONOf[slot] = t.str(b), uint64(s)
	}
	return uint64(s), err
}

// attrNull notes that an attribute column is null at row: where a value
// stops.
func (t *rowTmp) attrNull(rc *readCol, row int) {
	slot := uint32(rc.slot)
	if t.lastSet[slot] {
		t.lastSet[slot] = false
		t.addChange(rc.scope, entry{row: uint32(row), slot: slot | absentSlot})
	}
}

// attrSet notes the value x of an attribute column at row.
func (t *rowTmp) attrSet(rc *readCol, row int, x uint64) {
	// Resource and scope values repeat for long runs of (sorted) rows,
	// and so do a series' labels and many record attributes: only
	// changes are kept. Equal consecutive strings share their Str
	// (strRun, attrBytes), so comparing val is comparing values.
	slot := uint32(rc.slot)
	if !t.lastSet[slot] || t.lastVal[slot] != x {
		t.lastSet[slot], t.lastVal[slot] = true, x
		t.addChange(rc.scope, entry{row: uint32(row), slot: slot, val: x})
	}
}

// absentSlot marks a change entry whose column becomes null at its row.
const absentSlot = 1 << 31

func (t *rowTmp) addChange(s Scope, e entry) {
	ents := t.changes(s)
	*ents = append(*ents, e)
}

// changes is where the changes of attribute columns of scope s go.
func (t *rowTmp) changes(s Scope) *[]entry {
	switch s {
	case ScopeResource:
		return &t.resEnt
	case ScopeScope:
		return &t.scEnt
	}
	return &t.recEnt
}

// applyChanges updates the current values of resource or scope columns with
// the changes at one row and reports whether there were any.
func (t *rowTmp) applyChanges(chg []entry) bool {
	for _, e := range chg {
		slot := e.slot &^ absentSlot
		t.lastSet[slot] = e.slot&absentSlot == 0
		t.lastVal[slot] = e.val
	}
	return len(chg) > 0
}

// currentEntries returns the current values of the given slots, in slot
// order (the order of their columns).
func (t *rowTmp) currentEntries(r int, slots []uint32) []entry {
	row := t.curEnt[:0]
	for _, slot := range slots {
		if t.lastSet[slot] {
			row = append(row, entry{row: uint32(r), slot: slot, val: t.lastVal[slot]})
		}
	}
	t.curEnt = row
	return row
}

// byRow sorts entries by row (stably: column order within a row): a
// comparison sort for a few (resource and scope changes, usually), else a
// counting sort.
func (t *rowTmp) byRow(ents []entry, n int) []entry {
	if len(ents) <= n/16 {
		t.sorted = append(t.sorted[:0], ents...)
		slices.SortStableFunc(t.sorted, func(a, b entry) int { return cmp.Compare(a.row, b.row) })
		return t.sorted
	}
	t.starts = resize(t.starts, n+1)
	starts := t.starts
	for _, e := range ents {
		starts[e.row+1]++
	}
	for r := range n {
		starts[r+1] += starts[r]
	}
	sorted := grow(t.sorted[:0], len(ents))
	t.sorted = sorted
	cursor := grow(t.cursor[:0], n)
	t.cursor = cursor
	copy(cursor, starts[:n])
	for _, e := range ents {
		sorted[cursor[e.row]] = e
		cursor[e.row]++
	}
	return sorted
}

// rowChanges walks entries sorted by row, one row after another.
type rowChanges struct {
	ents []entry
	next int
}

// at returns the entries of row r; rows must come in ascending order.
func (w *rowChanges) at(r int) []entry {
	i := w.next
	j := i
	for j < len(w.ents) && w.ents[j].row == uint32(r) {
		j++
	}
	w.next = j
	return w.ents[i:j]
}

// assemble builds resources, scopes, record attributes and the fields that
// depend on several columns.
func (f *File) assemble(c *signal.Common, base, n int, dst any) error {
	t := f.t
	var resOf, scOf []uint32
	var rec []signal.Range
	switch d := dst.(type) {
	case *signal.Logs:
		resOf, scOf, rec = d.Resource[base:], d.Scope[base:], d.Attr[base:]
		for r := range n {
			bt := t.bodyType[r]
			if bt == 0 {
				d.BodyType[base+r] = signal.ValueString
				continue
			}
			vt, ok := signal.ParseValueType(string(t.bytes(bt)))
			if !ok {
				return fmt.Errorf("bad body_type %q", t.bytes(bt))
			}
			if vt == signal.ValueEmpty || t.bodyNull[r] {
				d.BodyType[base+r], d.Body[base+r] = signal.ValueEmpty, 0
				continue
			}
			typ, v, err := parseAnyValueJSON(c, c.Bytes(signal.Str(d.Body[base+r])))
			if err != nil {
				return err
			}
			d.BodyType[base+r], d.Body[base+r] = typ, v
		}
	case *signal.Metrics:
		resOf, scOf, rec = d.Resource[base:], d.Scope[base:], d.Attr[base:]
		if err := f.assembleMetrics(d, base, n); err != nil {
			return err
		}
	case *signal.Spans:
		resOf, scOf, rec = d.Resource[base:], d.Scope[base:], d.Attr[base:]
	}

	// Resources. lastSet/lastVal are reused to replay the changes recorded
	// by attrTyped row by row.
	clear(t.lastSet)
	chg := rowChanges{ents: t.byRow(t.resEnt, n)}
	for r := range n {
		changed := t.applyChanges(chg.at(r))
		if r > 0 && !changed && t.svcOK[r] == t.svcOK[r-1] && t.svc[r] == t.svc[r-1] && t.resURL[r] == t.resURL[r-1] &&
			t.resDropped[r] == t.resDropped[r-1] && t.ovfAt(ScopeResource, r) == t.ovfAt(ScopeResource, r-1) {
			resOf[r] = resOf[r-1]
			continue
		}
		row := t.currentEntries(r, f.resSlots)
		sig := f.sigBuf[:0]
		if t.svcOK[r] {
			sig = append(sig, 1)
			sig = appendLenBytes(sig, t.bytes(t.svc[r]))
		} else {
			sig = append(sig, 0)
		}
		sig = appendLenBytes(sig, t.bytes(t.resURL[r]))
		sig = strconv.AppendUint(sig, uint64(t.resDropped[r]), 10)
		sig = f.appendEntSig(sig, row)
		sig = appendLenBytes(sig, t.bytes(t.ovfAt(ScopeResource, r)))
		f.sigBuf = sig
		if len(f.prevRes) > 0 && bytes.Equal(sig, f.prevRes) {
			resOf[r] = f.prevResID
			continue
		}
		id, ok := f.resIDs[string(sig)]
		if !ok {
			var err error
			if id, err = f.newResource(c, r, row); err != nil {
				return err
			}
			f.resIDs[string(sig)] = id
		}
		f.prevRes = append(f.prevRes[:0], sig...)
		f.prevResID = id
		resOf[r] = id
	}
	// Scopes.
	clear(t.lastSet)
	chg = rowChanges{ents: t.byRow(t.scEnt, n)}
	for r := range n {
		changed := t.applyChanges(chg.at(r))
		if r > 0 && !changed && t.scName[r] == t.scName[r-1] && t.scVersion[r] == t.scVersion[r-1] && t.scURL[r] == t.scURL[r-1] &&
			t.scDropped[r] == t.scDropped[r-1] && t.ovfAt(ScopeScope, r) == t.ovfAt(ScopeScope, r-1) {
			scOf[r] = scOf[r-1]
			continue
		}
		row := t.currentEntries(r, f.scSlots)
		sig := f.sigBuf[:0]
		sig = appendLenBytes(sig, t.bytes(t.scName[r]))
		sig = appendLenBytes(sig, t.bytes(t.scVersion[r]))
		sig = appendLenBytes(sig, t.bytes(t.scURL[r]))
		sig = strconv.AppendUint(sig, uint64(t.scDropped[r]), 10)
		sig = f.appendEntSig(sig, row)
		sig = appendLenBytes(sig, t.bytes(t.ovfAt(ScopeScope, r)))
		f.sigBuf = sig
		if len(f.prevSc) > 0 && bytes.Equal(sig, f.prevSc) {
			scOf[r] = f.prevScID
			continue
		}
		id, ok := f.scIDs[string(sig)]
		if !ok {
			start := uint32(c.Attrs.Len())
			if err := f.appendEnts(c, row, false); err != nil {
				return err
			}
			if err := appendOverflowAttrs(c, t.bytes(t.ovfAt(ScopeScope, r))); err != nil {
				return err
			}
			c.Scopes = append(c.Scopes, signal.Scope{
				Name:         c.AppendBytes(t.bytes(t.scName[r])),
				Version:      c.AppendBytes(t.bytes(t.scVersion[r])),
				Attrs:        signal.Range{Start: start, End: uint32(c.Attrs.Len())},
				DroppedAttrs: t.scDropped[r],
				SchemaURL:    c.AppendBytes(t.bytes(t.scURL[r])),
			})
			id = uint32(len(c.Scopes) - 1)
			f.scIDs[string(sig)] = id
		}
		f.prevSc = append(f.prevSc[:0], sig...)
		f.prevScID = id
		scOf[r] = id
	}
	return f.recordAttrs(c, rec, n)
}

func (f *File) slotType(slot uint32) signal.ValueType {
	return f.attrCols()[slot].typ
}

// attrCols returns the attribute columns by slot.
func (f *File) attrCols() []readCol {
	if len(f.t.slotCols) != f.nattr {
		f.t.slotCols = f.t.slotCols[:0]
		f.t.slotTypes = f.t.slotTypes[:0]
		for _, rc := range f.cols {
			if rc.slot >= 0 {
				f.t.slotCols = append(f.t.slotCols, rc)
				f.t.slotTypes = append(f.t.slotTypes, rc.typ)
			}
		}
	}
	return f.t.slotCols
}

func appendLenBytes(dst, b []byte) []byte {
	dst = strconv.AppendInt(dst, int64(len(b)), 10)
	dst = append(dst, ':')
	return append(dst, b...)
}

// appendEntSig appends a signature of resource or scope entries (values in
// the tmp arena).
func (f *File) appendEntSig(sig []byte, row []entry) []byte {
	cols := f.attrCols()
	for _, e := range row {
		sig = strconv.AppendUint(sig, uint64(e.slot), 10)
		sig = append(sig, '=')
		switch cols[e.slot].typ {
		case signal.ValueString, signal.ValueBytes, signal.ValueArray, signal.ValueMap:
			sig = appendLenBytes(sig, f.t.bytes(signal.Str(e.val)))
		default:
			sig = strconv.AppendUint(sig, e.val, 16)
			sig = append(sig, ';')
		}
	}
	return sig
}

// appendEnts appends resource or scope entries (values in the tmp arena) to
// c.Attrs, copying strings and converting JSON to protobuf.
func (f *File) appendEnts(c *signal.Common, row []entry, _ bool) error {
	cols := f.attrCols()
	for _, e := range row {
		typ := cols[e.slot].typ
		v := e.val
		switch typ {
		case signal.ValueString, signal.ValueBytes:
			v = uint64(c.AppendBytes(f.t.bytes(signal.Str(v))))
		case signal.ValueArray, signal.ValueMap:
			off := len(c.Buf)
			var err error
			if c.Buf, err = otlp.AppendAnyValueProto(c.Buf, f.t.bytes(signal.Str(v))); err != nil {
				c.Buf = c.Buf[:off]
				return err
			}
			v = uint64(signal.MakeStr(off, len(c.Buf)-off))
		}
		c.Attrs.Append(f.slotKey[e.slot], typ, v)
	}
	return nil
}

func (f *File) newResource(c *signal.Common, r int, row []entry) (uint32, error) {
	t := f.t
	start := uint32(c.Attrs.Len())
	if t.svcOK[r] {
		c.Attrs.Append(c.Keys.IDString("service.name"), signal.ValueString, uint64(c.AppendBytes(t.bytes(t.svc[r]))))
	}
	if err := f.appendEnts(c, row, true); err != nil {
		return 0, err
	}
	if err := appendOverflowAttrs(c, t.bytes(t.ovfAt(ScopeResource, r))); err != nil {
		return 0, err
	}
	c.Resources = append(c.Resources, signal.Resource{
		Attrs:        signal.Range{Start: start, End: uint32(c.Attrs.Len())},
		DroppedAttrs: t.resDropped[r],
		SchemaURL:    c.AppendBytes(t.bytes(t.resURL[r])),
	})
	return uint32(len(c.Resources) - 1), nil
}

func (f *File) assembleMetrics(d *signal.Metrics, base, n int) error {
	t := f.t
	for r := range n {
		if t.valueIntOK[r] {
			d.NumberType[base+r], d.Number[base+r] = signal.ValueInt, t.valueInt[r]
		}
		// Quantiles back into (quantile, value) pairs.
		q, qv := t.quant[r], t.quantVal[r]
		if q.Len() != qv.Len() {
			return fmt.Errorf("quantiles and quantile_values differ in length")
		}
		start := uint32(len(d.F64))
		for j := range q.Len() {
			d.F64 = append(d.F64, t.f64[int(q.Start)+j], t.f64[int(qv.Start)+j])
		}
		d.Quantiles[base+r] = signal.Range{Start: start, End: uint32(len(d.F64))}
		if t.countFOK[r] {
			f.assembleFloatHist(d, base+r, r)
		}
		if h := t.hint[r]; h.Len() > 0 {
			d.Has[base+r] |= resetHintBits(t.bytes(h))
		}
		// Descriptor: usually the previous row's.
		if r > 0 && t.name[r] == t.name[r-1] && t.desc[r] == t.desc[r-1] && t.unit[r] == t.unit[r-1] &&
			t.mtype[r] == t.mtype[r-1] && t.temp[r] == t.temp[r-1] && t.meta[r] == t.meta[r-1] && t.mono[r] == t.mono[r-1] {
			d.Desc[base+r] = d.Desc[base+r-1]
			continue
		}
		sig := f.sigBuf[:0]
		for _, s := range [...]signal.Str{t.name[r], t.desc[r], t.unit[r], t.mtype[r], t.temp[r], t.meta[r]} {
			sig = appendLenBytes(sig, t.bytes(s))
		}
		if t.mono[r] {
			sig = append(sig, 1)
		}
		f.sigBuf = sig
		id, ok := f.descIDs[string(sig)]
		if !ok {
			mt, ok1 := signal.ParseMetricType(string(t.bytes(t.mtype[r])))
			tp, ok2 := signal.ParseTemporality(string(t.bytes(t.temp[r])))
			if !ok1 || !ok2 {
				return fmt.Errorf("bad metric_type %q or temporality %q", t.bytes(t.mtype[r]), t.bytes(t.temp[r]))
			}
			desc := signal.MetricDesc{
				Name:        d.AppendBytes(t.bytes(t.name[r])),
				Description: d.AppendBytes(t.bytes(t.desc[r])),
				Unit:        d.AppendBytes(t.bytes(t.unit[r])),
				Type:        mt,
				Temporality: tp,
				Monotonic:   t.mono[r],
			}
			a := uint32(d.Attrs.Len())
			desc.Metadata = signal.Range{Start: a, End: a}
			if t.meta[r].Len() > 0 {
				rg, err := otlp.AppendAttrsFromJSON(&d.Common, t.bytes(t.meta[r]))
				if err != nil {
					return err
				}
				desc.Metadata = rg
			}
			d.Descs = append(d.Descs, desc)
			id = uint32(len(d.Descs) - 1)
			f.descIDs[string(sig)] = id
		}
		d.Desc[base+r] = id
	}
	return nil
}

// assembleFloatHist makes point p (row r of the group) a float histogram
// from the float count columns (signal.Metrics.SetFloatCounts).
func (f *File) assembleFloatHist(d *signal.Metrics, p, r int) {
	t := f.t
	rng := func(x signal.Range) []float64 { return t.f64[x.Start:x.End] }
	b := t.floatScratch[:0]
	if string(t.bytes(t.mtype[r])) == signal.MetricExponentialHistogram.String() {
		b = append(append(b, rng(t.posF[r])...), rng(t.negF[r])...)
		d.SetFloatCounts(p, true, t.countF[r], t.zeroF[r], b, int(t.posF[r].Len()))
	} else {
		b = append(b, rng(t.bucketsF[r])...)
		d.SetFloatCounts(p, false, t.countF[r], 0, b, 0)
	}
	t.floatScratch = b
}

// resetHintBits is the signal.Metrics.Has bits of a reset_hint value.
func resetHintBits(b []byte) uint8 {
	switch string(b) {
	case "yes":
		return signal.HintReset
	case "no":
		return signal.HintNoReset
	case "gauge":
		return signal.HintGauge
	}
	return 0
}

// ovfAt is the overflow JSON of scope s at row r, 0 when none.
func (t *rowTmp) ovfAt(s Scope, r int) signal.Str {
	if o := t.ovf[s]; r < len(o) {
		return o[r]
	}
	return 0
}

// appendOverflowAttrs appends to c.Attrs the attributes of an overflow
// column's JSON object (see overflowColumns), keys in their stored order;
// empty js appends nothing.
func appendOverflowAttrs(c *signal.Common, js []byte) error {
	if len(js) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("overflow attributes: not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("overflow attributes: %w", err)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("overflow attributes: key %v is not a string", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("overflow attribute %q: %w", key, err)
		}
		typ, v, err := parseAnyValueJSON(c, raw)
		if err != nil {
			return fmt.Errorf("overflow attribute %q: %w", key, err)
		}
		c.Attrs.Append(c.Keys.IDString(key), typ, v)
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("overflow attributes: %w", err)
	}
	return nil
}

// DecodeOverflow appends the attributes of js, an overflow column's JSON
// object (key → OTLP JSON AnyValue), to c.Attrs, typed as they were sent.
func DecodeOverflow(c *signal.Common, js []byte) error { return appendOverflowAttrs(c, js) }
