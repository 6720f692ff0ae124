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

// copyChanged appends point i of b to s.Out with the labels d.cur: an
// attribute whose label keeps its value stays as it was (key and type), a
// removed label removes its attributes, a new or changed label becomes a
// string attribute named after the label, and a new __name__ renames the
// metric. job, instance and service_name come from the resource and are
// not rewritten where they come from the resource (counted; docs/rules.md).
func (s *Scratch) copyChanged(b *signal.Metrics, i int, d *decision) {
	out := &s.Out
	out.CopyFrom(b, i)
	j := out.Len() - 1
	c := &out.Common
	if d.newName != "" {
		di := out.Desc[j]
		k := renameKey{di, d.newName}
		if s.renamed == nil {
			s.renamed = map[renameKey]uint32{}
		}
		nd, ok := s.renamed[k]
		if !ok {
			desc := out.Descs[di]
			desc.Name = c.AppendString(d.newName)
			out.Descs = append(out.Descs, desc)
			nd = uint32(len(out.Descs) - 1)
			s.renamed[k] = nd
		}
		out.Desc[j] = nd
	}
	r := out.Attr[j]
	start := uint32(c.Attrs.Len())
	for a := r.Start; a < r.End; a++ {
		if len(d.removed) > 0 {
			if l := s.outLabel(c, c.Attrs.Key[a], d.set); l != "" && slices.Contains(d.removed, l) {
				continue
			}
		}
		c.Attrs.Append(c.Attrs.Key[a], c.Attrs.Type[a], c.Attrs.Val[a])
	}
	for _, l := range d.added {
		c.Attrs.Append(c.Keys.IDString(l.Name), signal.ValueString, uint64(c.AppendString(l.Value)))
	}
	if d.ignored {
		s.ignoredResource++
	}
	out.Attr[j] = signal.Range{Start: start, End: uint32(c.Attrs.Len())}
}

// plan works out, once per series, which point labels a relabel removed
// or changed (their attributes go) and which it added or changed (they
// become string attributes), and whether it touched a label that comes
// from the resource.
func (d *decision) plan() {
	d.cur.Range(func(l labels.Label) {
		if l.Name == labels.MetricName {
			return
		}
		if d.set.fromResource(l.Name) {
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
		if d.set.fromResource(l.Name) {
			d.ignored = true
			return
		}
		d.removed = append(d.removed, l.Name)
	})
}

// outLabel is d.set.label of key k of s.Out, cached per key for the batch
// (LabelName's shared map costs more than the rest of a point's copy).
func (s *Scratch) outLabel(c *signal.Common, k signal.KeyID, set setLabels) string {
	if int(k) >= len(s.keyLabel) {
		s.keyLabel = append(s.keyLabel, make([]keyLabel, int(k)+1-len(s.keyLabel))...)
	}
	kl := &s.keyLabel[k]
	if !kl.known || kl.set != set {
		*kl = keyLabel{label: set.label(c.Keys.Name(k)), set: set, known: true}
	}
	return kl.label
}

type keyLabel struct {
	label string
	set   setLabels
	known bool
}
