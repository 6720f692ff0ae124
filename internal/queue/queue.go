package queue

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// flushBytes bounds the encode buffer: a large batch is written in chunks so
// the buffer the queue keeps does not grow to the largest batch ever seen.
const flushBytes = 1 << 20

// Queue is a durable, segmented write-ahead log. See the package doc for the
// concurrency rules and on-disk invariants.
type Queue struct {
	opts      Options
	fs        fileSystem
	lock      io.Closer // Dir/LockName, held from Open to Close
	log       *slog.Logger
	segData   int64 // record bytes a segment holds: SegmentBytes - header
	maxRecord int

	// appendMu serializes the write phase of Append (encode, write,
	// rotate), so a batch stays contiguous even while rotation waits for a
	// running fsync with mu released. Lock order: appendMu, then mu.
	appendMu   sync.Mutex
	mu         sync.Mutex
	cond       sync.Cond // broadcast when syncing ends or synced advances
	segs       []*segment
	active     file   // write handle of segs[len(segs)-1]
	retired    []file // sealed write handles a running fsync may still use
	writeEnd   Position
	nextRecord uint64 // ordinal of the next record appended
	bytes      int64  // on-disk bytes of all segments
	syncing    bool   // an fsync leader runs outside mu
	durWaiters int    // appenders inside waitDurableLocked
	joined     uint8  // one bit per recent fsync, newest lowest: it made several appenders durable at once
	dirDirty   bool   // a segment was created since the last directory sync
	closed     bool
	err        error // sticky, wraps ErrFailed
	// wbuf holds encoded records not yet written: appenders leave their
	// records here and the fsync leader writes all of them with one
	// pwrite before its fsync (one write per group commit, not one per
	// Append). pend is the fate of the records in wbuf, shared by their
	// appenders; nil while wbuf is empty.
	wbuf  []byte
	wrecs uint64 // records encoded in wbuf
	// zeroedTo is the file offset up to which the active segment's blocks
	// are written (records, then zeros: preallocate; a recycled file's
	// whole size).
	zeroedTo int64
	// spares are released segment files kept for reuse (recycle), at most
	// maxSpares; spareBytes is their size, which counts against MaxBytes.
	spares        []spare
	spareBytes    int64
	spareDirDirty bool // a rename into a spare is not known durable yet
	pend          *pendingWrite
	freePend      []*pendingWrite // no appender refers to these: Append allocates nothing

	// Free-space headroom (Options.MinFreeBytes); minFree 0 means off.
	minFree      int64
	free         int64     // free bytes at the last statfs
	freeAt       time.Time // time of the last statfs; zero forces one
	writtenSince int64     // bytes the queue wrote since then
	spaceErr     bool      // statfs failed once (logged); check off
	refusedNeed  int64     // size of the last append refused for space
	scratch      [12]byte
	corruptAt    map[Position]bool  // corrupt regions already counted and logged
	cursors      map[string]*Cursor // exporters' read positions (cursor.go)
	released     Position           // highest position passed to Release

	// Read by readers without mu.
	synced   atomic.Uint64 // durable end: readers never pass it
	first    atomic.Uint64 // base of the oldest stored segment
	notify   atomic.Pointer[chan struct{}]
	waiters  atomic.Int64 // readers about to wait on notify
	isClosed atomic.Bool

	appends, appendedRecords, fsyncs atomic.Uint64
	recycled                         atomic.Uint64
	droppedRecords, droppedBytes     atomic.Uint64
	corruptRecords, corruptBytes     atomic.Uint64
	tornBytes                        atomic.Uint64
	lowDisk                          atomic.Bool
	lowDiskRefusals                  atomic.Uint64
}

// segment is the in-memory description of one segment file. Fields are
// guarded by Queue.mu except base, path and badHeader, which never change.
type segment struct {
	base        Position
	firstRecord uint64
	path        string
	size        int64     // record bytes (file size - header), clamped to the next base
	version     uint16    // segment format (segmentVersion, or 1 for an older build's)
	tag         uint32    // version 2: the tag its record headers carry
	sealed      bool      // no more appends; size is final
	badHeader   bool      // header unreadable: the whole file is skipped
	created     time.Time // start of the segment (Open for recovered ones)
	sealedAt    time.Time // when it was sealed (Open for recovered ones)
}

func (s *segment) end() Position { return s.base + Position(s.size) }

// header is what a scanner needs of the segment's header.
func (s *segment) header() segmentHeader {
	return segmentHeader{version: s.version, base: s.base, firstRecord: s.firstRecord, tag: s.tag}
}

// spare is a released segment file waiting to be reused (recycle).
type spare struct {
	path string
	size int64
}

// pendingWrite is the outcome of one write of the encode buffer, which may
// hold the records of several appenders. err is set (under Queue.mu) when
// the write failed and its records were cut off again: none of them may be
// acknowledged, and their positions are reused by later records.
type pendingWrite struct {
	err  error
	refs int // appenders waiting on it; reused once none is and it was written
}

// Stats is a snapshot of the queue's counters.
type Stats struct {
	Bytes    int64  // on-disk bytes of all segments, headers included
	Records  uint64 // records stored (approximate after corruption)
	Segments int
	First    Position // oldest stored position
	Last     Position // durable end: position after the last acknowledged record

	Appends         uint64 // successful Append calls since Open
	AppendedRecords uint64 // records in them
	Fsyncs          uint64 // file fsyncs since Open; Appends/Fsyncs is the group-commit factor
	Recycled        uint64 // segments started in a released segment's file since Open
	SpareBytes      int64  // released segment files kept for reuse (not in Bytes)

	DroppedRecords uint64 // deleted by DropOldest, never read by a Release
	DroppedBytes   uint64
	CorruptRecords uint64 // corrupt regions skipped by recovery and readers
	CorruptBytes   uint64
	TornBytes      uint64 // torn tail bytes recovery zeroed (up to the last non-zero one)

	MinFreeBytes    int64  // headroom kept free on the file system; 0 when off
	FreeBytes       int64  // free bytes on the file system at the last check
	LowDisk         bool   // the last Append was refused for the headroom
	LowDiskRefusals uint64 // Appends refused with ErrLowDisk since Open
}

// LockName is the file in Dir that Open locks (flock) for as long as the
// queue is open, so that a second process given the same directory fails
// to open it (ErrLocked) instead of writing over the first one's segments.
const LockName = "queue.lock"

// Open creates opts.Dir if needed, locks it (LockName), recovers the segments in it and returns a
// queue ready for appends. Recovery never fails on segment contents, only on
// I/O errors.
func Open(opts Options) (*Queue, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	q := &Queue{
		opts:      opts,
		fs:        opts.fs,
		log:       opts.Logger.With("queue", opts.Dir),
		segData:   opts.SegmentBytes - segmentHeaderSize,
		maxRecord: int(opts.SegmentBytes - segmentHeaderSize - recordHeaderSize),
	}
	q.cond.L = &q.mu
	ch := make(chan struct{})
	q.notify.Store(&ch)
	if err := q.fs.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("queue: create dir %q: %w", opts.Dir, err)
	}
	if q.lock, err = q.fs.Lock(filepath.Join(opts.Dir, LockName)); err != nil {
		return nil, err
	}
	if err := q.recover(); err != nil {
		q.closeFiles()
		q.lock.Close()
		return nil, err
	}
	if err := q.loadCursors(); err != nil {
		q.closeFiles()
		q.lock.Close()
		return nil, err
	}
	q.initSpace()
	return q, nil
}

func (q *Queue) path(base Position) string { return filepath.Join(q.opts.Dir, segmentName(base)) }

func (q *Queue) activeSeg() *segment { return q.segs[len(q.segs)-1] }

// recover rebuilds the segment list. Sealed segments are only stat'ed and
// their headers read (invariant 5 says they are durable and complete); the
// last segment is scanned record by record, which bounds recovery time by
// SegmentBytes, not by the queue size.
func (q *Queue) recover() error {
	names, err := q.fs.ReadDir(q.opts.Dir)
	if err != nil {
		return fmt.Errorf("queue: read dir %q: %w", q.opts.Dir, err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, spareExt) {
			// A spare of the last run (recycle): its contents are
			// released data or a header for a segment that was never
			// named; nothing in it is needed.
			if err := q.fs.Remove(filepath.Join(q.opts.Dir, name)); err != nil {
				return fmt.Errorf("queue: remove spare segment file %q: %w", name, err)
			}
			continue
		}
		base, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		now := time.Now()
		q.segs = append(q.segs, &segment{base: base, path: filepath.Join(q.opts.Dir, name), sealed: true, created: now, sealedAt: now})
	}
	slices.SortFunc(q.segs, func(a, b *segment) int { return cmpPos(a.base, b.base) })
	for _, s := range q.segs[:max(len(q.segs)-1, 0)] {
		if err := q.loadSealed(s); err != nil {
			return err
		}
	}
	// floor keeps positions monotonic when recovery removes the newest
	// file: the next segment may not start below any base ever used.
	floor := q.opts.Start
	for len(q.segs) > 0 {
		last := q.activeSeg()
		keep, err := q.recoverLast(last)
		if err != nil {
			return err
		}
		if keep {
			break
		}
		floor = max(floor, last.base)
	}
	// Overlaps only come from damaged or hand-made files; the later segment
	// wins so positions stay unique.
	for i := 0; i+1 < len(q.segs); i++ {
		s, next := q.segs[i], q.segs[i+1]
		if s.end() > next.base {
			q.log.Warn("queue: segment overlaps the next one; clamping", "file", s.path, "end", s.end(), "next_base", next.base)
			s.size = int64(next.base - s.base)
		}
		if s.badHeader {
			s.firstRecord = next.firstRecord
		}
	}
	older := q.active != nil && q.activeSeg().version != segmentVersion
	if older {
		// A last segment an older build wrote: appends go to a new
		// segment of this build's format, so this one is sealed, cut to
		// its records as a sealed segment is (rotateLocked), or removed
		// when it holds none (the new one takes its name).
		s := q.activeSeg()
		if s.size == 0 {
			q.active.Close()
			q.active = nil
			if err := q.fs.Remove(s.path); err != nil {
				return fmt.Errorf("queue: remove empty segment %q: %w", s.path, err)
			}
			q.bytes -= segmentHeaderSize
			q.segs = q.segs[:len(q.segs)-1]
		} else if err := q.active.Truncate(segmentHeaderSize + s.size); err != nil {
			return fmt.Errorf("queue: truncate segment %q to its data: %w", s.path, err)
		}
	}
	if q.active != nil {
		// Invariant 5 before sealing it below; also invariant 6.
		if err := q.active.Sync(); err != nil {
			return fmt.Errorf("queue: fsync segment %q: %w", q.activeSeg().path, err)
		}
	}
	if q.active == nil || q.writeEnd < floor || older {
		if err := q.startSegmentLocked(max(q.writeEnd, floor)); err != nil {
			return err
		}
	}
	// Invariant 6: whatever recovery hands to readers is durable before any
	// reader can see it, so a later power loss cannot take back a position
	// a reader has already delivered downstream.
	if err := q.active.Sync(); err != nil {
		return fmt.Errorf("queue: fsync segment %q: %w", q.activeSeg().path, err)
	}
	if err := q.fs.SyncDir(q.opts.Dir); err != nil {
		return fmt.Errorf("queue: fsync dir %q: %w", q.opts.Dir, err)
	}
	q.synced.Store(uint64(q.writeEnd))
	q.first.Store(uint64(q.segs[0].base))
	return nil
}

func cmpPos(a, b Position) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (q *Queue) loadSealed(s *segment) error {
	f, err := q.fs.OpenFile(s.path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("queue: open segment %q: %w", s.path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("queue: stat segment %q: %w", s.path, err)
	}
	q.bytes += size
	s.size = max(size-segmentHeaderSize, 0)
	h, err := readHeader(f, s)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return err
		}
		s.badHeader = true
		q.corruptRecords.Add(1)
		q.corruptBytes.Add(uint64(size))
		q.log.Error("queue: skipping segment with a corrupt header", "file", s.path, "offset", 0, "bytes", size, "err", err)
		return nil
	}
	s.firstRecord, s.version, s.tag = h.firstRecord, h.version, h.tag
	return nil
}

func readHeader(f file, s *segment) (segmentHeader, error) {
	var b [segmentHeaderSize]byte
	n, err := f.ReadAt(b[:], 0)
	if n < len(b) {
		if err != nil && !errors.Is(err, io.EOF) {
			return segmentHeader{}, fmt.Errorf("queue: read header of %q: %w", s.path, err)
		}
		return segmentHeader{}, fmt.Errorf("queue: segment %q: %w: %d header bytes", s.path, ErrCorrupt, n)
	}
	h, err := parseSegmentHeader(b[:])
	if err != nil {
		return h, fmt.Errorf("queue: segment %q: %w", s.path, err)
	}
	if h.base != s.base {
		return h, fmt.Errorf("queue: segment %q: %w: header base %d differs from file name", s.path, ErrCorrupt, h.base)
	}
	return h, nil
}

// recoverLast scans the last segment, zeroes a torn tail and makes the
// segment the active one. It returns keep=false after removing a segment
// that holds nothing (crash while it was being created), so that the caller
// recovers the one before it.
func (q *Queue) recoverLast(s *segment) (keep bool, err error) {
	f, err := q.fs.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Errorf("queue: open segment %q: %w", s.path, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return false, fmt.Errorf("queue: stat segment %q: %w", s.path, err)
	}
	h, err := readHeader(f, s)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			f.Close()
			return false, err
		}
		created := size <= segmentHeaderSize
		if !created {
			// Zero-filled past the header (preallocate): created, nothing
			// written into it yet.
			nz, err := dataEnd(f, segmentHeaderSize, size)
			if err != nil {
				f.Close()
				return false, fmt.Errorf("queue: read segment %q: %w", s.path, err)
			}
			created = nz == segmentHeaderSize
		}
		if created {
			// Invariant 4: a file is only acknowledged into after its header
			// is durable, so a short or torn header means nothing in it was
			// ever acknowledged.
			f.Close()
			q.log.Warn("queue: removing segment torn while being created", "file", s.path, "bytes", size)
			if err := q.fs.Remove(s.path); err != nil {
				return false, fmt.Errorf("queue: remove torn segment %q: %w", s.path, err)
			}
			q.segs = q.segs[:len(q.segs)-1]
			return false, nil
		}
		f.Close()
		s.badHeader = true
		s.size = size - segmentHeaderSize
		q.bytes += size
		q.corruptRecords.Add(1)
		q.corruptBytes.Add(uint64(size))
		q.log.Error("queue: skipping segment with a corrupt header", "file", s.path, "offset", 0, "bytes", size, "err", err)
		if len(q.segs) > 1 {
			s.firstRecord = q.segs[len(q.segs)-2].firstRecord
		}
		q.writeEnd, q.nextRecord = s.end(), s.firstRecord
		return true, nil // Open starts a fresh segment after it
	}
	s.firstRecord, s.version, s.tag = h.firstRecord, h.version, h.tag
	var sc segmentScanner
	sc.reset(f, s.base, size, h)
	off := int64(segmentHeaderSize)
	var records uint64
	end := size // where the records end: the file's end, or before a preallocated rest of zeros
	for off < end {
		_, next, st, err := sc.record(off)
		if err != nil {
			f.Close()
			return false, fmt.Errorf("queue: read segment %q at offset %d: %w", s.path, off, err)
		}
		if st == recordOK {
			records++
			off = next
			continue
		}
		if sc.tag != 0 {
			// Version 2: the records end at the first header without
			// the segment's tag (zeros, or an earlier use's bytes in a
			// recycled file) unless a record with it follows.
			p, found, err := sc.resync(off)
			if err != nil {
				f.Close()
				return false, fmt.Errorf("queue: read segment %q at offset %d: %w", s.path, off, err)
			}
			if found {
				q.noteCorrupt(s.path, sc.pos(off), off, p-off, "corrupt record")
				off = p
				continue
			}
			// A torn write: the records with the tag it left (here, or
			// passed by resync), up to their last non-zero byte, are
			// zeroed; recovery's fsync below makes that durable. A
			// header without the tag is never a record: not counted.
			torn := sc.tornEnd
			if st == recordBad || st == recordShort {
				e, err := sc.taggedEnd(off)
				if err == nil {
					torn = max(torn, e)
				}
			}
			nz := off
			if torn > off {
				nz, err = dataEnd(f, off, torn)
			}
			if err != nil {
				f.Close()
				return false, fmt.Errorf("queue: read segment %q at offset %d: %w", s.path, off, err)
			}
			if nz > off {
				q.tornBytes.Add(uint64(nz - off))
				q.log.Warn("queue: zeroing torn tail", "file", s.path, "offset", off, "bytes", nz-off)
				if err := preallocate(f, off, nz); err != nil {
					f.Close()
					return false, fmt.Errorf("queue: zero torn tail of segment %q at %d: %w", s.path, off, err)
				}
			}
			end = off
			break
		}
		// Version 1. Zeros from here to the end are the preallocated space past the
		// data (startSegmentLocked): the records end here, nothing is torn.
		nz, err := dataEnd(f, off, end)
		if err != nil {
			f.Close()
			return false, fmt.Errorf("queue: read segment %q at offset %d: %w", s.path, off, err)
		}
		if nz == off {
			end = off
			break
		}
		p, found, err := sc.resync(off)
		if err != nil {
			f.Close()
			return false, fmt.Errorf("queue: read segment %q at offset %d: %w", s.path, off, err)
		}
		if found {
			q.noteCorrupt(s.path, sc.pos(off), off, p-off, "corrupt record")
			off = p
			continue
		}
		// A torn write: its bytes, up to the last non-zero one, are zeroed
		// (the file keeps its preallocated size; recovery's fsync below
		// makes that durable before anything is appended over them).
		q.tornBytes.Add(uint64(nz - off))
		q.log.Warn("queue: zeroing torn tail", "file", s.path, "offset", off, "bytes", nz-off)
		if err := preallocate(f, off, nz); err != nil {
			f.Close()
			return false, fmt.Errorf("queue: zero torn tail of segment %q at %d: %w", s.path, off, err)
		}
		end = off
	}
	s.size = end - segmentHeaderSize
	s.sealed = false
	q.bytes += end
	q.active = f
	q.zeroedTo = size
	q.writeEnd = s.end()
	q.nextRecord = s.firstRecord + records
	return true, nil
}

// zeros is what preallocate writes (never written to).
var zeros = make([]byte, 1<<20)

// preallocChunk is how far ahead of its records the active segment is
// zero-filled (at most to SegmentBytes): one fill, and one sync that
// writes metadata, per 4 MiB of records, each a short stall.
const preallocChunk = 4 << 20

// preallocate writes zeros over the file bytes [from, to). The active
// segment is zero-filled ahead of its records (preallocChunk): an append
// then writes into blocks the file system has allocated and written,
// without changing the file's size, so the group commit's fdatasync writes
// the records and flushes the disk's cache without committing inode
// metadata (fallocate alone leaves ext4's extents unwritten, and the first
// write into them is a metadata change). Recovery finds where the records
// end by the zeros after them.
func preallocate(f file, from, to int64) error {
	for off := from; off < to; {
		n := min(int64(len(zeros)), to-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// startSegmentLocked creates a new active segment at base, in a spare
// file when there is one (recycle). The previous active segment, if any,
// must already be durable (invariant 5).
func (q *Queue) startSegmentLocked(base Position) error {
	path := q.path(base)
	h := segmentHeader{version: segmentVersion, base: base, firstRecord: q.nextRecord, tag: newTag()}
	f, written := q.recycleLocked(path, h)
	if f == nil {
		var err error
		f, err = q.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("queue: create segment %q: %w", path, err)
		}
		if _, err := f.WriteAt(appendSegmentHeader(nil, h), 0); err != nil {
			f.Close()
			// Best effort: a leftover header-only file is removed by recovery.
			_ = q.fs.Remove(path)
			return fmt.Errorf("queue: write header of %q: %w", path, err)
		}
		written = segmentHeaderSize
	}
	if q.active != nil {
		q.activeSeg().sealed = true
		q.activeSeg().sealedAt = time.Now()
		if q.syncing {
			q.retired = append(q.retired, q.active)
		} else if err := q.active.Close(); err != nil {
			q.log.Warn("queue: close sealed segment", "file", q.activeSeg().path, "err", err)
		}
	}
	q.segs = append(q.segs, &segment{base: base, firstRecord: q.nextRecord, path: path, created: time.Now(),
		version: h.version, tag: h.tag})
	q.active = f
	q.zeroedTo = written
	q.writeEnd = base
	q.bytes += segmentHeaderSize
	q.dirDirty = true
	return nil
}

// maxSpares is how many released segment files the queue keeps for reuse:
// enough for the rotations between two releases of a steady consumer.
const maxSpares = 2

// spareExt names a spare: the released segment's name plus this suffix,
// which recovery removes (parseSegmentName does not take it).
const spareExt = ".free"

// spareLocked keeps the file of the released segment s for reuse instead
// of deleting it, if fewer than maxSpares are kept (no directory fsync:
// a crash may bring the released segment back under its old name, which
// is data below a committed position, as a lost deletion is). Reports
// whether it did; else the caller deletes the file.
func (q *Queue) spareLocked(s *segment) bool {
	if len(q.spares) >= maxSpares || q.closed {
		return false
	}
	sp := spare{path: s.path + spareExt, size: s.size + segmentHeaderSize}
	if err := q.fs.Rename(s.path, sp.path); err != nil {
		q.log.Warn("queue: keep released segment file for reuse", "file", s.path, "err", err)
		return false
	}
	q.spares = append(q.spares, sp)
	q.spareBytes += sp.size
	q.spareDirDirty = true
	return true
}

// dropSparesLocked deletes the spare files (the space is needed).
func (q *Queue) dropSparesLocked() {
	for _, sp := range q.spares {
		if err := q.fs.Remove(sp.path); err != nil {
			q.log.Warn("queue: remove spare segment file", "file", sp.path, "err", err)
		}
	}
	q.spares, q.spareBytes = q.spares[:0], 0
}

// recycleLocked makes a spare file the segment at path with header h and
// returns it, with how far its blocks are written (its size, at least
// SegmentBytes), or nil when there is no spare or reusing one failed (the
// caller creates a file). Appends then overwrite an earlier use's bytes
// instead of zeros (preallocate): each block of the segment is written
// once per use, not twice, and a sync still writes only data. The earlier
// use's records never read as this segment's: their headers carry another
// tag, and their CRCs other positions.
//
// Order, for crashes: the rename that made the file a spare is made
// durable (its old name must not come back with the new header), then the
// new header is written and synced under the spare's name (a spare is
// removed at Open whatever it holds), then the file is renamed to its
// segment name, which the next sync of the directory makes durable before
// anything in it is acknowledged, as for a created segment (dirDirty).
// Under its segment name the file therefore always has its new header.
func (q *Queue) recycleLocked(path string, h segmentHeader) (file, int64) {
	for len(q.spares) > 0 {
		sp := q.spares[len(q.spares)-1]
		q.spares = q.spares[:len(q.spares)-1]
		q.spareBytes -= sp.size
		f, size, err := q.reuse(sp, path, h)
		if err == nil {
			q.recycled.Add(1)
			return f, size
		}
		q.log.Warn("queue: reuse released segment file; creating a new one", "file", sp.path, "err", err)
		_ = q.fs.Remove(sp.path)
	}
	return nil, 0
}

func (q *Queue) reuse(sp spare, path string, h segmentHeader) (file, int64, error) {
	if q.spareDirDirty {
		if err := q.fs.SyncDir(q.opts.Dir); err != nil {
			return nil, 0, err
		}
		q.spareDirDirty = false
	}
	f, err := q.fs.OpenFile(sp.path, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, err
	}
	size, err := f.Size()
	if err == nil && size < q.opts.SegmentBytes {
		// A sealed segment was cut to its records: the few blocks after
		// them are zero-filled once.
		if err = preallocate(f, max(size, segmentHeaderSize), q.opts.SegmentBytes); err == nil {
			size = q.opts.SegmentBytes
		}
	}
	if err == nil {
		_, err = f.WriteAt(appendSegmentHeader(nil, h), 0)
	}
	if err == nil {
		err = f.DataSync()
	}
	if err == nil {
		err = q.fs.Rename(sp.path, path)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, size, nil
}

// Append writes recs as consecutive records and returns the position after
// the last one once all of them are fsynced. Concurrent callers share
// fsyncs. The slices are not retained. On error nothing is acknowledged,
// though some of the records may still turn up later (at-least-once).
func (q *Queue) Append(recs ...[]byte) (end Position, err error) {
	return q.AppendAt(nil, recs...)
}

// AppendAt is Append that also calls at (when not nil) with the position
// after the last record as soon as the records have their positions and
// before the last of them can be read: a reader never returns it before at
// has returned (an earlier record of the batch may be readable already,
// when the batch opened a new segment). at runs under the queue's lock: it must be quick and must
// not call the queue. It is called for a batch that may still fail
// (Append's error then); positions of records whose write failed are
// reused by later appends, so whatever at keys by the position must be
// undone on error or checked against the record it finds there.
func (q *Queue) AppendAt(at func(end Position), recs ...[]byte) (end Position, err error) {
	need := int64(0)
	for _, r := range recs {
		if len(r) == 0 {
			return 0, ErrEmptyRecord
		}
		if len(r) > q.maxRecord {
			return 0, fmt.Errorf("%w: record of %d bytes, max %d", ErrTooLarge, len(r), q.maxRecord)
		}
		need += recordHeaderSize + int64(len(r))
	}
	// Room for the headers of the segments the batch may open.
	need += segmentHeaderSize * (1 + need/q.segData)
	if need > q.opts.MaxBytes/2 {
		return 0, fmt.Errorf("%w: batch of %d bytes, max %d", ErrTooLarge, need, q.opts.MaxBytes/2)
	}

	q.appendMu.Lock()
	q.mu.Lock()
	defer q.mu.Unlock()
	end, pend, err := q.writeLocked(recs, need)
	q.appendMu.Unlock()
	if err != nil {
		return 0, err
	}
	if at != nil {
		// mu is held since the records were encoded: no fsync leader
		// (nor a rotation) can have published them yet.
		at(end)
	}
	if err := q.waitDurableLocked(end, pend); err != nil {
		return 0, err
	}
	q.appends.Add(1)
	q.appendedRecords.Add(uint64(len(recs)))
	return end, nil
}

// writeLocked is Append's write phase; the caller holds appendMu and mu.
// It encodes recs into the encode buffer and leaves the last of them there
// for the fsync leader to write (waitDurableLocked); pend is their fate,
// nil when everything was written here. end is the position after the
// batch.
func (q *Queue) writeLocked(recs [][]byte, need int64) (end Position, pend *pendingWrite, err error) {
	if q.closed {
		return 0, nil, ErrClosed
	}
	if q.err != nil {
		return 0, nil, q.err
	}
	// Records other appenders left in the encode buffer take room too.
	need += int64(len(q.wbuf))
	if err := q.checkSpaceLocked(need); err != nil {
		return 0, nil, err
	}
	if q.bytes+q.spareBytes+need > q.opts.MaxBytes {
		q.dropSparesLocked() // kept for reuse only while there is room
	}
	if q.bytes+need > q.opts.MaxBytes {
		if q.opts.Full == Backpressure {
			return 0, nil, ErrFull
		}
		for q.bytes+need > q.opts.MaxBytes && len(q.segs) > 1 {
			q.dropOldestLocked()
		}
		if q.bytes+need > q.opts.MaxBytes {
			return 0, nil, ErrFull // unreachable while MaxBytes >= 2*SegmentBytes
		}
	}
	for _, r := range recs {
		size := int64(recordHeaderSize + len(r))
		if used := q.activeSeg().size + int64(len(q.wbuf)); used > 0 && used+size > q.segData {
			if err := q.flushLocked(); err != nil {
				return 0, nil, err
			}
			if err := q.rotateLocked(); err != nil {
				return 0, nil, err
			}
		}
		if q.pend == nil {
			if n := len(q.freePend); n > 0 {
				q.pend, q.freePend = q.freePend[n-1], q.freePend[:n-1]
			} else {
				q.pend = new(pendingWrite)
			}
		}
		q.wbuf = appendRecord(q.wbuf, &q.scratch, q.writeEnd+Position(len(q.wbuf)), q.activeSeg().tag, r)
		q.wrecs++
		if len(q.wbuf) >= flushBytes {
			if err := q.flushLocked(); err != nil {
				return 0, nil, err
			}
		}
	}
	// appendMu kept other appenders out, so this batch ends the buffer.
	if len(q.wbuf) > 0 {
		q.pend.refs++
	}
	return q.writeEnd + Position(len(q.wbuf)), q.pend, nil
}

// flushLocked writes the encode buffer, the records of every appender
// since the last write, at the end of the active segment with one write.
// On failure none of them is acknowledged (pendingWrite.err).
func (q *Queue) flushLocked() error {
	if len(q.wbuf) == 0 {
		return nil
	}
	s := q.activeSeg()
	off := segmentHeaderSize + s.size
	if end := off + int64(len(q.wbuf)); end > q.zeroedTo && q.zeroedTo < q.opts.SegmentBytes {
		// Zero-fill the next preallocChunk past this write first (the
		// write then lands on zeros), so the appends after it neither
		// grow the file nor allocate blocks.
		// From the records' end at the lowest: below off are records
		// (zeroedTo lags behind them after a failed fill).
		to := min(q.opts.SegmentBytes, end+preallocChunk)
		if err := preallocate(q.active, max(q.zeroedTo, off), to); err != nil {
			// Nothing of the records was written; the zeros need no undo.
			q.log.Warn("queue: preallocate segment", "file", s.path, "err", err)
		} else {
			q.zeroedTo = to
		}
	}
	_, err := q.active.WriteAt(q.wbuf, off)
	n, recs, pend := len(q.wbuf), q.wrecs, q.pend
	q.wbuf, q.wrecs, q.pend = q.wbuf[:0], 0, nil
	if cap(q.wbuf) > 4*flushBytes {
		q.wbuf = nil // a huge single record passed through; do not keep its buffer
	}
	if err != nil {
		err = fmt.Errorf("queue: write segment %q at offset %d: %w", s.path, off, err)
		// Cut off a partial write so that later records do not land behind
		// half a record. If even that fails the file's state is unknown.
		if terr := q.active.Truncate(off); terr != nil {
			err = q.failLocked(fmt.Errorf("%w; truncate back: %w", err, terr))
		}
		q.zeroedTo = min(q.zeroedTo, off)
		pend.err = err
		q.cond.Broadcast() // appenders waiting for this write learn its fate
		return err
	}
	s.size += int64(n)
	q.bytes += int64(n)
	q.writtenSince += int64(n)
	q.writeEnd += Position(n)
	q.nextRecord += recs
	return nil
}

// rotateLocked seals the active segment and starts the next one. The sealed
// segment is fsynced first, so that only the last segment can ever have a
// torn tail (invariant 5). That costs appenders one fsync's wait per
// SegmentBytes. The caller holds appendMu.
func (q *Queue) rotateLocked() error {
	// Never fsync a file while a leader does: Linux reports a writeback
	// error to one fsync only, so a concurrent one could succeed over lost
	// pages (invariant 4).
	for q.syncing {
		q.cond.Wait()
	}
	if q.closed {
		return ErrClosed
	}
	if q.err != nil {
		return q.err
	}
	s := q.activeSeg()
	// A sealed segment ends at its data: cut the preallocated rest off
	// (before the fsync that seals it), so recovery and readers take its
	// size for its data as they always did.
	if err := q.active.Truncate(segmentHeaderSize + s.size); err != nil {
		return q.failLocked(fmt.Errorf("queue: truncate segment %q to its data: %w", s.path, err))
	}
	err := q.active.Sync()
	q.fsyncs.Add(1)
	if err != nil {
		return q.failLocked(fmt.Errorf("queue: fsync segment %q: %w", s.path, err))
	}
	if q.dirDirty {
		// The segment's own directory entry must be durable too before its
		// records count as acknowledged.
		if err := q.fs.SyncDir(q.opts.Dir); err != nil {
			return q.failLocked(fmt.Errorf("queue: fsync dir %q: %w", q.opts.Dir, err))
		}
		q.dirDirty = false
	}
	q.publishLocked(q.writeEnd)
	q.cond.Broadcast()
	if err := q.startSegmentLocked(q.writeEnd); err != nil {
		return err
	}
	if len(q.cursors) > 0 {
		// A new segment is when a cursor's backlog grows by one: enforce
		// its bounds here too, so a stuck exporter with no lake beside it
		// cannot fill the queue (a removal error is logged, not fatal).
		if err := q.removeSegments(q.trimLocked(time.Now())); err != nil {
			q.log.Warn("queue: remove segment", "err", err)
		}
	}
	return nil
}

// waitDurableLocked returns once everything before end is fsynced. One
// waiter at a time becomes the leader: it writes the records every appender
// left in the encode buffer (pend is the fate of the caller's, nil if it
// wrote them itself) with one write, then fsyncs everything written so far
// with mu released; the others wait for it and usually find their data
// covered (group commit).
func (q *Queue) waitDurableLocked(end Position, pend *pendingWrite) error {
	q.durWaiters++
	defer func() {
		q.durWaiters--
		if pend != nil {
			if pend.refs--; pend.refs == 0 && pend != q.pend {
				pend.err = nil
				q.freePend = append(q.freePend, pend)
			}
		}
	}()
	for {
		// The write's fate first: positions of records whose write failed
		// are reused, so a durable end past them does not cover them.
		if pend != nil && pend.err != nil {
			return pend.err
		}
		if Position(q.synced.Load()) >= end {
			return nil
		}
		if q.err != nil {
			return q.err
		}
		if q.syncing {
			q.cond.Wait()
			continue
		}
		q.syncing = true
		// Wait for more appenders only under concurrent load: when one of
		// the last 8 fsyncs served several, or others wait beside the
		// leader now. A lone appender never waits. Eight, not one: under
		// a few concurrent senders of large requests the others are often
		// still decoding when the leader arrives, and a policy that looks
		// at the last fsync only lets every other fsync go alone
		// (remote-write relay: 1.7 appends per fsync with 4 senders).
		if d := q.opts.GroupCommitDelay; d > 0 && (q.joined != 0 || q.durWaiters > 1) {
			q.mu.Unlock()
			time.Sleep(d)
			q.mu.Lock()
		}
		// No appender is in its write phase now except one waiting in
		// rotateLocked for this fsync, which has written its records:
		// the buffer holds whole batches only.
		if err := q.flushLocked(); err != nil {
			q.syncing = false
			q.cond.Broadcast()
			continue // the loop returns pend.err or q.err
		}
		target, f, path, syncDir := q.writeEnd, q.active, q.activeSeg().path, q.dirDirty
		q.dirDirty = false
		q.joined <<= 1 // every waiter's data was written before target
		if q.durWaiters > 1 {
			q.joined |= 1
		}
		q.mu.Unlock()
		// fdatasync: the segment is preallocated, so the records'
		// blocks and the file size are on disk already, except after
		// a new zero-filled chunk, whose size and blocks fdatasync
		// writes too (the metadata reading the data needs); a new
		// segment's directory entry is synced below.
		err := f.DataSync()
		if err != nil {
			err = fmt.Errorf("queue: fsync segment %q: %w", path, err)
		} else if syncDir {
			if err = q.fs.SyncDir(q.opts.Dir); err != nil {
				err = fmt.Errorf("queue: fsync dir %q: %w", q.opts.Dir, err)
			}
		}
		q.mu.Lock()
		q.fsyncs.Add(1)
		q.syncing = false
		if err != nil {
			q.failLocked(err)
		} else {
			q.publishLocked(target)
		}
		for _, rf := range q.retired {
			_ = rf.Close() // synced before it was retired; nothing to lose
		}
		clear(q.retired)
		q.retired = q.retired[:0]
		q.cond.Broadcast()
	}
}

// failLocked makes err sticky: after an unknown outcome on disk (failed
// fsync or failed undo of a write) nothing more may be acknowledged, because
// the kernel may have dropped dirty pages we can no longer resend.
func (q *Queue) failLocked(err error) error {
	if q.err == nil {
		q.err = fmt.Errorf("%w: %w", ErrFailed, err)
		q.log.Error("queue: failed; appends refused until reopened", "err", err)
	}
	return q.err
}

// publishLocked makes data before end visible to readers and wakes them.
func (q *Queue) publishLocked(end Position) {
	if end <= Position(q.synced.Load()) {
		return
	}
	q.synced.Store(uint64(end))
	// Only pay for a new channel when someone waits. A reader announces
	// itself before it loads synced, so either it sees the new end or we
	// see it here (both sides use sequentially consistent atomics).
	if q.waiters.Load() > 0 {
		ch := make(chan struct{})
		close(*q.notify.Swap(&ch))
	}
}

// noteCorrupt counts and logs a corrupt region once per Queue, however many
// readers (or recovery) run into it.
func (q *Queue) noteCorrupt(path string, pos Position, off, n int64, what string) {
	q.mu.Lock()
	seen := q.corruptAt[pos]
	if !seen {
		if q.corruptAt == nil {
			q.corruptAt = make(map[Position]bool)
		}
		q.corruptAt[pos] = true
	}
	q.mu.Unlock()
	if seen {
		return
	}
	q.corruptRecords.Add(1)
	q.corruptBytes.Add(uint64(n))
	q.log.Error("queue: skipping "+what, "file", path, "offset", off, "bytes", n)
}

func (q *Queue) dropOldestLocked() {
	s, next := q.segs[0], q.segs[1]
	q.segs = slices.Delete(q.segs, 0, 1)
	fileBytes := s.size + segmentHeaderSize
	q.bytes -= fileBytes
	q.first.Store(uint64(next.base))
	recs := next.firstRecord - s.firstRecord
	q.droppedRecords.Add(recs)
	q.droppedBytes.Add(uint64(fileBytes))
	q.log.Warn("queue: full, dropping oldest segment", "file", s.path, "records", recs, "bytes", fileBytes)
	if err := q.fs.Remove(s.path); err != nil {
		q.log.Error("queue: remove dropped segment", "file", s.path, "err", err)
	}
}

// Release tells the queue that everything before upTo is committed
// downstream (the lake). Whole segments that end at or before upTo and
// before every cursor's committed position (cursor.go) are deleted; the
// active segment is never deleted. A queue with cursors and no lake
// consumer releases MaxPosition once, so only the cursors hold segments.
func (q *Queue) Release(upTo Position) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.released = max(q.released, upTo)
	paths := q.trimLocked(time.Now())
	q.mu.Unlock()
	return q.removeSegments(paths)
}

// Stats returns a snapshot of the queue's size and counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	st := Stats{
		Bytes:      q.bytes,
		Segments:   len(q.segs),
		First:      q.segs[0].base,
		SpareBytes: q.spareBytes,
	}
	if first := q.segs[0].firstRecord; q.nextRecord > first {
		st.Records = q.nextRecord - first
	}
	q.mu.Unlock()
	st.Last = Position(q.synced.Load())
	st.Appends = q.appends.Load()
	st.AppendedRecords = q.appendedRecords.Load()
	st.Fsyncs = q.fsyncs.Load()
	st.Recycled = q.recycled.Load()
	st.DroppedRecords = q.droppedRecords.Load()
	st.DroppedBytes = q.droppedBytes.Load()
	st.CorruptRecords = q.corruptRecords.Load()
	st.CorruptBytes = q.corruptBytes.Load()
	st.TornBytes = q.tornBytes.Load()
	q.mu.Lock()
	st.MinFreeBytes, st.FreeBytes = q.minFree, q.free
	q.mu.Unlock()
	st.LowDisk = q.lowDisk.Load()
	st.LowDiskRefusals = q.lowDiskRefusals.Load()
	return st
}

// Close waits for a running fsync, makes everything written durable, and
// closes the files. Blocked readers return ErrClosed. Idempotent.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	q.isClosed.Store(true)
	for q.syncing {
		q.cond.Wait()
	}
	var err error
	if q.err == nil {
		// Appenders waiting for the leader's write get it from here; on
		// failure they return their pendingWrite's error.
		_ = q.flushLocked()
	}
	if q.err == nil && q.writeEnd > Position(q.synced.Load()) {
		// Appenders still waiting for their fsync get it from here.
		if err = q.active.Sync(); err == nil && q.dirDirty {
			err = q.fs.SyncDir(q.opts.Dir)
		}
		q.fsyncs.Add(1)
		if err != nil {
			err = q.failLocked(fmt.Errorf("queue: fsync segment %q on close: %w", q.activeSeg().path, err))
		} else {
			q.publishLocked(q.writeEnd)
		}
	}
	if cerr := q.closeFiles(); err == nil {
		err = cerr
	}
	// Released last: the next Open may recover the files only once this
	// one has stopped writing them.
	q.lock.Close()
	q.cond.Broadcast()
	// Leave a closed channel behind so no reader can block on it later.
	ch := make(chan struct{})
	close(ch)
	close(*q.notify.Swap(&ch))
	return err
}

func (q *Queue) closeFiles() error {
	var errs []error
	for _, f := range q.retired {
		errs = append(errs, f.Close())
	}
	q.retired = nil
	if q.active != nil {
		if err := q.active.Close(); err != nil {
			errs = append(errs, fmt.Errorf("queue: close segment %q: %w", q.activeSeg().path, err))
		}
		q.active = nil
	}
	return errors.Join(errs...)
}
