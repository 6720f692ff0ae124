package signal

import (
	"math"

	"github.com/sluice-dev/sluice/internal/unsafex"
)

// Str locates a byte string in a batch arena: offset in the high 32 bits,
// length in the low 32 bits. The zero Str is the empty string.
type Str uint64

// MakeStr builds a Str from an offset and a length.
func MakeStr(off, n int) Str { return Str(uint64(off)<<32 | uint64(uint32(n))) }

// Off is the offset of s in the arena.
func (s Str) Off() int { return int(s >> 32) }

// Len is the length of s in bytes.
func (s Str) Len() int { return int(uint32(s)) }

// Range is a half-open range [Start, End) of indexes.
type Range struct{ Start, End uint32 }

// Len is the number of elements in r.
func (r Range) Len() int { return int(r.End - r.Start) }

// Attrs is a flat, columnar list of attribute key/value pairs. A record's
// attribute set is a Range into it. Val holds, by Type: a Str for string,
// bytes, array and map; the int64 bits for int; the float64 bits for double;
// 0 or 1 for bool; 0 for empty.
type Attrs struct {
	Key  []KeyID
	Type []ValueType
	Val  []uint64
}

// Len is the number of pairs.
func (a *Attrs) Len() int { return len(a.Key) }

// Append adds one pair.
func (a *Attrs) Append(k KeyID, t ValueType, v uint64) {
	a.Key = append(a.Key, k)
	a.Type = append(a.Type, t)
	a.Val = append(a.Val, v)
}

func (a *Attrs) reset() {
	a.Key, a.Type, a.Val = a.Key[:0], a.Type[:0], a.Val[:0]
}

// Resource is one OTLP Resource with the schema URL of its Resource* wrapper.
type Resource struct {
	Attrs        Range
	DroppedAttrs uint32
	SchemaURL    Str
}

// Scope is one OTLP InstrumentationScope with the schema URL of its Scope*
// wrapper.
type Scope struct {
	Name, Version Str
	Attrs         Range
	DroppedAttrs  uint32
	SchemaURL     Str
}

// Common is what every batch has: the arena, the key table, the attribute
// store, and the resources and scopes its records point to.
type Common struct {
	Buf       []byte
	Keys      KeyTable
	Attrs     Attrs
	Resources []Resource
	Scopes    []Scope
	// Msgs holds raw OTLP protobuf messages that have no columns of their
	// own (exemplars, span events, span links); records hold Ranges into it.
	Msgs []Str

	// ShareAttrSets makes copies into this batch (CopyFrom, CopyRows)
	// give records, resources and scopes whose attribute sets are equal
	// one Range (copier.attrs): a series' points then share their set,
	// which is stored once, and a reader tells equal sets by their Range.
	// Only for batches whose attributes are never changed in place (the
	// lake writer's partitions). Reset keeps it.
	ShareAttrSets bool
	// ShareResources makes copies into this batch give equal resources
	// and scopes one resource and one scope (ShareAttrSets implies it):
	// each decoded request brings its own copy of the resources it
	// shares with other requests, and the lake's encoder resolves every
	// resource of a file. Same contract as ShareAttrSets; Reset keeps it.
	ShareResources bool

	gen uint64 // bumped by Reset, so copiers notice a refilled source
}

// Reset empties the batch for reuse, keeping its capacity.
func (c *Common) Reset() {
	c.gen++
	c.Buf = c.Buf[:0]
	c.Keys.reset()
	c.Attrs.reset()
	c.Resources = c.Resources[:0]
	c.Scopes = c.Scopes[:0]
	c.Msgs = c.Msgs[:0]
}

// Bytes returns the bytes of s. The slice aliases the arena: it is valid
// until the batch is reset or its arena grows, and must not be modified.
func (c *Common) Bytes(s Str) []byte {
	off := s.Off()
	return c.Buf[off : off+s.Len() : off+s.Len()]
}

// String returns s as a string that aliases the arena (see unsafex.String):
// valid until the batch is reset or its arena grows.
func (c *Common) String(s Str) string { return unsafex.String(c.Bytes(s)) }

// AppendBytes copies b into the arena and returns its Str.
func (c *Common) AppendBytes(b []byte) Str {
	off := len(c.Buf)
	c.Buf = append(c.Buf, b...)
	return MakeStr(off, len(b))
}

// AppendString copies s into the arena and returns its Str.
func (c *Common) AppendString(s string) Str {
	off := len(c.Buf)
	c.Buf = append(c.Buf, s...)
	return MakeStr(off, len(s))
}

// AttrString returns the string value of attribute i (string, bytes, array
// and map values), aliasing the arena.
func (c *Common) AttrString(i int) string { return c.String(Str(c.Attrs.Val[i])) }

// AttrInt returns the value of int attribute i.
func (c *Common) AttrInt(i int) int64 { return int64(c.Attrs.Val[i]) }

// AttrDouble returns the value of double attribute i.
func (c *Common) AttrDouble(i int) float64 { return math.Float64frombits(c.Attrs.Val[i]) }

// AttrBool returns the value of bool attribute i.
func (c *Common) AttrBool(i int) bool { return c.Attrs.Val[i] != 0 }

// FindAttr returns the index in c.Attrs of the last pair in r whose key is
// key, or -1. The last one wins because OTLP requires unique keys and the
// collector's own maps keep the last duplicate too.
func (c *Common) FindAttr(r Range, key string) int {
	id, ok := c.Keys.ids[key]
	if !ok {
		return -1
	}
	for i := int(r.End) - 1; i >= int(r.Start); i-- {
		if c.Attrs.Key[i] == id {
			return i
		}
	}
	return -1
}

// ServiceName returns the string value of the "service.name" attribute of
// resource r, or "".
func (c *Common) ServiceName(r uint32) string {
	i := c.FindAttr(c.Resources[r].Attrs, "service.name")
	if i < 0 || c.Attrs.Type[i] != ValueString {
		return ""
	}
	return c.AttrString(i)
}

// copier copies records from one batch's Common into another's, remapping
// keys, resources and scopes and copying strings. It caches what it has
// copied for the current source, so a resource shared by many records is
// copied once.
type copier struct {
	src      *Common
	srcGen   uint64
	keyMap   []KeyID  // src KeyID -> dst KeyID + 1 (0: not mapped yet)
	resMap   []uint32 // src resource -> dst resource + 1
	scopeMap []uint32 // src scope -> dst scope + 1
	last     []Str    // dst KeyID -> the value last copied for it (value)
	values   valueTable
	sets     setTable
	sink     uint64 // touchSets' loads land here, so that they are kept
	// With ShareAttrSets or ShareResources: the destination's resources
	// and scopes by content (sharedResource), so that each source batch's
	// copy of one resource (every request brings its own) is one.
	resIdx   map[Resource]uint32
	scopeIdx map[Scope]uint32
}

func (cp *copier) bind(src *Common) {
	// A source is identified by its address and generation: a batch that
	// was reset and refilled gets fresh maps even at the same address.
	if cp.src == src && cp.srcGen == src.gen {
		return
	}
	cp.src, cp.srcGen = src, src.gen
	cp.keyMap = resize(cp.keyMap, src.Keys.Len())
	cp.resMap = resize(cp.resMap, len(src.Resources))
	cp.scopeMap = resize(cp.scopeMap, len(src.Scopes))
}

// forget drops the cache; call it when dst is reset.
func (cp *copier) forget() {
	cp.src = nil
	clear(cp.last)
	cp.values.reset()
	cp.sets.reset()
	clear(cp.resIdx)
	clear(cp.scopeIdx)
}

// grow extends a map slice so that index i is valid; a source may gain keys,
// resources or scopes after the copier was bound to it.
func grow[T KeyID | uint32](s []T, i int) []T {
	if i < len(s) {
		return s
	}
	return append(s, make([]T, i+1-len(s))...)
}

func resize[T KeyID | uint32](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

func (cp *copier) key(dst *Common, k KeyID) KeyID {
	cp.keyMap = grow(cp.keyMap, int(k))
	if m := cp.keyMap[k]; m != 0 {
		return m - 1
	}
	id := dst.Keys.IDString(cp.src.Keys.Name(k))
	cp.keyMap[k] = id + 1
	return id
}

func (cp *copier) str(dst *Common, s Str) Str {
	if s.Len() == 0 {
		return 0
	}
	return dst.AppendBytes(cp.src.Bytes(s))
}

// attrs copies the attribute range r of the source and returns the new range.
func (cp *copier) attrs(dst *Common, r Range) Range { return cp.attrsShared(dst, r, dst.ShareAttrSets) }

// attrsShared is attrs, with share in place of dst.ShareAttrSets.
func (cp *copier) attrsShared(dst *Common, r Range, share bool) Range {
	start := len(dst.Attrs.Key)
	n := r.Len()
	if n == 0 {
		return Range{uint32(start), uint32(start)}
	}
	src := &cp.src.Attrs
	keys := src.Key[r.Start:r.End]
	types := src.Type[r.Start : r.End : r.Start+uint32(n)]
	vals := src.Val[r.Start : r.End : r.Start+uint32(n)]
	if share {
		// Look the set up by its content before copying anything: a
		// series' later points cost one hash and one compare, not a
		// value lookup per attribute.
		return cp.attrsHashed(dst, r, cp.sourceSetHash(dst, keys, types, vals))
	}
	return cp.copyAttrs(dst, keys, types, vals)
}

// attrsHashed is attrs into a batch that shares sets, for a source set r
// (not empty) whose sourceSetHash is h.
func (cp *copier) attrsHashed(dst *Common, r Range, h uint64) Range {
	src := &cp.src.Attrs
	n := r.Len()
	keys := src.Key[r.Start:r.End]
	types := src.Type[r.Start : r.End : r.Start+uint32(n)]
	vals := src.Val[r.Start : r.End : r.Start+uint32(n)]
	prev, slot, ok := cp.findSet(dst, h, keys, types, vals)
	if ok {
		return prev
	}
	out := cp.copyAttrs(dst, keys, types, vals)
	cp.sets.add(out, h, slot)
	return out
}

// copyAttrs appends a copy of a source set (keys mapped, string values
// interned) and returns its Range.
func (cp *copier) copyAttrs(dst *Common, keys []KeyID, types []ValueType, vals []uint64) Range {
	start := len(dst.Attrs.Key)
	n := len(keys)
	types, vals = types[:n], vals[:n]
	a := &dst.Attrs
	a.Key, a.Type, a.Val = grown(a.Key, n), grown(a.Type, n), grown(a.Val, n)
	dk, dt, dv := a.Key[start:], a.Type[start:start+n], a.Val[start:start+n]
	for j, sk := range keys {
		var k KeyID
		if int(sk) < len(cp.keyMap) && cp.keyMap[sk] != 0 {
			k = cp.keyMap[sk] - 1
		} else {
			k = cp.key(dst, sk)
		}
		t, v := types[j], vals[j]
		switch t {
		case ValueString, ValueBytes, ValueArray, ValueMap:
			v = uint64(cp.value(dst, k, Str(v)))
		}
		dk[j], dt[j], dv[j] = k, t, v
	}
	return Range{uint32(start), uint32(start + n)}
}

// value copies the string value s of destination key k, or reuses the
// copy of an equal value of k: the one last copied for k (runs of one
// value, checked first because it is cheapest), else the one interned in
// the destination's valueTable. Attribute values repeat from record to
// record (the job of every point, the method of most requests), so the
// destination's arena keeps one copy of each, and an encoder comparing
// values finds them equal by offset without reading them (the lake's
// attribute runs). Strs are never written through, so sharing one is
// safe; the bytes are compared, so a stale entry (after the destination
// was reset or rolled back) costs a miss, never a wrong value.
func (cp *copier) value(dst *Common, k KeyID, s Str) Str {
	if s.Len() == 0 {
		return 0
	}
	return cp.internValue(dst, k, cp.src.Bytes(s))
}

// internValue is value for the bytes b (not empty) of a value of key k.
func (cp *copier) internValue(dst *Common, k KeyID, b []byte) Str {
	if int(k) >= len(cp.last) {
		cp.last = append(cp.last, make([]Str, int(k)+1-len(cp.last))...)
	} else if l := cp.last[k]; l.Len() == len(b) && l.Off()+l.Len() <= len(dst.Buf) && string(dst.Bytes(l)) == string(b) {
		return l
	}
	bh := cp.values.bytesHash(b)
	s, slot, ok := cp.values.find(dst, k, b, bh)
	if !ok {
		s = dst.AppendBytes(b)
		cp.values.add(dst, k, b, bh, s, slot)
	}
	cp.last[k] = s
	return s
}

// msgs copies the message range r of the source and returns the new range.
func (cp *copier) msgs(dst *Common, r Range) Range {
	start := uint32(len(dst.Msgs))
	for _, m := range cp.src.Msgs[r.Start:r.End] {
		dst.Msgs = append(dst.Msgs, cp.str(dst, m))
	}
	return Range{start, uint32(len(dst.Msgs))}
}

func (cp *copier) resource(dst *Common, r uint32) uint32 {
	cp.resMap = grow(cp.resMap, int(r))
	if m := cp.resMap[r]; m != 0 {
		return m - 1
	}
	sr := cp.src.Resources[r]
	var id uint32
	if dst.ShareAttrSets || dst.ShareResources {
		id = cp.sharedResource(dst, Resource{
			Attrs:        cp.attrsShared(dst, sr.Attrs, true),
			DroppedAttrs: sr.DroppedAttrs,
			SchemaURL:    cp.internStr(dst, keySchemaURL, cp.src.Bytes(sr.SchemaURL)),
		})
	} else {
		dst.Resources = append(dst.Resources, Resource{
			Attrs:        cp.attrs(dst, sr.Attrs),
			DroppedAttrs: sr.DroppedAttrs,
			SchemaURL:    cp.str(dst, sr.SchemaURL),
		})
		id = uint32(len(dst.Resources) - 1)
	}
	cp.resMap[r] = id + 1
	return id
}

func (cp *copier) scope(dst *Common, s uint32) uint32 {
	cp.scopeMap = grow(cp.scopeMap, int(s))
	if m := cp.scopeMap[s]; m != 0 {
		return m - 1
	}
	ss := cp.src.Scopes[s]
	var id uint32
	if dst.ShareAttrSets || dst.ShareResources {
		id = cp.sharedScope(dst, Scope{
			Name:         cp.internStr(dst, keyScopeName, cp.src.Bytes(ss.Name)),
			Version:      cp.internStr(dst, keyScopeVersion, cp.src.Bytes(ss.Version)),
			Attrs:        cp.attrsShared(dst, ss.Attrs, true),
			DroppedAttrs: ss.DroppedAttrs,
			SchemaURL:    cp.internStr(dst, keySchemaURL, cp.src.Bytes(ss.SchemaURL)),
		})
	} else {
		dst.Scopes = append(dst.Scopes, Scope{
			Name:         cp.str(dst, ss.Name),
			Version:      cp.str(dst, ss.Version),
			Attrs:        cp.attrs(dst, ss.Attrs),
			DroppedAttrs: ss.DroppedAttrs,
			SchemaURL:    cp.str(dst, ss.SchemaURL),
		})
		id = uint32(len(dst.Scopes) - 1)
	}
	cp.scopeMap[s] = id + 1
	return id
}

// Pseudo keys under which sharedResource and sharedScope intern their
// strings in the valueTable (no attribute key is this large).
const (
	keySchemaURL KeyID = 1<<32 - 1 - iota
	keyScopeName
	keyScopeVersion
)

// internStr is a copy of b in dst's arena, shared with an equal string
// interned under the pseudo key k (valueTable only: no last-value check).
func (cp *copier) internStr(dst *Common, k KeyID, b []byte) Str {
	if len(b) == 0 {
		return 0
	}
	bh := cp.values.bytesHash(b)
	s, slot, ok := cp.values.find(dst, k, b, bh)
	if !ok {
		s = dst.AppendBytes(b)
		cp.values.add(dst, k, b, bh, s, slot)
	}
	return s
}

// sharedResource returns the index of a resource of dst equal to r, whose
// set and strings are interned (copier.attrs, internStr), appending r
// when there is none: a partition's points keep one resource per distinct
// resource, not one per source batch (the lake's encoder resolves every
// resource's cells per file). An entry stale after a rollback is checked
// against the resource at its index.
func (cp *copier) sharedResource(dst *Common, r Resource) uint32 {
	k := r
	if k.Attrs.Len() == 0 {
		k.Attrs = Range{} // empty sets are empty Ranges anywhere
	}
	if id, ok := cp.resIdx[k]; ok && int(id) < len(dst.Resources) {
		if e := dst.Resources[id]; e.DroppedAttrs == k.DroppedAttrs && e.SchemaURL == k.SchemaURL &&
			(e.Attrs == k.Attrs || e.Attrs.Len() == 0 && k.Attrs.Len() == 0) {
			return id
		}
	}
	if cp.resIdx == nil {
		cp.resIdx = make(map[Resource]uint32)
	}
	dst.Resources = append(dst.Resources, r)
	id := uint32(len(dst.Resources) - 1)
	cp.resIdx[k] = id
	return id
}

// sharedScope is sharedResource for scopes.
func (cp *copier) sharedScope(dst *Common, s Scope) uint32 {
	k := s
	if k.Attrs.Len() == 0 {
		k.Attrs = Range{}
	}
	if id, ok := cp.scopeIdx[k]; ok && int(id) < len(dst.Scopes) {
		e := dst.Scopes[id]
		if e.Attrs.Len() == 0 {
			e.Attrs = Range{}
		}
		if e == k {
			return id
		}
	}
	if cp.scopeIdx == nil {
		cp.scopeIdx = make(map[Scope]uint32)
	}
	dst.Scopes = append(dst.Scopes, s)
	id := uint32(len(dst.Scopes) - 1)
	cp.scopeIdx[k] = id
	return id
}
