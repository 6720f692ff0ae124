package signal

// Decoding straight into a destination batch: a decoder that holds the
// wire bytes of a record (the lake loop's remote-write path) appends its
// points to the lake writer's partition batch itself, instead of decoding
// into a batch of its own that the writer then copies (CopyRows). What it
// appends must be what the copy would have made: string attribute values
// interned in the destination's valueTable and, when ShareAttrSets is
// set, equal sets given one Range through the same setTable, whichever way
// (copy or direct) each point came in.

// InternStrAttrs appends an attribute set of string values (keys of m's
// key table, vals their bytes, which must not alias m's arena) and returns
// its Range: the set CopyFrom would give a source point with these
// attributes. With ShareAttrSets an equal set already in m is returned
// instead (found by its content, before anything is copied); values are
// interned per key (copier.value). An empty set is an empty Range at the
// end of m.Attrs, as a copy gives.
func (m *Metrics) InternStrAttrs(keys []KeyID, vals [][]byte) Range {
	return m.Common.internStrAttrs(&m.cp, keys, vals)
}

func (c *Common) internStrAttrs(cp *copier, keys []KeyID, vals [][]byte) Range {
	start := len(c.Attrs.Key)
	n := len(keys)
	if n == 0 {
		return Range{uint32(start), uint32(start)}
	}
	vals = vals[:n]
	var h uint64
	slot := -1
	if c.ShareAttrSets {
		h = uint64(n) * 0x9e3779b97f4a7c15
		for j, k := range keys {
			h = setHashStep(h, k, ValueString, quickHash(vals[j]))
		}
		if r, s, ok := c.findStrSet(cp, h, keys, vals); ok {
			return r
		} else {
			slot = s
		}
	}
	a := &c.Attrs
	a.Key, a.Type, a.Val = grown(a.Key, n), grown(a.Type, n), grown(a.Val, n)
	dk, dt, dv := a.Key[start:], a.Type[start:start+n], a.Val[start:start+n]
	for j, k := range keys {
		var v Str
		if len(vals[j]) > 0 {
			v = cp.internValue(c, k, vals[j])
		}
		dk[j], dt[j], dv[j] = k, ValueString, uint64(v)
	}
	r := Range{uint32(start), uint32(start + n)}
	if c.ShareAttrSets {
		cp.sets.add(r, h, slot)
	}
	return r
}

// findStrSet is copier.findSet for a set of string values given as bytes.
func (c *Common) findStrSet(cp *copier, h uint64, keys []KeyID, vals [][]byte) (Range, int, bool) {
	t := &cp.sets
	if len(t.slots) == 0 {
		return Range{}, -1, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := t.slots[i]
		if sl.r.Len() == 0 {
			return Range{}, int(i), false
		}
		if sl.tag == h && c.sameStrSet(sl.r, keys, vals) {
			return sl.r, int(i), true
		}
	}
}

// sameStrSet reports whether set r of c holds exactly keys with the
// string values vals. A stale entry (the batch was rolled back below it)
// is out of range or compares unequal.
func (c *Common) sameStrSet(r Range, keys []KeyID, vals [][]byte) bool {
	if r.Len() != len(keys) || int(r.End) > len(c.Attrs.Key) {
		return false
	}
	a := &c.Attrs
	dk := a.Key[r.Start:r.End]
	dt := a.Type[r.Start : r.End : r.Start+uint32(len(dk))]
	dv := a.Val[r.Start : r.End : r.Start+uint32(len(dk))]
	vals = vals[:len(dk)]
	for j, k := range keys[:len(dk)] {
		if dk[j] != k || dt[j] != ValueString {
			return false
		}
		d := Str(dv[j])
		if d.Len() != len(vals[j]) || d.Off()+d.Len() > len(c.Buf) || string(c.Bytes(d)) != string(vals[j]) {
			return false
		}
	}
	return true
}

// AddBareResourceScope adds the resource and scope of a decoded request
// that has neither of its own (remote write: a resource without
// attributes, a scope with only a name and a version) as a copy of them
// would: with ShareAttrSets or ShareResources they are shared with equal
// ones already in m.
func (m *Metrics) AddBareResourceScope(name, version []byte) (res, scope uint32) {
	c, cp := &m.Common, &m.cp
	a := uint32(c.Attrs.Len())
	empty := Range{Start: a, End: a}
	if !c.ShareAttrSets && !c.ShareResources {
		sc := Scope{Name: c.AppendBytes(name), Version: c.AppendBytes(version), Attrs: empty}
		c.Resources = append(c.Resources, Resource{Attrs: empty})
		c.Scopes = append(c.Scopes, sc)
		return uint32(len(c.Resources) - 1), uint32(len(c.Scopes) - 1)
	}
	res = cp.sharedResource(c, Resource{Attrs: empty})
	scope = cp.sharedScope(c, Scope{
		Name:    cp.internStr(c, keyScopeName, name),
		Version: cp.internStr(c, keyScopeVersion, version),
		Attrs:   empty,
	})
	return res, scope
}
