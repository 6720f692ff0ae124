package prw

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestHashValueIsXXHash: hashValue is xxhash.Sum64 at every length around
// its short path (0 to 80 bytes), for random contents and every byte value.
func TestHashValueIsXXHash(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 80; n++ {
		b := make([]byte, n)
		for trial := range 50 {
			for i := range b {
				b[i] = byte(r.Uint32())
				if trial == 0 {
					b[i] = 0xff
				}
			}
			if got, want := hashValue(b), xxhash.Sum64(b); got != want {
				t.Fatalf("len %d: %x, xxhash %x (%x)", n, got, want, b)
			}
		}
	}
}

// TestSameName: sameName is bytes.Equal for every pair of lengths up to
// 24 and a difference at every position.
func TestSameName(t *testing.T) {
	for n := 0; n <= 24; n++ {
		a := make([]byte, n)
		for i := range a {
			a[i] = 'a' + byte(i)
		}
		for m := 0; m <= 24; m++ {
			b := make([]byte, m)
			copy(b, a)
			for i := n; i < m; i++ {
				b[i] = 'a' + byte(i)
			}
			if got, want := sameName(a, b), bytes.Equal(a, b); got != want {
				t.Fatalf("%q %q: %v, want %v", a, b, got, want)
			}
			for p := range min(n, m) {
				c := bytes.Clone(b)
				c[p] ^= 0x20
				if got, want := sameName(a, c), bytes.Equal(a, c); got != want {
					t.Fatalf("%q %q: %v, want %v", a, c, got, want)
				}
			}
		}
	}
}
