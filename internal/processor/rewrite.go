package processor

import (
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/sluice-dev/sluice/internal/signal"
)

func relabelProcess(lb *labels.Builder, ru *rule) bool {
	return relabel.ProcessBuilder(lb, ru.relabel...)
}

// rewrite gives point j of b, compacted in place, the labels d.cur: an
// attribute whose label keeps its value stays as it was (key and type), a
// removed label removes its attributes, a new or changed label becomes a
// string attribute named after the label, and a new __name__ renames the
// metric. job, instance and service_name come from
// the resource and are not rewritten where they come from the resource
// (counted; docs/rules.md).
func (s *Scratch) rewrite(b *signal.Metrics, j int, d *decision) {
	c := &b.Common
	if d.newName != "" {
		di := b.Desc[j]
		k := renameKey{di, d.newName}
		if s.renamed == nil {
			s.renamed = map[renameKey]uint32{}
		}
		nd, ok := s.renamed[k]
		if !ok {
			desc := b.Descs[di]
			desc.Name = c.AppendString(d.newName)
			b.Descs = append(b.Descs, desc)
			nd = uint32(len(b.Descs) - 1)
			s.renamed[k] = nd
		}
		b.Desc[j] = nd
	}
	s.filterAttrs(b, j, d, d.removedIDs, d.removed)
	r := b.Attr[j]
	at := &c.Attrs
	if len(d.added) > 0 {
		start := uint32(at.Len())
		at.Key = append(at.Key, at.Key[r.Start:r.End]...)
		at.Type = append(at.Type, at.Type[r.Start:r.End]...)
		at.Val = append(at.Val, at.Val[r.Start:r.End]...)
		for _, l := range d.added {
			at.Append(c.Keys.IDString(l.Name), signal.ValueString, uint64(c.AppendString(l.Value)))
		}
		r = signal.Range{Start: start, End: uint32(at.Len())}
	}
	if d.ignored {
		s.ignoredResource++
	}
	b.Attr[j] = r
}

// filterAttrs removes from point j the attributes whose labels have the
// ids in remove (names: the same labels by name), in place inside the
// point's own range (every point of a decoded batch has its own).
func (s *Scratch) filterAttrs(b *signal.Metrics, j int, d *decision, remove []uint32, names []string) {
	if len(remove) == 0 {
		return
	}
	c := &b.Common
	if d.epoch != s.rules.cache.epoch.Load() {
		s.filterAttrsByName(b, j, d, names) // the ids were numbered before a reset
		return
	}
	if g := s.rules.cache.idGen.Load(); g != s.idGen {
		s.idGen = g // a label got an id since the lookups cached in keyLabel
		clear(s.keyLabel)
	}
	at := &c.Attrs
	r := b.Attr[j]
	w := r.Start
	for a := r.Start; a < r.End; a++ {
		if l := s.outLabelID(c, at.Key[a], d); l != 0 && slices.Contains(remove, l) {
			continue
		}
		if w != a {
			at.Key[w], at.Type[w], at.Val[w] = at.Key[a], at.Type[a], at.Val[a]
		}
		w++
	}
	b.Attr[j].End = w
}

func (s *Scratch) filterAttrsByName(b *signal.Metrics, j int, d *decision, names []string) {
	at := &b.Attrs
	r := b.Attr[j]
	w := r.Start
	for a := r.Start; a < r.End; a++ {
		if slices.Contains(names, d.set.label(b.Keys.Name(at.Key[a]))) {
			continue
		}
		if w != a {
			at.Key[w], at.Type[w], at.Val[w] = at.Key[a], at.Type[a], at.Val[a]
		}
		w++
	}
	b.Attr[j].End = w
}

// plan works out, once per series, which point labels a relabel removed
// or changed (their attributes go) and which it added or changed (they
// become string attributes), and whether it touched a label that comes
// from the resource.
func (d *rewritePlan) plan(set setLabels) {
	d.cur.Range(func(l labels.Label) {
		if l.Name == labels.MetricName {
			return
		}
		if set.fromResource(l.Name) {
			if d.orig.Get(l.Name) != l.Value {
				d.ignored = true
			}
			return
		}
		if d.orig.Has(l.Name) && d.orig.Get(l.Name) == l.Value {
			return
		}
		d.added = append(d.added, l)
		if d.orig.Has(l.Name) {
			d.removed = append(d.removed, l.Name)
		}
	})
	d.orig.Range(func(l labels.Label) {
		if l.Name == labels.MetricName || d.cur.Has(l.Name) {
			return
		}
		if set.fromResource(l.Name) {
			d.ignored = true
			return
		}
		d.removed = append(d.removed, l.Name)
	})
}

// outLabelID is the label id (see labelID) of key k of the batch being
// rewritten on a series of d's label set, cached per key and set for the
// batch (LabelName's shared map costs more than the rest of a point's
// rewrite; a batch mixes series of several sets).
func (s *Scratch) outLabelID(c *signal.Common, k signal.KeyID, d *decision) uint32 {
	i := int(k)<<5 | int(d.setIdx)
	if i >= len(s.keyLabel) {
		s.keyLabel = append(s.keyLabel, make([]keyLabel, i+32-len(s.keyLabel))...)
	}
	kl := &s.keyLabel[i]
	if !kl.known {
		kl.known = true
		if l := d.set.label(c.Keys.Name(k)); l != "" {
			kl.id = s.rules.cache.lookupID(l) // 0 when no decision removes it
		}
	}
	return kl.id
}

type keyLabel struct {
	id    uint32 // 0: the key is no label
	known bool
}

// index numbers the 32 sets.
func (set setLabels) index() uint8 {
	var i uint8
	for b, on := range [5]bool{set.job, set.instance, set.histogram, set.summary, set.rw} {
		if on {
			i |= 1 << b
		}
	}
	return i
}
