package prw

import (
	"encoding/binary"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// XXH64 constants (xxhash.Sum64's, seed 0).
const (
	xxPrime1 uint64 = 11400714785074694791
	xxPrime2 uint64 = 14029467366897019727
	xxPrime3 uint64 = 1609587929392839161
	xxPrime4 uint64 = 9650029242287828579
	xxPrime5 uint64 = 2870177450012600261
)

// hashValue is xxhash.Sum64(b): in Go for the short strings label values
// mostly are (under 32 bytes, XXH64's short path), which saves the call
// into the assembly version and its argument spills per label (the scan
// hashes every label value of every series); longer ones go to xxhash.
// TestHashValueIsXXHash checks it against xxhash.Sum64.
func hashValue(b []byte) uint64 {
	n := len(b)
	if n >= 32 {
		return xxhash.Sum64(b)
	}
	h := xxPrime5 + uint64(n)
	for ; len(b) >= 8; b = b[8:] {
		k := bits.RotateLeft64(binary.LittleEndian.Uint64(b)*xxPrime2, 31) * xxPrime1
		h = bits.RotateLeft64(h^k, 27)*xxPrime1 + xxPrime4
	}
	if len(b) >= 4 {
		h ^= uint64(binary.LittleEndian.Uint32(b)) * xxPrime1
		h = bits.RotateLeft64(h, 23)*xxPrime2 + xxPrime3
		b = b[4:]
	}
	for _, c := range b {
		h ^= uint64(c) * xxPrime5
		h = bits.RotateLeft64(h, 11) * xxPrime1
	}
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}

// sameName reports whether a and b are equal. Label names are short: two
// overlapping word loads compare one of 4 to 16 bytes without a call.
func sameName(a, b []byte) bool {
	n := len(a)
	if n != len(b) {
		return false
	}
	switch {
	case n >= 8 && n <= 16:
		return binary.LittleEndian.Uint64(a) == binary.LittleEndian.Uint64(b) &&
			binary.LittleEndian.Uint64(a[n-8:]) == binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4 && n < 8:
		return binary.LittleEndian.Uint32(a) == binary.LittleEndian.Uint32(b) &&
			binary.LittleEndian.Uint32(a[n-4:]) == binary.LittleEndian.Uint32(b[n-4:])
	}
	return string(a) == string(b)
}
