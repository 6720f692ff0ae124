package queue

import (
	"bytes"
	"testing"
)

// validSegment builds segment bytes at base with the given payloads.
func validSegment(base Position, firstRecord uint64, payloads ...string) []byte {
	b := appendSegmentHeader(nil, segmentHeader{base: base, firstRecord: firstRecord})
	pos := base
	for _, p := range payloads {
		b = appendRecord(b, new([12]byte), pos, []byte(p))
		pos += Position(recordHeaderSize + len(p))
	}
	return b
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
