package pipeline

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/internal/queue"
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
	wg.Wait()
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
