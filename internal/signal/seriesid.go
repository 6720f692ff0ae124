package signal

import (
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// Series ids are stored in the lake, so this algorithm is part of the file
// format (docs/schema.md): changing it splits every series in two.
//
//	pair(k, t, v) = mix(xxh64(k) + t*P1 + xxh64(v) or mix(v bits))
//	set(attrs)    = Σ pair(...)                  (wrapping sum: order-free)
//	series        = mix(xxh64(name) ^ mix(set(resource)+P2) ^ (set(point)*P3))
//
// A wrapping sum of well-mixed pair hashes makes the id independent of
// attribute order without sorting, which profiling showed dominated decode.
const (
	seriesP1 = 0x9E3779B97F4A7C15
	seriesP2 = 0xC2B2AE3D27D4EB4F
	seriesP3 = 0x165667B19E3779F9
)

// mix is the splitmix64 finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// ComputeSeriesIDs sets SeriesID for every point: a 64-bit hash over the
// metric name, the resource attributes and the point attributes. Attribute
// order never changes the id; value types do: int 1 and string "1" are
// different series.
func (m *Metrics) ComputeSeriesIDs() { m.ComputeSeriesIDsFrom(0) }

// ComputeSeriesIDsFrom is ComputeSeriesIDs for the points from index start
// on, so that a decoder appending to a batch hashes only what it added.
func (m *Metrics) ComputeSeriesIDsFrom(start int) {
	sc := &m.seriesScratch
	// Caches per resource and descriptor index; 0 means "not computed" (a
	// real hash of 0 is merely recomputed).
	sc.resHash = resizeU64(sc.resHash, len(m.Resources))
	sc.nameHash = resizeU64(sc.nameHash, len(m.Descs))
	for i := start; i < len(m.Time); i++ {
		r := m.Resource[i]
		rh := sc.resHash[r]
		if rh == 0 {
			rh = SeriesResource(m.attrSetHash(m.Resources[r].Attrs))
			sc.resHash[r] = rh
		}
		d := m.Desc[i]
		nh := sc.nameHash[d]
		if nh == 0 {
			nh = xxhash.Sum64(m.Bytes(m.Descs[d].Name))
			sc.nameHash[d] = nh
		}
		m.SeriesID[i] = SeriesID(nh, rh, m.attrSetHash(m.Attr[i]))
	}
}

// attrSetHash is the order-independent hash of the pairs in r: the sum of
// their AttrHash terms, computed in the loop (a call to AttrHash per
// attribute costs decoding 3%).
func (m *Metrics) attrSetHash(r Range) uint64 {
	var sum uint64
	a := &m.Attrs
	for i := r.Start; i < r.End; i++ {
		t := a.Type[i]
		var vh uint64
		switch t {
		case ValueString, ValueBytes, ValueArray, ValueMap:
			vh = xxhash.Sum64(m.Bytes(Str(a.Val[i])))
		default:
			vh = mix(a.Val[i] + seriesP2)
		}
		sum += SeriesPair(m.Keys.Hash(a.Key[i]), t, vh)
	}
	return sum
}

// AttrHash is attribute i's term in the hash of its set (the set hash is
// the wrapping sum of its terms): SeriesPair of its key, type and value.
func (c *Common) AttrHash(i uint32) uint64 {
	a := &c.Attrs
	t := a.Type[i]
	var vh uint64
	switch t {
	case ValueString, ValueBytes, ValueArray, ValueMap:
		vh = xxhash.Sum64(c.Bytes(Str(a.Val[i])))
	default:
		vh = mix(a.Val[i] + seriesP2)
	}
	return SeriesPair(c.Keys.Hash(a.Key[i]), t, vh)
}

// SeriesPair is one attribute's term in the hash of its set, from the
// xxhash64 of its key, its type and its value's hash (xxhash64 of the
// bytes of a string, bytes, array or map value).
func SeriesPair(keyHash uint64, t ValueType, valueHash uint64) uint64 {
	return mix(keyHash + uint64(t)*seriesP1 + valueHash)
}

// SeriesResource is the resource part of a series id from the hash of the
// resource's attribute set.
func SeriesResource(setHash uint64) uint64 { return mix(setHash + seriesP2) }

// SeriesID is a series id from the xxhash64 of its metric name, its
// SeriesResource and the hash of its point attribute set. Callers that
// hash series without a batch (the remote-write scan, a strip_label limit)
// build ids with it, so they equal the ids of ComputeSeriesIDs.
func SeriesID(nameHash, resource, setHash uint64) uint64 {
	return mix(nameHash ^ resource ^ bits.RotateLeft64(setHash*seriesP3, 17))
}

// seriesScratch is reused across calls so that hashing allocates nothing in
// steady state.
type seriesScratch struct {
	resHash  []uint64
	nameHash []uint64
}

func resizeU64(s []uint64, n int) []uint64 {
	if cap(s) < n {
		return make([]uint64, n)
	}
	s = s[:n]
	clear(s)
	return s
}
