package lake

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortedPermMatches: sortedPerm (buckets of k1, each spread by the
// high bits of k2 and sorted in groups) gives the rows in the order of one
// comparison sort by (k1, k2, k3, row), on hashes (metrics' series ids),
// clustered and skewed k2 (times), duplicates, time out of row order, and
// buckets small and large.
func TestSortedPermMatches(t *testing.T) {
	var rng *rand.Rand // seeded per shape and size: the same keys every run
	shapes := []struct {
		name string
		key  func(i int) (uint32, uint64, uint64)
	}{
		{"series-hashes", func(i int) (uint32, uint64, uint64) {
			s := uint64(i % 3000)
			return uint32(s % 50), s * 0x9E3779B97F4A7C15, uint64(i / 3000)
		}},
		{"series-times-shuffled", func(i int) (uint32, uint64, uint64) {
			s := uint64(i % 700)
			return uint32(s % 7), s * 0x9E3779B97F4A7C15, rng.Uint64N(5)
		}},
		{"clustered-times", func(i int) (uint32, uint64, uint64) {
			return uint32(i % 3), signedKey(1_700_000_000_000_000_000 + int64(rng.IntN(1000))), 0
		}},
		{"skewed", func(i int) (uint32, uint64, uint64) {
			if i%10 == 0 {
				return 0, ^uint64(0) - uint64(i), 0
			}
			return 0, uint64(rng.IntN(3)), uint64(rng.IntN(3))
		}},
		{"all-equal", func(i int) (uint32, uint64, uint64) { return 1, 42, uint64(i % 2) }},
		{"random", func(i int) (uint32, uint64, uint64) {
			return uint32(rng.IntN(4)), rng.Uint64(), rng.Uint64()
		}},
	}
	for si, sh := range shapes {
		name := sh.name
		for _, n := range []int{0, 1, 40, 63, 64, 65, 1000, 30_000} {
			rng = rand.New(rand.NewPCG(uint64(si), uint64(n)))
			var e encoder
			keys := e.keysFor(n)
			for i := range keys {
				k1, k2, k3 := sh.key(i)
				keys[i] = rowKey{k1: k1, k2: k2, k3: k3, row: int32(i)}
			}
			want := slices.Clone(keys)
			slices.SortFunc(want, cmpRowKey)
			got := e.sortedPerm()
			for i := range want {
				if got[i] != want[i].row {
					t.Fatalf("%s, %d rows: row %d is %d, want %d", name, n, i, got[i], want[i].row)
				}
			}
		}
	}
}
