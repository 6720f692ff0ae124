package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"

	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/stats"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// TestHandoff: an entry is taken only at its exact position and only for
// the request it was filed with; entries the reader passed are dropped;
// a position filed again (after a failed write) replaces what was at or
// past it; a body becomes a spare only once both its owners released it;
// the bound refuses bodies and counts them; every byte counted is a
// buffer the handoff holds.
func TestHandoff(t *testing.T) {
	h := newHandoff(1 << 20)
	put := func(pos queue.Position, raw, body string) {
		t.Helper()
		hb := h.put(pos, h.hash([]byte(raw)), len(raw), []byte(body))
		if hb == nil {
			t.Fatalf("put(%d) refused", pos)
		}
		h.release(hb) // the lender's statistics are done
	}
	take := func(pos queue.Position, raw string) string {
		t.Helper()
		hb := h.take(pos, []byte(raw))
		if hb == nil {
			return "<nil>"
		}
		s := string(hb.b)
		h.release(hb)
		return s
	}
	put(100, "r100", "decoded 100")
	if got := take(99, "r100"); got != "<nil>" {
		t.Fatalf("take before the entry's position: %q", got)
	}
	if got := take(100, "r100"); got != "decoded 100" {
		t.Fatalf("take(100) = %q", got)
	}
	if got := take(100, "r100"); got != "<nil>" {
		t.Fatalf("an entry was taken twice: %q", got)
	}

	// Another request at the position (same length, other bytes): never
	// its body.
	put(200, "r200", "decoded 200")
	if got := take(200, "r201"); got != "<nil>" {
		t.Fatalf("an entry was taken for another request: %q", got)
	}

	// Passed entries go; a later one is found behind them.
	put(300, "r300", "decoded 300")
	put(400, "r400", "decoded 400")
	put(500, "r500", "decoded 500")
	if got := take(400, "r400"); got != "decoded 400" {
		t.Fatalf("take(400) behind a passed entry = %q", got)
	}
	if got := take(300, "r300"); got != "<nil>" {
		t.Fatalf("a passed entry was taken: %q", got)
	}
	h.pass(500)
	if _, n := h.held(); n != 0 {
		t.Fatalf("%d entries left after pass", n)
	}

	// A failed write's positions are reused: the new record's entry
	// replaces the entries at or past its position.
	put(600, "r600", "decoded 600")
	put(700, "r700", "decoded 700")
	put(650, "r650", "decoded 650")
	if got := take(650, "r650"); got != "decoded 650" {
		t.Fatalf("take(650) = %q", got)
	}
	if got := take(700, "r700"); got != "<nil>" {
		t.Fatalf("an entry past a reused position survived: %q", got)
	}
	if _, n := h.held(); n != 0 {
		t.Fatalf("%d entries left", n)
	}
	if h.taken.Load() != 3 || h.drops.Load() != 0 {
		t.Fatalf("taken %d dropped %d, want 3 and 0", h.taken.Load(), h.drops.Load())
	}

	// Two owners: a body taken and used by the loop is not a spare while
	// the lender still reads it, nor the other way round.
	h2 := newHandoff(1 << 20)
	body := make([]byte, 1000)
	lent := h2.put(10, h2.hash([]byte("r")), 1, body)
	taken := h2.take(10, []byte("r"))
	if taken != lent || h2.getSpare() != nil {
		t.Fatal("a filed body was a spare before either owner released it")
	}
	h2.release(taken)
	if h2.getSpare() != nil {
		t.Fatal("a body was a spare while its lender still read it")
	}
	h2.release(lent)
	if sp := h2.getSpare(); cap(sp) != 1000 || &sp[:1][0] != &body[0] {
		t.Fatal("the released body is not the spare")
	}
	if b, n := h2.held(); b != 0 || n != 0 {
		t.Fatalf("after the spare went: %d bytes in %d entries counted", b, n)
	}

	b, _ := h.held()
	var spare int64
	for _, s := range h.spare {
		spare += int64(cap(s))
	}
	if b != spare || len(h.spare) > maxSpare {
		t.Fatalf("counts %d bytes, holds %d in %d spare buffers", b, spare, len(h.spare))
	}

	// The bound: what does not fit is not filed, and counted.
	small := newHandoff(64)
	if small.room(65) || small.drops.Load() != 1 {
		t.Fatalf("room for a body over the bound (drops %d)", small.drops.Load())
	}
	if small.put(10, 1, 1, make([]byte, 40)) == nil {
		t.Fatal("a body within the bound was refused")
	}
	if small.put(20, 2, 1, make([]byte, 40)) != nil {
		t.Fatal("a body past the bound was filed")
	}
	if n, e := small.held(); n != 40 || e != 1 || small.drops.Load() != 2 {
		t.Fatalf("bound 64: holds %d bytes in %d entries, dropped %d", n, e, small.drops.Load())
	}
}

// TestLakeLoopHandoff: requests the consumer queued with the receiver's
// decoded body reach the lake through the handoff (the loop decodes none
// of them), every sample exactly once, as without it; after a crash
// before the checkpoint, the replay (whose entries were taken) decodes
// them from the queue and again writes each sample exactly once; an entry
// whose record holds another request is not used.
func TestLakeLoopHandoff(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "lake")
	ctx := context.Background()
	q, err := queue.Open(queue.Options{Dir: filepath.Join(dir, "queue"), SegmentBytes: 1 << 20, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	m := newMetrics()
	h := newHandoff(64 << 20)
	c := newConsumer(q, time.Second, m)
	c.handoff = h
	open := func() *lakeLoop {
		t.Helper()
		committed, err := cat.QueuePosition(ctx, QueueName)
		if err != nil {
			t.Fatal(err)
		}
		from := queue.Position(committed)
		if committed == 0 {
			from = q.Stats().First
		}
		l, err := newLakeLoop(q, cat, lake.Options{Root: root}, from, &lakeLoop{
			log: testLogger(t), m: m, interval: time.Hour, maxBuf: 1 << 40, maxQueue: 1 << 40, hand: h,
		})
		if err != nil {
			t.Fatal(err)
		}
		l.committed = queue.Position(committed)
		return l
	}
	const series = 40
	now := time.Now().Truncate(time.Hour).Add(time.Minute).UnixMilli()
	var recv []byte // the receiver's decode buffer
	send := func(first, n int) {
		t.Helper()
		for seq := first; seq < first+n; seq++ {
			wr := &prompb.WriteRequest{}
			for i := range series {
				wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{
					Labels:  []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("m%d", i%3)}, {Name: "instance", Value: "h"}, {Name: "series", Value: fmt.Sprint(i)}},
					Samples: []prompb.Sample{{Value: float64(seq*1000 + i), Timestamp: now + int64(seq)}},
				})
			}
			body, err := wr.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			req, _ := scannedRequest(t, body)
			recv = append(recv[:0], body...) // the receiver's snappy decode
			req.Scanned.Decoded = recv
			if _, err := c.Consume(ctx, req); err != nil {
				t.Fatal(err)
			}
			// The receiver's next decode goes into what it got back:
			// never a body the handoff still holds.
			recv = req.Scanned.Decoded
			clear(recv[:cap(recv)])
		}
	}

	l1 := open()
	send(0, 4)
	if err := l1.drain(); err != nil {
		t.Fatal(err)
	}
	if err := l1.commitCheckpoint(reasonRequest); err != nil {
		t.Fatal(err)
	}
	if h.taken.Load() != 4 || cap(l1.prwBuf) != 0 {
		t.Fatalf("the loop took %d of 4 requests from the handoff (decode buffer %d bytes)", h.taken.Load(), cap(l1.prwBuf))
	}
	send(4, 6)
	// Record 9's entry stands for another request: not used.
	h.mu.Lock()
	h.entries[len(h.entries)-1].raw++
	h.mu.Unlock()
	if err := l1.drain(); err != nil {
		t.Fatal(err)
	}
	if h.taken.Load() != 9 || cap(l1.prwBuf) == 0 {
		t.Fatalf("the loop took %d of 9 requests from the handoff, want 9 (and record 9 decoded)", h.taken.Load())
	}
	// The crash: l1's buffered partition (records 4-9) is lost unflushed.
	l1.r.Close()

	l2 := open()
	if err := l2.drain(); err != nil {
		t.Fatal(err)
	}
	if err := l2.commitCheckpoint(reasonRequest); err != nil {
		t.Fatal(err)
	}
	l2.r.Close()
	if h.taken.Load() != 9 || cap(l2.prwBuf) == 0 {
		t.Fatalf("the replay took %d entries from the handoff, want none", h.taken.Load()-9)
	}
	got := lakeValues(t, root, cat)
	for seq := range 10 {
		for i := range series {
			if v := float64(seq*1000 + i); got[v] != 1 {
				t.Fatalf("record %d sample %d is in the lake %d times", seq, i, got[v])
			}
		}
	}
	if len(got) != 10*series {
		t.Fatalf("%d distinct samples in the lake, want %d", len(got), 10*series)
	}
	if b, n := h.held(); n != 0 || b > 64<<20 {
		t.Fatalf("the handoff holds %d entries, %d bytes after the loops read everything", n, b)
	}
}

// TestLakeLoopHandoffV2: a scanned remote write 2.0 request queued with
// the receiver's decoded body is decoded by the lake loop from the
// handoff's copy (no snappy decode of its own), into the same samples.
func TestLakeLoopHandoffV2(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "lake")
	ctx := context.Background()
	q, err := queue.Open(queue.Options{Dir: filepath.Join(dir, "queue"), SegmentBytes: 1 << 20, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	m := newMetrics()
	h := newHandoff(64 << 20)
	c := newConsumer(q, time.Second, m)
	c.handoff = h
	l, err := newLakeLoop(q, cat, lake.Options{Root: root}, q.Stats().First, &lakeLoop{
		log: testLogger(t), m: m, interval: time.Hour, maxBuf: 1 << 40, maxQueue: 1 << 40, hand: h,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.r.Close()
	const requests, series = 3, 30
	now := time.Now().Truncate(time.Hour).Add(time.Minute).UnixMilli()
	var recv []byte // the receiver's decode buffer
	for r := range requests {
		st := writev2.NewSymbolTable()
		req := &writev2.Request{}
		for i := range series {
			var refs []uint32
			for _, lb := range [][2]string{{"__name__", fmt.Sprintf("m%d", i%4)}, {"instance", "h"}, {"n", fmt.Sprint(i)}} {
				refs = append(refs, st.Symbolize(lb[0]), st.Symbolize(lb[1]))
			}
			req.Timeseries = append(req.Timeseries, writev2.TimeSeries{LabelsRefs: refs,
				Samples: []writev2.Sample{{Value: float64(r*1000 + i), Timestamp: now + int64(r)}}})
		}
		req.Symbols = st.Symbols()
		body, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		creq, _ := scannedRequestV(t, 2, body)
		recv = append(recv[:0], body...)
		creq.Scanned.Decoded = recv
		if _, err := c.Consume(ctx, creq); err != nil {
			t.Fatal(err)
		}
		recv = creq.Scanned.Decoded
		clear(recv[:cap(recv)])
	}
	if err := l.drain(); err != nil {
		t.Fatal(err)
	}
	if err := l.commitCheckpoint(reasonRequest); err != nil {
		t.Fatal(err)
	}
	if h.taken.Load() != requests {
		t.Fatalf("the loop took %d of %d 2.0 requests from the handoff", h.taken.Load(), requests)
	}
	got := lakeValues(t, root, cat)
	for r := range requests {
		for i := range series {
			if v := float64(r*1000 + i); got[v] != 1 {
				t.Fatalf("request %d sample %d is in the lake %d times", r, i, got[v])
			}
		}
	}
	if len(got) != requests*series {
		t.Fatalf("%d distinct samples in the lake, want %d", len(got), requests*series)
	}
}

// TestLakeLoopHandoffConcurrent: four receivers consume at once, each
// decoding its next request into the buffer it got back (and scribbling
// over it first), while the lake loop reads the queue: no filed body is
// written while the loop or a lender reads it (run with -race), and every
// sample reaches the lake exactly once with its value.
func TestLakeLoopHandoffConcurrent(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "lake")
	ctx := context.Background()
	q, err := queue.Open(queue.Options{Dir: filepath.Join(dir, "queue"), SegmentBytes: 1 << 20, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	m := newMetrics()
	h := newHandoff(1 << 20)
	c := newConsumer(q, time.Second, m)
	c.handoff = h
	if c.stats, err = stats.New(stats.Config{}); err != nil {
		t.Fatal(err)
	}
	l, err := newLakeLoop(q, cat, lake.Options{Root: root}, q.Stats().First, &lakeLoop{
		log: testLogger(t), m: m, interval: time.Hour, maxBuf: 1 << 40, maxQueue: 1 << 40, hand: h,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.r.Close()
	const senders, requests, series = 4, 25, 20
	now := time.Now().Truncate(time.Hour).Add(time.Minute).UnixMilli()
	stop := make(chan struct{})
	loopDone := make(chan error, 1)
	go func() {
		for {
			if err := l.drain(); err != nil {
				loopDone <- err
				return
			}
			select {
			case <-stop:
				loopDone <- l.drain()
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var recv []byte
			for r := range requests {
				seq := g*requests + r
				wr := &prompb.WriteRequest{}
				for i := range series {
					wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{
						Labels:  []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "g", Value: fmt.Sprint(g)}, {Name: "series", Value: fmt.Sprint(i)}},
						Samples: []prompb.Sample{{Value: float64(seq*1000 + i), Timestamp: now + int64(r)}},
					})
				}
				body, err := wr.Marshal()
				if err != nil {
					errs <- err
					return
				}
				// As the receiver: decode into its buffer, scan there (the
				// statistics read the labels from it after the append).
				recv = append(recv[:0], body...)
				sc := &prw.Scanner{LabelKeys: true} // as the receiver scans
				if !sc.ScanV1(recv) {
					errs <- fmt.Errorf("scan refused request %d", seq)
					return
				}
				var ll []prw.Label
				labels := func(i int, dst []stats.Label) []stats.Label {
					ll = sc.Labels(i, ll[:0])
					for _, l := range ll {
						dst = append(dst, stats.Label{Name: l.Name, Value: l.Value})
					}
					return dst
				}
				req := &otlpreceiver.Request{Tenant: "acme", Kind: signal.KindMetrics, Body: snappy.Encode(nil, body),
					Transport: "prometheus_remote_write", RemoteWrite: 1, Scanned: &otlpreceiver.Scanned{Points: sc.Samples(), NumSeries: sc.Series,
						Attrs: sc.Attrs, MaxAttrs: sc.MaxAttrs, Decoded: recv,
						Series: stats.Series{Names: sc.Names, Name: sc.Name, ID: sc.ID, Time: sc.Time, Labels: labels}}}
				if _, err := c.Consume(ctx, req); err != nil {
					errs <- err
					return
				}
				recv = req.Scanned.Decoded
				for i := range recv[:cap(recv)] {
					recv[:cap(recv)][i] = 0xff
				}
			}
		}()
	}
	waittest.Wait(t, &wg, "the consumers")
	close(stop)
	if err := waittest.Recv(t, loopDone, "the lake loop once stopped"); err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := l.commitCheckpoint(reasonRequest); err != nil {
		t.Fatal(err)
	}
	got := lakeValues(t, root, cat)
	for seq := range senders * requests {
		for i := range series {
			if v := float64(seq*1000 + i); got[v] != 1 {
				t.Fatalf("request %d sample %d is in the lake %d times", seq, i, got[v])
			}
		}
	}
	if len(got) != senders*requests*series {
		t.Fatalf("%d distinct samples in the lake, want %d", len(got), senders*requests*series)
	}
	if h.taken.Load() == 0 {
		t.Fatal("no request went through the handoff")
	}
	t.Logf("taken from the handoff: %d of %d", h.taken.Load(), senders*requests)
}
