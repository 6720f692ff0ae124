package processor

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/prometheus/prometheus/model/labels"
)

// maxCachedSeries bounds the series a rule set caches decisions for, for
// all requests together; past it a shard starts over (decisions are
// recomputed, never wrong). Series whose decisions are equal share one
// (interned), so most series cost one table slot (16 bytes, at most half
// the table used): 64 MB for the full cache.
const maxCachedSeries = 1 << 21

// maxDecisionBytes bounds the memory of the decisions the cache holds
// that are not shared (a relabel gives each series its own labels, a
// downsample its own output group, a per-label limit its own value: 200
// to 700 bytes each), estimated by decision.bytes; past it the whole
// cache starts over. Counting relabeled decisions alone (at most 512K)
// let a million new series a minute with every rule kind hold 600 MB.
var maxDecisionBytes int64 = 256 << 20 // a variable for tests

// maxInterned bounds the table of shared decisions; past it the table
// starts over (cached pointers stay valid).
const maxInterned = 1 << 16

// maxLabelIDs bounds the label numbering (see labelID); past it the cache
// and the numbering start over together (decisions hold label ids).
const maxLabelIDs = 1 << 14

const cacheShards = 64

// decisionCache holds the decisions of one rule set (Rules), shared by
// every request, so a series is evaluated once per rule set whichever
// request brings it, and the bound is one for the process, not one per
// concurrent request. Decisions are immutable once cached.
type decisionCache struct {
	shards [cacheShards]cacheShard

	internMu sync.Mutex
	interned map[uint64][]*decision
	unique   atomic.Int64 // estimated bytes of the unshared decisions (maxDecisionBytes)

	idMu     sync.RWMutex
	labelIDs map[string]uint32
	idGen    atomic.Uint64 // bumped when labelIDs changes: lookups cached by a Scratch are stale
	epoch    atomic.Uint64 // bumped when the numbering starts over
}

// cacheShard is a flat open-addressing table (linear probing, load at
// most 1/2): a lookup touches the slot holding key and pointer together,
// one cache line where a Go map touches two or three.
type cacheShard struct {
	mu    sync.RWMutex
	slots []cacheSlot
	n     int
	_     [16]byte // keeps shards' locks on separate cache lines
}

type cacheSlot struct {
	key uint64 // 0: empty
	d   *decision
}

func newDecisionCache() *decisionCache {
	return &decisionCache{labelIDs: map[string]uint32{}, interned: map[uint64][]*decision{}}
}

// slotKey keeps key 0 for empty slots (a series whose key is 0 shares
// key 1's entry: a 2^-64 chance, as for any two keys).
func slotKey(key uint64) uint64 {
	if key == 0 {
		return 1
	}
	return key
}

func (c *decisionCache) get(key uint64) *decision {
	sh := &c.shards[slotKey(key)%cacheShards]
	sh.mu.RLock()
	d := c.getLocked(key)
	sh.mu.RUnlock()
	return d
}

// getLocked is get with the read lock of key's shard held.
func (c *decisionCache) getLocked(key uint64) *decision {
	key = slotKey(key)
	sh := &c.shards[key%cacheShards]
	n := len(sh.slots)
	if n == 0 {
		return nil
	}
	mask := uint64(n - 1)
	for i := mix(key) & mask; ; i = (i + 1) & mask {
		e := &sh.slots[i]
		if e.key == key {
			return e.d
		}
		if e.key == 0 {
			return nil
		}
	}
}

// intern returns the cached decision equal to d, or d (now cached). A
// decision that rewrites the series (relabel) or holds its own downsample
// target is never equal to another. Each decision not shared counts its
// bytes against maxDecisionBytes.
func (c *decisionCache) intern(d *decision) *decision {
	if d.rewritePlan != nil || d.perSeries {
		c.countUnshared(d)
		return d
	}
	h := d.contentHash()
	c.internMu.Lock()
	for _, o := range c.interned[h] {
		if o.sameAs(d) {
			c.internMu.Unlock()
			return o
		}
	}
	if len(c.interned) >= maxInterned {
		clear(c.interned)
	}
	c.interned[h] = append(c.interned[h], d)
	c.internMu.Unlock()
	c.countUnshared(d) // equal to none so far: the first of its kind, or a series' own
	return d
}

// countUnshared counts the bytes of a decision not shared (so far); past
// maxDecisionBytes the cache starts over.
func (c *decisionCache) countUnshared(d *decision) {
	if c.unique.Add(d.bytes()) > maxDecisionBytes {
		c.unique.Store(0)
		c.clearShards()
	}
}

// bytes estimates the memory d holds: what a profile of a million
// distinct decisions shows, within a few tens of bytes.
func (d *decision) bytes() int64 {
	n := int64(unsafe.Sizeof(*d)) + int64(cap(d.events))*int64(unsafe.Sizeof(event{})) +
		int64(cap(d.lims))*int64(unsafe.Sizeof(limitEvent{})) + int64(cap(d.aggs))*8 + int64(cap(d.strip))*4 + 32
	for _, at := range d.aggs {
		if d.perSeries {
			n += int64(unsafe.Sizeof(*at)) + labelsBytes(at.labels) + int64(len(at.prefix))
		}
	}
	if p := d.rewritePlan; p != nil {
		n += int64(unsafe.Sizeof(*p)) + labelsBytes(p.orig) + labelsBytes(p.cur) +
			int64(cap(p.added))*int64(unsafe.Sizeof(labels.Label{})) + int64(cap(p.removed))*16 + int64(cap(p.removedIDs))*4
	}
	return n
}

func labelsBytes(ls labels.Labels) int64 {
	n := int64(0)
	ls.Range(func(l labels.Label) { n += int64(len(l.Name)+len(l.Value)) + 32 })
	return n
}

func (c *decisionCache) clearShards() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		clear(sh.slots)
		sh.n = 0
		sh.mu.Unlock()
	}
}

// contentHash hashes what sameAs compares.
func (d *decision) contentHash() uint64 {
	h := uint64(d.setIdx) | d.epoch<<8
	if d.drop {
		h ^= 1 << 63
	}
	for _, e := range d.events {
		h = mix(h ^ uint64(e.rule)<<8 ^ uint64(e.kind))
	}
	for _, l := range d.lims {
		h = mix(h ^ l.group ^ l.id<<1 ^ uint64(l.strip)<<2)
		if l.sample {
			h++
		}
	}
	for _, a := range d.aggs {
		h = mix(h ^ a.key)
	}
	for _, id := range d.strip {
		h = mix(h ^ uint64(id)<<3)
	}
	return h
}

// sameAs reports whether d and o (neither with a rewrite plan) decide the
// same for every point.
func (d *decision) sameAs(o *decision) bool {
	return d.drop == o.drop && d.changed == o.changed && d.setIdx == o.setIdx && d.set == o.set && d.epoch == o.epoch &&
		slices.Equal(d.events, o.events) && slices.Equal(d.lims, o.lims) && slices.Equal(d.aggs, o.aggs) &&
		slices.Equal(d.strip, o.strip) && slices.Equal(d.stripNames, o.stripNames)
}

func (c *decisionCache) put(key uint64, d *decision) {
	key = slotKey(key)
	sh := &c.shards[key%cacheShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.n >= maxCachedSeries/cacheShards {
		clear(sh.slots)
		sh.n = 0
	}
	if 2*(sh.n+1) > len(sh.slots) {
		old := sh.slots
		sh.slots = make([]cacheSlot, max(16, 2*len(old)))
		sh.n = 0
		for _, e := range old {
			if e.key != 0 {
				sh.insert(e.key, e.d)
			}
		}
	}
	sh.insert(key, d)
}

func (sh *cacheShard) insert(key uint64, d *decision) {
	mask := uint64(len(sh.slots) - 1)
	for i := mix(key) & mask; ; i = (i + 1) & mask {
		e := &sh.slots[i]
		if e.key == key {
			e.d = d
			return
		}
		if e.key == 0 {
			*e = cacheSlot{key, d}
			sh.n++
			return
		}
	}
}

// labelID numbers label names (from 1) for the decisions of this rule set,
// so a rewrite compares integers per attribute.
func (c *decisionCache) labelID(l string) uint32 {
	if id := c.lookupID(l); id != 0 {
		return id
	}
	c.idMu.Lock()
	defer c.idMu.Unlock()
	if id, ok := c.labelIDs[l]; ok {
		return id
	}
	if len(c.labelIDs) >= maxLabelIDs {
		c.resetLocked()
	}
	id := uint32(len(c.labelIDs) + 1)
	c.labelIDs[strings.Clone(l)] = id
	c.idGen.Add(1)
	return id
}

// resetLocked empties the cache and the numbering, and starts a new epoch:
// a decision of an older epoch still in use (in flight) compares label
// names instead of ids. Lock order: idMu, then the shards.
func (c *decisionCache) resetLocked() {
	{
		// Decisions hold ids: both start over. Lock order: idMu, then
		// the shards.
		c.clearShards()
		clear(c.labelIDs)
		c.epoch.Add(1)
		c.idGen.Add(1)
	}
}

// lookupID is l's id, or 0 when l has none (no decision removes it).
func (c *decisionCache) lookupID(l string) uint32 {
	c.idMu.RLock()
	id := c.labelIDs[l]
	c.idMu.RUnlock()
	return id
}
