package prw

import (
	"bytes"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluice-dev/sluice/internal/signal"
)

// A series cache across requests. Senders send the same series with every
// scrape, so most series of a request were decoded before: the cache keys a
// remote write 1.0 series by the bytes of its label fields (the Label
// messages of the TimeSeries as received, when they come first, as every
// encoder writes them) and keeps what checking, sorting and hashing the
// labels gave: where __name__ and each value are in the key, the attribute
// keys in order, and the series id. A hit costs one hash of the key and one
// bytes compare, then the attribute slots are filled without parsing,
// comparing or hashing labels one by one.
//
// Remote write 2.0 is not cached: its symbol tables differ from request to
// request, so a key must be written from the resolved labels, and on the
// benchmark loads that costs as much as the decode it saves (BENCHMARKS.md,
// "Decode, a series cache").
//
// Rules:
//
//  1. Only a series whose labels were valid and strictly sorted by name is
//     cached: on a hit its labels (equal bytes) are sorted and valid too,
//     and its attributes are the labels in request order without __name__.
//     A series with a problem in its labels is never inserted. A hit with
//     anything but samples besides its labels is decoded as a miss.
//  2. A hit gives exactly what the miss would: the key is compared byte for
//     byte, never trusted to its hash (TestSeriesCache* force collisions).
//  3. Memory is bounded: each shard holds at most its share of the cache's
//     bytes and is emptied whole (a new generation) when it is full; the
//     label names are interned in one table of at most maxCacheNames names,
//     past which series with new names are not cached.
//  4. Hostile input cannot make probes long: the hash is seeded per process
//     (maphash) and a lookup or an insert looks at maxCacheProbes slots at
//     most (an insert that finds none free is skipped).
//
// Off by default: a Decoder uses a cache only once SetSeriesCache gave it
// one. On the benchmark loads a hit costs less than half the instructions
// of a miss, but when the series a decoder sees take more room than a
// core's L2 cache (BenchmarkDecodeV1Cycle: 32,000 series, about 13 MB), the
// hits' reads of the cache miss L2 and the decode is slower than without
// it (BENCHMARKS.md, "Decode, a series cache"); production loads are that
// size or larger.
//
// Sharing: one cache may serve every Decoder of the process (the receiver's
// pooled exchanges, the lake loop, the tail and the exporters decode the
// same series; a cache per decoder would hold the working set once per
// pooled decoder, and a pooled decoder's cache would be emptied whenever the
// pool drops it). The shards are locked one lookup or insert at a time; a
// hit copies what it needs while it holds the lock.

// DefaultSeriesCacheBytes bounds the shared series cache (about 170,000
// series of 10 labels).
const DefaultSeriesCacheBytes = 64 << 20

const (
	cacheShards    = 64
	maxCachedKey   = 4096 // a series whose labels take more bytes is not cached
	maxCacheProbes = 8
	maxCacheNames  = 1 << 16
	// cacheEntryBytes is what an entry costs besides its key and name ids
	// (cacheEntry), for the shard's budget; the slots are counted apart.
	cacheEntryBytes = 40
	// minCacheEntryBytes is the least an entry costs (key and all), which
	// sizes a shard's slot table.
	minCacheEntryBytes = 128
)

// SeriesCache is a bounded cache of decoded series shared by Decoders
// (safe for concurrent use). The zero value is not usable: NewSeriesCache.
type SeriesCache struct {
	seed       maphash.Seed
	shardBytes int // per shard: entries, keys and name ids
	maxEntries int // per shard
	slots      int // per shard, a power of 2
	shards     [cacheShards]cacheShard

	namesMu  sync.RWMutex
	names    []string
	nameIDs  map[string]uint32
	maxNames int // maxCacheNames (tests lower it)
	// noName counts inserts skipped for a label name past maxNames;
	// probationCalls, Decode calls that did not use the cache (admission).
	noName, probationCalls atomic.Uint64

	// collide makes every key hash to its length (tests: forced collisions).
	collide bool
}

type cacheShard struct {
	mu    sync.Mutex
	slots []uint32 // entry index + 1, linear probing; nil until first insert
	ents  []cacheEntry
	attrs []cacheAttr // the entries' attributes, in attribute order
	keys  []byte      // the entries' keys
	stats CacheStats
	_     [64]byte // keeps shards' locks on separate cache lines
}

type cacheEntry struct {
	hash    uint64
	sid     uint64
	key     uint32 // offset in keys
	keyLen  uint16
	nattr   uint16 // the series' labels - 1
	attrs   uint32 // offset in attrs
	nameIdx uint16 // __name__'s index among the series' (sorted) labels
	name    cacheAttr
}

// cacheAttr is a label of a cached series: its name's id in the names
// table and where its value is in the key.
type cacheAttr struct {
	gid uint32
	off uint16
	n   uint16
}

// cacheHit is what a hit copies out of its entry.
type cacheHit struct {
	sid     uint64
	nameIdx int
	name    cacheAttr
	attrs   []cacheAttr
}

// CacheStats counts a cache's work since it was made.
type CacheStats struct {
	Hits, Misses, Inserts uint64
	// Clears counts shards emptied because they were full; Skipped,
	// inserts given up (no free slot within the probe bound, or new label
	// names past the names table's bound).
	Clears, Skipped uint64
	// ProbationCalls counts Decode calls that did not use the cache
	// because their decoder's recent lookups rarely hit (admission).
	ProbationCalls uint64
}

// NewSeriesCache returns a cache of at most about maxBytes (at least
// 64 KiB per shard).
func NewSeriesCache(maxBytes int) *SeriesCache {
	per := max(maxBytes/cacheShards, 64<<10)
	c := &SeriesCache{seed: maphash.MakeSeed(), nameIDs: make(map[string]uint32), maxNames: maxCacheNames}
	c.maxEntries = per / minCacheEntryBytes
	slots := 1
	for slots < 2*c.maxEntries {
		slots <<= 1
	}
	c.slots = slots
	c.shardBytes = per - 4*slots
	return c
}

var defaultCache struct {
	once sync.Once
	c    *SeriesCache
}

// DefaultSeriesCache is one cache for the whole process, of
// DefaultSeriesCacheBytes, made on first use: what an owner passes to
// SetSeriesCache to share one cache among its decoders.
func DefaultSeriesCache() *SeriesCache {
	defaultCache.once.Do(func() { defaultCache.c = NewSeriesCache(DefaultSeriesCacheBytes) })
	return defaultCache.c
}

// Stats sums the shards' counters.
func (c *SeriesCache) Stats() CacheStats {
	var t CacheStats
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		s := sh.stats
		sh.mu.Unlock()
		t.Hits += s.Hits
		t.Misses += s.Misses
		t.Inserts += s.Inserts
		t.Clears += s.Clears
		t.Skipped += s.Skipped
	}
	t.Skipped += c.noName.Load()
	t.ProbationCalls = c.probationCalls.Load()
	return t
}

func (c *SeriesCache) hash(key []byte) uint64 {
	if c.collide {
		return uint64(len(key))
	}
	return maphash.Bytes(c.seed, key)
}

func (c *SeriesCache) shard(h uint64) *cacheShard { return &c.shards[h>>58] }

// lookup finds the series of key (whose hash is h) and copies it into
// hit (hit.attrs is appended to from [:0]).
func (c *SeriesCache) lookup(h uint64, key []byte, hit *cacheHit) bool {
	sh := c.shard(h)
	sh.mu.Lock()
	if sh.slots != nil {
		mask := uint64(len(sh.slots) - 1)
		for i, p := h&mask, 0; p < maxCacheProbes; i, p = (i+1)&mask, p+1 {
			s := sh.slots[i]
			if s == 0 {
				break
			}
			e := &sh.ents[s-1]
			if e.hash != h || int(e.keyLen) != len(key) || !bytes.Equal(sh.keys[e.key:e.key+uint32(e.keyLen)], key) {
				continue
			}
			hit.sid, hit.nameIdx, hit.name = e.sid, int(e.nameIdx), e.name
			hit.attrs = append(hit.attrs[:0], sh.attrs[e.attrs:e.attrs+uint32(e.nattr)]...)
			sh.stats.Hits++
			sh.mu.Unlock()
			return true
		}
	}
	sh.stats.Misses++
	sh.mu.Unlock()
	return false
}

// insert adds the series of key (hash h).
func (c *SeriesCache) insert(h uint64, key []byte, hit *cacheHit) {
	sh := c.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.slots == nil {
		sh.slots = make([]uint32, c.slots)
	}
	if len(sh.ents) >= c.maxEntries || len(sh.keys)+8*len(sh.attrs)+cacheEntryBytes*len(sh.ents)+len(key)+8*len(hit.attrs) > c.shardBytes {
		clear(sh.slots)
		sh.ents, sh.attrs, sh.keys = sh.ents[:0], sh.attrs[:0], sh.keys[:0]
		sh.stats.Clears++
	}
	mask := uint64(len(sh.slots) - 1)
	for i, p := h&mask, 0; p < maxCacheProbes; i, p = (i+1)&mask, p+1 {
		s := sh.slots[i]
		if s != 0 {
			if e := &sh.ents[s-1]; e.hash == h && int(e.keyLen) == len(key) && bytes.Equal(sh.keys[e.key:e.key+uint32(e.keyLen)], key) {
				return // another decoder inserted it
			}
			continue
		}
		sh.ents = append(sh.ents, cacheEntry{hash: h, sid: hit.sid, key: uint32(len(sh.keys)), keyLen: uint16(len(key)),
			nattr: uint16(len(hit.attrs)), attrs: uint32(len(sh.attrs)), nameIdx: uint16(hit.nameIdx), name: hit.name})
		sh.keys = append(sh.keys, key...)
		sh.attrs = append(sh.attrs, hit.attrs...)
		sh.slots[i] = uint32(len(sh.ents))
		sh.stats.Inserts++
		return
	}
	sh.stats.Skipped++
}

// nameID returns the id of label name, interning it; false when the table
// is full.
func (c *SeriesCache) nameID(name []byte) (uint32, bool) {
	c.namesMu.RLock()
	id, ok := c.nameIDs[string(name)]
	c.namesMu.RUnlock()
	if ok {
		return id, true
	}
	c.namesMu.Lock()
	defer c.namesMu.Unlock()
	if id, ok := c.nameIDs[string(name)]; ok {
		return id, true
	}
	if len(c.names) >= c.maxNames {
		return 0, false
	}
	s := string(name)
	id = uint32(len(c.names))
	c.names = append(c.names, s)
	c.nameIDs[s] = id
	return id, true
}

// name returns the label name of id.
func (c *SeriesCache) name(id uint32) string {
	c.namesMu.RLock()
	s := c.names[id]
	c.namesMu.RUnlock()
	return s
}

// gslot is what a label name id stands for in one Decode call: as a key,
// its KeyID in the call's batch; as a metric name, its family (index in
// descPool). Each is set when its gen is the call's (Decoder.callGen).
type gslot struct {
	kgen uint32
	key  signal.KeyID
	fgen uint32
	fam  uint32
}

// SetSeriesCache makes the decoder use c (nil: no cache, the default).
func (d *Decoder) SetSeriesCache(c *SeriesCache) { d.ownCache = c }

// beginCache picks the call's cache and starts a new generation of the
// name id map (gslot).
func (d *Decoder) beginCache() {
	c := d.ownCache
	if c != nil && d.adm.probation {
		d.adm.calls++
		if d.adm.calls%probationEvery != 0 {
			c.probationCalls.Add(1)
			c = nil
		}
	}
	d.cache = c
	d.callGen++
	if d.callGen == 0 {
		clear(d.gmap)
		d.callGen = 1
	}
}

// lookupSeries looks the series of key up: on a hit d.hit holds it.
func (d *Decoder) lookupSeries(key []byte) (h uint64, hit bool) {
	h = d.cache.hash(key)
	hit = d.cache.lookup(h, key, &d.hit)
	d.adm.lookups++
	if hit {
		d.adm.hits++
	}
	return h, hit
}

// admission decides per call whether a decoder uses the cache. A load
// whose series do not recur (new series in every request, or more series
// than the cache holds, sent round robin) would pay a lookup and an insert
// per series and never hit (BenchmarkDecodeV1Churn: about a third more
// instructions). After a window of admitWindow lookups (more than the
// default cache holds, so that a load that fits warms the cache in its
// first round before it is judged) with fewer than 1 in 8 hits, the
// decoder goes on probation: it uses the cache for one call in
// probationEvery only (their misses are still inserted), and comes off
// when a window of probationWindow of those calls' lookups hits 1 in 4 or
// more (the load's series recur, and the probation calls cached them).
type admission struct {
	lookups, hits uint32 // in the current window
	probation     bool
	calls         uint32 // calls since probation began
}

const (
	admitWindow     = 1 << 18
	probationWindow = 4096
	probationEvery  = 16
)

// review closes a window when it is full (at the end of a call).
func (a *admission) review() {
	if a.lookups < admitWindow && (!a.probation || a.lookups < probationWindow) {
		return
	}
	switch {
	case !a.probation && a.hits*8 < a.lookups:
		a.probation, a.calls = true, 0
	case a.probation && a.hits*4 >= a.lookups:
		a.probation = false
	}
	a.lookups, a.hits = 0, 0
}

// cachedAttrs appends the attributes of the 1.0 cache hit d.hit whose
// key starts at base in d.b (the values are in the key).
func (d *Decoder) cachedAttrs(base int) signal.Range {
	c := d.c
	start := uint32(c.Attrs.Len())
	as := d.hit.attrs
	keys, types, vals := c.Attrs.Extend(len(as))
	keys, types, vals = keys[:len(as)], types[:len(as)], vals[:len(as)]
	gm, gen := d.gmap, d.callGen
	for j, a := range as {
		var k signal.KeyID
		if g := a.gid; int(g) < len(gm) && gm[g].kgen == gen {
			k = gm[g].key
		} else {
			k = d.keySlow(g)
			gm = d.gmap
		}
		v := uint64(base+int(a.off))<<32 | uint64(a.n)
		if a.n == 0 {
			v = 0 // an empty value is the zero Str, as labelV1 leaves it
		}
		keys[j], types[j], vals[j] = k, signal.ValueString, v
	}
	return signal.Range{Start: start, End: uint32(c.Attrs.Len())}
}

// keyID returns label name id g's key in this call's batch.
func (d *Decoder) keyID(g uint32) signal.KeyID {
	if int(g) < len(d.gmap) && d.gmap[g].kgen == d.callGen {
		return d.gmap[g].key
	}
	return d.keySlow(g)
}

func (d *Decoder) keySlow(g uint32) signal.KeyID {
	d.growGmap(g)
	s := &d.gmap[g]
	s.key, s.kgen = d.c.Keys.IDString(d.cache.name(g)), d.callGen
	return s.key
}

// hitFamily returns the family of the hit's metric name, whose bytes are
// name.
func (d *Decoder) hitFamily(name signal.Str, ref uint32) uint32 {
	g := d.hit.name.gid
	if int(g) < len(d.gmap) && d.gmap[g].fgen == d.callGen {
		return d.gmap[g].fam
	}
	fam := d.family(name, ref)
	d.growGmap(g)
	d.gmap[g].fam, d.gmap[g].fgen = fam, d.callGen
	return fam
}

func (d *Decoder) growGmap(g uint32) {
	if int(g) >= len(d.gmap) {
		d.gmap = append(d.gmap, make([]gslot, int(g)+1-len(d.gmap))...)
	}
}

// insertSeries caches the series just appended by attrs (valid, strictly
// sorted labels: rule 1) under key, its label fields from base in d.b,
// and its hash h; fam is its family.
func (d *Decoder) insertSeries(h uint64, key []byte, base, nameIdx int, fam uint32) {
	ls := d.labels
	n := len(ls) - 1
	if n+1 > 0xffff || len(key) > maxCachedKey {
		return
	}
	c := d.cache
	hit := &d.hit
	as := slices.Grow(hit.attrs[:0], n)[:n]
	hit.attrs = as
	pk := d.prevKeys[:n]
	if !d.cacheAttrs(as[:nameIdx], pk[:nameIdx], ls[:nameIdx], base) ||
		!d.cacheAttrs(as[nameIdx:], pk[nameIdx:], ls[nameIdx+1:], base) {
		return
	}
	// The metric name's id, once per family and call.
	if len(d.famGid) <= int(fam) {
		d.famGid = append(d.famGid, make([]uint32, int(fam)+1-len(d.famGid))...)
	}
	name := ls[nameIdx].value
	g := d.famGid[fam]
	if g == 0 {
		id, ok := c.nameID(d.str(name))
		if !ok {
			c.noName.Add(1)
			return
		}
		g = id + 1
		d.famGid[fam] = g
		d.growGmap(id)
		d.gmap[id].fam, d.gmap[id].fgen = fam, d.callGen
	}
	hit.sid, hit.nameIdx = d.sid, nameIdx
	hit.name = cacheAttr{gid: g - 1, off: uint16(name.Off() - base), n: uint16(name.Len())}
	c.insert(h, key, hit)
}

// cacheAttrs fills the cache's attributes as of labels ls, whose keys
// attrs left in pk, and notes their keys in this call's gmap. False when
// a name has no id (the names table is full).
func (d *Decoder) cacheAttrs(as []cacheAttr, pk []keyCache, ls []label, base int) bool {
	pk, ls = pk[:len(as)], ls[:len(as)]
	gm, gen := d.gmap, d.callGen
	for j := range as {
		e := &pk[j]
		g := e.gid
		if g == 0 {
			id, ok := d.cache.nameID(d.str(e.name))
			if !ok {
				d.cache.noName.Add(1)
				return false
			}
			g = id + 1
			e.gid = g
		}
		g--
		a := cacheAttr{gid: g}
		if v := ls[j].value; v.Len() > 0 { // else the zero Str
			a.off, a.n = uint16(v.Off()-base), uint16(v.Len())
		}
		as[j] = a
		if int(g) < len(gm) && gm[g].kgen == gen {
			continue
		}
		d.growGmap(g)
		gm = d.gmap
		gm[g].key, gm[g].kgen = e.id, gen // what attrs found
	}
	return true
}
