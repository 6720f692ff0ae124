package queue

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
)

// The queue stops short of a full disk: appends are refused with
// ErrLowDisk (an ErrFull) while they would leave less than MinFreeBytes,
// without a statfs per append, and are accepted again as soon as a
// Release or another writer frees space.
func TestLowDiskHeadroom(t *testing.T) {
	mfs := newMemFS()
	mfs.capacity = 1 << 20
	var statfs atomic.Int64
	mfs.hook = func(op, _ string, n int) (int, error) {
		if op == "statfs" {
			statfs.Add(1)
		}
		return n, nil
	}
	const minFree = 256 << 10
	q, err := Open(Options{Dir: "/q", SegmentBytes: 64 << 10, MaxBytes: 4 << 20, MinFreeBytes: minFree, fs: mfs, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	rec := bytes.Repeat([]byte("x"), 1000)
	appended := 0
	for ; ; appended++ {
		_, err = q.Append(rec)
		if err != nil {
			break
		}
		if appended > 2000 {
			t.Fatal("the queue filled the whole disk without refusing")
		}
	}
	if !errors.Is(err, ErrLowDisk) || !errors.Is(err, ErrFull) {
		t.Fatalf("refusal: %v, want ErrLowDisk wrapping ErrFull", err)
	}
	free, _, _ := mfs.Space("/q")
	if free < minFree {
		t.Errorf("refused only at %d bytes free, below the headroom %d", free, minFree)
	}
	if free > minFree+64<<10 {
		t.Errorf("refused at %d bytes free, far above the headroom %d", free, minFree)
	}
	if n := statfs.Load(); n > int64(appended/10) {
		t.Errorf("%d statfs calls for %d appends: want the answer reused between appends", n, appended)
	}
	st := q.Stats()
	if !st.LowDisk || st.LowDiskRefusals != 1 || st.MinFreeBytes != minFree {
		t.Errorf("stats: low %v refusals %d min %d", st.LowDisk, st.LowDiskRefusals, st.MinFreeBytes)
	}
	if _, min, low := q.DiskSpace(); !low || min != minFree {
		t.Errorf("DiskSpace: low %v min %d, want low", low, min)
	}

	// The lake commits and releases: space comes back at once.
	if err := q.Release(st.Last); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Append(rec); err != nil {
		t.Fatalf("append after release: %v", err)
	}
	if _, _, low := q.DiskSpace(); low {
		t.Error("DiskSpace still low after release")
	}
	if st := q.Stats(); st.LowDisk {
		t.Error("stats still low after a successful append")
	}

	// Another writer takes the space: refused again once its statfs is
	// stale, however many bytes the queue itself holds.
	mfs.mu.Lock()
	mfs.used = mfs.capacity - minFree
	mfs.mu.Unlock()
	q.mu.Lock()
	q.freeAt = q.freeAt.Add(-spaceCheckEvery)
	q.mu.Unlock()
	if _, err := q.Append(rec); !errors.Is(err, ErrLowDisk) {
		t.Fatalf("append with the disk taken by others: %v, want ErrLowDisk", err)
	}
}

func TestLowDiskDefaults(t *testing.T) {
	for _, tc := range []struct {
		capacity, opt, want int64
	}{
		{1 << 40, 0, DefaultMinFreeBytes},
		{1 << 30, 0, 1 << 30 / 10},
		{1 << 30, 4 << 20, 4 << 20},
		{1 << 30, -1, 0},
	} {
		mfs := newMemFS()
		mfs.capacity = tc.capacity
		q, err := Open(Options{Dir: "/q", SegmentBytes: 64 << 10, MinFreeBytes: tc.opt, fs: mfs, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if got := q.Stats().MinFreeBytes; got != tc.want {
			t.Errorf("capacity %d, MinFreeBytes %d: headroom %d, want %d", tc.capacity, tc.opt, got, tc.want)
		}
		q.Close()
	}
}

// A file system that cannot report free space turns the check off rather
// than refusing everything.
func TestLowDiskStatfsUnsupported(t *testing.T) {
	mfs := newMemFS()
	mfs.hook = func(op, _ string, n int) (int, error) {
		if op == "statfs" {
			return 0, errors.ErrUnsupported
		}
		return n, nil
	}
	q, err := Open(Options{Dir: "/q", SegmentBytes: 64 << 10, fs: mfs, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Append([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.MinFreeBytes != 0 || st.LowDisk {
		t.Errorf("stats %+v", st)
	}
}
