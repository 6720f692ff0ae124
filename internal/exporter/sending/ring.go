package sending

import (
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// vnodes per endpoint: with 3..10 endpoints this keeps each one's share
// within a few percent of 1/N.
const vnodes = 256

// Ring maps a series hash to one of N endpoints by consistent hashing:
// adding an endpoint moves about 1/(N+1) of the series, all of them to the
// new endpoint. Immutable after NewRing.
type Ring struct {
	points []uint64
	owner  []int
}

// NewRing places vnodes points per endpoint, keyed by the endpoint's name
// (so the mapping survives reordering the config).
func NewRing(names []string) *Ring {
	type pt struct {
		h uint64
		i int
	}
	pts := make([]pt, 0, len(names)*vnodes)
	var buf []byte
	for i, n := range names {
		for v := range vnodes {
			buf = strconv.AppendInt(append(append(buf[:0], n...), '#'), int64(v), 10)
			pts = append(pts, pt{xxhash.Sum64(buf), i})
		}
	}
	slices.SortFunc(pts, func(a, b pt) int {
		if a.h < b.h {
			return -1
		}
		if a.h > b.h {
			return 1
		}
		return a.i - b.i
	})
	r := &Ring{points: make([]uint64, len(pts)), owner: make([]int, len(pts))}
	for k, p := range pts {
		r.points[k], r.owner[k] = p.h, p.i
	}
	return r
}

// Pick returns the index of the endpoint owning the series hash h.
func (r *Ring) Pick(h uint64) int {
	// Mix first: series hashes from one hasher may cluster.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	k, _ := slices.BinarySearch(r.points, h)
	if k == len(r.points) {
		k = 0
	}
	return r.owner[k]
}
