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
// The consumer copies the decoded body of a scanned request (encPRW1N,
// encPRW2N) into a buffer of the handoff's and puts it under the exact queue
// position its record ends at, while the queue still holds the record back
// from readers (queue.AppendAt): an entry is in place before the lake loop
// can read its record. The lake loop, reading that record, takes the entry
// instead of snappy-decoding the record's body (1.0: appended straight
// into its partition, appendPRW; 2.0: decoded from it, decodeMetrics); an entry is used only when the
// record's request (the snappy bytes the record holds) has the length and
// the seeded hash the entry was put with, so an entry can never stand for
// another request (a position reused after a failed write, a replay).
// Anything missing (the loop behind by more than the bound, a replay after
// a rewind, a restart) takes the old path: the record is decoded. The queue
// stays the only source of truth: exactly-once, replay and poison
// isolation do not depend on the handoff.
//
// Memory is bounded by max (the capacities of the buffers held: waiting,
// in use by the loop, or spare for the next copies): a body that does not
// fit is not kept (counted in sluice_lake_handoff_dropped_total) and its
// record is decoded when read. Entries the loop passed without taking
// (records it read otherwise) are dropped as it reads past them.
type handoff struct {
	max   int64
	seed  maphash.Seed
	taken atomic.Uint64 // bodies the lake loop used instead of decoding
	drops atomic.Uint64 // bodies not kept: no room

	mu      sync.Mutex
	entries []handoffEntry // by position, ascending; entries[head:] live
	head    int
	bytes   int64    // capacities of the buffers held
	spare   [][]byte // buffers the loop is done with
}

type handoffEntry struct {
	pos  queue.Position // after the record
	raw  uint64         // the request's seeded hash (snappy, as queued)
	n    int            // the request's length
	body []byte         // the request snappy-decoded
}

// maxSpare bounds the spare buffers (a few requests in flight at once).
const maxSpare = 8

func newHandoff(max int64) *handoff {
	return &handoff{max: max, seed: maphash.MakeSeed()}
}

// hash is the check of a request's snappy bytes.
func (h *handoff) hash(raw []byte) uint64 { return maphash.Bytes(h.seed, raw) }

// copyOf returns a buffer of the handoff's holding body, or nil when it
// has no room for it (counted as dropped). The buffer is not counted until
// put keeps it.
func (h *handoff) copyOf(body []byte) []byte {
	n := len(body)
	if h == nil || n == 0 {
		return nil
	}
	h.mu.Lock()
	var b []byte
	for k := len(h.spare); k > 0 && b == nil; k-- {
		s := h.spare[k-1]
		h.spare[k-1] = nil
		h.spare = h.spare[:k-1]
		h.bytes -= int64(cap(s))
		if cap(s) >= n {
			b = s
		}
	}
	room := h.bytes+int64(max(n, cap(b))) <= h.max
	h.mu.Unlock()
	if !room {
		h.drops.Add(1)
		return nil
	}
	if b == nil {
		b = make([]byte, n)
	}
	return append(b[:0], body...)
}

// put keeps body (from copyOf), the decoded request of the record ending
// at pos whose request is n bytes hashing to raw; it is called from
// queue.AppendAt's callback. Entries at or past pos are dropped: a
// position comes again only after a failed write, whose records were never
// acknowledged.
func (h *handoff) put(pos queue.Position, raw uint64, n int, body []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bytes+int64(cap(body)) > h.max {
		h.drops.Add(1)
		return
	}
	for len(h.entries) > h.head && h.entries[len(h.entries)-1].pos >= pos {
		e := &h.entries[len(h.entries)-1]
		h.bytes -= int64(cap(e.body))
		*e = handoffEntry{}
		h.entries = h.entries[:len(h.entries)-1]
	}
	if h.head > 0 && h.head == len(h.entries) {
		h.entries, h.head = h.entries[:0], 0
	}
	h.entries = append(h.entries, handoffEntry{pos: pos, raw: raw, n: n, body: body})
	h.bytes += int64(cap(body))
}

// take returns the decoded request of the record ending at pos whose
// request is raw (snappy, as in the record), or nil. Entries before pos
// are dropped (their records were read without them). The caller gives
// the body back with done once it no longer reads it.
func (h *handoff) take(pos queue.Position, raw []byte) []byte {
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
	if e.body == nil {
		return nil
	}
	if e.n != len(raw) || e.raw != h.hash(raw) {
		h.done(e.body)
		return nil
	}
	h.taken.Add(1)
	return e.body
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
		h.bytes -= int64(cap(e.body))
		h.spareLocked(e.body)
		*e = handoffEntry{}
		h.head++
	}
	if h.head == len(h.entries) {
		h.entries, h.head = h.entries[:0], 0
	}
}

// done gives back a body take returned.
func (h *handoff) done(body []byte) {
	h.mu.Lock()
	h.bytes -= int64(cap(body))
	h.spareLocked(body)
	h.mu.Unlock()
}

func (h *handoff) spareLocked(body []byte) {
	if len(h.spare) < maxSpare && h.bytes+int64(cap(body)) <= h.max {
		h.spare = append(h.spare, body[:0])
		h.bytes += int64(cap(body))
	}
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
