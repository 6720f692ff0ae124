package signal

import "testing"

// TestDescEqual: the compare behind the descriptor table (internDesc) tells
// descriptors apart by every field, which TestCopySharesDescs sees only
// when two hashes meet in the table.
func TestDescEqual(t *testing.T) {
	type variant struct {
		name, desc, unit, meta string
		typ                    MetricType
		temp                   Temporality
		mono                   bool
	}
	base := variant{"up", "Up.", "1", "gauge", MetricSum, TemporalityCumulative, true}
	vs := []variant{base}
	for _, change := range []func(*variant){
		func(v *variant) { v.name = "uP" },
		func(v *variant) { v.desc = "" },
		func(v *variant) { v.unit = "s" },
		func(v *variant) { v.meta = "counter" },
		func(v *variant) { v.meta = "" },
		func(v *variant) { v.typ = MetricGauge },
		func(v *variant) { v.temp = TemporalityDelta },
		func(v *variant) { v.mono = false },
	} {
		v := base
		change(&v)
		vs = append(vs, v)
	}
	src := new(Metrics)
	c := &src.Common
	c.Resources = append(c.Resources, Resource{})
	c.Scopes = append(c.Scopes, Scope{})
	for i, v := range vs {
		start := uint32(c.Attrs.Len())
		if v.meta != "" {
			c.Attrs.Append(c.Keys.IDString("type"), ValueString, uint64(c.AppendString(v.meta)))
		}
		src.Descs = append(src.Descs, MetricDesc{
			Name: c.AppendString(v.name), Description: c.AppendString(v.desc), Unit: c.AppendString(v.unit),
			Type: v.typ, Temporality: v.temp, Monotonic: v.mono, Metadata: Range{Start: start, End: uint32(c.Attrs.Len())},
		})
		src.AppendPoint(uint32(i), 0, 0)
	}
	dst := new(Metrics)
	dst.ShareAttrSets = true
	dst.CopyRows(src, Rows{From: 0, To: src.Len()})
	if len(dst.Descs) != len(vs) {
		t.Fatalf("%d descriptors copied, want %d", len(dst.Descs), len(vs))
	}
	for i := range vs {
		for j := range vs {
			c := dst.contentOf(&dst.Descs[dst.Desc[j]])
			if got := dst.descIs(&dst.Descs[dst.Desc[i]], &c); got != (i == j) {
				t.Errorf("descIs(%+v, %+v) = %v", vs[i], vs[j], got)
			}
		}
	}
}
