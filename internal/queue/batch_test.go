package queue

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/waittest"
)

// TestBatchedWriteCrash checks the group commit's batched write: appenders
// that arrive while an fsync runs leave their records in the encode buffer,
// and the next leader writes all of them with ONE write before its fsync.
// A power cut between that write and its fsync (every page of the batch
// independently kept, lost or zeroed) must keep every acknowledged record,
// never show a record nobody appended, and recover a batch cut in the
// middle as a torn tail, the same as a single record's.
func TestBatchedWriteCrash(t *testing.T) {
	mfs := newMemFS()
	// No statfs: the memFS lock is held while the first fsync blocks.
	q, err := Open(Options{Dir: "/q", SegmentBytes: 2048, MaxBytes: 1 << 20, MinFreeBytes: -1, fs: mfs, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()

	const waiting = 3 // appenders queued behind the first fsync
	recA := payload(0, 0, 200)
	var recs [waiting][]byte
	for i := range recs {
		recs[i] = payload(1+i, 0, 300) // one size: the layout does not depend on their order
	}
	var (
		syncs      int
		firstSync  = make(chan struct{})
		release    = make(chan struct{})
		writes     []int // sizes of the segment writes after the first fsync
		images     []*memFS
		imageRng   = rand.New(rand.NewPCG(13, 1))
		afterFirst bool
	)
	mfs.hook = func(op, name string, n int) (int, error) {
		switch op {
		case "write":
			if afterFirst {
				writes = append(writes, n)
			}
		case "sync":
			syncs++
			switch syncs {
			case 1:
				close(firstSync)
				<-release // the leader's fsync runs while the others queue up
				afterFirst = true
			case 2:
				// Power cut after the batched write, before its fsync.
				for range 200 {
					images = append(images, mfs.crashImageLocked(imageRng))
				}
			}
		}
		return n, nil
	}

	endA, err := Position(0), error(nil)
	var wg sync.WaitGroup
	wg.Go(func() { endA, err = q.Append(recA) })
	waittest.Recv(t, firstSync, "the first append's fsync")
	ends := make([]Position, waiting)
	errs := make([]error, waiting)
	for i := range waiting {
		wg.Go(func() { ends[i], errs[i] = q.Append(recs[i]) })
	}
	// Wait until all of them wait for durability with their records
	// encoded but not written (the leader's write phase is over).
	deadline := time.Now().Add(60 * time.Second)
	for {
		q.mu.Lock()
		n, buffered := q.durWaiters, len(q.wbuf)
		q.mu.Unlock()
		if n == 1+waiting {
			want := 0
			for _, r := range recs {
				want += recordHeaderSize + len(r)
			}
			if buffered != want {
				t.Fatalf("%d bytes in the encode buffer, want the %d of the %d waiting records", buffered, want, waiting)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d appenders wait for durability", n)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	waittest.Wait(t, &wg, "the appenders once the fsync was released")
	if err != nil {
		t.Fatalf("first append: %v", err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("append %d: %v", i, e)
		}
	}
	mfs.mu.Lock()
	mfs.hook = nil
	mfs.mu.Unlock()
	want := 0
	for _, r := range recs {
		want += recordHeaderSize + len(r)
	}
	if len(writes) != 1 || writes[0] != want {
		t.Fatalf("writes after the first fsync: %v, want one write of %d bytes (the %d waiting records)", writes, want, waiting)
	}
	if st := q.Stats(); st.Fsyncs != 2 || st.Appends != 1+waiting {
		t.Fatalf("want %d appends in 2 fsyncs: %+v", 1+waiting, st)
	}
	if len(images) == 0 {
		t.Fatal("no crash image taken at the batch's fsync")
	}

	byEnd := map[Position][]byte{endA: recA}
	for i, e := range ends {
		byEnd[e] = recs[i]
	}
	partial, torn := 0, 0
	for n, img := range images {
		rq, err := Open(Options{Dir: "/q", SegmentBytes: 2048, MaxBytes: 1 << 20, fs: img, Logger: discardLogger()})
		if err != nil {
			t.Fatalf("image %d: Open: %v", n, err)
		}
		got, r := drain(t, rq, 0)
		r.Close()
		found := map[Position]bool{}
		for _, g := range got {
			if p, ok := byEnd[g.end]; !ok || !bytes.Equal(p, g.payload) {
				t.Fatalf("image %d: record at %d was never appended there", n, g.end)
			}
			found[g.end] = true
		}
		if !found[endA] {
			t.Fatalf("image %d: the acknowledged first record is lost", n)
		}
		kept := 0
		for _, e := range ends {
			if found[e] {
				kept++
			}
		}
		if kept > 0 && kept < waiting {
			partial++
		}
		st := rq.Stats()
		if st.TornBytes > 0 || st.CorruptRecords > 0 {
			torn++
		}
		// The recovered queue appends after whatever it kept.
		end, err := rq.Append([]byte("after the crash"))
		if err != nil || end <= r.Position() {
			t.Fatalf("image %d: append after recovery: end %d after %d, %v", n, end, r.Position(), err)
		}
		rq.Close()
	}
	// 200 images of a ~900-byte batch over two or three 512-byte pages: some cut
	// the batch in the middle, and recovery dropped a torn tail.
	if partial == 0 || torn == 0 {
		t.Fatalf("no image cut the batch in the middle (partial %d, torn %d of %d)", partial, torn, len(images))
	}
	t.Logf("%d images: %d kept part of the batch, %d recovered a torn tail or skipped damage", len(images), partial, torn)
}

// TestCloseWritesBufferedRecords: appenders whose records wait in the
// encode buffer behind a running fsync when Close is called are written,
// fsynced and acknowledged (by Close or by the next leader, whichever gets
// there first), and a reopened queue holds every one of them.
func TestCloseWritesBufferedRecords(t *testing.T) {
	mfs := newMemFS()
	q, err := Open(Options{Dir: "/q", SegmentBytes: 1 << 16, MaxBytes: 1 << 20, MinFreeBytes: -1, fs: mfs, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	firstSync, release := make(chan struct{}), make(chan struct{})
	syncs := 0
	mfs.hook = func(op, name string, n int) (int, error) {
		if op == "sync" {
			if syncs++; syncs == 1 {
				close(firstSync)
				<-release
			}
		}
		return n, nil
	}
	const n = 4
	recs := make([][]byte, n)
	ends := make([]Position, n)
	errs := make([]error, n)
	for i := range recs {
		recs[i] = payload(i, 0, 100+50*i)
	}
	var wg sync.WaitGroup
	wg.Go(func() { ends[0], errs[0] = q.Append(recs[0]) })
	waittest.Recv(t, firstSync, "the first append's fsync")
	for i := 1; i < n; i++ {
		wg.Go(func() { ends[i], errs[i] = q.Append(recs[i]) })
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		q.mu.Lock()
		waiting := q.durWaiters
		q.mu.Unlock()
		if waiting == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d appenders wait", waiting)
		}
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	for !q.isClosed.Load() { // Close marked the queue and waits for the fsync
		if time.Now().After(deadline) {
			t.Fatal("Close did not start")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	waittest.Wait(t, &wg, "the appenders once the fsync was released")
	if err := waittest.Recv(t, closed, "Close once the fsync was released"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("append %d: %v", i, e)
		}
	}
	mfs.mu.Lock()
	mfs.hook = nil
	mfs.mu.Unlock()
	q2, err := Open(Options{Dir: "/q", SegmentBytes: 1 << 16, MaxBytes: 1 << 20, MinFreeBytes: -1, fs: mfs.crashImage(rand.New(rand.NewPCG(1, 2))), Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	got, r := drain(t, q2, 0)
	r.Close()
	byEnd := map[Position][]byte{}
	for _, g := range got {
		byEnd[g.end] = g.payload
	}
	for i := range recs {
		if !bytes.Equal(byEnd[ends[i]], recs[i]) {
			t.Fatalf("acknowledged record %d (end %d) not durable after Close", i, ends[i])
		}
	}
}
