package queue

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// lastNonZero returns the index of the last non-zero byte of b, or -1.
func lastNonZero(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

// TestPreallocatedSegments: the active segment is created zero-filled to
// SegmentBytes; a clean close and reopen finds its records end before the
// zeros (no torn or corrupt bytes, appends continue at the same position);
// a sealed segment is cut to its data, so its file size is its records'.
func TestPreallocatedSegments(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 8 << 10, MaxBytes: 1 << 20}
	q := mustOpen(t, opts)
	var last Position
	for i := range 30 { // about 3.5 segments of 1 KiB records
		end, err := q.Append(payload(1, i, 1000))
		if err != nil {
			t.Fatal(err)
		}
		last = end
	}
	before := q.Stats()
	q.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	for i, path := range segs {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		base, _ := parseSegmentName(filepath.Base(path))
		if i == len(segs)-1 {
			if st.Size() != opts.SegmentBytes {
				t.Fatalf("active segment of %d bytes, want %d (preallocated)", st.Size(), opts.SegmentBytes)
			}
			continue
		}
		next, _ := parseSegmentName(filepath.Base(segs[i+1]))
		if want := int64(segmentHeaderSize) + int64(next-base); st.Size() != want {
			t.Fatalf("sealed segment %s of %d bytes, want %d (its records)", path, st.Size(), want)
		}
	}
	q = mustOpen(t, opts)
	defer q.Close()
	st := q.Stats()
	if st.TornBytes != 0 || st.CorruptRecords != 0 || st.Last != last || st.Records != before.Records || st.Bytes != before.Bytes {
		t.Fatalf("after reopen %+v, before %+v (last %d)", st, before, last)
	}
	end, err := q.Append(payload(1, 30, 10))
	if err != nil {
		t.Fatal(err)
	}
	if end != last+Position(recordHeaderSize+16) {
		t.Fatalf("append after reopen ends at %d, want %d", end, last+Position(recordHeaderSize+16))
	}
	got, r := drain(t, q, 0)
	defer r.Close()
	if len(got) != 31 {
		t.Fatalf("read %d records, want 31", len(got))
	}
}

// TestPreallocatedHoleAndTornRecord: a power cut can leave, in the last
// (preallocated) segment, a hole of zeros where pages of a write were not
// kept, valid records after it, and a torn record before the zeros of the
// preallocated space. Recovery skips the hole as one corrupt region
// (counted), keeps every record after it, zeroes the torn record (counted
// up to its last non-zero byte) and appends after the last valid record.
func TestPreallocatedHoleAndTornRecord(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 64 << 10, MaxBytes: 1 << 20}
	q := mustOpen(t, opts)
	var ends []Position
	for i := range 40 {
		end, err := q.Append(payload(2, i, 300))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
	}
	q.Close()
	path := lastSegmentPath(t, dir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := func(p Position) int { return segmentHeaderSize + int(p) }
	// The hole: records 10..14 (after ends[9], up to ends[14]) read as zeros.
	clear(b[off(ends[9]):off(ends[14])])
	// The torn record: record 39's header and half its payload, the rest
	// zeros, as if the write ended mid-page.
	torn := off(ends[38])
	clear(b[torn+recordHeaderSize+150 : off(ends[39])])
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}

	q = mustOpen(t, opts)
	defer q.Close()
	st := q.Stats()
	if st.CorruptRecords != 1 || st.CorruptBytes != uint64(ends[14]-ends[9]) {
		t.Fatalf("corrupt %d records %d bytes, want 1 and %d", st.CorruptRecords, st.CorruptBytes, ends[14]-ends[9])
	}
	if want := uint64(lastNonZero(b[torn:]) + 1); st.TornBytes != want {
		t.Fatalf("torn bytes %d, want %d", st.TornBytes, want)
	}
	if st.Last != ends[38] {
		t.Fatalf("records end at %d, want %d (before the torn record)", st.Last, ends[38])
	}
	end, err := q.Append(payload(3, 0, 100))
	if err != nil {
		t.Fatal(err)
	}
	if end != ends[38]+Position(recordHeaderSize+100) {
		t.Fatalf("append at %d", end)
	}
	got, r := drain(t, q, 0)
	defer r.Close()
	var seqs []int
	for _, g := range got {
		if binary.LittleEndian.Uint64(g.payload) == 2 {
			seqs = append(seqs, int(binary.LittleEndian.Uint64(g.payload[8:])))
		}
	}
	if len(seqs) != 34 || seqs[9] != 9 || seqs[10] != 15 || seqs[33] != 38 {
		t.Fatalf("records read %v, want 0-9 and 15-38", seqs)
	}
}

// TestResyncSkipsZeros: the resynchronization after a bad record finds the
// next valid record across long runs of zeros (word-wise), at any
// alignment, and finds none in zeros alone.
func TestResyncSkipsZeros(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		gap := rng.IntN(3 * readAhead)
		pre := rng.IntN(20)
		b := make([]byte, segmentHeaderSize+pre+gap)
		for i := segmentHeaderSize; i < segmentHeaderSize+pre; i++ {
			b[i] = byte(rng.Uint32() | 1) // garbage before the zeros
		}
		at := int64(len(b))
		b = appendRecordV1(b, Position(at-segmentHeaderSize), []byte("found"))
		b = append(b, make([]byte, rng.IntN(100))...)
		f := &bytesFile{b}
		var s segmentScanner
		v1 := segmentHeader{version: segmentVersionV1}
		s.reset(f, 0, int64(len(b)), v1)
		p, found, err := s.resync(segmentHeaderSize)
		if err != nil || !found || p != at {
			t.Fatalf("gap %d pre %d: resync to %d found %v (%v), want %d", gap, pre, p, found, err, at)
		}
		s.reset(f, 0, at, v1) // zeros only up to the limit
		if p, found, _ := s.resync(segmentHeaderSize + int64(pre)); found || p != at {
			t.Fatalf("gap %d: resync in zeros found a record at %d", gap, p)
		}
	}
}

// bytesFile is a read-only file over b.
type bytesFile struct{ b []byte }

func (f *bytesFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(f.b)) {
		return 0, os.ErrClosed
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, os.ErrClosed
	}
	return n, nil
}
func (f *bytesFile) WriteAt([]byte, int64) (int, error) { return 0, os.ErrPermission }
func (f *bytesFile) Close() error                       { return nil }
func (f *bytesFile) Sync() error                        { return nil }
func (f *bytesFile) DataSync() error                    { return nil }
func (f *bytesFile) Truncate(int64) error               { return os.ErrPermission }
func (f *bytesFile) Size() (int64, error)               { return int64(len(f.b)), nil }

// TestSegmentTornWhileCreated: a power cut while a segment was being
// created (header lost, zeros of its preallocation kept) leaves nothing
// that was acknowledged: recovery removes it without counting corruption
// and carries on from the segment before it.
func TestSegmentTornWhileCreated(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 8 << 10, MaxBytes: 1 << 20}
	q := mustOpen(t, opts)
	var last Position
	for i := range 5 {
		end, err := q.Append(payload(1, i, 100))
		if err != nil {
			t.Fatal(err)
		}
		last = end
	}
	q.Close()
	// The next segment as a crash during its creation leaves it.
	path := filepath.Join(dir, segmentName(last+1000))
	if err := os.WriteFile(path, make([]byte, opts.SegmentBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	q = mustOpen(t, opts)
	defer q.Close()
	st := q.Stats()
	if st.CorruptRecords != 0 || st.CorruptBytes != 0 || st.TornBytes != 0 {
		t.Fatalf("stats %+v: a segment torn while created counted as damage", st)
	}
	// The torn file was removed; recovery started the next segment at
	// its base (invariant 1), so the name is taken again, by a valid one.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseSegmentHeader(b); err != nil {
		t.Fatalf("the segment at the torn one's base: %v", err)
	}
	got, r := drain(t, q, 0)
	defer r.Close()
	if len(got) != 5 {
		t.Fatalf("read %d records, want 5", len(got))
	}
	// Positions stay monotonic: the next append is not below the removed
	// segment's base (invariant 1).
	end, err := q.Append(payload(1, 5, 100))
	if err != nil {
		t.Fatal(err)
	}
	if end < last+1000 {
		t.Fatalf("append after recovery ends at %d, below the removed segment's base %d", end, last+1000)
	}
}
