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
// downsample its own output group, a per-label limit its own value: 216,
// 520 and 664 bytes each for series of 5 labels, measured), estimated by
// decision.bytes; past it the whole
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

// bytes is the heap d holds of its own: each of its allocations rounded
// up to the allocator's size class, as a heap profile counts them
// (TestDecisionBytesMatchHeap: within 10% of the heap freed when the
// cache lets a set of decisions go). Labels are counted as the one
// string Prometheus' default labels keep them in; cacheShare is its part
// of the cache's own tables.
func (d *decision) bytes() int64 {
	n := cacheShare + heapBytes(unsafe.Sizeof(*d)) + heapBytes(uintptr(cap(d.events))*unsafe.Sizeof(event{})) +
		heapBytes(uintptr(cap(d.lims))*unsafe.Sizeof(limitEvent{})) + heapBytes(uintptr(cap(d.aggs))*8) +
		heapBytes(uintptr(cap(d.strip))*4) + heapBytes(uintptr(cap(d.stripNames))*unsafe.Sizeof(""))
	for _, at := range d.aggs {
		if at.own { // an aggregate's target is shared, interned by its rule
			n += heapBytes(unsafe.Sizeof(*at)) + labelsBytes(at.labels) + heapBytes(uintptr(len(at.prefix))) +
				heapBytes(uintptr(len(at.desc.name))) + heapBytes(uintptr(len(at.desc.unit))) + heapBytes(uintptr(len(at.desc.description)))
		}
	}
	if p := d.rewritePlan; p != nil {
		n += heapBytes(unsafe.Sizeof(*p)) + labelsBytes(p.orig) + labelsBytes(p.cur) +
			heapBytes(uintptr(cap(p.added))*unsafe.Sizeof(labels.Label{})) + heapBytes(uintptr(cap(p.removed))*unsafe.Sizeof("")) +
			heapBytes(uintptr(cap(p.removedIDs))*4)
	}
	return n
}

// cacheShare is what a decision costs the cache beside itself: the
// interned table's entry (a slice of one pointer) of a shared one; about
// what a relabeled or downsampled one leaves in the allocator's spans.
const cacheShare = 16

func labelsBytes(ls labels.Labels) int64 { return heapBytes(uintptr(ls.ByteSize())) }

// sizeClasses are the Go allocator's small size classes (runtime's
// sizeclasses.go); an allocation takes the smallest that fits.
var sizeClasses = [...]uint32{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048,
	2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880,
	12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// heapBytes is what an allocation of n bytes takes on the heap (0 for
// none); past 32 KiB, whole 8 KiB pages.
func heapBytes(n uintptr) int64 {
	if n == 0 {
		return 0
	}
	if n > 32768 {
		return int64((n + 8191) &^ 8191)
	}
	i, _ := slices.BinarySearch(sizeClasses[:], uint32(n))
	return int64(sizeClasses[i])
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
