package signal

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// ComputeSeriesIDs sets SeriesID for every point: a 64-bit xxhash over the
// metric name, the resource attributes and the point attributes, each set
// sorted by key so that attribute order never changes the id. Types are part
// of the hash: int 1 and string "1" are different series.
func (m *Metrics) ComputeSeriesIDs() {
	var h xxhash.Digest
	var order []int
	resHash := make([]uint64, len(m.Resources))
	resDone := make([]bool, len(m.Resources))
	var scratch [8]byte
	for i := range m.Time {
		r := m.Resource[i]
		if !resDone[r] {
			h.Reset()
			order = m.hashAttrs(&h, m.Resources[r].Attrs, order)
			resHash[r], resDone[r] = h.Sum64(), true
		}
		h.Reset()
		_, _ = h.Write(m.Bytes(m.Descs[m.Desc[i]].Name))
		binary.LittleEndian.PutUint64(scratch[:], resHash[r])
		_, _ = h.Write([]byte{0xff})
		_, _ = h.Write(scratch[:])
		order = m.hashAttrs(&h, m.Attr[i], order)
		m.SeriesID[i] = h.Sum64()
	}
}

// hashAttrs writes the pairs of r into h in key order.
func (m *Metrics) hashAttrs(h *xxhash.Digest, r Range, order []int) []int {
	order = order[:0]
	for i := int(r.Start); i < int(r.End); i++ {
		order = append(order, i)
	}
	// Insertion sort: attribute sets are small and often already sorted.
	for a := 1; a < len(order); a++ {
		for b := a; b > 0 && m.Keys.Name(m.Attrs.Key[order[b]]) < m.Keys.Name(m.Attrs.Key[order[b-1]]); b-- {
			order[b], order[b-1] = order[b-1], order[b]
		}
	}
	var scratch [10]byte
	for _, i := range order {
		_, _ = h.WriteString(m.Keys.Name(m.Attrs.Key[i]))
		t := m.Attrs.Type[i]
		scratch[0], scratch[1] = 0, byte(t)
		switch t {
		case ValueString, ValueBytes, ValueArray, ValueMap:
			_, _ = h.Write(scratch[:2])
			b := m.Bytes(Str(m.Attrs.Val[i]))
			binary.LittleEndian.PutUint64(scratch[2:], uint64(len(b)))
			_, _ = h.Write(scratch[2:])
			_, _ = h.Write(b)
		default:
			binary.LittleEndian.PutUint64(scratch[2:], m.Attrs.Val[i])
			_, _ = h.Write(scratch[:])
		}
	}
	return order
}
