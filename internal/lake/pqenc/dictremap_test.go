package pqenc

import (
	"fmt"
	"slices"
	"testing"
)

// BenchmarkDictPagesOtherOrder copies a dictionary chunk whose dictionary
// orders its values otherwise than the output chunk's (which took the
// first input's): its pages remapped (dictremap.go) or row by row, as
// before. 64K rows of 200 values changing every few rows, a null in 11,
// 8K-row pages.
func BenchmarkDictPagesOtherOrder(b *testing.B) {
	li, footer := dictTestLeaf(b)
	const n = 64 << 10
	vals := make([]string, n)
	for i := range vals {
		if i%11 == 5 {
			continue // null
		}
		vals[i] = fmt.Sprintf("service-%03d.example.internal", (i/(1+i%6))%200)
	}
	other := slices.Clone(vals)
	slices.Reverse(other)
	inputs := [][]byte{writeDictFile(b, li, footer, vals), writeDictFile(b, li, footer, other)}
	runs := []dictRun{{0, 0, n}, {1, 0, n}}
	for _, remap := range []bool{false, true} {
		b.Run(fmt.Sprintf("remap=%v", remap), func(b *testing.B) {
			defer func() { remapPages = true }()
			remapPages = remap
			b.ReportAllocs()
			var remapped int
			for range b.N {
				_, _, remapped, _ = mergeDictFiles(b, li, footer, inputs, runs, true)
			}
			if remap != (remapped > 0) {
				b.Fatalf("%d pages remapped", remapped)
			}
			b.ReportMetric(float64(2*n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
