package signal_test

import (
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

// descVariant is one descriptor content; descSource builds a batch that
// holds each of them (its own copy, as every decoded request does) with
// one point each.
type descVariant struct {
	name, desc, unit string
	typ              signal.MetricType
	temp             signal.Temporality
	mono             bool
	meta             string // a metadata attribute's value, "" for none
}

func descSource(vs []descVariant) *signal.Metrics {
	src := new(signal.Metrics)
	c := &src.Common
	c.Resources = append(c.Resources, signal.Resource{})
	c.Scopes = append(c.Scopes, signal.Scope{})
	for i, v := range vs {
		start := uint32(c.Attrs.Len())
		if v.meta != "" {
			c.Attrs.Append(c.Keys.IDString("help"), signal.ValueString, uint64(c.AppendString(v.meta)))
		}
		src.Descs = append(src.Descs, signal.MetricDesc{
			Name: c.AppendString(v.name), Description: c.AppendString(v.desc), Unit: c.AppendString(v.unit),
			Type: v.typ, Temporality: v.temp, Monotonic: v.mono,
			Metadata: signal.Range{Start: start, End: uint32(c.Attrs.Len())},
		})
		p := src.AppendPoint(uint32(i), 0, 0)
		src.Time[p] = int64(i + 1)
	}
	return src
}

// descOf is point p's descriptor content as a descVariant.
func descOf(m *signal.Metrics, p int) descVariant {
	d := m.Descs[m.Desc[p]]
	v := descVariant{
		name: m.String(d.Name), desc: m.String(d.Description), unit: m.String(d.Unit),
		typ: d.Type, temp: d.Temporality, mono: d.Monotonic,
	}
	if d.Metadata.Len() > 0 {
		v.meta = m.AttrString(int(d.Metadata.Start))
	}
	return v
}

// TestCopySharesDescs: copies into a batch with ShareAttrSets (the lake's
// metrics partitions) keep one descriptor per distinct content, however
// many source batches bring it, and every point keeps its own descriptor's
// content: descriptors that differ in any field (name, description, unit,
// type, temporality, monotonic, metadata) stay apart. Without
// ShareAttrSets each source batch's descriptors are copied as before.
// After Reset the batch starts over.
func TestCopySharesDescs(t *testing.T) {
	base := descVariant{name: "http_requests_total", desc: "Requests.", unit: "1", typ: signal.MetricSum, temp: signal.TemporalityCumulative, mono: true, meta: "counter"}
	vs := []descVariant{base}
	for _, change := range []func(*descVariant){
		func(v *descVariant) { v.name = "http_requests_totaL" },
		func(v *descVariant) { v.desc = "Requests served." },
		func(v *descVariant) { v.unit = "" },
		func(v *descVariant) { v.typ = signal.MetricGauge },
		func(v *descVariant) { v.temp = signal.TemporalityDelta },
		func(v *descVariant) { v.mono = false },
		func(v *descVariant) { v.meta = "gauge" },
		func(v *descVariant) { v.meta = "" },
		func(v *descVariant) { v.desc, v.unit = "", "" },
	} {
		v := base
		change(&v)
		vs = append(vs, v)
	}
	// Many short names, more than the table's first size.
	for i := range 200 {
		vs = append(vs, descVariant{name: fmt.Sprintf("m%d", i), typ: signal.MetricGauge})
	}
	for _, share := range []bool{true, false} {
		dst := new(signal.Metrics)
		dst.ShareAttrSets = share
		for round := range 2 {
			const batches = 5
			for b := range batches {
				// Each batch in another order (11 is prime to len(vs)): CopyRows
				// and CopyFrom.
				order := make([]descVariant, len(vs))
				for i := range vs {
					order[i] = vs[(i*11+b*13)%len(vs)]
				}
				src := descSource(order)
				if b%2 == 0 {
					dst.CopyRows(src, signal.Rows{From: 0, To: src.Len()})
				} else {
					for i := range src.Len() {
						dst.CopyFrom(src, i)
					}
				}
				for i := range src.Len() {
					p := dst.Len() - src.Len() + i
					if got, want := descOf(dst, p), order[i]; got != want {
						t.Fatalf("share %v round %d batch %d point %d: descriptor %+v, want %+v", share, round, b, i, got, want)
					}
				}
			}
			want := len(vs)
			if !share {
				want = batches * len(vs)
			}
			if len(dst.Descs) != want {
				t.Fatalf("share %v round %d: %d descriptors, want %d", share, round, len(dst.Descs), want)
			}
			dst.Reset()
		}
	}
}
