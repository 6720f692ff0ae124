package processor

import (
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/sluice-dev/sluice/internal/signal"
)

// A strip_label limit names the series a point becomes without its label
// with signal's series id (signal.SeriesID, part of the lake's file
// format): a later limit then counts a stripped series and one that
// arrived without the label as one. TestStrippedSeriesID checks it against
// signal's ids.

// Odd multipliers that mix a rule number into a decision's cache key.
const (
	keyP1 = 0x9E3779B97F4A7C15
	keyP3 = 0x165667B19E3779F9
)

// strippedSeriesID is the series id of point i of b without the point
// attributes whose labels (on a series with set labels set) are in strip.
func strippedSeriesID(b *signal.Metrics, i int, set setLabels, strip []string) uint64 {
	nh := xxhash.Sum64(b.Bytes(b.Descs[b.Desc[i]].Name))
	rh := signal.SeriesResource(attrSetHash(&b.Common, b.Resources[b.Resource[i]].Attrs, set, nil))
	ph := attrSetHash(&b.Common, b.Attr[i], set, strip)
	return signal.SeriesID(nh, rh, ph)
}

// attrSetHash is signal's order-independent hash of the attributes in r,
// but for those whose labels are in strip.
func attrSetHash(c *signal.Common, r signal.Range, set setLabels, strip []string) uint64 {
	var sum uint64
	a := &c.Attrs
	for i := r.Start; i < r.End; i++ {
		if len(strip) > 0 && slices.Contains(strip, set.label(c.Keys.Name(a.Key[i]))) {
			continue
		}
		sum += c.AttrHash(i)
	}
	return sum
}

// strippedID is the series id of point i (of a series of decision d)
// without the labels the strip_label limits s.forced removed. Attribute
// labels are found by id, cached per key for the batch (outLabelID), and
// the name and resource hashes once per descriptor and resource: this runs
// for every stripped point.
func (s *Scratch) strippedID(b *signal.Metrics, i int, d *decision) uint64 {
	c := s.rules.cache
	if s.forcedStale || d.epoch != c.epoch.Load() {
		return strippedSeriesID(b, i, d.set, s.stripNamesOf()) // ids numbered before a reset
	}
	if g := c.idGen.Load(); g != s.idGen {
		s.idGen = g // a label got an id since the lookups cached in keyLabel
		clear(s.keyLabel)
	}
	di, ri := b.Desc[i], b.Resource[i]
	if int(di) >= len(s.nameHash) {
		s.nameHash = append(s.nameHash, make([]uint64, int(di)+1-len(s.nameHash))...)
	}
	nh := s.nameHash[di]
	if nh == 0 {
		nh = xxhash.Sum64(b.Bytes(b.Descs[di].Name))
		s.nameHash[di] = nh
	}
	if int(ri) >= len(s.resHash) {
		s.resHash = append(s.resHash, make([]uint64, int(ri)+1-len(s.resHash))...)
	}
	rh := s.resHash[ri]
	if rh == 0 {
		rh = signal.SeriesResource(attrSetHash(&b.Common, b.Resources[ri].Attrs, d.set, nil))
		s.resHash[ri] = rh
	}
	cm := &b.Common
	a := &cm.Attrs
	r := b.Attr[i]
	var ph uint64
	for k := r.Start; k < r.End; k++ {
		if l := s.outLabelID(cm, a.Key[k], d); l != 0 && slices.Contains(s.forcedIDs, l) {
			continue
		}
		ph += cm.AttrHash(k)
	}
	return signal.SeriesID(nh, rh, ph)
}

// stripNamesOf is the labels of the strip_label limits replay switched
// at for the point (s.forced).
func (s *Scratch) stripNamesOf() []string {
	names := s.forcedNames[:0]
	for _, r := range s.forced {
		names = append(names, s.rules.metrics[r].label)
	}
	s.forcedNames = names
	return names
}

// strippedKey is the cache key of the decision of point i's series once
// the strip_label limits s.forced (the last one: rule) stripped it, from
// decision d, cached under key. When no relabel comes before rule, the
// labels the rules after it see are those of the series the point becomes
// without the stripped labels, so the key is that series' (with the
// limits): the series a strip folds into one share one decision. Otherwise
// it is derived from the point's own series key.
func (s *Scratch) strippedKey(b *signal.Metrics, i int, d *decision, key uint64, rule uint8) uint64 {
	rs := s.rules.metrics
	for r := range rule {
		if rs[r].act == actRelabel && !rs[r].shadow {
			return mix(key ^ (uint64(rule)+1)*keyP1)
		}
	}
	k := s.strippedID(b, i, d) ^ s.descKey[b.Desc[i]]
	for _, r := range s.forced {
		k = mix(k ^ (uint64(r)+1)*keyP3)
	}
	return k
}
