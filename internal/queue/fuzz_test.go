package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// testTag is the tag of the segments tests build by hand.
const testTag = 0x7a6b5c4d

// validSegment builds segment bytes at base with the given payloads.
func validSegment(base Position, firstRecord uint64, payloads ...string) []byte {
	return taggedSegment(base, firstRecord, testTag, payloads...)
}

// taggedSegment builds a version 2 segment with the given tag.
func taggedSegment(base Position, firstRecord uint64, tag uint32, payloads ...string) []byte {
	b := appendSegmentHeader(nil, segmentHeader{base: base, firstRecord: firstRecord, tag: tag})
	pos := base
	for _, p := range payloads {
		b = appendRecord(b, new([12]byte), pos, tag, []byte(p))
		pos += Position(recordHeaderSize + len(p))
	}
	return b
}

// validSegmentV1 builds a segment as builds before version 2 wrote it.
func validSegmentV1(base Position, firstRecord uint64, payloads ...string) []byte {
	b := appendSegmentHeader(nil, segmentHeader{version: segmentVersionV1, base: base, firstRecord: firstRecord})
	pos := base
	for _, p := range payloads {
		b = appendRecordV1(b, pos, []byte(p))
		pos += Position(recordHeaderV1 + len(p))
	}
	return b
}

// appendRecordV1 encodes a version 1 record: length | CRC32C | payload.
func appendRecordV1(dst []byte, pos Position, payload []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, recordCRC(new([12]byte), pos, payload))
	return append(dst, payload...)
}

// FuzzRecover feeds arbitrary bytes to recovery and to readers as one or two
// segment files. Whatever the bytes, Open must succeed, reads must end, and
// the queue must keep accepting and returning new records.
func FuzzRecover(f *testing.F) {
	seg := validSegment(0, 0, "hello", "", "world, a longer record")
	f.Add(seg, []byte(nil))
	f.Add(seg[:len(seg)-3], []byte(nil))
	f.Add(seg[:segmentHeaderSize], []byte(nil))
	f.Add(seg[:10], []byte(nil))
	f.Add([]byte{}, []byte(nil))
	bad := bytes.Clone(seg)
	bad[segmentHeaderSize+9] ^= 0xff
	f.Add(bad, []byte(nil))
	f.Add(seg, validSegment(Position(len(seg)), 3, "next segment"))
	f.Add(seg, []byte("garbage in the last segment"))
	f.Add(seg, validSegment(5, 1, "overlapping"))
	v1 := validSegmentV1(0, 0, "hello", "", "world, a longer record")
	f.Add(v1, []byte(nil))
	f.Add(v1[:len(v1)-3], []byte(nil))
	f.Add(v1, validSegment(Position(len(v1)), 3, "next segment"))
	// A recycled file: new records, then an earlier use's under another tag.
	old := taggedSegment(0, 0, 0x11223344, "old one", "old two", "old three, a longer one")
	recycled := append(validSegment(0, 0, "new"), old[segmentHeaderSize+15:]...)
	f.Add(recycled, []byte(nil))
	f.Add(seg, recycled)

	f.Fuzz(func(t *testing.T, first, second []byte) {
		mfs := newMemFS()
		mfs.names["/q/"+segmentName(0)] = &memNode{data: first}
		if len(second) > 0 {
			// Named by the first file's length so both gaps and overlaps occur.
			base := Position(max(len(first)-segmentHeaderSize, 0))
			if len(second) >= 16 {
				base = Position(second[8]) // often disagrees with the header
			}
			mfs.names["/q/"+segmentName(base)] = &memNode{data: second}
		}
		opts := Options{Dir: "/q", SegmentBytes: 4096, MaxBytes: 1 << 20, fs: mfs, Logger: discardLogger()}
		q, err := Open(opts)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		_, r := drain(t, q, 0)
		r.Close()
		end, err := q.Append([]byte("new"))
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		got, r := drain(t, q, 0)
		r.Close()
		if len(got) == 0 || string(got[len(got)-1].payload) != "new" || got[len(got)-1].end != end {
			t.Fatalf("appended record not read back last")
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		q, err = Open(opts)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer q.Close()
		got2, r2 := drain(t, q, 0)
		r2.Close()
		if len(got2) != len(got) || q.Stats().Last != end {
			t.Fatalf("reopen changed contents: %d records, was %d", len(got2), len(got))
		}
	})
}

// FuzzRecycledTail: a last segment in a recycled file holds new records
// (sizes from the input) over arbitrary bytes of an earlier use, cut at an
// arbitrary offset (a crash during the new writes). Recovery returns exactly
// the new records that end before the cut, in order, never anything else,
// counts nothing corrupt, and the queue appends and reopens cleanly.
func FuzzRecycledTail(f *testing.F) {
	old := taggedSegment(0, 0, 0x11223344, "old one", "old two", "old three, a longer one")
	f.Add(old[segmentHeaderSize:], uint16(40), []byte{5, 9, 200})
	f.Add([]byte{}, uint16(0), []byte{1})
	f.Add(bytes.Repeat([]byte{0x4d, 0x5c, 0x6b, 0x7a, 9, 0, 0, 0}, 100), uint16(300), []byte{7, 7, 7, 7})
	f.Add(make([]byte, 500), uint16(1000), []byte{100, 1})

	f.Fuzz(func(t *testing.T, oldBytes []byte, cut uint16, sizes []byte) {
		const segBytes = 4096
		const base = Position(1 << 20)
		if len(sizes) > 20 {
			sizes = sizes[:20]
		}
		img := appendSegmentHeader(nil, segmentHeader{base: base, firstRecord: 7, tag: testTag})
		var ends []Position
		var payloads [][]byte
		pos := base
		for i, s := range sizes {
			p := payload(9, i, int(s))
			if len(img)+recordHeaderSize+len(p) > segBytes {
				break
			}
			img = appendRecord(img, new([12]byte), pos, testTag, p)
			pos += Position(recordHeaderSize + len(p))
			ends, payloads = append(ends, pos), append(payloads, p)
		}
		c := min(segmentHeaderSize+int(cut), len(img))
		file := make([]byte, segBytes)
		copy(file[segmentHeaderSize:], oldBytes)
		copy(file, img[:c])

		mfs := newMemFS()
		mfs.names["/q/"+segmentName(base)] = &memNode{data: file}
		opts := Options{Dir: "/q", SegmentBytes: segBytes, MaxBytes: 1 << 20, fs: mfs, Logger: discardLogger()}
		q, err := Open(opts)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		got, r := drain(t, q, 0)
		r.Close()
		// The records wholly before the cut, or that the bytes after it
		// happen to complete (a payload ending in zeros over zeros).
		n := 0
		for n < len(ends) {
			from, to := int(ends[n]-base)+segmentHeaderSize-recordHeaderSize-len(payloads[n]), int(ends[n]-base)+segmentHeaderSize
			if !bytes.Equal(file[from:to], img[from:to]) {
				break
			}
			n++
		}
		if len(got) != n {
			t.Fatalf("read %d records, want %d (cut at %d)", len(got), n, c)
		}
		for i, g := range got {
			if g.end != ends[i] || !bytes.Equal(g.payload, payloads[i]) {
				t.Fatalf("record %d differs", i)
			}
		}
		if st := q.Stats(); st.CorruptRecords != 0 {
			t.Fatalf("stats %+v: corrupt", st)
		}
		end, err := q.Append([]byte("new"))
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		q.Close()
		q, err = Open(opts)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer q.Close()
		got2, r2 := drain(t, q, 0)
		r2.Close()
		if st := q.Stats(); len(got2) != n+1 || st.Last != end || st.TornBytes != 0 || st.CorruptRecords != 0 {
			t.Fatalf("reopen: %d records, stats %+v", len(got2), st)
		}
	})
}

// FuzzCursorFile: whatever bytes a cursor file holds, Open succeeds and
// the cursor resumes at the newest valid slot's position, or, with no
// valid slot, at the oldest stored record (never past stored data); it
// then reads and commits on.
func FuzzCursorFile(f *testing.F) {
	valid := func(seq, pos uint64) []byte {
		var s [cursorSlot]byte
		copy(s[:], "SLQC")
		binary.LittleEndian.PutUint64(s[4:], seq)
		binary.LittleEndian.PutUint64(s[12:], pos)
		binary.LittleEndian.PutUint32(s[28:], crc32.Checksum(s[:28], castagnoli))
		return s[:]
	}
	f.Add([]byte{})
	f.Add(valid(1, 0))
	f.Add(append(valid(3, 120), valid(2, 0)...))
	f.Add(append(valid(1, 0), bytes.Repeat([]byte{0xff}, cursorSlot)...))
	f.Add(bytes.Repeat([]byte("SLQC"), 40))
	f.Add(append(valid(5, 1<<40), valid(4, 0)...)) // past the end of the queue
	f.Fuzz(func(t *testing.T, file []byte) {
		mfs := newMemFS()
		dir := "/q"
		opts := Options{Dir: dir, SegmentBytes: 1024, MaxBytes: 1 << 20, MinFreeBytes: -1, fs: mfs, Logger: discardLogger()}
		q, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		var ends []Position
		for i := range 4 {
			end, err := q.Append(payload(1, i, 100))
			if err != nil {
				t.Fatal(err)
			}
			ends = append(ends, end)
		}
		q.Close()
		cf, err := mfs.OpenFile(filepath.Join(dir, cursorDir, "x"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cf.WriteAt(file, 0); err != nil {
			t.Fatal(err)
		}
		cf.Close()
		// What the file says: the valid slot of the highest seq.
		var want Position
		found := false
		var seq uint64
		for i := 0; i+cursorSlot <= min(len(file), 2*cursorSlot); i += cursorSlot {
			s := file[i : i+cursorSlot]
			if string(s[:4]) == "SLQC" && binary.LittleEndian.Uint32(s[28:]) == crc32.Checksum(s[:28], castagnoli) {
				if n := binary.LittleEndian.Uint64(s[4:]); !found || n > seq {
					seq, want, found = n, Position(binary.LittleEndian.Uint64(s[12:])), true
				}
			}
		}
		q, err = Open(opts)
		if err != nil {
			t.Fatalf("Open with a cursor file of %d bytes: %v", len(file), err)
		}
		defer q.Close()
		c, err := q.OpenCursor("x", CursorOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			want = q.Stats().First
		}
		want = min(want, q.Stats().Last)
		if got := c.Committed(); got != want {
			t.Fatalf("cursor at %d, want %d (valid slot found: %v)", got, want, found)
		}
		// It reads on without error from there (a position inside a
		// record resynchronizes; past the end waits), and commits.
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // read what is there, never wait
		last := c.Committed()
		for {
			_, pos, err := c.Next(ctx)
			if err != nil {
				break
			}
			last = pos
		}
		if !found && last != ends[len(ends)-1] {
			t.Fatalf("a cursor without a valid slot read up to %d, want every record (to %d)", last, ends[len(ends)-1])
		}
		if err := c.Commit(last); err != nil {
			t.Fatal(err)
		}
	})
}
