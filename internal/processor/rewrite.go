package processor

import (
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
		l := d.set.label(c.Keys.Name(c.Attrs.Key[a]))
		if l == "" || d.cur.Get(l) == d.orig.Get(l) && d.cur.Has(l) {
			c.Attrs.Append(c.Attrs.Key[a], c.Attrs.Type[a], c.Attrs.Val[a])
		}
	}
	ignored := false
	d.cur.Range(func(l labels.Label) {
		if l.Name == labels.MetricName {
			return
		}
		if d.set.fromResource(l.Name) {
			if d.orig.Get(l.Name) != l.Value {
				ignored = true
			}
			return
		}
		if d.orig.Has(l.Name) && d.orig.Get(l.Name) == l.Value {
			return
		}
		c.Attrs.Append(c.Keys.IDString(l.Name), signal.ValueString, uint64(c.AppendString(l.Value)))
	})
	d.orig.Range(func(l labels.Label) {
		if d.set.fromResource(l.Name) && !d.cur.Has(l.Name) {
			ignored = true
		}
	})
	if ignored {
		s.ignoredResource++
	}
	out.Attr[j] = signal.Range{Start: start, End: uint32(c.Attrs.Len())}
}
