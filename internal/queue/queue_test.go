package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/waittest"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func mustOpen(t testing.TB, opts Options) *Queue {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	q, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return q
}

type rec struct {
	payload []byte
	end     Position
}

// drain reads every durable record from `from` on, without blocking.
func drain(t testing.TB, q *Queue, from Position) ([]rec, *Reader) {
	t.Helper()
	r := q.NewReader(from)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	var out []rec
	for {
		p, end, err := r.Next(done)
		if errors.Is(err, context.Canceled) {
			break
		}
		if err != nil {
			t.Fatalf("Next at %d: %v", r.Position(), err)
		}
		out = append(out, rec{bytes.Clone(p), end})
	}
	if last := q.Stats().Last; r.Position() != last {
		t.Fatalf("drain stopped at %d, durable end %d", r.Position(), last)
	}
	return out, r
}

// payload makes a self-describing record: id, seq and a pattern that a
// test can verify without remembering the bytes.
func payload(id, seq, size int) []byte {
	size = max(size, 16)
	b := make([]byte, size)
	binary.LittleEndian.PutUint64(b, uint64(id))
	binary.LittleEndian.PutUint64(b[8:], uint64(seq))
	for i := 16; i < size; i++ {
		b[i] = byte(id*31 + seq*7 + i)
	}
	return b
}

func TestAppendReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	q := mustOpen(t, Options{Dir: dir, SegmentBytes: 1024, MaxBytes: 1 << 20})
	defer q.Close()
	var want []rec
	if _, err := q.Append([]byte{}); !errors.Is(err, ErrEmptyRecord) {
		t.Fatalf("Append of an empty record: %v, want ErrEmptyRecord", err)
	}
	sizes := []int{2, 1, 17, 100, 500, 1024 - segmentHeaderSize - recordHeaderSize - 1, 3, 1, 250}
	for i, n := range sizes {
		p := bytes.Repeat([]byte{byte(i + 1)}, n)
		end, err := q.Append(p)
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		want = append(want, rec{p, end})
	}
	// A batch: one end for all, records contiguous.
	batch := [][]byte{[]byte("a"), []byte("bb"), bytes.Repeat([]byte("c"), 600)}
	end, err := q.Append(batch...)
	if err != nil {
		t.Fatal(err)
	}
	prev := want[len(want)-1].end
	for _, p := range batch {
		prev += Position(recordHeaderSize + len(p))
	}
	if end != prev {
		t.Fatalf("batch end %d, want %d (contiguous records)", end, prev)
	}
	got, r := drain(t, q, 0)
	defer r.Close()
	if len(got) != len(want)+len(batch) {
		t.Fatalf("read %d records, want %d", len(got), len(want)+len(batch))
	}
	for i, w := range want {
		if !bytes.Equal(got[i].payload, w.payload) || got[i].end != w.end {
			t.Fatalf("record %d: got %d bytes end %d, want %d bytes end %d", i, len(got[i].payload), got[i].end, len(w.payload), w.end)
		}
	}
	if got[len(got)-1].end != end {
		t.Fatalf("last end %d, want %d", got[len(got)-1].end, end)
	}
	st := q.Stats()
	if st.Segments < 3 {
		t.Fatalf("expected rotation into several segments, got %d", st.Segments)
	}
	if st.Records != uint64(len(got)) || st.Last != end || st.First != 0 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := q.Append(make([]byte, 1024)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized record: %v, want ErrTooLarge", err)
	}
}

// The group-commit delay applies only under concurrent load: a lone
// appender with an hour's delay is never held up (the test would time out),
// while concurrent appenders behind a delay share far more fsyncs than
// without one.
func TestGroupCommitDelayOnlyUnderConcurrency(t *testing.T) {
	q := mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 1 << 20, MaxBytes: 64 << 20, GroupCommitDelay: time.Hour})
	done := make(chan error, 1)
	go func() {
		for i := range 20 {
			if _, err := q.Append(payload(0, i, 100)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a lone appender waited for the group-commit delay")
	}
	if st := q.Stats(); st.Fsyncs < st.Appends {
		t.Fatalf("lone appender: %d fsyncs for %d appends", st.Fsyncs, st.Appends)
	}
	q.Close()

	q = mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 1 << 20, MaxBytes: 64 << 20, GroupCommitDelay: 20 * time.Millisecond})
	defer q.Close()
	const writers, each = 16, 20
	start := q.Stats().Fsyncs
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := q.Append(payload(w, i, 100)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	waittest.Wait(t, &wg, "the concurrent appenders")
	fsyncs := q.Stats().Fsyncs - start
	t.Logf("%d appends, %d fsyncs", writers*each, fsyncs)
	// Each delayed round lets every other writer join: about one fsync
	// per round of 16; allow 4x for a loaded machine.
	if fsyncs > writers*each/4 {
		t.Fatalf("delay not effective: %d fsyncs for %d appends", fsyncs, writers*each)
	}
}

func TestGroupCommitSharesFsyncs(t *testing.T) {
	q := mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 1 << 20, MaxBytes: 64 << 20})
	defer q.Close()
	const writers, each = 32, 40
	start := q.Stats().Fsyncs
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := q.Append(payload(w, i, 200)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	waittest.Wait(t, &wg, "the concurrent appenders")
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := q.Stats()
	fsyncs := st.Fsyncs - start
	t.Logf("%d appends, %d fsyncs", st.Appends, fsyncs)
	if st.Appends != writers*each {
		t.Fatalf("appends %d", st.Appends)
	}
	if fsyncs >= st.Appends/2 {
		t.Fatalf("group commit not effective: %d fsyncs for %d appends", fsyncs, st.Appends)
	}
	got, r := drain(t, q, 0)
	r.Close()
	if len(got) != writers*each {
		t.Fatalf("read %d", len(got))
	}
}

func TestRestartPreservesRecords(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 2048, MaxBytes: 1 << 20}
	q := mustOpen(t, opts)
	var want []rec
	for i := range 100 {
		p := payload(1, i, 10+i*3)
		end, err := q.Append(p)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rec{p, end})
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := q.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}

	q = mustOpen(t, opts)
	defer q.Close()
	st := q.Stats()
	if st.Records != 100 || st.Last != want[99].end || st.TornBytes != 0 || st.CorruptRecords != 0 {
		t.Fatalf("stats after reopen: %+v", st)
	}
	end, err := q.Append([]byte("after restart"))
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, rec{[]byte("after restart"), end})
	got, r := drain(t, q, 0)
	defer r.Close()
	if len(got) != len(want) {
		t.Fatalf("read %d, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].payload, want[i].payload) || got[i].end != want[i].end {
			t.Fatalf("record %d differs", i)
		}
	}
	// Replaying from a committed position yields exactly the rest.
	tail, r2 := drain(t, q, want[49].end)
	defer r2.Close()
	if len(tail) != 51 || !bytes.Equal(tail[0].payload, want[50].payload) {
		t.Fatalf("replay from position: %d records", len(tail))
	}
}

// segmentTag reads the tag from the header of the segment file at path.
func segmentTag(t *testing.T, path string) uint32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < segmentHeaderSize {
		t.Fatalf("read segment header of %s: %v", path, err)
	}
	h, err := parseSegmentHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h.tag
}

func lastSegmentPath(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
	if err != nil || len(m) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	return m[len(m)-1]
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestTornTailTruncated: bytes after the last record of the last segment
// that are a torn record (a header with the segment's tag, its record not
// valid) are counted up to their last non-zero byte and zeroed, in a
// preallocated segment (written where the next record would go) and in a
// segment whose file grows (appended at its end; a header cut short by the
// file's end is torn too); zeros alone are the preallocated space, and a
// header without the segment's tag is never a record (an earlier use's
// bytes in a recycled file look the same): neither is counted. Appends
// continue where the records end.
func TestTornTailTruncated(t *testing.T) {
	type tail struct {
		b func(tag uint32) []byte
		// torn bytes counted: -1 for up to the tail's last non-zero byte
		pre, grown int
	}
	tails := map[string]tail{
		"partial header": {func(uint32) []byte { return []byte{5, 0, 0} }, 0, -1},
		"header without tag": {func(uint32) []byte {
			return append(binary.LittleEndian.AppendUint32(nil, 100), make([]byte, 8+30)...)
		}, 0, 0},
		"partial payload": {func(tag uint32) []byte {
			b := binary.LittleEndian.AppendUint32(nil, 100)
			return append(binary.LittleEndian.AppendUint32(b, tag), make([]byte, 4+30)...)
		}, -1, -1},
		"zeros": {func(uint32) []byte { return make([]byte, 700) }, 0, 0},
		"bad crc at end": {func(tag uint32) []byte {
			return appendRecord(nil, new([12]byte), 12345, tag, []byte("not at this position"))
		}, -1, -1},
	}
	for name, tc := range tails {
		for _, prealloc := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/preallocated=%v", name, prealloc), func(t *testing.T) {
				dir := t.TempDir()
				opts := Options{Dir: dir, SegmentBytes: 1 << 16, MaxBytes: 1 << 20}
				q := mustOpen(t, opts)
				var ends []Position
				for i := range 20 {
					end, err := q.Append(payload(2, i, 50))
					if err != nil {
						t.Fatal(err)
					}
					ends = append(ends, end)
				}
				q.Close()
				path := lastSegmentPath(t, dir)
				dataEnd := int64(segmentHeaderSize) + int64(ends[19])
				if before, _ := os.Stat(path); before.Size() != opts.SegmentBytes {
					t.Fatalf("segment of %d bytes, want %d (preallocated)", before.Size(), opts.SegmentBytes)
				}
				tail := tc.b(segmentTag(t, path))
				if prealloc {
					f, err := os.OpenFile(path, os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := f.WriteAt(tail, dataEnd); err != nil {
						t.Fatal(err)
					}
					f.Close()
				} else {
					if err := os.Truncate(path, dataEnd); err != nil {
						t.Fatal(err)
					}
					appendFile(t, path, tail)
				}
				size := func() int64 { st, _ := os.Stat(path); return st.Size() }
				sizeBefore := size()

				q = mustOpen(t, opts)
				defer q.Close()
				st := q.Stats()
				want := tc.grown
				if prealloc {
					want = tc.pre
				}
				torn := uint64(want)
				if want < 0 {
					torn = uint64(lastNonZero(tail) + 1)
				}
				if st.TornBytes != torn || st.CorruptRecords != 0 {
					t.Fatalf("stats %+v, want %d torn bytes", st, torn)
				}
				if size() != sizeBefore {
					t.Fatalf("size after recovery %d, want %d", size(), sizeBefore)
				}
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if i := firstNonZero(b[dataEnd:]); i >= 0 && torn > 0 {
					t.Fatalf("byte %d after the records is not zero after recovery", i)
				}
				end, err := q.Append([]byte("next"))
				if err != nil {
					t.Fatal(err)
				}
				if end != ends[19]+Position(recordHeaderSize+4) {
					t.Fatalf("append after truncation at %d", end)
				}
				got, r := drain(t, q, 0)
				defer r.Close()
				if len(got) != 21 || string(got[20].payload) != "next" {
					t.Fatalf("read %d records", len(got))
				}
			})
		}
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestCorruptRecordSkipped(t *testing.T) {
	cases := []struct {
		name    string
		corrupt func(b []byte, off int64) // off: file offset of record 5
		sealed  bool
	}{
		{"payload bit flip in last segment", func(b []byte, off int64) { b[off+recordHeaderSize+3] ^= 0x40 }, false},
		{"length field in last segment", func(b []byte, off int64) { b[off+1] = 0x7f }, false},
		{"payload bit flip in sealed segment", func(b []byte, off int64) { b[off+recordHeaderSize+3] ^= 0x40 }, true},
		{"crc field in sealed segment", func(b []byte, off int64) { b[off+5] ^= 1 }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var logs syncBuffer
			opts := Options{Dir: dir, SegmentBytes: 4096, MaxBytes: 1 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			q := mustOpen(t, opts)
			const n = 10
			var ends []Position
			for i := range n {
				end, err := q.Append(payload(3, i, 100))
				if err != nil {
					t.Fatal(err)
				}
				ends = append(ends, end)
			}
			if tc.sealed {
				// Fill past the first segment so it is sealed.
				for i := range 40 {
					if _, err := q.Append(payload(4, i, 100)); err != nil {
						t.Fatal(err)
					}
				}
			}
			q.Close()
			segs, _ := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
			path := segs[0]
			if !tc.sealed && len(segs) != 1 {
				t.Fatalf("want a single segment, have %d", len(segs))
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			off := segmentHeaderSize + int64(ends[4])
			tc.corrupt(b, off)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}

			q = mustOpen(t, opts)
			defer q.Close()
			got, r := drain(t, q, 0)
			defer r.Close()
			var seqs []int
			for _, g := range got {
				if binary.LittleEndian.Uint64(g.payload) == 3 {
					seqs = append(seqs, int(binary.LittleEndian.Uint64(g.payload[8:])))
				}
			}
			if fmt.Sprint(seqs) != "[0 1 2 3 4 6 7 8 9]" {
				t.Fatalf("records read %v, want all but #5", seqs)
			}
			st := q.Stats()
			if st.CorruptRecords != 1 || st.CorruptBytes != uint64(recordHeaderSize+100) {
				t.Fatalf("corrupt stats %d records %d bytes", st.CorruptRecords, st.CorruptBytes)
			}
			if r.Corrupt() != 0 && !tc.sealed {
				// Recovery already resynced the last segment; the reader
				// still has to skip the same bytes.
				t.Logf("reader skipped %d bytes", r.Corrupt())
			}
			want := fmt.Sprintf("offset=%d", off)
			if s := logs.String(); !bytes.Contains([]byte(s), []byte(want)) || !bytes.Contains([]byte(s), []byte(filepath.Base(path))) {
				t.Fatalf("log does not name file and %s:\n%s", want, s)
			}
		})
	}
}

func TestReleaseDeletesSegments(t *testing.T) {
	dir := t.TempDir()
	q := mustOpen(t, Options{Dir: dir, SegmentBytes: 1024, MaxBytes: 1 << 20})
	defer q.Close()
	var ends []Position
	for i := range 60 {
		end, err := q.Append(payload(5, i, 100))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
	}
	before := q.Stats()
	files := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
		return len(m)
	}
	if files() != before.Segments || before.Segments < 5 {
		t.Fatalf("segments %d, files %d", before.Segments, files())
	}
	commit := ends[29]
	if err := q.Release(commit); err != nil {
		t.Fatal(err)
	}
	st := q.Stats()
	if st.Segments >= before.Segments || files() != st.Segments || st.First > commit || st.Bytes >= before.Bytes {
		t.Fatalf("after Release(%d): %+v (before %+v)", commit, st, before)
	}
	if st.Records+before.Records-st.Records != 60 || st.Records >= 60 {
		t.Fatalf("records %d", st.Records)
	}
	got, r := drain(t, q, commit)
	r.Close()
	if len(got) != 30 || r.Lost() != 0 {
		t.Fatalf("read %d records after commit, lost %d", len(got), r.Lost())
	}
	// Releasing everything keeps the active segment.
	if err := q.Release(ends[59]); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Segments != 1 || files() != 1 {
		t.Fatalf("after full release: %+v", st)
	}
}

func TestFullBackpressure(t *testing.T) {
	q := mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 1024, MaxBytes: 4096})
	defer q.Close()
	var ends []Position
	var err error
	for i := 0; i < 100; i++ {
		var end Position
		if end, err = q.Append(payload(6, i, 100)); err != nil {
			break
		}
		ends = append(ends, end)
	}
	if !errors.Is(err, ErrFull) {
		t.Fatalf("got %v, want ErrFull", err)
	}
	st := q.Stats()
	if st.Bytes > 4096 || st.DroppedRecords != 0 || st.Records != uint64(len(ends)) {
		t.Fatalf("stats when full: %+v", st)
	}
	// Nothing stored was lost, and releasing makes room again.
	got, r := drain(t, q, 0)
	r.Close()
	if len(got) != len(ends) {
		t.Fatalf("read %d, want %d", len(got), len(ends))
	}
	if err := q.Release(ends[len(ends)-1]); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Append(payload(6, 999, 100)); err != nil {
		t.Fatalf("append after release: %v", err)
	}
}

func TestDropOldest(t *testing.T) {
	q := mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 1024, MaxBytes: 4096, Full: DropOldest})
	defer q.Close()
	r := q.NewReader(0)
	defer r.Close()
	// The reader takes the first record, then falls behind.
	if _, err := q.Append(payload(7, 0, 100)); err != nil {
		t.Fatal(err)
	}
	if p, _, err := r.Next(waittest.Context(t)); err != nil || binary.LittleEndian.Uint64(p[8:]) != 0 {
		t.Fatalf("first record: %v", err)
	}
	const n = 200
	for i := 1; i < n; i++ {
		if _, err := q.Append(payload(7, i, 100)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	st := q.Stats()
	if st.Bytes > 4096 || st.DroppedRecords == 0 || st.DroppedBytes == 0 {
		t.Fatalf("stats %+v", st)
	}
	if st.DroppedRecords+st.Records != n {
		t.Fatalf("dropped %d + stored %d != appended %d", st.DroppedRecords, st.Records, n)
	}
	var seqs []uint64
	for r.Position() < st.Last {
		p, _, err := r.Next(waittest.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, binary.LittleEndian.Uint64(p[8:]))
	}
	if uint64(len(seqs)) != st.Records || r.Lost() == 0 {
		t.Fatalf("read %d of %d stored, lost %d bytes", len(seqs), st.Records, r.Lost())
	}
	if seqs[0] != st.DroppedRecords || seqs[len(seqs)-1] != n-1 {
		t.Fatalf("reader resumed at seq %d (dropped %d)", seqs[0], st.DroppedRecords)
	}
	// Lost bytes are exactly the positions between the reader and the data.
	if want := uint64(st.First) - uint64(recordHeaderSize+100); r.Lost() != want {
		t.Fatalf("lost %d bytes, want %d", r.Lost(), want)
	}
}

func TestReaderBlocksThenWakes(t *testing.T) {
	q := mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 1024, MaxBytes: 1 << 20})
	r := q.NewReader(0)
	defer r.Close()
	type result struct {
		p   []byte
		err error
	}
	next := func() chan result {
		ch := make(chan result, 1)
		go func() {
			p, _, err := r.Next(waittest.Context(t))
			ch <- result{bytes.Clone(p), err}
		}()
		return ch
	}
	ch := next()
	select {
	case res := <-ch:
		t.Fatalf("Next returned on an empty queue: %q %v", res.p, res.err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := q.Append([]byte("wake up")); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-ch:
		if res.err != nil || string(res.p) != "wake up" {
			t.Fatalf("got %q %v", res.p, res.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reader did not wake on append")
	}
	// Context cancellation.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if _, _, err := r.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want deadline", err)
	}
	cancel()
	// Close wakes a blocked reader.
	ch = next()
	time.Sleep(20 * time.Millisecond)
	q.Close()
	select {
	case res := <-ch:
		if !errors.Is(res.err, ErrClosed) {
			t.Fatalf("got %v, want ErrClosed", res.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reader did not wake on Close")
	}
}

func TestStartPositionNeverReused(t *testing.T) {
	dir := t.TempDir()
	q := mustOpen(t, Options{Dir: dir, Start: 1 << 20})
	end, err := q.Append([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if end != 1<<20+recordHeaderSize+1 {
		t.Fatalf("end %d", end)
	}
	q.Close()
	// Reopening with a higher Start moves past the existing data.
	q = mustOpen(t, Options{Dir: dir, Start: 2 << 20})
	defer q.Close()
	end, err = q.Append([]byte("y"))
	if err != nil || end != 2<<20+recordHeaderSize+1 {
		t.Fatalf("end %d err %v", end, err)
	}
	got, r := drain(t, q, 0)
	r.Close()
	if len(got) != 2 || string(got[0].payload) != "x" || string(got[1].payload) != "y" {
		t.Fatalf("got %d records", len(got))
	}
}

func TestRecoverTornSegmentCreation(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 1024, MaxBytes: 1 << 20}
	q := mustOpen(t, opts)
	var last Position
	for i := range 30 {
		var err error
		if last, err = q.Append(payload(8, i, 60)); err != nil {
			t.Fatal(err)
		}
	}
	q.Close()
	// A crash right after creating the next segment leaves a file whose
	// header never reached the disk.
	torn := filepath.Join(dir, segmentName(last+100))
	if err := os.WriteFile(torn, []byte("SLQ"), 0o644); err != nil {
		t.Fatal(err)
	}
	q = mustOpen(t, opts)
	defer q.Close()
	// It was removed and a valid segment started at the same base, so
	// positions never go back below it.
	if b, err := os.ReadFile(torn); err != nil || len(b) < segmentHeaderSize {
		t.Fatalf("torn segment not replaced: %v", err)
	} else if _, err := parseSegmentHeader(b); err != nil {
		t.Fatal(err)
	}
	end, err := q.Append([]byte("z"))
	if err != nil {
		t.Fatal(err)
	}
	if end <= last+100 {
		t.Fatalf("position %d reused below removed base %d", end, last+100)
	}
	got, r := drain(t, q, 0)
	r.Close()
	if len(got) != 31 || q.Stats().Records != 31 {
		t.Fatalf("read %d, stats %+v", len(got), q.Stats())
	}
}

func TestOptionsValidation(t *testing.T) {
	bad := []Options{
		{},
		{Dir: "x", SegmentBytes: 10},
		{Dir: "x", SegmentBytes: 1 << 20, MaxBytes: 1 << 20},
		{Dir: "x", Full: 7},
		{Dir: "x", GroupCommitDelay: -1},
	}
	for _, o := range bad {
		if _, err := o.withDefaults(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	o, err := Options{Dir: "x", MaxBytes: 100 << 20}.withDefaults()
	if err != nil || o.SegmentBytes != 25<<20 {
		t.Fatalf("defaults: %+v %v", o, err)
	}
}

func TestAppendAndNextDoNotAllocate(t *testing.T) {
	q := mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 1 << 20, MaxBytes: 1 << 30})
	defer q.Close()
	rec := payload(9, 0, 512)
	one := [][]byte{rec}
	q.Append(one...) // warm the encode buffer
	if a := testing.AllocsPerRun(50, func() { q.Append(one...) }); a > 0 {
		t.Fatalf("Append allocates %.1f times", a)
	}
	r := q.NewReader(0)
	defer r.Close()
	ctx := context.Background()
	r.Next(ctx)
	if a := testing.AllocsPerRun(40, func() { r.Next(ctx) }); a > 0 {
		t.Fatalf("Reader.Next allocates %.1f times", a)
	}
}
