package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/stats"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// TestHandoffAuditModel (audit20): the handoff driven by random sequences
// of what the consumer and the lake loop do (files at increasing
// positions, a failed write's positions filed again, takes at the exact
// position or past entries, requests with another hash, passes, the
// lender's and the loop's releases in any order, spares taken by the
// receiver and written over) against a model: a take returns exactly the
// body filed at that position for that request, or nothing; a body is
// never handed out as a spare (nor written by its next user) while the
// lender or the loop still holds it; the bytes counted are exactly the
// capacities of the buffers the handoff holds (filed or spare) plus those
// lent and not yet released, and never more than the bound.
func TestHandoffAuditModel(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { handoffModelRun(t, seed) })
	}
}

type modelBuf struct {
	b       []byte
	content string
	owners  int // the lender, the entry or the loop
}

func handoffModelRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	max := int64(256 + rng.IntN(2048))
	h := newHandoff(max)
	type filed struct {
		pos  queue.Position
		raw  string
		body *modelBuf
		hb   *handBuf
	}
	var entries []filed // the model's entries, ascending
	lent := map[*handBuf]*modelBuf{}
	loopHeld := map[*handBuf]*modelBuf{}
	live := map[*byte]*modelBuf{} // first byte of a buffer somebody holds
	var pos queue.Position = 1000
	var readPos queue.Position = 1000
	var spares [][]byte
	check := func(step int, what string) {
		t.Helper()
		b, n := h.held()
		if b > max {
			t.Fatalf("step %d (%s): %d bytes held, bound %d", step, what, b, max)
		}
		want := int64(0)
		for _, s := range h.spare {
			want += int64(cap(s))
		}
		seen := map[*handBuf]bool{}
		for _, e := range h.entries[h.head:] {
			seen[e.buf] = true
		}
		for hb := range lent {
			seen[hb] = true
		}
		for hb := range loopHeld {
			seen[hb] = true
		}
		for hb := range seen {
			want += int64(cap(hb.b))
		}
		if b != want {
			t.Fatalf("step %d (%s): counts %d bytes, holds %d", step, what, b, want)
		}
		if n != len(entries) {
			t.Fatalf("step %d (%s): %d entries, the model has %d", step, what, n, len(entries))
		}
		for _, s := range h.spare {
			if mb := live[&s[:1][0]]; mb != nil {
				t.Fatalf("step %d (%s): a spare is a body %d owners still hold", step, what, mb.owners)
			}
		}
	}
	release := func(hb *handBuf, mb *modelBuf) {
		if string(hb.b) != mb.content {
			t.Fatalf("a held body was written over: %q, want %q", hb.b, mb.content)
		}
		mb.owners--
		if mb.owners == 0 {
			delete(live, &mb.b[:1][0])
		}
		h.release(hb)
	}
	for step := range 400 {
		what := ""
		switch op := rng.IntN(10); {
		case op < 4: // the consumer files a request
			what = "put"
			var body []byte
			if k := len(spares); k > 0 && rng.IntN(2) == 0 {
				body, spares = spares[k-1][:0], spares[:k-1]
			}
			if rng.IntN(4) == 0 && len(entries) > 0 && pos > readPos+10 {
				// A failed write: its positions come again.
				pos -= queue.Position(1 + rng.IntN(10))
				if pos < readPos {
					pos = readPos
				}
			}
			pos += queue.Position(1 + rng.IntN(50))
			content := fmt.Sprintf("req@%d-%d", pos, rng.Uint32())
			body = append(body, content...)
			if rng.IntN(3) == 0 {
				body = append(make([]byte, 0, len(body)+rng.IntN(400)), body...)
			}
			raw := "snappy:" + content
			hb := h.put(pos, h.hash([]byte(raw)), len(raw), body)
			// The model: entries at or past pos go when the body is
			// filed (a refused one leaves them: a take checks the
			// request's hash, and reading past them drops them).
			for hb != nil && len(entries) > 0 && entries[len(entries)-1].pos >= pos {
				e := entries[len(entries)-1]
				entries = entries[:len(entries)-1]
				e.body.owners--
				if e.body.owners == 0 {
					delete(live, &e.body.b[:1][0])
				}
			}
			if hb == nil {
				if h.bytes+int64(cap(body)) <= max {
					t.Fatalf("step %d: a body of %d fitting in %d/%d was refused", step, cap(body), h.bytes, max)
				}
				spares = append(spares, body) // the receiver keeps it
				break
			}
			mb := &modelBuf{b: body, content: content, owners: 2}
			live[&body[:1][0]] = mb
			entries = append(entries, filed{pos: pos, raw: raw, body: mb, hb: hb})
			lent[hb] = mb
			if sp := h.getSpare(); sp != nil {
				if mb := live[&sp[:cap(sp)][:1][0]]; mb != nil {
					t.Fatalf("step %d: the spare is a body still held", step)
				}
				for i := range sp[:cap(sp)] {
					sp[:cap(sp)][i] = 0xee // the receiver decodes into it
				}
				spares = append(spares, sp)
			}
		case op < 6: // the lender's statistics are done
			what = "lender release"
			for hb, mb := range lent {
				delete(lent, hb)
				release(hb, mb)
				break
			}
		case op < 8: // the loop reads the next record
			what = "take"
			if len(entries) == 0 {
				break
			}
			i := rng.IntN(len(entries))
			e := entries[i]
			raw := e.raw
			other := rng.IntN(5) == 0
			if other {
				raw = "snappy:another request"
			}
			hb := h.take(e.pos, []byte(raw))
			for _, p := range entries[:i+1] {
				p.body.owners--
				if p.body.owners == 0 {
					delete(live, &p.body.b[:1][0])
				}
			}
			entries = entries[i+1:]
			readPos = e.pos
			if other {
				if hb != nil {
					t.Fatalf("step %d: taken for another request", step)
				}
				break
			}
			if hb == nil || hb != e.hb || string(hb.b) != e.body.content {
				t.Fatalf("step %d: take(%d) did not return the body filed there", step, e.pos)
			}
			e.body.owners++
			live[&e.body.b[:1][0]] = e.body
			loopHeld[hb] = e.body
		case op < 9: // the loop is done with what it took
			what = "loop release"
			for hb, mb := range loopHeld {
				delete(loopHeld, hb)
				release(hb, mb)
				break
			}
		default: // the loop read records without the handoff
			what = "pass"
			if len(entries) == 0 {
				break
			}
			i := rng.IntN(len(entries))
			p := entries[i].pos
			h.pass(p)
			for _, e := range entries[:i+1] {
				e.body.owners--
				if e.body.owners == 0 {
					delete(live, &e.body.b[:1][0])
				}
			}
			entries = entries[i+1:]
			readPos = p
		}
		check(step, what)
	}
}

// TestHandoffAuditStalledLoop (audit20): with the lake loop stalled (it
// takes nothing), receivers filing as fast as they can never make the
// handoff hold more than its bound; the requests past it are counted as
// dropped (the loop decodes them from the queue), and once the loop reads
// on, everything is released.
func TestHandoffAuditStalledLoop(t *testing.T) {
	const max = 64 << 10
	h := newHandoff(max)
	var mu sync.Mutex
	var pos queue.Position
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body []byte
			for r := range 500 {
				body = append(body[:0], fmt.Sprintf("g%d r%d %0900d", g, r, r)...)
				if !h.room(cap(body)) {
					continue
				}
				raw := []byte(fmt.Sprint("raw", g, r))
				var hb *handBuf
				mu.Lock() // the queue's lock: positions ascend
				pos += 1000
				hb = h.put(pos, h.hash(raw), len(raw), body)
				mu.Unlock()
				if b, _ := h.held(); b > max {
					t.Errorf("holds %d bytes, bound %d", b, max)
					return
				}
				if hb != nil {
					body = h.getSpare()
					h.release(hb)
				}
			}
		}()
	}
	waittest.Wait(t, &wg, "the handoff's users")
	if h.drops.Load() == 0 {
		t.Fatal("nothing dropped: the bound was never reached")
	}
	if b, _ := h.held(); b > max {
		t.Fatalf("holds %d bytes, bound %d", b, max)
	}
	mu.Lock()
	h.pass(pos)
	mu.Unlock()
	b, n := h.held()
	var spare int64
	for _, s := range h.spare {
		spare += int64(cap(s))
	}
	if n != 0 || b != spare || len(h.spare) > maxSpare {
		t.Fatalf("after the loop read on: %d entries, %d bytes counted, %d in %d spares", n, b, spare, len(h.spare))
	}
}

// TestLakeLoopHandoffStalledAudit (audit20): the consumer queues scanned
// remote-write requests while the lake loop reads nothing (a lake on a slow
// disk): the handoff never holds more than its bound (what
// sluice_lake_handoff_bytes shows), the requests past it are counted as
// dropped, and when the loop reads on every sample reaches the lake exactly
// once with its value, those handed off and those decoded from the queue
// alike (taken + dropped = requests).
func TestLakeLoopHandoffStalledAudit(t *testing.T) {
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
	const max = 16 << 10
	h := newHandoff(max)
	c := newConsumer(q, time.Second, m)
	c.handoff = h
	l, err := newLakeLoop(q, cat, lake.Options{Root: root}, q.Stats().First, &lakeLoop{
		log: testLogger(t), m: m, interval: time.Hour, maxBuf: 1 << 40, maxQueue: 1 << 40, hand: h,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.r.Close()
	const requests, series = 60, 40
	now := time.Now().Truncate(time.Hour).Add(time.Minute).UnixMilli()
	var recv []byte
	for r := range requests {
		wr := &prompb.WriteRequest{}
		for i := range series {
			wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "series", Value: fmt.Sprint(i)}},
				Samples: []prompb.Sample{{Value: float64(r*1000 + i), Timestamp: now + int64(r)}},
			})
		}
		body, err := wr.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		recv = append(recv[:0], body...)
		sc := &prw.Scanner{LabelKeys: true} // as the receiver scans
		if !sc.ScanV1(recv) {
			t.Fatalf("scan refused request %d", r)
		}
		req := &otlpreceiver.Request{Tenant: "acme", Kind: signal.KindMetrics, Body: snappy.Encode(nil, body),
			Transport: "prometheus_remote_write", RemoteWrite: 1, Scanned: &otlpreceiver.Scanned{Points: sc.Samples(), NumSeries: sc.Series,
				Attrs: sc.Attrs, MaxAttrs: sc.MaxAttrs, Decoded: recv,
				Series: stats.Series{Names: sc.Names, Name: sc.Name, ID: sc.ID, Time: sc.Time}}}
		if _, err := c.Consume(ctx, req); err != nil {
			t.Fatal(err)
		}
		recv = req.Scanned.Decoded
		for i := range recv[:cap(recv)] {
			recv[:cap(recv)][i] = 0xff // the receiver decodes its next request here
		}
		if b, _ := h.held(); b > max {
			t.Fatalf("request %d: the handoff holds %d bytes, bound %d", r, b, max)
		}
	}
	if h.drops.Load() == 0 {
		t.Fatal("nothing dropped with the loop stalled: the bound was not reached")
	}
	if err := l.drain(); err != nil {
		t.Fatal(err)
	}
	if err := l.commitCheckpoint(reasonRequest); err != nil {
		t.Fatal(err)
	}
	if got := h.taken.Load() + h.drops.Load(); got != requests || h.taken.Load() == 0 {
		t.Fatalf("taken %d + dropped %d, want %d requests, some taken", h.taken.Load(), h.drops.Load(), requests)
	}
	if _, n := h.held(); n != 0 {
		t.Fatalf("%d entries left after the loop read everything", n)
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
	t.Logf("taken %d, dropped %d", h.taken.Load(), h.drops.Load())
}
