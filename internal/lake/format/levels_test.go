package format

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestBitPackedLevels decodes bit-packed runs of width 1 (the levels of
// optional and repeated columns; unpack1 takes 8 at a time) and of a
// wider width next to RLE runs, against the bits written, for pages whose
// last group is cut short by the page's end; levels of width 1 also as
// runs (decodeDefRuns, and runsOfDefs from the levels as bytes).
func TestBitPackedLevels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 500 {
		width := 1
		if iter%5 == 4 {
			width = 2
		}
		maxV := uint8(1)<<width - 1
		var src []byte
		var want []uint8
		lastPacked := false
		for range 1 + rng.IntN(6) {
			lastPacked = rng.IntN(3) != 0
			if !lastPacked { // an RLE run
				n, v := 1+rng.IntN(40), uint8(rng.IntN(int(maxV)+1))
				src = binary.AppendUvarint(src, uint64(n)<<1)
				src = append(src, v)
				for range n {
					want = append(want, v)
				}
				continue
			}
			groups := 1 + rng.IntN(5)
			if iter%3 == 0 {
				groups = 1 + rng.IntN(40) // over 64 levels: a word at a time
			}
			src = binary.AppendUvarint(src, uint64(groups)<<1|1)
			var acc uint64
			have := 0
			for range groups * 8 {
				v := uint8(rng.IntN(int(maxV) + 1))
				want = append(want, v)
				acc |= uint64(v) << have
				if have += width; have >= 8 {
					src = append(src, byte(acc))
					acc >>= 8
					have -= 8
				}
			}
		}
		// The page ends up to 7 values before a last bit-packed run does.
		n := len(want)
		if lastPacked {
			n -= rng.IntN(8)
		}
		got := make([]uint8, n)
		if err := decodeHybrid(src, width, got, maxV); err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("iteration %d (width %d): level %d is %d, want %d", iter, width, i, got[i], want[i])
			}
		}
		if width == 1 {
			runs, nn, err := decodeDefRuns(src, n, nil)
			if err != nil {
				t.Fatalf("iteration %d: runs: %v", iter, err)
			}
			p := pageVals{n: n, defs: want[:n]}
			checkDefRuns(t, iter, runs, nn, want[:n])
			r2 := p.runsOfDefs(nil)
			checkDefRuns(t, iter, r2, nn, want[:n])
			if _, _, err := decodeDefRuns(src, n+8, nil); err == nil {
				t.Fatalf("iteration %d: runs of %d levels taken for %d", iter, len(want), n+8)
			}
		}
		got32 := make([]int32, n)
		if err := decodeHybrid(src, width, got32, int32(maxV)); err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		for i := range got32 {
			if got32[i] != int32(want[i]) {
				t.Fatalf("iteration %d (width %d): index %d is %d, want %d", iter, width, i, got32[i], want[i])
			}
		}
	}
}

// TestHexDecodeMatches compares hexDecode with encoding/hex on ids of
// every digit in either case and on ids with one byte that is no digit.
func TestHexDecodeMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const digits = "0123456789abcdefABCDEF"
	for iter := range 20000 {
		src := make([]byte, 32)
		for i := range src {
			src[i] = digits[rng.IntN(len(digits))]
		}
		if iter%2 == 1 {
			src[rng.IntN(len(src))] = byte(rng.IntN(256))
		}
		var got, want [16]byte
		_, werr := hex.Decode(want[:], src)
		gerr := hexDecode(got[:], src)
		if (gerr != nil) != (werr != nil) {
			t.Fatalf("%q: error %v, encoding/hex %v", src, gerr, werr)
		}
		if werr == nil && got != want {
			t.Fatalf("%q: %x, want %x", src, got, want)
		}
		var id signal.TraceID
		if ok := hexTraceID(&id, src); ok != (werr == nil) || ok && [16]byte(id) != want {
			t.Fatalf("%q: hexTraceID %x, %v; encoding/hex %x, %v", src, id, ok, want, werr)
		}
		var sid signal.SpanID
		_, werr = hex.Decode(want[:8], src[:16])
		if ok := hexSpanID(&sid, src[:16]); ok != (werr == nil) || ok && [8]byte(sid) != [8]byte(want[:8]) {
			t.Fatalf("%q: hexSpanID %x, %v; encoding/hex %x, %v", src[:16], sid, ok, want[:8], werr)
		}
	}
	// Every byte value at every position of an id, and of a 10-digit
	// tail (the table path after 8 digits at a time).
	for _, l := range []int{32, 16, 10} {
		for b := range 256 {
			for at := range l {
				src := []byte("0123456789abcdefABCDEF0123456789")[:l]
				src[at] = byte(b)
				got, want := make([]byte, l/2), make([]byte, l/2)
				_, werr := hex.Decode(want, src)
				gerr := hexDecode(got, src)
				if (gerr != nil) != (werr != nil) || werr == nil && string(got) != string(want) {
					t.Fatalf("%q: %x, %v; encoding/hex %x, %v", src, got, gerr, want, werr)
				}
			}
		}
	}
	if hexDecode(make([]byte, 8), make([]byte, 15)) == nil {
		t.Fatal("an odd number of digits was taken")
	}
}

// checkDefRuns checks that runs, merged and none empty, expand to levels,
// nn of them 1.
func checkDefRuns(t *testing.T, iter int, runs []valRun, nn int, levels []uint8) {
	t.Helper()
	var got []uint8
	ones := 0
	for k, r := range runs {
		if r.n <= 0 || k > 0 && runs[k-1].v == r.v {
			t.Fatalf("iteration %d: run %d of %d levels of %d after %v", iter, k, r.n, r.v, runs[max(k-1, 0)])
		}
		for range r.n {
			got = append(got, uint8(r.v))
		}
		if r.v == 1 {
			ones += int(r.n)
		}
	}
	if string(got) != string(levels) || ones != nn {
		t.Fatalf("iteration %d: runs expand to %v (%d ones, nn %d), want %v", iter, got, ones, nn, levels)
	}
}
