package signal

// Known series of a batch: a decoder that appends straight into a lake
// partition (the lake loop's remote-write path, prw.PlainAppender)
// remembers, per series it appended, the attribute set, descriptor and
// series id it gave it, under a key of its own choosing (a seeded hash of
// the series' label bytes as received). The next sample of the same series
// in the same partition (the common case: every scrape repeats the same
// series) then takes them from one probe, without parsing its labels,
// hashing them for its series id, or looking its set up by content.
//
// The batch does not compare a key's content: a key is trusted as the
// series' identity, as the 64-bit series id already is the lake's (see
// seriesid.go); the caller chooses a key whose collisions are as unlikely
// (prw.PlainAppender: 64-bit seeded maphash plus the label bytes' length).
// Entries live as long as the batch's generation (Common.gen): a Reset or
// Truncate forgets every one, so an entry never names a set or descriptor
// that was rolled back.

// KnownSeries is what a batch remembers of a series appended into it.
type KnownSeries struct {
	Attr Range  // its attribute set in the batch
	ID   uint64 // its series id
	Desc uint32 // its descriptor in the batch
	Len  uint32 // a check of the caller's (prw.PlainAppender: the label bytes' length)
}

type knownSlot struct {
	key uint64 // 0: empty (keys of 0 are stored as 1)
	s   KnownSeries
}

// knownTable is an open-addressing table of KnownSeries by key, at most
// half full.
type knownTable struct {
	gen   uint64
	slots []knownSlot
	n     int
}

// maxKnownSeries bounds the series a batch remembers; past it a batch
// forgets them all and starts again (a partition of more distinct series
// than this is flushed before long anyway: lake.Options.TargetFileBytes).
//
// Memory: 64-128 bytes per distinct series of the batch (32-byte slots, at
// most half full), at most 64 MiB at the bound. The lake writer counts it
// in a partition's memory (CopyTableBytes: lake.max_buffered_bytes and the
// checkpoint's buffered bytes), not in the partition's file size estimate
// (250 bytes a row), which decides where files roll: counting it there
// would roll files at other rows than the copy path, whose files the
// direct path must match (TestAppendMetricsMatchesWriteMetrics).
const maxKnownSeries = 1 << 20

func knownKey(k uint64) uint64 {
	if k == 0 {
		return 1
	}
	return k
}

// KnownSeries returns the series remembered under key (see
// AddKnownSeries), if any.
func (m *Metrics) KnownSeries(key uint64) (KnownSeries, bool) {
	t := &m.known
	if t.gen != m.gen || t.n == 0 {
		return KnownSeries{}, false
	}
	key = knownKey(key)
	mask := uint64(len(t.slots) - 1)
	for i := (key * 0x9E3779B97F4A7C15) >> 7 & mask; ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.key == key {
			return sl.s, true
		}
		if sl.key == 0 {
			return KnownSeries{}, false
		}
	}
}

// KnownSeriesBlock looks up keys (at most 64) as KnownSeries does, into
// out (as long as keys), and returns a bit per key found (bit j: keys[j]).
// The table is larger than the cache for a partition of many series and a
// probe's slot a cache miss; this reads the block's slots first, in a loop
// of loads that do not depend on each other, so that their misses overlap,
// and only then compares keys (as the copy's set lookups do: touchSets).
func (m *Metrics) KnownSeriesBlock(keys []uint64, out []KnownSeries) uint64 {
	t := &m.known
	if t.gen != m.gen || t.n == 0 {
		return 0
	}
	keys = keys[:min(len(keys), 64)]
	out = out[:len(keys)]
	mask := uint64(len(t.slots) - 1)
	var idx [64]uint32
	var sink uint64
	for j, k := range keys {
		i := (knownKey(k) * 0x9E3779B97F4A7C15) >> 7 & mask
		idx[j] = uint32(i)
		sink += t.slots[i].key
	}
	knownSink = sink
	var found uint64
	for j, k := range keys {
		k = knownKey(k)
		for i := uint64(idx[j]); ; i = (i + 1) & mask {
			sl := &t.slots[i]
			if sl.key == k {
				out[j] = sl.s
				found |= 1 << j
				break
			}
			if sl.key == 0 {
				break
			}
		}
	}
	return found
}

// knownSink keeps the loads of KnownSeriesBlock's first loop.
var knownSink uint64

// AddKnownSeries remembers s under key until the batch's next Reset or
// Truncate. s.Attr and s.Desc must be a set and a descriptor of m.
func (m *Metrics) AddKnownSeries(key uint64, s KnownSeries) {
	t := &m.known
	if t.gen != m.gen || t.n >= maxKnownSeries {
		clear(t.slots)
		t.n, t.gen = 0, m.gen
	}
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	key = knownKey(key)
	mask := uint64(len(t.slots) - 1)
	for i := (key * 0x9E3779B97F4A7C15) >> 7 & mask; ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.key == key {
			sl.s = s
			return
		}
		if sl.key == 0 {
			sl.key, sl.s = key, s
			t.n++
			return
		}
	}
}

func (t *knownTable) grow() {
	old := t.slots
	t.slots = make([]knownSlot, max(1024, 2*len(old)))
	mask := uint64(len(t.slots) - 1)
	for _, sl := range old {
		if sl.key == 0 {
			continue
		}
		i := (sl.key * 0x9E3779B97F4A7C15) >> 7 & mask
		for t.slots[i].key != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = sl
	}
}

// InternDescribedGauge is InternGaugeDesc for a gauge with a description
// (help) and a metadata set meta of m (remote write 2.0's metadata, as
// prw's decoder describes it: type and unit attributes), equal to the
// descriptor a copy of the decoded request gives (prw.PlainAppender2).
func (m *Metrics) InternDescribedGauge(name, help []byte, meta Range) uint32 {
	if !m.ShareAttrSets {
		m.Descs = append(m.Descs, MetricDesc{Name: m.AppendBytes(name), Description: appendStr(&m.Common, help), Type: MetricGauge, Metadata: meta})
		return uint32(len(m.Descs) - 1)
	}
	return m.internDesc(descContent{name: name, desc: help, typ: MetricGauge, meta: meta})
}
