package format

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// deltaLengthCases are byte arrays whose lengths exercise the delta
// encoding: constant (bit width 0), small and large spreads, falling
// lengths (negative deltas), empty values, one value, several blocks.
func deltaLengthCases() [][][]byte {
	rng := rand.New(rand.NewPCG(12, 5))
	var cases [][][]byte
	gen := func(n int, length func(i int) int) [][]byte {
		vals := make([][]byte, n)
		for i := range vals {
			v := make([]byte, length(i))
			for j := range v {
				v[j] = byte(rng.IntN(256))
			}
			vals[i] = v
		}
		return vals
	}
	cases = append(cases,
		nil,
		gen(1, func(int) int { return 7 }),
		gen(1, func(int) int { return 0 }),
		gen(200, func(int) int { return 32 }),
		gen(129, func(int) int { return 16 }),
		gen(1000, func(int) int { return rng.IntN(5) }),
		gen(1000, func(int) int { return rng.IntN(2000) }),
		gen(700, func(i int) int { return 900 - i }),
		gen(3000, func(i int) int { return (i * 37) % 301 }),
		gen(513, func(i int) int {
			if i%100 == 0 {
				return 5000
			}
			return 3
		}),
	)
	return cases
}

func encodeDeltaLengths(t testing.TB, vals [][]byte) []byte {
	var data []byte
	offs := []uint32{0}
	for _, v := range vals {
		data = append(data, v...)
		offs = append(offs, uint32(len(data)))
	}
	enc, err := parquet.DeltaLengthByteArray.EncodeByteArray(nil, data, offs)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// TestDeltaLengthByteArrays decodes what parquet-go's encoder writes and
// compares with the values and with parquet-go's decoder; the values
// alias the page (no copy). Cut or damaged pages are errors, never a
// panic or values past the page.
func TestDeltaLengthByteArrays(t *testing.T) {
	for k, vals := range deltaLengthCases() {
		enc := encodeDeltaLengths(t, vals)
		data, offs, err := deltaLengthByteArrays(enc, len(vals), nil)
		if err != nil {
			t.Fatalf("case %d: %v", k, err)
		}
		if len(offs) != len(vals)+1 {
			t.Fatalf("case %d: %d offsets for %d values", k, len(offs), len(vals))
		}
		for i, v := range vals {
			if got := data[offs[i]:offs[i+1]]; !bytes.Equal(got, v) {
				t.Fatalf("case %d value %d: %d bytes, want %d", k, i, len(got), len(v))
			}
		}
		if len(data) > 0 && &data[0] != &enc[len(enc)-len(data)] {
			t.Fatalf("case %d: the values are a copy, not the page's bytes", k)
		}
		pdata, poffs, perr := parquet.DeltaLengthByteArray.DecodeByteArray(nil, enc, nil)
		if perr != nil || !bytes.Equal(pdata, data) || !slices.Equal(poffs, offs) && len(vals) > 0 {
			t.Fatalf("case %d: parquet-go decodes %d bytes, %d offsets (%v)", k, len(pdata), len(poffs), perr)
		}
		if _, _, err := deltaLengthByteArrays(enc, len(vals)+1, nil); err == nil {
			t.Fatalf("case %d: a page of another value count was taken", k)
		}
		// Every cut of the lengths is refused; cuts of the values too, or
		// decode inside the page.
		for cut := 0; cut < len(enc); cut++ {
			if lens := len(enc) - len(data); cut > lens+8 && cut%97 != 0 {
				continue
			}
			d, _, err := deltaLengthByteArrays(enc[:cut], len(vals), nil)
			if err == nil && len(d) > cut {
				t.Fatalf("case %d cut %d: %d bytes of values", k, cut, len(d))
			}
			if err == nil && len(vals) > 0 && cut < len(enc)-len(data) {
				t.Fatalf("case %d: the page cut at %d (in its lengths) was taken", k, cut)
			}
		}
	}
}

// FuzzDeltaLengthByteArrays: whatever the decoder takes, parquet-go's
// decoder takes too, with the same values.
func FuzzDeltaLengthByteArrays(f *testing.F) {
	for _, vals := range deltaLengthCases() {
		f.Add(encodeDeltaLengths(f, vals), uint16(len(vals)))
	}
	f.Fuzz(func(t *testing.T, src []byte, n uint16) {
		data, offs, err := deltaLengthByteArrays(src, int(n), nil)
		if err != nil {
			return
		}
		if len(offs) != int(n)+1 || int(offs[n]) != len(data) {
			t.Fatalf("%d offsets, last %d, for %d values of %d bytes", len(offs), offs[len(offs)-1], n, len(data))
		}
		pdata, poffs, perr := parquet.DeltaLengthByteArray.DecodeByteArray(nil, src, nil)
		if perr != nil {
			t.Fatalf("parquet-go refuses what the decoder takes: %v", perr)
		}
		if n > 0 && (!bytes.Equal(pdata, data) || !slices.Equal(poffs, offs)) {
			t.Fatalf("values differ from parquet-go's")
		}
	})
}
