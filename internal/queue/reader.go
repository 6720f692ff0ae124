package queue

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Reader reads records in order from a position. It sees only durable
// (acknowledged) data. Not safe for concurrent use; any number of Readers
// may run next to appenders.
type Reader struct {
	q       *Queue
	pos     Position
	seg     *segment // nil: look up the segment holding pos
	f       file
	limit   Position // records before limit are readable without asking q
	sc      segmentScanner
	lost    uint64
	corrupt uint64
}

// NewReader returns a reader starting at from, which should be a position
// returned by Append or Reader.Next, or Stats().First. A position below the
// oldest stored data skips forward (see Lost); a position inside a record is
// treated as corrupt data and resynchronized.
func (q *Queue) NewReader(from Position) *Reader {
	return &Reader{q: q, pos: from}
}

// Position returns the position after the last record returned by Next.
func (r *Reader) Position() Position { return r.pos }

// Lost returns how many bytes of positions the reader skipped because the
// data was deleted before it was read (DropOldest, or Release beyond it).
func (r *Reader) Lost() uint64 { return r.lost }

// Corrupt returns how many bytes this reader skipped as corrupt.
func (r *Reader) Corrupt() uint64 { return r.corrupt }

// Next returns the next record and the position after it, blocking until
// one is durable or ctx is done. The payload is valid until the next call.
// With a ctx that is already done Next does not block: it returns records
// while there are any, then ctx.Err(), which is how a consumer drains what
// is durable now (for example before it flushes a file).
func (r *Reader) Next(ctx context.Context) ([]byte, Position, error) {
	for {
		if r.q.isClosed.Load() {
			r.Close()
			return nil, r.pos, ErrClosed
		}
		if first := Position(r.q.first.Load()); r.pos < first {
			r.lost += uint64(first - r.pos)
			r.pos = first
			r.closeSegment()
		}
		if r.seg != nil && r.pos < r.limit {
			off := segmentHeaderSize + int64(r.pos-r.seg.base)
			payload, next, st, err := r.sc.record(off)
			if err != nil {
				return nil, r.pos, fmt.Errorf("queue: read segment %q at offset %d: %w", r.seg.path, off, err)
			}
			if st == recordOK {
				r.pos = r.sc.pos(next)
				return payload, r.pos, nil
			}
			p, _, err := r.sc.resync(off)
			if err != nil {
				return nil, r.pos, fmt.Errorf("queue: read segment %q at offset %d: %w", r.seg.path, off, err)
			}
			if Position(r.q.first.Load()) > r.seg.base {
				// Released while read, and its file perhaps reused
				// (recycle): skipped as lost (above), not corrupt.
				continue
			}
			r.corrupt += uint64(p - off)
			r.q.noteCorrupt(r.seg.path, r.pos, off, p-off, "corrupt record")
			r.pos = r.sc.pos(p)
			continue
		}
		// Load the channel before looking at the durable end, so a publish
		// in between closes the channel we wait on.
		r.q.waiters.Add(1)
		wake := *r.q.notify.Load()
		if err := r.refresh(); err != nil {
			r.q.waiters.Add(-1)
			return nil, r.pos, err
		}
		if r.seg != nil && r.pos < r.limit {
			r.q.waiters.Add(-1)
			continue
		}
		if err := ctx.Err(); err != nil {
			r.q.waiters.Add(-1)
			return nil, r.pos, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			r.q.waiters.Add(-1)
			return nil, r.pos, ctx.Err()
		}
		r.q.waiters.Add(-1)
	}
}

// refresh finds the segment holding pos and how far it may be read.
func (r *Reader) refresh() error {
	q := r.q
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	segs := q.segs
	i := 0
	for i+1 < len(segs) && segs[i+1].base <= r.pos {
		i++
	}
	var seg *segment
	var limit Position
	for ; i < len(segs); i++ {
		s := segs[i]
		if r.pos < s.base {
			if i == 0 {
				r.lost += uint64(s.base - r.pos) // deleted since Next checked
			}
			r.pos = s.base // a gap between segments holds no data
		}
		end := s.end()
		if !s.sealed {
			end = min(end, Position(q.synced.Load()))
		}
		last := i+1 == len(segs)
		if s.badHeader {
			if !last {
				continue // counted by recovery
			}
			r.pos = max(r.pos, end)
			break
		}
		if r.pos < end || last || !s.sealed {
			seg, limit = s, end
			break
		}
	}
	q.mu.Unlock()

	if seg == nil {
		r.closeSegment()
		return nil
	}
	if seg != r.seg {
		r.closeSegment()
		f, err := q.fs.OpenFile(seg.path, os.O_RDONLY, 0)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted under us; Next sees the new first position
			}
			return fmt.Errorf("queue: open segment %q: %w", seg.path, err)
		}
		r.seg, r.f = seg, f
	}
	r.limit = limit
	r.sc.reset(r.f, seg.base, segmentHeaderSize+int64(limit-seg.base), seg.header())
	return nil
}

func (r *Reader) closeSegment() {
	if r.f != nil {
		_ = r.f.Close() // read-only handle
	}
	r.seg, r.f = nil, nil
	r.limit = 0
}

// Close releases the reader's file handle. The reader must not be used after.
func (r *Reader) Close() error {
	r.closeSegment()
	return nil
}
