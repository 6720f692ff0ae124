package pipeline

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/queue"
)

// handoff passes the remote-write receiver's snappy-decoded request to the
// lake loop, so that the loop does not decode a request the receiver just
// decoded (issue 13: the loop's snappy decode was ~5% of the whole
// process into the lake at 1,500 samples a request).
//
// The receiver lends the decoded body of a scanned request (encPRW1N,
// encPRW2N) to the consumer (otlpreceiver.Scanned.Decoded), which files it,
// without copying it, under the exact queue position its record ends at,
// while the queue still holds the record back from readers
// (queue.AppendAt): an entry is in place before the lake loop can read its
// record. The lake loop, reading that record, takes the entry instead of
// snappy-decoding the record's body (1.0: appended straight into its
// partition, appendPRW; 2.0: decoded from it, decodeMetrics); an entry is
// used only when the record's request (the snappy bytes the record holds)
// has the length and the seeded hash the entry was filed with, so an entry
// can never stand for another request (a position reused after a failed
// write, a replay). Anything missing (the loop behind by more than the
// bound, a replay after a rewind, a restart) takes the old path: the
// record is decoded. The queue stays the only source of truth:
// exactly-once, replay and poison isolation do not depend on the handoff.
//
// A filed body has two owners until both let it go: the consumer, whose
// statistics still read the request after the append (the scan's names
// alias it), and the entry (then the lake loop that took it). The receiver
// gets a spare buffer in its place; the body becomes a spare once both
// released it. Nobody writes a filed body: the receiver decodes its next
// request into the spare.
//
// Memory is bounded by max (the capacities of the buffers held: filed, in
// use by the loop, or spare): a body that does not fit is not filed
// (counted in sluice_lake_handoff_dropped_total) and its record is decoded
// when read. Entries the loop passed without taking (records it read
// otherwise) are dropped as it reads past them.
type handoff struct {
	max   int64
	seed  maphash.Seed
	taken atomic.Uint64 // bodies the lake loop used instead of decoding
	drops atomic.Uint64 // bodies not filed: no room

	mu      sync.Mutex
	entries []handoffEntry // by position, ascending; entries[head:] live
	head    int
	bytes   int64    // capacities of the buffers held
	spare   [][]byte // buffers nobody reads
	free    []*handBuf
}

// handBuf is a filed body and its owners (under handoff.mu).
type handBuf struct {
	b    []byte
	refs int32
}

type handoffEntry struct {
	pos queue.Position // after the record
	raw uint64         // the request's seeded hash (snappy, as queued)
	n   int            // the request's length
	buf *handBuf       // the request snappy-decoded
}

// maxSpare bounds the spare buffers (a few requests in flight at once).
const maxSpare = 8

func newHandoff(max int64) *handoff {
	return &handoff{max: max, seed: maphash.MakeSeed()}
}

// hash is the check of a request's snappy bytes.
func (h *handoff) hash(raw []byte) uint64 { return maphash.Bytes(h.seed, raw) }

// room reports whether a body of capacity c would fit now (the consumer's
// check before it hashes the request; put checks again), counting it as
// dropped when not.
func (h *handoff) room(c int) bool {
	h.mu.Lock()
	ok := h.bytes+int64(c) <= h.max
	h.mu.Unlock()
	if !ok {
		h.drops.Add(1)
	}
	return ok
}

// put files body, the decoded request of the record ending at pos whose
// request is n bytes hashing to raw, and returns it with two owners (the
// entry and the caller, who releases it once it no longer reads body), or
// nil when it does not fit (the caller keeps body). It is called from
// queue.AppendAt's callback. Entries at or past pos are dropped: a
// position comes again only after a failed write, whose records were
// never acknowledged.
func (h *handoff) put(pos queue.Position, raw uint64, n int, body []byte) *handBuf {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bytes+int64(cap(body)) > h.max {
		h.drops.Add(1)
		return nil
	}
	for len(h.entries) > h.head && h.entries[len(h.entries)-1].pos >= pos {
		e := &h.entries[len(h.entries)-1]
		h.releaseLocked(e.buf)
		*e = handoffEntry{}
		h.entries = h.entries[:len(h.entries)-1]
	}
	if h.head > 0 && h.head == len(h.entries) {
		h.entries, h.head = h.entries[:0], 0
	}
	var hb *handBuf
	if k := len(h.free); k > 0 {
		hb, h.free = h.free[k-1], h.free[:k-1]
	} else {
		hb = new(handBuf)
	}
	hb.b, hb.refs = body, 2
	h.entries = append(h.entries, handoffEntry{pos: pos, raw: raw, n: n, buf: hb})
	h.bytes += int64(cap(body))
	return hb
}

// take returns the decoded request of the record ending at pos whose
// request is raw (snappy, as in the record), or nil. Entries before pos
// are dropped (their records were read without them). The caller releases
// the returned buffer once it no longer reads it.
func (h *handoff) take(pos queue.Position, raw []byte) *handBuf {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	h.passLocked(pos - 1)
	var e handoffEntry
	if h.head < len(h.entries) && h.entries[h.head].pos == pos {
		e = h.entries[h.head]
		h.entries[h.head] = handoffEntry{}
		h.head++
	}
	h.mu.Unlock()
	if e.buf == nil {
		return nil
	}
	if e.n != len(raw) || e.raw != h.hash(raw) {
		h.release(e.buf)
		return nil
	}
	h.taken.Add(1)
	return e.buf
}

// pass drops the entries of records up to pos: the lake loop read them
// without the handoff.
func (h *handoff) pass(pos queue.Position) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.passLocked(pos)
	h.mu.Unlock()
}

func (h *handoff) passLocked(pos queue.Position) {
	for h.head < len(h.entries) && h.entries[h.head].pos <= pos {
		e := &h.entries[h.head]
		h.releaseLocked(e.buf)
		*e = handoffEntry{}
		h.head++
	}
	if h.head == len(h.entries) {
		h.entries, h.head = h.entries[:0], 0
	}
}

// release drops one owner of hb; the last one makes its body a spare.
func (h *handoff) release(hb *handBuf) {
	h.mu.Lock()
	h.releaseLocked(hb)
	h.mu.Unlock()
}

func (h *handoff) releaseLocked(hb *handBuf) {
	if hb.refs--; hb.refs > 0 {
		return
	}
	b := hb.b
	h.bytes -= int64(cap(b))
	if len(h.spare) < maxSpare && h.bytes+int64(cap(b)) <= h.max {
		h.spare = append(h.spare, b[:0])
		h.bytes += int64(cap(b))
	}
	hb.b = nil
	if len(h.free) < 2*maxSpare {
		h.free = append(h.free, hb)
	}
}

// getSpare returns a buffer nobody reads (length 0), or nil.
func (h *handoff) getSpare() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := len(h.spare)
	if k == 0 {
		return nil
	}
	b := h.spare[k-1]
	h.spare[k-1] = nil
	h.spare = h.spare[:k-1]
	h.bytes -= int64(cap(b))
	return b
}

// held is what the handoff holds: the bytes it counts and the entries
// waiting (tests).
func (h *handoff) held() (int64, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bytes, len(h.entries) - h.head
}

// register adds the handoff's counters to reg (nil: none).
func (h *handoff) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_lake_handoff_taken_total",
			Help: "Remote-write requests the lake loop took snappy-decoded from the receiver instead of decoding them from the queue (lake.handoff_max_bytes)."},
			func() float64 { return float64(h.taken.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_lake_handoff_dropped_total",
			Help: "Remote-write requests not handed to the lake loop for lack of room (lake.handoff_max_bytes): the lake loop lagged behind the receiver and decodes them from the queue."},
			func() float64 { return float64(h.drops.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_lake_handoff_bytes",
			Help: "Bytes held for remote-write requests handed to the lake loop (at most lake.handoff_max_bytes)."},
			func() float64 { b, _ := h.held(); return float64(b) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
