package signal

import "bytes"

// descTable finds the descriptors of a batch with ShareAttrSets (the lake's
// metrics partitions) by content, so that copies into it give equal
// descriptors one index: every decoded request brings its own descriptor
// of each metric it holds (a remote-write request of 100 samples over 50
// metrics, 50), which a partition would otherwise keep once per request,
// with their name bytes in the arena, and the encoder would sort by name
// and compare again per file.
type descTable struct {
	gen   uint64   // the batch's Common.gen the slots index
	slots []uint32 // descriptor index + 1, 0 empty; a power of two long
	n     int
}

// sharedDesc returns the index of a descriptor of m equal to src's sd (name,
// description, unit, type, temporality, monotonic and metadata), copying sd
// when m has none. The copier is bound to src.
func (m *Metrics) sharedDesc(src *Metrics, sd *MetricDesc) uint32 {
	// The metadata first: with shared sets, equal metadata is one Range.
	meta := m.cp.attrs(&m.Common, sd.Metadata)
	return m.internDesc(descContent{
		name: src.Bytes(sd.Name), desc: src.Bytes(sd.Description), unit: src.Bytes(sd.Unit),
		typ: sd.Type, temp: sd.Temporality, mono: sd.Monotonic, meta: meta,
	})
}

// InternGaugeDesc returns the index of a gauge descriptor named name, with
// no description, unit or metadata (a remote-write 1.0 metric's), appending
// it to m when m has none, or always when m does not share sets (see
// ShareAttrSets): direct appends into a lake partition keep one descriptor
// per metric, as copies into it do.
func (m *Metrics) InternGaugeDesc(name []byte) uint32 {
	if !m.ShareAttrSets {
		m.Descs = append(m.Descs, MetricDesc{Name: m.AppendBytes(name), Type: MetricGauge})
		return uint32(len(m.Descs) - 1)
	}
	return m.internDesc(descContent{name: name, typ: MetricGauge})
}

// descContent is what makes two descriptors equal; meta is the metadata
// set as m holds it.
type descContent struct {
	name, desc, unit []byte
	typ              MetricType
	temp             Temporality
	mono             bool
	meta             Range
}

// internDesc returns the index of m's descriptor of content c, appending
// one when m has none.
func (m *Metrics) internDesc(c descContent) uint32 {
	d := &m.Common
	t := &m.descTab
	if t.gen != d.gen {
		clear(t.slots)
		t.n, t.gen = 0, d.gen
	}
	if c.meta.Len() == 0 {
		c.meta = Range{}
	}
	h := c.hash()
	if 2*(t.n+1) > len(t.slots) {
		t.rehash(m)
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := t.slots[i]
		if v == 0 {
			m.Descs = append(m.Descs, MetricDesc{
				Name:        appendStr(d, c.name),
				Description: appendStr(d, c.desc),
				Unit:        appendStr(d, c.unit),
				Type:        c.typ,
				Temporality: c.temp,
				Monotonic:   c.mono,
				Metadata:    c.meta,
			})
			t.slots[i] = uint32(len(m.Descs))
			t.n++
			return uint32(len(m.Descs) - 1)
		}
		if int(v) > len(m.Descs) {
			// The batch's descriptors were cut back without a Reset
			// (a decoder's rollback): index what is left.
			t.rehash(m)
			return m.internDesc(c)
		}
		if m.descIs(&m.Descs[v-1], &c) {
			return v - 1
		}
	}
}

func appendStr(d *Common, b []byte) Str {
	if len(b) == 0 {
		return 0
	}
	return d.AppendBytes(b)
}

// contentOf is descriptor dd's content.
func (m *Metrics) contentOf(dd *MetricDesc) descContent {
	c := descContent{
		name: m.Bytes(dd.Name), desc: m.Bytes(dd.Description), unit: m.Bytes(dd.Unit),
		typ: dd.Type, temp: dd.Temporality, mono: dd.Monotonic, meta: dd.Metadata,
	}
	if c.meta.Len() == 0 {
		c.meta = Range{}
	}
	return c
}

// descIs reports whether m's descriptor dd has content c.
func (m *Metrics) descIs(dd *MetricDesc, c *descContent) bool {
	ddMeta := dd.Metadata
	if ddMeta.Len() == 0 {
		ddMeta = Range{}
	}
	return dd.Type == c.typ && dd.Temporality == c.temp && dd.Monotonic == c.mono &&
		ddMeta == c.meta && bytes.Equal(m.Bytes(dd.Name), c.name) &&
		bytes.Equal(m.Bytes(dd.Description), c.desc) && bytes.Equal(m.Bytes(dd.Unit), c.unit)
}

// rehash doubles the table (at least 64 slots, at most half full) and
// indexes all of m's descriptors anew.
func (t *descTable) rehash(m *Metrics) {
	n := max(64, 2*len(t.slots))
	for n < 2*(len(m.Descs)+1) {
		n *= 2 // descriptors appended by other means than internDesc
	}
	if cap(t.slots) >= n {
		t.slots = t.slots[:n]
		clear(t.slots)
	} else {
		t.slots = make([]uint32, n)
	}
	t.n = 0
	mask := uint64(n - 1)
	for di := range m.Descs {
		c := m.contentOf(&m.Descs[di])
		i := c.hash() & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = uint32(di + 1)
		t.n++
	}
}

func (c *descContent) hash() uint64 {
	h := mix(quickHash(c.name) ^ uint64(c.typ)<<8 ^ uint64(c.temp)<<16 ^ uint64(boolU8(c.mono))<<24)
	if len(c.desc) > 0 || len(c.unit) > 0 {
		h = mix(h ^ quickHash(c.desc))
		h = mix(h ^ quickHash(c.unit))
	}
	if c.meta.Len() > 0 {
		h = mix(h ^ uint64(c.meta.Start)<<32 ^ uint64(c.meta.End))
	}
	return h
}

func boolU8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
