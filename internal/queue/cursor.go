package queue

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"time"
)

// cursorDir is the subdirectory of Options.Dir holding one file per cursor.
// Recovery lists regular files only, so it never mistakes it for a segment.
const cursorDir = "cursors"

// A cursor file holds two 32-byte slots written alternately:
//
//	"SLQC" | seq uint64 | position uint64 | 0 uint64 | CRC32C(slot[0:28]) uint32
//
// A torn write can damage only the slot being written; the other still
// holds the previous commit, so a crash never loses more than the commit in
// flight. No rename is needed, hence no directory fsync per commit.
const cursorSlot = 32

var cursorNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// CursorOptions bound one cursor's backlog (what was appended but not yet
// committed through the cursor). Zero means no bound.
type CursorOptions struct {
	// MaxBytes: when Last minus the committed position exceeds it, whole
	// segments at the head of the backlog are dropped for this cursor (it
	// skips to the first segment boundary that brings the backlog under the
	// bound), counted in DroppedBytes. Other cursors and the lake keep them.
	MaxBytes int64
	// MaxAge: a sealed segment holding the committed position that was
	// sealed more than MaxAge ago is dropped for this cursor. Segments
	// recovered at Open count as sealed at Open (the age is not on disk).
	MaxAge time.Duration
	// From names cursors a new cursor starts at instead of the durable
	// end: the lowest committed position of those that exist (none: the
	// end). An exporter that reads with a cursor per endpoint takes over
	// the backlog of the cursor it had before, and a new endpoint that of
	// its siblings, so nothing acknowledged is skipped by the change. It
	// does not apply to a cursor that exists.
	From []string
}

// CursorStats is a snapshot of a cursor.
type CursorStats struct {
	Committed    Position
	LagBytes     int64         // durable end minus Committed
	LagSeconds   float64       // age of the oldest segment holding uncommitted data; 0 when caught up
	DroppedBytes uint64        // skipped by MaxBytes/MaxAge since Open
	DroppedAge   uint64        // part of DroppedBytes due to MaxAge
	LostBytes    uint64        // deleted under the reader (DropOldest of the whole queue)
	MaxAge       time.Duration // resolved options
	MaxBytes     int64
}

// Cursor is a named, durable read position of its own (an exporter's). The
// queue keeps every segment that some cursor has not committed past (and
// that Release has not released, see Release). Next and Commit belong to one
// goroutine; Stats may be called from any.
type Cursor struct {
	q    *Queue
	name string
	path string
	opts CursorOptions

	// Guarded by q.mu.
	committed Position
	floor     Position // bounds enforcement moved the cursor here
	seq       uint64
	open      bool // attached by OpenCursor (else only a hold loaded from disk)

	droppedBytes, droppedAge atomic.Uint64
	lost                     atomic.Uint64 // copy of r.Lost() for Stats

	r *Reader // owner goroutine only
}

// loadCursors registers the cursors found on disk as holds, so that a
// Release before their exporter starts cannot delete what they still need.
func (q *Queue) loadCursors() error {
	dir := filepath.Join(q.opts.Dir, cursorDir)
	names, err := q.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("queue: read cursor dir %q: %w", dir, err)
	}
	q.cursors = map[string]*Cursor{}
	for _, name := range names {
		if !cursorNameRE.MatchString(name) {
			continue
		}
		c := &Cursor{q: q, name: name, path: filepath.Join(dir, name)}
		ok, err := c.load()
		if err != nil {
			return err
		}
		if !ok {
			// Both slots damaged (a torn write damages one): where the
			// exporter was is unknown. The oldest stored record loses
			// nothing acknowledged (sent again: at least once, within
			// the exporter's backlog bounds); the durable end would
			// skip its whole backlog.
			c.committed = Position(q.first.Load())
			q.log.Error("queue: cursor file has no valid slot; the cursor restarts at the oldest stored record, so its backlog is sent again",
				"file", c.path, "position", c.committed)
		}
		if end := Position(q.synced.Load()); c.committed > end {
			// Past everything stored (segments deleted or restored from
			// an older copy): waiting for the queue to reach it would
			// skip what is appended until then.
			q.log.Error("queue: cursor is past the end of the queue; it resumes at the end", "file", c.path, "position", c.committed, "end", end)
			c.committed = end
		}
		q.cursors[name] = c
	}
	return nil
}

// load reads the newest valid slot. ok is false when neither slot is valid.
func (c *Cursor) load() (ok bool, err error) {
	f, err := c.q.fs.OpenFile(c.path, os.O_RDONLY, 0)
	if err != nil {
		return false, fmt.Errorf("queue: open cursor %q: %w", c.path, err)
	}
	defer f.Close()
	var buf [2 * cursorSlot]byte
	n, err := f.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("queue: read cursor %q: %w", c.path, err)
	}
	for i := 0; i+cursorSlot <= n; i += cursorSlot {
		s := buf[i : i+cursorSlot]
		if string(s[:4]) != "SLQC" || binary.LittleEndian.Uint32(s[28:]) != crc32.Checksum(s[:28], castagnoli) {
			continue
		}
		seq := binary.LittleEndian.Uint64(s[4:])
		if !ok || seq > c.seq {
			c.seq, c.committed, ok = seq, Position(binary.LittleEndian.Uint64(s[12:])), true
		}
	}
	return ok, nil
}

// OpenCursor attaches to the cursor name (letters, digits, '_', '.', '-'),
// creating it at the durable end if it does not exist (or where
// opts.From says): a new exporter forwards what arrives from now on, not
// the backlog the lake still holds.
func (q *Queue) OpenCursor(name string, opts CursorOptions) (*Cursor, error) {
	if !cursorNameRE.MatchString(name) {
		return nil, fmt.Errorf("queue: invalid cursor name %q", name)
	}
	if opts.MaxBytes < 0 || opts.MaxAge < 0 {
		return nil, fmt.Errorf("queue: cursor %q: negative bound", name)
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil, ErrClosed
	}
	c := q.cursors[name]
	if c != nil && c.open {
		q.mu.Unlock()
		return nil, fmt.Errorf("queue: cursor %q is already open", name)
	}
	fresh := c == nil
	if fresh {
		start := Position(q.synced.Load())
		for _, f := range opts.From {
			if fc := q.cursors[f]; fc != nil && f != name {
				start = min(start, max(fc.committed, fc.floor))
			}
		}
		c = &Cursor{q: q, name: name, path: filepath.Join(q.opts.Dir, cursorDir, name), committed: start}
	}
	c.open, c.opts = true, opts
	q.mu.Unlock()

	if fresh {
		if err := q.fs.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
			return nil, fmt.Errorf("queue: create cursor dir: %w", err)
		}
		// Both slots, then the file's directory entry, so a crash right
		// after leaves a valid cursor.
		if err := c.write(c.committed, true); err != nil {
			return nil, err
		}
		if err := q.fs.SyncDir(filepath.Dir(c.path)); err != nil {
			return nil, fmt.Errorf("queue: fsync cursor dir: %w", err)
		}
		q.mu.Lock()
		if q.cursors == nil {
			q.cursors = map[string]*Cursor{}
		}
		q.cursors[name] = c
		q.mu.Unlock()
	}
	q.mu.Lock()
	paths := q.trimLocked(time.Now())
	c.r = q.NewReader(max(c.committed, c.floor))
	q.mu.Unlock()
	q.removeSegments(paths)
	return c, nil
}

// RemoveCursor deletes a cursor that is not open (an exporter removed from
// the config), so it no longer holds segments.
func (q *Queue) RemoveCursor(name string) error {
	q.mu.Lock()
	c := q.cursors[name]
	if c == nil {
		q.mu.Unlock()
		return nil
	}
	if c.open {
		q.mu.Unlock()
		return fmt.Errorf("queue: cursor %q is open", name)
	}
	delete(q.cursors, name)
	paths := q.trimLocked(time.Now())
	q.mu.Unlock()
	q.removeSegments(paths)
	if err := q.fs.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("queue: remove cursor %q: %w", c.path, err)
	}
	return nil
}

// CursorNames lists the cursors known to the queue (open or only on disk).
func (q *Queue) CursorNames() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	names := make([]string, 0, len(q.cursors))
	for n := range q.cursors {
		names = append(names, n)
	}
	return names
}

// write stores pos in the next slot (both when all) and fsyncs the file.
func (c *Cursor) write(pos Position, all bool) error {
	f, err := c.q.fs.OpenFile(c.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("queue: open cursor %q: %w", c.path, err)
	}
	var s [cursorSlot]byte
	slots := []int64{int64(c.seq+1) % 2}
	if all {
		slots = []int64{0, 1}
	}
	for _, slot := range slots {
		c.seq++
		copy(s[:], "SLQC")
		binary.LittleEndian.PutUint64(s[4:], c.seq)
		binary.LittleEndian.PutUint64(s[12:], uint64(pos))
		binary.LittleEndian.PutUint32(s[28:], crc32.Checksum(s[:28], castagnoli))
		if _, err = f.WriteAt(s[:], slot*cursorSlot); err != nil {
			break
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("queue: write cursor %q: %w", c.path, err)
	}
	return nil
}

// Name returns the cursor's name.
func (c *Cursor) Name() string { return c.name }

// Next returns the next record after the cursor's read position, like
// Reader.Next; it first skips what the bounds dropped.
func (c *Cursor) Next(ctx context.Context) ([]byte, Position, error) {
	c.q.mu.Lock()
	floor := c.floor
	c.q.mu.Unlock()
	if c.r.Position() < floor {
		lost := c.r.Lost()
		c.r.Close()
		c.r = c.q.NewReader(floor)
		c.r.lost = lost
	}
	p, pos, err := c.r.Next(ctx)
	c.lost.Store(c.r.lost)
	return p, pos, err
}

// Rewind moves the read position back to the committed one (after a failed
// send whose records must be read again).
func (c *Cursor) Rewind() {
	c.q.mu.Lock()
	from := max(c.committed, c.floor)
	c.q.mu.Unlock()
	lost := c.r.Lost()
	c.r.Close()
	c.r = c.q.NewReader(from)
	c.r.lost = lost
}

// Commit durably records that everything before pos was accepted
// downstream (pos is a position Next returned), then lets the queue delete
// segments no one needs any more. After a crash the cursor resumes at the
// last committed position: delivery through a cursor is at least once.
func (c *Cursor) Commit(pos Position) error {
	q := c.q
	q.mu.Lock()
	if pos <= c.committed {
		q.mu.Unlock()
		return nil
	}
	q.mu.Unlock()
	if err := c.write(pos, false); err != nil {
		return err
	}
	q.mu.Lock()
	c.committed = pos
	paths := q.trimLocked(time.Now())
	q.mu.Unlock()
	return q.removeSegments(paths)
}

// Committed returns the last committed position.
func (c *Cursor) Committed() Position {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	return c.committed
}

// Stats returns the cursor's lag and drop counters.
func (c *Cursor) Stats() CursorStats {
	q := c.q
	now := time.Now()
	q.mu.Lock()
	pos := max(c.committed, c.floor)
	st := CursorStats{Committed: c.committed, MaxAge: c.opts.MaxAge, MaxBytes: c.opts.MaxBytes}
	last := Position(q.synced.Load())
	if last > pos {
		st.LagBytes = int64(last - pos)
		if s := q.segmentAtLocked(pos); s != nil && !s.created.IsZero() {
			st.LagSeconds = now.Sub(s.created).Seconds()
		}
	}
	q.mu.Unlock()
	st.DroppedBytes = c.droppedBytes.Load()
	st.DroppedAge = c.droppedAge.Load()
	st.LostBytes = c.lost.Load()
	return st
}

// Close detaches the cursor; its committed position keeps holding segments
// until RemoveCursor or the next Open.
func (c *Cursor) Close() error {
	c.q.mu.Lock()
	c.open = false
	c.q.mu.Unlock()
	if c.r != nil {
		c.r.Close()
	}
	return nil
}

func (q *Queue) segmentAtLocked(pos Position) *segment {
	for i := len(q.segs) - 1; i >= 0; i-- {
		if q.segs[i].base <= pos {
			return q.segs[i]
		}
	}
	if len(q.segs) > 0 {
		return q.segs[0]
	}
	return nil
}

// trimLocked enforces the cursors' bounds, then unlinks from q.segs the
// whole segments below both the released position and every cursor, and
// returns their paths for removeSegments (outside mu).
func (q *Queue) trimLocked(now time.Time) []string {
	last := Position(q.synced.Load())
	hold := q.released
	for _, c := range q.cursors {
		if c.open {
			q.boundLocked(c, now, last)
		}
		hold = min(hold, max(c.committed, c.floor))
	}
	var paths []string
	for len(q.segs) > 1 && q.segs[1].base <= hold {
		s := q.segs[0]
		q.bytes -= s.size + segmentHeaderSize
		if !q.spareLocked(s) {
			paths = append(paths, s.path)
		}
		q.segs = q.segs[1:]
	}
	q.first.Store(uint64(q.segs[0].base))
	if len(paths) > 0 {
		q.freeAt = time.Time{} // space comes back: look again at the next Append
	}
	return paths
}

// boundLocked moves c's floor past the segments its bounds drop. Only
// whole sealed segments are dropped, and never the active one.
func (q *Queue) boundLocked(c *Cursor, now time.Time, last Position) {
	pos := max(c.committed, c.floor)
	for i := 0; i+1 < len(q.segs); i++ {
		s, next := q.segs[i], q.segs[i+1]
		if next.base <= pos {
			continue
		}
		overBytes := c.opts.MaxBytes > 0 && int64(last-pos) > c.opts.MaxBytes
		overAge := c.opts.MaxAge > 0 && s.sealed && !s.sealedAt.IsZero() && now.Sub(s.sealedAt) > c.opts.MaxAge
		if !overBytes && !overAge {
			return
		}
		n := uint64(next.base - pos)
		c.droppedBytes.Add(n)
		if !overBytes {
			c.droppedAge.Add(n)
		}
		q.log.Warn("queue: cursor backlog over its bound; dropping a segment for this cursor",
			"cursor", c.name, "file", s.path, "bytes", n, "max_bytes", c.opts.MaxBytes, "max_age", c.opts.MaxAge)
		pos = next.base
		c.floor = pos
	}
}

func (q *Queue) removeSegments(paths []string) error {
	// No directory fsync: a deletion lost in a crash only brings back data
	// below a committed position, which the consumer skips.
	var errs []error
	for _, p := range paths {
		if err := q.fs.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("queue: remove segment %q: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// MaxPosition is above every position: Release(MaxPosition) leaves the
// cursors alone to hold segments (a pipeline without a lake).
const MaxPosition = Position(1<<64 - 1)
