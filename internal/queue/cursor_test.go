package queue

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/waittest"
)

// drainCursor reads what the cursor can read now, returning the record seqs.
func drainCursor(t *testing.T, c *Cursor) (seqs []int, end Position) {
	t.Helper()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		p, pos, err := c.Next(done)
		if errors.Is(err, context.Canceled) {
			return seqs, end
		}
		if err != nil {
			t.Fatalf("cursor Next: %v", err)
		}
		seqs = append(seqs, int(binary.LittleEndian.Uint64(p[8:])))
		end = pos
	}
}

func appendN(t *testing.T, q *Queue, from, n, size int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := q.Append(payload(1, i, size)); err != nil {
			t.Fatal(err)
		}
	}
}

// A cursor that has not committed holds segments the lake released; its
// commit then lets them go; a restart resumes after the commit.
func TestCursorHoldsSegmentsAndResumes(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 1024, MaxBytes: 1 << 20}
	q := mustOpen(t, opts)
	c, err := q.OpenCursor("prw", CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, q, 0, 100, 100)
	if err := q.Release(q.Stats().Last); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.First != 0 || st.Segments < 10 {
		t.Fatalf("lake release deleted segments the cursor still needs: %+v", st)
	}
	seqs, _ := drainCursor(t, c)
	if len(seqs) != 100 || seqs[0] != 0 || seqs[99] != 99 {
		t.Fatalf("cursor read %d records (%v...)", len(seqs), seqs[:min(3, len(seqs))])
	}
	// Commit after record 49 only: segments below it go, the rest stay.
	q2 := q.NewReader(0)
	var mid Position
	for i := 0; i < 50; i++ {
		_, mid, _ = q2.Next(waittest.Context(t))
	}
	q2.Close()
	if err := c.Commit(mid); err != nil {
		t.Fatal(err)
	}
	st := q.Stats()
	if st.First == 0 || st.First > mid {
		t.Fatalf("after commit at %d the queue starts at %d", mid, st.First)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	q = mustOpen(t, opts)
	defer q.Close()
	if err := q.Release(q.Stats().Last); err != nil { // the lake again, before the exporter starts
		t.Fatal(err)
	}
	c, err = q.OpenCursor("prw", CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Committed() != mid {
		t.Fatalf("reopened cursor at %d, committed %d", c.Committed(), mid)
	}
	seqs, end := drainCursor(t, c)
	if len(seqs) != 50 || seqs[0] != 50 {
		t.Fatalf("after restart the cursor read %d records from seq %v, want 50 from 50", len(seqs), seqs)
	}
	if err := c.Commit(end); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Segments != 1 {
		t.Fatalf("everything committed by lake and cursor, still %d segments", st.Segments)
	}
	if _, err := q.OpenCursor("prw", CursorOptions{}); err == nil {
		t.Fatal("a cursor opened twice must be refused")
	}
	if _, err := q.OpenCursor("../x", CursorOptions{}); err == nil {
		t.Fatal("a bad cursor name must be refused")
	}
}

// A stuck cursor with MaxBytes loses whole old segments (counted), never
// blocks the lake or another cursor, and the queue stays bounded.
func TestCursorMaxBytesDropsCounted(t *testing.T) {
	q := mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 1024, MaxBytes: 1 << 20})
	defer q.Close()
	stuck, err := q.OpenCursor("stuck", CursorOptions{MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	healthy, err := q.OpenCursor("healthy", CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, q, 0, 300, 100)
	_, end := drainCursor(t, healthy)
	if err := healthy.Commit(end); err != nil {
		t.Fatal(err)
	}
	q.Release(MaxPosition) // no lake
	st := q.Stats()
	if st.Bytes > 4096+3*1024 {
		t.Fatalf("queue holds %d bytes for a cursor bounded to 4096", st.Bytes)
	}
	cs := stuck.Stats()
	if cs.DroppedBytes == 0 || cs.LagBytes > 4096+1024 {
		t.Fatalf("stuck cursor stats %+v", cs)
	}
	seqs, _ := drainCursor(t, stuck)
	if len(seqs) == 0 || seqs[0] == 0 || seqs[len(seqs)-1] != 299 {
		t.Fatalf("stuck cursor should read the newest records only, got %d from %v", len(seqs), seqs[:1])
	}
	// What was dropped is what it did not read: positions add up.
	if got := uint64(st.Last) - uint64(cs.LagBytes); got != cs.DroppedBytes {
		t.Fatalf("dropped %d bytes, but the cursor skipped %d", cs.DroppedBytes, got)
	}
}

func TestCursorMaxAgeDrops(t *testing.T) {
	q := mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 1024, MaxBytes: 1 << 20})
	defer q.Close()
	c, err := q.OpenCursor("old", CursorOptions{MaxAge: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, q, 0, 30, 100) // about 3 sealed segments
	time.Sleep(80 * time.Millisecond)
	appendN(t, q, 30, 1, 100)
	q.Release(MaxPosition)
	cs := c.Stats()
	if cs.DroppedAge == 0 || cs.DroppedAge != cs.DroppedBytes {
		t.Fatalf("old segments were not dropped by age: %+v", cs)
	}
	seqs, _ := drainCursor(t, c)
	if len(seqs) == 0 || seqs[0] == 0 || seqs[len(seqs)-1] != 30 {
		t.Fatalf("read %v after the age drop", seqs)
	}
}

// A torn slot leaves the other one, so the cursor is at most one commit
// behind; two torn slots restart the cursor at the oldest stored record
// (logged; FuzzCursorFile).
func TestCursorTornSlot(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 1024, MaxBytes: 1 << 20}
	q := mustOpen(t, opts)
	c, _ := q.OpenCursor("x", CursorOptions{})
	appendN(t, q, 0, 3, 100)
	r := q.NewReader(0)
	_, p1, _ := r.Next(waittest.Context(t))
	_, p2, _ := r.Next(waittest.Context(t))
	r.Close()
	c.Commit(p1)
	c.Commit(p2)
	q.Close()
	path := filepath.Join(dir, cursorDir, "x")
	b, _ := os.ReadFile(path)
	// Damage the newest slot.
	newest := 0
	if binary.LittleEndian.Uint64(b[cursorSlot+4:]) > binary.LittleEndian.Uint64(b[4:]) {
		newest = cursorSlot
	}
	b[newest+20] ^= 0xff
	os.WriteFile(path, b, 0o644)
	q = mustOpen(t, opts)
	c, _ = q.OpenCursor("x", CursorOptions{})
	if c.Committed() != p1 {
		t.Fatalf("torn newest slot: cursor at %d, want the previous commit %d", c.Committed(), p1)
	}
	q.Close()
}

const cursorCrashDirEnv = "SLUICE_QUEUE_CURSOR_CRASH_DIR"

// TestCursorCrashChild appends, reads through a cursor, "sends" and commits
// in a loop, printing "committed <pos> <seq>" after every commit returns.
func TestCursorCrashChild(t *testing.T) {
	dir := os.Getenv(cursorCrashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCursorCrashKill9")
	}
	q, err := Open(Options{Dir: dir, SegmentBytes: 4096, MaxBytes: 1 << 24, Logger: discardLogger()})
	if err != nil {
		os.Exit(2)
	}
	q.Release(MaxPosition)
	c, err := q.OpenCursor("exp", CursorOptions{})
	if err != nil {
		os.Exit(3)
	}
	go func() {
		for {
			if _, err := q.Append(payload(7, int(time.Now().UnixNano()), 64)); err != nil {
				os.Exit(4)
			}
		}
	}()
	for {
		p, pos, err := c.Next(waittest.Context(t))
		if err != nil {
			os.Exit(5)
		}
		if err := c.Commit(pos); err != nil {
			os.Exit(6)
		}
		fmt.Printf("committed %d %d\n", pos, binary.LittleEndian.Uint64(p[8:]))
	}
}

// TestCursorCrashKill9 kills a committing process with SIGKILL and checks
// that the reopened cursor is at or after the last commit it printed (the
// commit returned), on a record boundary, and never past the durable end.
func TestCursorCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCursorCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), cursorCrashDirEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(out)
		var last Position
		n := 0
		killed := false
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				if err != io.EOF {
					t.Fatal(err)
				}
				break
			}
			f := strings.Fields(line)
			if len(f) != 3 || f[0] != "committed" {
				continue
			}
			p, _ := strconv.ParseUint(f[1], 10, 64)
			last = Position(p)
			n++
			if !killed && n >= 300+round*200 {
				cmd.Process.Kill()
				killed = true
			}
		}
		cmd.Wait()
		if !killed {
			t.Fatalf("round %d: child exited by itself after %d commits", round, n)
		}
		q := mustOpen(t, Options{Dir: dir, SegmentBytes: 4096, MaxBytes: 1 << 24})
		c, err := q.OpenCursor("exp", CursorOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := c.Committed()
		if got < last || got > q.Stats().Last {
			t.Fatalf("round %d: cursor at %d after kill; last printed commit %d, durable end %d", round, got, last, q.Stats().Last)
		}
		// On a record boundary: a reader from there reads valid records only.
		drainCursor(t, c)
		if st := q.Stats(); st.CorruptRecords != 0 {
			t.Fatalf("round %d: resumed mid-record: %+v", round, st)
		}
		t.Logf("round %d: %d commits, cursor resumed at %d (last acknowledged %d)", round, n, got, last)
		c.Close()
		q.Close()
	}
}

// A new cursor opened From others starts at the lowest of their committed
// positions, not at the durable end: an exporter that splits its cursor
// into one per endpoint skips nothing of its backlog. A cursor that
// exists keeps its own position.
func TestCursorFrom(t *testing.T) {
	dir := t.TempDir()
	q := mustOpen(t, Options{Dir: dir, SegmentBytes: 1024, MaxBytes: 1 << 20})
	defer q.Close()
	old, err := q.OpenCursor("x", CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, q, 0, 10, 100)
	seqs, _ := drainCursor(t, old)
	if len(seqs) != 10 {
		t.Fatalf("read %d, want 10", len(seqs))
	}
	// Commit after the first 4 records only.
	old.Rewind()
	var at Position
	for range 4 {
		_, pos, err := old.Next(waittest.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		at = pos
	}
	if err := old.Commit(at); err != nil {
		t.Fatal(err)
	}
	old.Close()
	split, err := q.OpenCursor("x.a", CursorOptions{From: []string{"x", "missing"}})
	if err != nil {
		t.Fatal(err)
	}
	if seqs, _ := drainCursor(t, split); len(seqs) != 6 || seqs[0] != 4 {
		t.Fatalf("the new cursor read %v, want records 4..9", seqs)
	}
	fresh, err := q.OpenCursor("y", CursorOptions{From: []string{"missing"}})
	if err != nil {
		t.Fatal(err)
	}
	if seqs, _ := drainCursor(t, fresh); len(seqs) != 0 {
		t.Fatalf("a cursor From no existing one read %v, want nothing (the durable end)", seqs)
	}
	split.Close()
	again, err := q.OpenCursor("x.a", CursorOptions{From: []string{"nothing-like-it"}})
	if err != nil {
		t.Fatal(err)
	}
	if seqs, _ := drainCursor(t, again); len(seqs) != 6 {
		t.Fatalf("reopened, the cursor read %v: it moved (From applies to new cursors only)", seqs)
	}
}
