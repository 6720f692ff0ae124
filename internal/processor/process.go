package processor

import (
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/otlptranslator"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/sluice-dev/sluice/internal/promname"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// event kinds of a series decision, replayed per point.
const (
	evMatched uint8 = iota
	evDropped       // the rule drops the point (a shadow rule: would drop)
	evChanged
	evProb  // the rule samples each point with its probability
	evLimit // the rule's limiter admits or refuses the series; see decision.lims
	evAgg   // the rule aggregates (downsamples) the point; see decision.aggs
)

// limitEvent is what replay needs for one evLimit of a series.
type limitEvent struct {
	group  uint64 // 0: the tenant's; else mixed with the tenant per batch
	id     uint64 // 0: the point's series id; else the hash of the label's value
	sample bool   // exceed_action sample: the series is in the kept sample
	strip  uint32 // exceed_action strip_label: the label's id (labelID)
	// stripped: the series was stripped by a limit before; the limit
	// counts it by the series id it has without the label (per point,
	// strippedSeriesID), as a series that arrived without it.
	stripped bool
}

type event struct {
	rule uint8
	kind uint8
}

// decision is what the rules do to one series, computed once per rule
// set and immutable once cached (shared by every request).
type decision struct {
	events  []event
	drop    bool // a non-shadow rule drops every point
	changed bool // a relabel changed the series' labels; see rw
	// perSeries: the decision holds what is the series' own (a downsample
	// target, with its labels): never shared, bounded as relabeled ones.
	perSeries bool
	setIdx    uint8     // set.index()
	epoch     uint64    // the cache's label numbering epoch its ids are of
	set       setLabels // the labels sluice sets on the series
	lims      []limitEvent
	aggs      []*aggTarget // per evAgg event
	// strip and stripNames are the labels strip_label limits removed (by
	// id and by name) when nothing else changed the series: such a
	// decision holds no labels and is shared (interned) like any other.
	strip        []uint32
	stripNames   []string
	*rewritePlan // set when changed
}

// rewritePlan is how a relabel changes a series' points.
type rewritePlan struct {
	orig, cur  labels.Labels  // labels before and after the rules
	newName    string         // the new OTLP metric name, "" if unchanged
	removed    []string       // point labels whose attributes a relabel removes
	removedIDs []uint32       // their labelID
	added      []labels.Label // point labels a relabel adds or changes
	ignored    bool           // a relabel changed a label from the resource
}

// setLabels says which labels sluice derives itself for a series (see
// promname.Reclaim): an attribute keyed like one of the others is a plain
// label. rw: the series was sent by remote write (scope prw.ScopeName), its
// labels are the attribute keys verbatim, as the query API shows them.
type setLabels struct{ job, instance, histogram, summary, rw bool }

// Scratch is the reusable state of one Process call at a time.
type Scratch struct {
	// Tenant is the tenant of the batch (limits per tenant).
	Tenant string
	// Now, when set, is the time limits use instead of the clock (tests).
	Now time.Time

	// OutLogs receives the kept records when ProcessLogs reports a change.
	OutLogs signal.Logs

	// Refused is the number of points of the last ProcessMetrics call
	// that a limit refused (exceed_action refuse, or sample and not in
	// the sample) or a require rule refused, shadow rules aside: what the
	// sender is told was not taken (an OTLP partial success), unlike what
	// drop, keep and sample rules remove by design. RefusedBy names the
	// first rule that refused one.
	Refused   int
	RefusedBy string

	rules           *Rules
	descKey         []uint64
	sb              labels.ScratchBuilder
	kv              []attrLabel
	names           []string
	counts          [maxRules][4]uint64 // matched, dropped, changed, over a limit
	forced          []uint8             // the strip_label limits replay switched at, for the point (replay)
	forcedNames     []string            // their labels (stripNamesOf)
	forcedIDs       []uint32            // and label ids
	forcedStale     bool                // some of forcedIDs are of an older numbering epoch
	nameHash        []uint64            // by descriptor, of the batch (strippedID; 0: not yet)
	resHash         []uint64            // by resource, of the batch (strippedID; 0: not yet)
	renamed         map[renameKey]uint32
	ignoredResource uint64
	set             setLabels  // of the series seriesLabels built last
	keyLabel        []keyLabel // by key and label set (32 a key) of the batch being processed
	rwScope         []bool     // by scope of the batch: sent by remote write (prw.ScopeName)
	descRW          []bool     // by descriptor of the batch: holds remote-write points (flushEffects)
	now             int64
	tenantGroup     uint64
	idGen           uint64                 // the decision cache's idGen keyLabel was filled at
	eff             []effCount             // by descriptor and rule, of the batch (effects.go)
	found           [lookupChunk]*decision // cached decisions of the chunk's points (lookupChunk)
	held            *limiter               // locked by hold, until release
	effTouched      []int32                // the cells of eff not zero
}

type renameKey struct {
	desc uint32
	name string
}

type attrLabel = promname.AttrLabel

func (s *Scratch) bind(r *Rules) { s.rules = r }

// ProcessMetrics applies the metric rules to b in place. It returns false
// when no point is dropped or changed (b is unchanged and its original
// bytes can be used as they are); otherwise b holds only the kept points,
// in their order, and kept is their number. Kept points are compacted to
// the front of b without copying what they reference, and a relabeled
// point gets a new attribute range appended to b's stores, so a batch
// where most points are kept costs little more than the decisions. b's
// SeriesID must be set (the OTLP decoder sets it).
func (r *Rules) ProcessMetrics(b *signal.Metrics, s *Scratch) (changed bool, kept int) {
	s.Refused, s.RefusedBy = 0, ""
	if r == nil || len(r.metrics) == 0 || b.Len() == 0 {
		return false, b.Len()
	}
	s.bind(r)
	s.now = s.Now.UnixNano()
	if s.Now.IsZero() {
		s.now = time.Now().UnixNano()
	}
	s.tenantGroup = xxhash.Sum64String(s.Tenant) | 1
	// Series ids hash the name but not the unit or type, which the
	// Prometheus name depends on: fold them into the cache key.
	s.descKey = s.descKey[:0]
	for i := range b.Descs {
		d := &b.Descs[i]
		k := xxhash.Sum64(b.Bytes(d.Unit))*0x9E3779B97F4A7C15 + uint64(d.Type)<<8 + uint64(d.Temporality)<<1
		if d.Monotonic {
			k++
		}
		s.descKey = append(s.descKey, k)
	}
	s.rwScope = s.rwScope[:0]
	for _, sc := range b.Scopes {
		s.rwScope = append(s.rwScope, b.String(sc.Name) == prw.ScopeName)
	}
	s.remoteWriteDescs(b)
	clear(s.renamed)
	s.keyLabel = s.keyLabel[:0]
	s.nameHash, s.resHash = s.nameHash[:0], s.resHash[:0]
	s.effectsSized(len(b.Descs), len(r.metrics))
	n := b.Len()
	j := 0
	for i := 0; i < n; i++ {
		if i%lookupChunk == 0 {
			// Between chunks no limiter is held: other requests' points
			// interleave with this batch's every lookupChunk points.
			s.release()
			s.lookupChunk(b, i, min(n, i+lookupChunk))
		}
		dec := s.found[i%lookupChunk]
		if dec == nil {
			dec = s.decide(b, i)
		}
		dec, dropped := s.replay(dec, b, i)
		if dropped {
			continue
		}
		if j != i {
			b.MovePoint(j, i)
		}
		if dec.changed {
			s.rewrite(b, j, dec)
			changed = true
		}
		if len(dec.strip) > 0 {
			s.filterAttrs(b, j, dec, dec.strip, dec.stripNames)
			changed = true
		}
		j++
	}
	s.release()
	s.flush(r.metrics)
	s.flushEffects(b, r.metrics)
	if j != n {
		changed = true
	}
	if changed {
		b.Truncate(j)
	}
	return changed, j
}

func (s *Scratch) flush(rs []rule) {
	if s.ignoredResource != 0 && s.rules.m != nil {
		s.rules.m.ResourceLabelsIgnored.Add(float64(s.ignoredResource))
	}
	s.ignoredResource = 0
	for i := range rs {
		c := &s.counts[i]
		if c[0] != 0 {
			rs[i].c.matched.Add(float64(c[0]))
		}
		if c[1] != 0 {
			rs[i].c.dropped.Add(float64(c[1]))
		}
		if c[2] != 0 {
			rs[i].c.changed.Add(float64(c[2]))
		}
		if c[3] != 0 {
			rs[i].c.exceeded.Add(float64(c[3]))
		}
		*c = [4]uint64{}
	}
}

// replay counts a point's events and reports whether it is dropped, and
// the decision whose rewrite the point gets. A strip_label limit that
// strips the point switches, at its position, to the decision of the
// series without the label (stripped): the rules after the limit count,
// drop, aggregate and relabel the stripped series, and its rewrite
// removes the label.
func (s *Scratch) replay(d *decision, b *signal.Metrics, i int) (*decision, bool) {
	rs := s.rules.metrics
	id, t, desc := b.SeriesID[i], b.Time[i], b.Desc[i]
	key := id ^ s.descKey[desc]
	s.forced, s.forcedIDs, s.forcedStale = s.forced[:0], s.forcedIDs[:0], false
	li, ai := 0, 0
	for k := 0; k < len(d.events); k++ {
		e := d.events[k]
		c := &s.counts[e.rule]
		switch e.kind {
		case evMatched:
			c[0]++
		case evChanged:
			c[2]++
			s.effect(e.rule, desc, true)
		case evDropped:
			c[1]++
			s.effect(e.rule, desc, false)
			if !rs[e.rule].shadow {
				if rs[e.rule].act == actRequire {
					s.refuse(&rs[e.rule])
				}
				return d, true
			}
		case evLimit:
			le := &d.lims[li]
			li++
			g := le.group
			if g == 0 {
				g = s.tenantGroup
			} else {
				g = mix(g ^ s.tenantGroup) // per metric within the tenant
			}
			lid := le.id
			if lid == 0 {
				lid = id
				if le.stripped {
					lid = s.strippedID(b, i, d)
				}
			}
			ru := &rs[e.rule]
			if s.hold(ru.lim).admitLocked(g, lid, s.now) {
				break
			}
			c[3]++
			s.exceeded(e.rule, desc)
			switch {
			case ru.exceed == exReport:
			case ru.exceed == exStrip:
				c[2]++
				s.effect(e.rule, desc, true)
				if !ru.shadow && le.strip != 0 {
					s.forced, s.forcedIDs = append(s.forced, e.rule), append(s.forcedIDs, le.strip)
					if d.epoch != s.rules.cache.epoch.Load() {
						s.forcedStale = true
					}
					key = s.strippedKey(b, i, d, key, e.rule)
					// Continue with the stripped series' decision: its
					// events are those of the rules after this one.
					d = s.stripped(b, i, key)
					k, li, ai = -1, 0, 0
				}
			case ru.exceed == exSample && le.sample:
			default:
				c[1]++
				s.effect(e.rule, desc, false)
				if !ru.shadow {
					s.refuse(ru)
					return d, true
				}
			}
		case evAgg:
			at := d.aggs[ai]
			ai++
			ru := &rs[e.rule]
			if ru.shadow {
				break
			}
			var taken bool
			if at.hist {
				taken = ru.agg.addHist(mix(at.key^s.tenantGroup), s.Tenant, at, mix(id^s.tenantGroup), t, b, i)
			} else if b.NumberType[i] == signal.ValueEmpty {
				// A point without a value (package prw's carrier of
				// exemplars sent alone) is no sample: not a 0, not a
				// counter reset. It goes on as it came.
			} else if v := b.Value(i); v != v {
				// Nor is a NaN: a stale marker ends its series in
				// Prometheus, and folded in it would make a sum, an avg
				// and every later total of its group NaN. It is taken
				// with the inputs and changes no output, as vmagent's
				// stream aggregation skips NaN.
				taken = true
			} else {
				taken = ru.agg.add(mix(at.key^s.tenantGroup), s.Tenant, at, mix(id^s.tenantGroup), t, v, at.cumulative)
			}
			if taken && !ru.keepInput {
				c[1]++
				s.effect(e.rule, desc, false)
				return d, true
			}
		case evProb:
			if pointHash(id, t) >= rs[e.rule].threshold {
				c[1]++
				s.effect(e.rule, desc, false)
				if !rs[e.rule].shadow {
					return d, true
				}
			}
		}
	}
	return d, false
}

// refuse counts a point that rule ru refused (Scratch.Refused).
func (s *Scratch) refuse(ru *rule) {
	if s.Refused == 0 {
		s.RefusedBy = ru.name
	}
	s.Refused++
}

// pointHash is a uniform 64-bit hash of a point, the same in every process.
func pointHash(id uint64, t int64) uint64 {
	return mix(id ^ bits.RotateLeft64(uint64(t)*0x9E3779B97F4A7C15, 23))
}

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// lookupChunk is how many points' decisions lookupChunk finds at once.
const lookupChunk = 256

// lookupChunk looks the cached decisions of points [from, to) up into
// s.found (nil: not cached), under one read lock of every cache shard
// rather than one per point: without an atomic operation between them the
// lookups' cache misses overlap.
func (s *Scratch) lookupChunk(b *signal.Metrics, from, to int) {
	c := s.rules.cache
	for k := range c.shards {
		c.shards[k].mu.RLock()
	}
	for i := from; i < to; i++ {
		s.found[i-from] = c.getLocked(s.seriesKey(b, i))
	}
	for k := range c.shards {
		c.shards[k].mu.RUnlock()
	}
}

// hold returns l locked, held until release or until another limiter is
// held: a batch locks its limiter once a chunk, not once a point. At most
// one limiter is held at a time, and nothing holding a cache or aggregate
// lock waits for a limiter, so holding one cannot deadlock.
func (s *Scratch) hold(l *limiter) *limiter {
	if s.held != l {
		s.release()
		l.mu.Lock()
		s.held = l
	}
	return l
}

// release unlocks the limiter hold locked, if any.
func (s *Scratch) release() {
	if s.held != nil {
		s.held.mu.Unlock()
		s.held = nil
	}
}

// seriesKey is the decision cache key of point i's series: its id, with
// what the Prometheus name depends on and the id does not hash (unit,
// type, and whether remote write sent it).
func (s *Scratch) seriesKey(b *signal.Metrics, i int) uint64 {
	k := b.SeriesID[i] ^ s.descKey[b.Desc[i]]
	if s.remoteWrite(b, i) {
		k ^= 0xD6E8FEB86659FD93
	}
	return k
}

// remoteWrite reports whether point i was sent by remote write: the query
// API shows it with exactly its stored name and attribute keys.
func (s *Scratch) remoteWrite(b *signal.Metrics, i int) bool {
	return s.remoteWriteScope(b, int(b.Scope[i]))
}

// remoteWriteScope reports whether scope sc of b is remote write's.
func (s *Scratch) remoteWriteScope(b *signal.Metrics, sc int) bool {
	if len(s.rwScope) != len(b.Scopes) { // outside ProcessMetrics
		return b.String(b.Scopes[sc].Name) == prw.ScopeName
	}
	return s.rwScope[sc]
}

func (s *Scratch) decide(b *signal.Metrics, i int) *decision {
	key := s.seriesKey(b, i)
	c := s.rules.cache
	if d := c.get(key); d != nil {
		return d
	}
	d := c.intern(s.evaluate(b, i, nil))
	c.put(key, d)
	return d
}

// stripped is the decision of point i's series when the strip_label
// limits s.forced strip it, cached under key (derived from the series'
// key and the limits). It depends on the series only, as every cached
// decision: which limits strip is per point (limiter state), and picks
// the decision, never changes one.
func (s *Scratch) stripped(b *signal.Metrics, i int, key uint64) *decision {
	c := s.rules.cache
	if d := c.get(key); d != nil {
		return d
	}
	d := s.evaluate(b, i, s.forced)
	// Replay has counted the events up to the last strip: they go, so
	// the stripped series' decisions of one metric are equal (interned).
	last := s.forced[len(s.forced)-1]
	k, nl, na := 0, 0, 0
	for ; k < len(d.events) && d.events[k].rule <= last; k++ {
		switch d.events[k].kind {
		case evLimit:
			nl++
		case evAgg:
			na++
		}
	}
	d.events, d.lims, d.aggs = d.events[k:], d.lims[nl:], d.aggs[na:]
	d = c.intern(d)
	c.put(key, d)
	return d
}

// evaluate runs the rules on point i's series. The strip_label limits
// (rule indexes) in forced strip it: the rules after one see the series
// without its label.
func (s *Scratch) evaluate(b *signal.Metrics, i int, forced []uint8) *decision {
	orig := s.seriesLabels(b, i)
	cur := orig
	names := s.names
	d := &decision{epoch: s.rules.cache.epoch.Load()}
	var lb *labels.Builder
	var stripped []string // the labels forced limits stripped so far
	for ri := range s.rules.metrics {
		ru := &s.rules.metrics[ri]
		ev := func(k uint8) { d.events = append(d.events, event{uint8(ri), k}) }
		m := matches(ru, cur, names)
		if m {
			ev(evMatched)
		}
		switch ru.act {
		case actDrop:
			if m {
				ev(evDropped)
			}
		case actKeep:
			if !m {
				ev(evDropped)
			}
		case actSampleOneIn:
			if m && mix(cur.Hash())%ru.oneIn != 0 {
				ev(evDropped)
			}
		case actSampleProb:
			if m {
				ev(evProb)
			}
		case actLimit:
			if m {
				strip := s.limitEvent(d, ru, cur, len(stripped) > 0, ev)
				if strip && !ru.shadow && slices.Contains(forced, uint8(ri)) {
					if lb == nil {
						lb = labels.NewBuilder(cur)
					} else {
						lb.Reset(cur)
					}
					cur = lb.Del(ru.label).Labels()
					stripped = append(stripped, ru.label)
				}
			}
		case actAggregate, actDownsample:
			if m {
				if at := aggTargetOf(ru, cur, &b.Descs[b.Desc[i]], b); at != nil {
					ev(evAgg)
					d.aggs = append(d.aggs, at)
					d.perSeries = d.perSeries || ru.act == actDownsample
				}
			}
		case actRequire:
			if m {
				for _, l := range ru.required {
					if cur.Get(l) == "" {
						ev(evDropped)
						break
					}
				}
			}
		case actRelabel:
			if !m {
				break
			}
			if lb == nil {
				lb = labels.NewBuilder(cur)
			} else {
				lb.Reset(cur)
			}
			if !relabelProcess(lb, ru) || !finishRelabel(lb, cur) {
				ev(evDropped)
				break
			}
			nl := lb.Labels()
			if labels.Equal(nl, cur) {
				break
			}
			ev(evChanged)
			if !ru.shadow {
				cur = nl
				names = []string{cur.Get(labels.MetricName)}
			}
		}
		if n := len(d.events); n > 0 && d.events[n-1].kind == evDropped && !ru.shadow {
			d.drop = true
			return d
		}
	}
	d.set, d.setIdx = s.set, s.set.index()
	if len(stripped) > 0 {
		if lb == nil {
			lb = labels.NewBuilder(orig)
		} else {
			lb.Reset(orig)
		}
		if labels.Equal(lb.Del(stripped...).Labels(), cur) {
			// Only strips: no labels held, shared with other series.
			d.stripNames = stripped
			for _, l := range stripped {
				d.strip = append(d.strip, s.rules.cache.labelID(l))
			}
			return d
		}
	}
	if !labels.Equal(cur, orig) {
		d.changed, d.rewritePlan = true, &rewritePlan{orig: orig, cur: cur}
		d.plan(d.set)
		for _, l := range d.removed {
			d.removedIDs = append(d.removedIDs, s.rules.cache.labelID(l))
		}

		if nn := cur.Get(labels.MetricName); nn != orig.Get(labels.MetricName) {
			d.newName = nn
		}
	}
	return d
}

// finishRelabel completes a relabel list's result in lb (cur: the labels
// before it): labels it added whose names begin with "__" (other than
// __name__) are removed, as vmagent removes them after relabeling, since
// Prometheus reserves such names and "__tmp" ones carry values between
// steps only. It reports false when the result has no metric name: a
// relabel that removes __name__ (or sets it to "") leaves a point no
// Prometheus stores (its scrape refuses it: "missing metric name") and
// no OTLP metric can carry, so the series is dropped.
func finishRelabel(lb *labels.Builder, cur labels.Labels) bool {
	lb.Range(func(l labels.Label) {
		if strings.HasPrefix(l.Name, "__") && l.Name != labels.MetricName && !cur.Has(l.Name) {
			lb.Del(l.Name)
		}
	})
	return lb.Get(labels.MetricName) != ""
}

// aggTargetOf is the group a series of labels cur (of metric desc in b)
// feeds in aggregate or downsample rule ru; nil for points that are not
// gauges or sums (they pass as they are).
func aggTargetOf(ru *rule, cur labels.Labels, desc *signal.MetricDesc, b *signal.Metrics) *aggTarget {
	hist := desc.Type == signal.MetricHistogram
	switch {
	case hist && !ru.agg.histOut, !hist && !ru.agg.scalarOut:
		return nil // no output of this rule takes the point: it passes
	case !hist && desc.Type != signal.MetricGauge && desc.Type != signal.MetricSum:
		return nil
	}
	if len(ru.inRelabel) > 0 {
		lb := labels.NewBuilder(cur)
		if !relabel.ProcessBuilder(lb, ru.inRelabel...) || !finishRelabel(lb, cur) {
			return nil // input_relabel_configs dropped it: not taken, it passes
		}
		cur = lb.Labels()
	}
	name := cur.Get(labels.MetricName)
	at := &aggTarget{cumulative: desc.Temporality != signal.TemporalityDelta, hist: hist}
	if desc.Type == signal.MetricGauge {
		at.cumulative = true
	}
	lb := labels.NewBuilder(cur)
	switch {
	case ru.act == actDownsample:
		lb.Del(labels.MetricName)
		at.desc = outDesc{name: strings.Clone(b.String(desc.Name)), unit: strings.Clone(b.String(desc.Unit)),
			description: strings.Clone(b.String(desc.Description)), typ: desc.Type, temporality: desc.Temporality, monotonic: desc.Monotonic}
	case len(ru.by) > 0:
		lb.Keep(ru.by...)
	default:
		lb.Del(labels.MetricName)
		lb.Del(ru.without...)
	}
	at.labels = lb.Labels()
	at.prefix = name + ":" + ru.aggPrefix
	at.key = mix(xxhash.Sum64String(at.prefix) ^ at.labels.Hash())
	if ru.act == actDownsample {
		// Every series its own group: sharing the target saves nothing,
		// and the series' decision holds it as long as it is cached.
		at.own = true
		return at
	}
	return ru.agg.intern(at)
}

// limitEvent adds limit rule ru's event for a series of labels cur to d;
// a series without the label of a per-label limit has none. It reports
// whether a strip_label limit would strip the series' label. A series a
// limit before stripped (stripped) counts by the series id it has without
// the label, as a series that arrived without it (limitEvent.stripped).
func (s *Scratch) limitEvent(d *decision, ru *rule, cur labels.Labels, stripped bool, ev func(uint8)) bool {
	var le limitEvent
	if ru.per != perTenant {
		le.group = xxhash.Sum64String(cur.Get(labels.MetricName)) | 1
	}
	if ru.per == perLabel {
		v := cur.Get(ru.label)
		if v == "" {
			return false
		}
		le.group = mix(le.group^xxhash.Sum64String(ru.label)) | 1
		le.id = xxhash.Sum64String(v) | 1
	}
	if ru.exceed == exSample {
		le.sample = mix(cur.Hash())%ru.oneIn == 0
	}
	if ru.per != perLabel {
		le.stripped = stripped
	}
	if ru.exceed == exStrip && cur.Get(ru.label) != "" && !s.set.fromResource(ru.label) {
		le.strip = s.rules.cache.labelID(ru.label)
	}
	ev(evLimit)
	d.lims = append(d.lims, le)
	return le.strip != 0
}

func matches(ru *rule, l labels.Labels, names []string) bool {
	for _, m := range ru.ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	if len(ru.nameMs) == 0 {
		return true
	}
	for _, n := range names {
		ok := true
		for _, m := range ru.nameMs {
			if !m.Matches(n) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// seriesLabels builds point i's labels as PromQL shows them, and sets
// s.names to its Prometheus names (one, or the base and its _bucket, _sum,
// _count for histograms and summaries).
func (s *Scratch) seriesLabels(b *signal.Metrics, i int) labels.Labels {
	desc := &b.Descs[b.Desc[i]]
	rw := s.remoteWrite(b, i)
	var base string
	s.names = s.names[:0]
	if rw {
		// Exactly the name sent; a histogram is a native histogram under
		// it, with no other series.
		base = strings.Clone(b.String(desc.Name))
		s.names = append(s.names, base)
	} else {
		base = promname.Base(b.String(desc.Name), b.String(desc.Unit), translatorType(desc))
		s.names = append(s.names, base)
		switch desc.Type {
		case signal.MetricHistogram:
			s.names = append(s.names, base+"_bucket", base+"_sum", base+"_count")
		case signal.MetricExponentialHistogram, signal.MetricSummary:
			s.names = append(s.names, base+"_sum", base+"_count")
		}
	}
	s.names = slices.Clone(s.names)
	s.sb.Reset()
	s.sb.Add(labels.MetricName, base)
	job, inst := s.addResourceLabels(&b.Common, b.Resources[b.Resource[i]].Attrs)
	s.set = setLabels{job, inst, desc.Type == signal.MetricHistogram, desc.Type == signal.MetricSummary, rw}
	s.kv = appendPointLabels(s.kv[:0], &b.Common, b.Attr[i], s.set)
	promname.JoinCollisions(&s.sb, s.kv)
	s.sb.Sort()
	return s.sb.Labels()
}

// addResourceLabels adds the labels sluice derives from resource attributes
// res (service_name and job from service.name and service.namespace,
// instance from service.instance.id) to s.sb, and says whether job and
// instance were set.
func (s *Scratch) addResourceLabels(c *signal.Common, res signal.Range) (job, instance bool) {
	svc := attrStr(c, res, "service.name")
	if svc != "" {
		s.sb.Add(promname.LabelServiceName, svc)
		j := svc
		if ns := attrStr(c, res, "service.namespace"); ns != "" {
			j = ns + "/" + svc
		}
		s.sb.Add(promname.LabelJob, j)
	}
	inst := attrStr(c, res, "service.instance.id")
	if inst != "" {
		s.sb.Add(promname.LabelInstance, inst)
	}
	return svc != "", inst != ""
}

// appendPointLabels appends the labels of the attributes in r, sorted by
// label then key (the order promname.JoinCollisions needs). job, instance,
// histogram and summary say which labels sluice sets on the series (see
// promname.Reclaim).
func appendPointLabels(kv []attrLabel, c *signal.Common, r signal.Range, set setLabels) []attrLabel {
	for a := r.Start; a < r.End; a++ {
		key := c.Keys.Name(c.Attrs.Key[a])
		l := set.label(key)
		if l == "" {
			continue
		}
		kv = append(kv, attrLabel{Label: l, Key: key, Value: strings.Clone(promname.AttrValue(c, int(a)))})
	}
	promname.SortAttrLabels(kv)
	return kv
}

func attrStr(c *signal.Common, r signal.Range, key string) string {
	if a := c.FindAttr(r, key); a >= 0 {
		return strings.Clone(promname.AttrValue(c, a))
	}
	return ""
}

func translatorType(d *signal.MetricDesc) otlptranslator.MetricType {
	switch d.Type {
	case signal.MetricGauge:
		return otlptranslator.MetricTypeGauge
	case signal.MetricSum:
		if d.Monotonic {
			return otlptranslator.MetricTypeMonotonicCounter
		}
		return otlptranslator.MetricTypeNonMonotonicCounter
	case signal.MetricHistogram:
		return otlptranslator.MetricTypeHistogram
	case signal.MetricExponentialHistogram:
		return otlptranslator.MetricTypeExponentialHistogram
	case signal.MetricSummary:
		return otlptranslator.MetricTypeSummary
	}
	return otlptranslator.MetricTypeUnknown
}

// label is the label of the attribute key on a series with these set
// labels.
func (set setLabels) label(key string) string {
	if set.rw {
		return key
	}
	return promname.Reclaim(key, promname.LabelName(key), set.job, set.instance, set.histogram, set.summary)
}

// fromResource reports whether label l comes from the resource.
func (set setLabels) fromResource(l string) bool {
	switch l {
	case promname.LabelJob, promname.LabelServiceName:
		return set.job
	case promname.LabelInstance:
		return set.instance
	}
	return false
}
