package pqenc

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/rle"
)

// TestLevelPack: levels written as runs and packed decode to the same
// levels with parquet-go's decoder, and packing never makes them larger.
func TestLevelPack(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var tmp levelScratch
	for i := range 300 {
		maxLevel := byte(1 + i%3)
		width := bits.Len8(maxLevel)
		var want []byte
		var r levelRuns
		for len(want) < 1+rnd.IntN(3000) {
			v := byte(rnd.IntN(int(maxLevel) + 1))
			k := 1
			if rnd.IntN(4) == 0 { // some long runs among short ones
				k = 1 + rnd.IntN(50)
			}
			r.add(v, k)
			for range k {
				want = append(want, v)
			}
		}
		r.flush()
		runs := len(r.buf)
		r.pack(width, len(want), &tmp)
		if len(r.buf) > runs {
			t.Fatalf("case %d: packed %d bytes, runs %d", i, len(r.buf), runs)
		}
		enc := rle.Encoding{BitWidth: width}
		got, err := enc.DecodeLevels(nil, r.buf)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		// Bit-packed groups end on a multiple of 8: padding follows.
		if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
			t.Fatalf("case %d: decoded %d levels, want %d (width %d)", i, len(got), len(want), width)
		}
	}
}
