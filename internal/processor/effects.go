package processor

import (
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/promname"
	"github.com/sluice-dev/sluice/internal/signal"
)

// DefaultMaxRuleEffects bounds the (rule, tenant, metric name) entries of
// the effects table (processors.max_rule_effects).
const DefaultMaxRuleEffects = 10_000

// RuleEffect is what one metric rule did to the points of one tenant's
// metric, as PromQL names it before the rules (the base name of a
// histogram or summary), since start-up: points dropped and points
// changed, counted as sluice_processor_rule_dropped_total and
// sluice_processor_rule_changed_total count them (a shadow rule's: what it
// would have done), and for a limit rule the points of series over its
// limit whatever its exceed_action (sluice_processor_limit_exceeded_total),
// so that a limit that only reports names the metrics over it.
type RuleEffect struct {
	Rule, Tenant, Metric       string
	Dropped, Changed, Exceeded uint64
}

// effects is the bounded table of RuleEffect, kept in Metrics across
// reloads (by rule name). Entries are keyed by a 64-bit hash of rule,
// tenant and metric descriptor; strings are made once per entry.
type effects struct {
	mu       sync.Mutex
	max      int
	m        map[uint64]*RuleEffect
	overflow prometheus.Counter
}

// effCount is one (descriptor, rule) cell of a batch's scratch counts.
type effCount struct{ dropped, changed, exceeded uint32 }

// SetMaxRuleEffects bounds the effects table to n entries (n <= 0: the
// default); entries already in it are kept.
func (m *Metrics) SetMaxRuleEffects(n int) {
	if n <= 0 {
		n = DefaultMaxRuleEffects
	}
	m.eff.mu.Lock()
	m.eff.max = n
	m.eff.mu.Unlock()
}

// RuleEffects returns every entry of the effects table, of tenant only
// when tenant is not empty, in no particular order.
func (m *Metrics) RuleEffects(tenant string) []RuleEffect {
	m.eff.mu.Lock()
	defer m.eff.mu.Unlock()
	out := make([]RuleEffect, 0, len(m.eff.m))
	for _, e := range m.eff.m {
		if tenant == "" || e.Tenant == tenant {
			out = append(out, *e)
		}
	}
	return out
}

// effectsSized readies s.eff for a batch of nDesc descriptors and nRules
// rules; every cell is zero (flushEffects zeroes what a batch touched).
func (s *Scratch) effectsSized(nDesc, nRules int) {
	n := nDesc * nRules
	if cap(s.eff) < n {
		s.eff = make([]effCount, n)
	}
	s.eff = s.eff[:n]
	s.effTouched = s.effTouched[:0]
}

// effect counts one point of descriptor desc that rule dropped (changed
// false) or changed.
func (s *Scratch) effect(rule uint8, desc uint32, changed bool) {
	c := s.effCell(rule, desc)
	if changed {
		c.changed++
	} else {
		c.dropped++
	}
}

// exceeded counts one point of descriptor desc whose series is over limit
// rule's limit.
func (s *Scratch) exceeded(rule uint8, desc uint32) { s.effCell(rule, desc).exceeded++ }

// effCell is the batch's (descriptor, rule) cell, noted as touched.
func (s *Scratch) effCell(rule uint8, desc uint32) *effCount {
	i := int(desc)*len(s.rules.metrics) + int(rule)
	c := &s.eff[i]
	if *c == (effCount{}) {
		s.effTouched = append(s.effTouched, int32(i))
	}
	return c
}

// flushEffects adds the batch's counts to the table, under one lock, and
// zeroes them. A new entry past the bound is not made; its points are
// counted in sluice_processor_rule_effects_overflow_points_total.
func (s *Scratch) flushEffects(b *signal.Metrics, rs []rule) {
	if len(s.effTouched) == 0 {
		return
	}
	m := s.rules.m
	nr := len(rs)
	e := &m.eff
	var over uint64
	e.mu.Lock()
	if e.m == nil {
		e.m = map[uint64]*RuleEffect{}
	}
	rw := func(d int) bool { return d < len(s.descRW) && s.descRW[d] }
	for _, i := range s.effTouched {
		c := s.eff[i]
		s.eff[i] = effCount{}
		desc, ru := int(i)/nr, &rs[int(i)%nr]
		d := &b.Descs[desc]
		k := mix(ru.nameHash^s.tenantGroup*0x9E3779B97F4A7C15) ^ mix(xxhash.Sum64(b.Bytes(d.Name))^s.descKey[desc])
		if rw(desc) {
			k ^= 0xD6E8FEB86659FD93
		}
		r := e.m[k]
		if r == nil {
			if len(e.m) >= e.max {
				over += uint64(c.dropped) + uint64(c.changed)
				continue
			}
			// The metric as the query API names it: a remote-write one
			// exactly as stored.
			name := b.String(d.Name)
			if !rw(desc) {
				name = promname.Base(name, b.String(d.Unit), translatorType(d))
			}
			r = &RuleEffect{Rule: ru.name, Tenant: strings.Clone(s.Tenant), Metric: strings.Clone(name)}
			e.m[k] = r
		}
		r.Dropped += uint64(c.dropped)
		r.Changed += uint64(c.changed)
		r.Exceeded += uint64(c.exceeded)
	}
	e.mu.Unlock()
	s.effTouched = s.effTouched[:0]
	if over != 0 {
		e.overflow.Add(float64(over))
	}
}

// remoteWriteDescs sets s.descRW: which descriptors of b hold remote-write
// points, by scope when the batch is all remote write or none (the usual
// batch), else by a look at its points. Called before the points move.
func (s *Scratch) remoteWriteDescs(b *signal.Metrics) {
	all, none := len(b.Scopes) > 0, true
	for sc := range b.Scopes {
		if s.remoteWriteScope(b, sc) {
			none = false
		} else {
			all = false
		}
	}
	s.descRW = append(s.descRW[:0], make([]bool, len(b.Descs))...)
	switch {
	case none:
	case all:
		for d := range s.descRW {
			s.descRW[d] = true
		}
	default:
		for i := range b.Len() {
			if s.remoteWrite(b, i) {
				s.descRW[b.Desc[i]] = true
			}
		}
	}
}
