package queue

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRecycleReusesReleasedFiles: a consumer releasing as it goes makes the
// queue start segments in released files (spares, at most maxSpares kept),
// the records read back are exactly those appended after the released
// position, and a reopen counts nothing torn or corrupt although the
// recycled files hold an earlier use's records after their own, removes the
// spares and reads the same records.
func TestRecycleReusesReleasedFiles(t *testing.T) {
	dir := t.TempDir()
	var logs syncBuffer
	opts := Options{Dir: dir, SegmentBytes: 8 << 10, MaxBytes: 1 << 20,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	q := mustOpen(t, opts)
	var ends []Position
	for i := range 400 {
		end, err := q.Append(payload(1, i, 100+i%7*50))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
		if i >= 30 {
			if err := q.Release(ends[i-30]); err != nil {
				t.Fatal(err)
			}
		}
		if n := countSuffix(t, dir, spareExt); n > maxSpares {
			t.Fatalf("%d spare files, want at most %d", n, maxSpares)
		}
	}
	st := q.Stats()
	if st.Recycled < 5 {
		t.Fatalf("%d segments recycled, want several; stats %+v; log:\n%s", st.Recycled, st, logs.String())
	}
	// The active segment was recycled: past its records, it holds an
	// earlier use's bytes, not zeros.
	path := lastSegmentPath(t, dir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dataEnd := segmentHeaderSize + int64(ends[len(ends)-1]-q.activeSeg().base)
	if int64(len(b)) != opts.SegmentBytes || firstNonZero(b[dataEnd:]) < 0 {
		t.Logf("active segment not a recycled one here (size %d)", len(b))
	}
	check := func(q *Queue, label string) {
		t.Helper()
		first := q.Stats().First
		got, r := drain(t, q, 0)
		r.Close()
		var want []Position
		for _, e := range ends {
			if e > first {
				want = append(want, e)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s: read %d records, want %d", label, len(got), len(want))
		}
		for i, g := range got {
			seq := int(binary.LittleEndian.Uint64(g.payload[8:]))
			if g.end != want[i] || !bytes.Equal(g.payload, payload(1, seq, len(g.payload))) || ends[seq] != g.end {
				t.Fatalf("%s: record %d: end %d seq %d, want end %d", label, i, g.end, seq, want[i])
			}
		}
		st := q.Stats()
		if st.CorruptRecords != 0 || st.TornBytes != 0 {
			t.Fatalf("%s: stats %+v, want nothing corrupt or torn", label, st)
		}
	}
	check(q, "live")
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = mustOpen(t, opts)
	defer q.Close()
	check(q, "reopened")
	if n := countSuffix(t, dir, spareExt); n != 0 {
		t.Fatalf("%d spare files after reopen, want 0", n)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("errors logged:\n%s", logs.String())
	}
}

func countSuffix(t *testing.T, dir, suffix string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) {
			n++
		}
	}
	return n
}

// TestRecycledSegmentEveryCut: the active segment is a recycled file whose
// earlier use left records of its own; a crash cuts the writes of the new
// records at every byte (the file holds the new bytes up to the cut and the
// earlier use's bytes after it, the new header being durable before
// anything was written into it). Recovery returns exactly the new records
// that end before the cut, never one of the earlier use's, counts nothing
// corrupt, and after an append and a clean reopen nothing torn either.
func TestRecycledSegmentEveryCut(t *testing.T) {
	mfs := newMemFS()
	opts := Options{Dir: "/q", SegmentBytes: 4096, MaxBytes: 1 << 20, fs: mfs, Logger: discardLogger()}
	q, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	var ends []Position // by seq
	add := func(size int) {
		t.Helper()
		end, err := q.Append(payload(1, len(ends), size))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
	}
	for q.Stats().Segments < 3 {
		add(60 + len(ends)%5*40)
	}
	if err := q.Release(q.segs[1].base); err != nil {
		t.Fatal(err)
	}
	if len(q.spares) != 1 {
		t.Fatalf("%d spares after a release, want 1", len(q.spares))
	}
	old := bytes.Clone(mfs.names[q.spares[0].path].data)
	segs := len(q.segs)
	for len(q.segs) == segs {
		add(60 + len(ends)%5*40)
	}
	if st := q.Stats(); st.Recycled != 1 {
		t.Fatalf("stats %+v, want one segment recycled", st)
	}
	base, path := q.activeSeg().base, q.activeSeg().path
	for range 12 {
		add(20 + len(ends)%3*30)
	}
	if len(q.segs) != segs+1 {
		t.Fatalf("the new records spilled into another segment")
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	full := bytes.Clone(mfs.names[path].data)
	before := make([]byte, len(full))
	copy(before, old)
	copy(before, full[:segmentHeaderSize])
	dataEnd := segmentHeaderSize + int64(ends[len(ends)-1]-base)
	if firstNonZero(before[dataEnd:]) < 0 {
		t.Fatalf("the recycled file holds nothing of its earlier use past the new records")
	}

	for cut := int64(segmentHeaderSize); cut <= dataEnd; cut++ {
		img := newMemFS()
		for name, n := range mfs.names {
			data := n.data
			if name == path {
				data = append(bytes.Clone(full[:cut]), before[cut:]...)
			}
			img.names[name] = &memNode{data: bytes.Clone(data), durable: bytes.Clone(data)}
			img.durable[name] = img.names[name]
		}
		iopts := opts
		iopts.fs = img
		q, err := Open(iopts)
		if err != nil {
			t.Fatalf("cut %d: Open: %v", cut, err)
		}
		first := q.Stats().First
		var want []int
		for seq, e := range ends {
			if e > first && (e <= base || e <= base+Position(cut-segmentHeaderSize)) {
				want = append(want, seq)
			}
		}
		got, r := drain(t, q, 0)
		r.Close()
		if len(got) != len(want) {
			t.Fatalf("cut %d: read %d records, want %d", cut, len(got), len(want))
		}
		for i, g := range got {
			seq := int(binary.LittleEndian.Uint64(g.payload[8:]))
			if seq != want[i] || g.end != ends[seq] || !bytes.Equal(g.payload, payload(1, seq, len(g.payload))) {
				t.Fatalf("cut %d: record %d is seq %d at %d, want seq %d at %d", cut, i, seq, g.end, want[i], ends[want[i]])
			}
		}
		if st := q.Stats(); st.CorruptRecords != 0 {
			t.Fatalf("cut %d: stats %+v, want nothing corrupt", cut, st)
		}
		end, err := q.Append([]byte("after the crash"))
		if err != nil {
			t.Fatalf("cut %d: append: %v", cut, err)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		q, err = Open(iopts)
		if err != nil {
			t.Fatalf("cut %d: reopen: %v", cut, err)
		}
		got2, r := drain(t, q, 0)
		r.Close()
		if st := q.Stats(); st.CorruptRecords != 0 || st.TornBytes != 0 || st.Last != end {
			t.Fatalf("cut %d: reopened stats %+v, want nothing corrupt or torn, last %d", cut, st, end)
		}
		if len(got2) != len(got)+1 || string(got2[len(got)].payload) != "after the crash" {
			t.Fatalf("cut %d: reopened %d records, want %d", cut, len(got2), len(got)+1)
		}
		q.Close()
	}
}

// TestOpenVersion1Queue: a queue an older build wrote (version 1 segments:
// 8-byte record headers without a tag, the active one zero-filled past its
// records, a torn record at its end) is recovered: every record reads back,
// the torn record is counted and zeroed as that build did, and appends go
// to a new version 2 segment after the old last one, which is sealed and
// cut to its records. A segment of a later version is refused with the
// version named (skipped whole and counted, as any unreadable header).
func TestOpenVersion1Queue(t *testing.T) {
	dir := t.TempDir()
	var p0, p1 []string
	for i := range 6 {
		p0 = append(p0, string(payload(1, i, 40+i*10)))
	}
	for i := 6; i < 11; i++ {
		p1 = append(p1, string(payload(1, i, 30+i)))
	}
	seg0 := validSegmentV1(0, 0, p0...)
	base1 := Position(len(seg0) - segmentHeaderSize)
	seg1 := validSegmentV1(base1, 6, p1...)
	dataEnd1 := len(seg1)
	torn := appendRecordV1(nil, base1+Position(dataEnd1-segmentHeaderSize), payload(1, 11, 80))[:50]
	seg1 = append(seg1, torn...)
	seg1 = append(seg1, make([]byte, 4096-len(seg1))...) // preallocated
	for base, b := range map[Position][]byte{0: seg0, base1: seg1} {
		if err := os.WriteFile(filepath.Join(dir, segmentName(base)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := Options{Dir: dir, SegmentBytes: 4096, MaxBytes: 1 << 20}
	q := mustOpen(t, opts)
	st := q.Stats()
	if st.TornBytes != uint64(lastNonZero(torn)+1) || st.CorruptRecords != 0 || st.Records != 11 {
		t.Fatalf("stats %+v, want 11 records and %d torn bytes", st, lastNonZero(torn)+1)
	}
	want := append(append([]string(nil), p0...), p1...)
	readAll := func(q *Queue) []string {
		got, r := drain(t, q, 0)
		r.Close()
		var out []string
		for _, g := range got {
			out = append(out, string(g.payload))
		}
		return out
	}
	if got := readAll(q); !slices.Equal(got, want) {
		t.Fatalf("read %d records, want the %d the older build wrote", len(got), len(want))
	}
	end, err := q.Append([]byte("new"))
	if err != nil {
		t.Fatal(err)
	}
	if end != base1+Position(dataEnd1-segmentHeaderSize)+recordHeaderSize+3 {
		t.Fatalf("append after the version 1 segment ends at %d", end)
	}
	q.Close()
	if fi, err := os.Stat(filepath.Join(dir, segmentName(base1))); err != nil || fi.Size() != int64(dataEnd1) {
		t.Fatalf("version 1 segment not cut to its records: %v %v", fi.Size(), err)
	}
	last := lastSegmentPath(t, dir)
	b, _ := os.ReadFile(last)
	if h, err := parseSegmentHeader(b); err != nil || h.version != segmentVersion || h.base != base1+Position(dataEnd1-segmentHeaderSize) {
		t.Fatalf("new segment header %+v, %v", h, err)
	}
	q = mustOpen(t, opts)
	if got := readAll(q); !slices.Equal(got, append(want, "new")) {
		t.Fatalf("reopened: read %d records", len(got))
	}
	if st := q.Stats(); st.TornBytes != 0 || st.CorruptRecords != 0 {
		t.Fatalf("reopened: stats %+v", st)
	}
	q.Close()

	// A later build's segment version.
	var logs syncBuffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	future := appendSegmentHeader(nil, segmentHeader{version: 3, base: 1 << 20})
	future = append(future, "records of a format this build does not know"...)
	if err := os.WriteFile(filepath.Join(dir, segmentName(1<<20)), future, 0o644); err != nil {
		t.Fatal(err)
	}
	q = mustOpen(t, opts)
	defer q.Close()
	if st := q.Stats(); st.CorruptRecords != 1 || !strings.Contains(logs.String(), "unsupported segment version 3") {
		t.Fatalf("stats %+v, log:\n%s", st, logs.String())
	}
	if got := readAll(q); !slices.Equal(got, append(want, "new")) {
		t.Fatalf("with a later version's segment: read %d records", len(got))
	}
}
