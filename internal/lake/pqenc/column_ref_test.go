package pqenc

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestBytesRefIsBytes: BytesRef, which skips the dictionary lookup and the
// bloom hash of a value it has a ref for, writes the file Bytes writes:
// with and without a bloom filter, over several row groups (a ref kept
// from an earlier chunk is not used) and when the dictionary outgrows
// MaxDictBytes mid-chunk (the chunk falls back to plain values).
func TestBytesRefIsBytes(t *testing.T) {
	defer func(n int) { pageRows = n }(pageRows)
	pageRows = 300
	li, footer := dictTestLeaf(t)
	vals := []string{"alpha", "bravo", "charlie", "a-value-longer-than-sixteen-bytes", "echo"}
	for _, c := range []struct {
		name     string
		bloom    bool
		maxDict  int
		distinct int
	}{
		{"dict", false, 0, len(vals)},
		{"dict-bloom", true, 0, len(vals)},
		{"fallback-bloom", true, 600, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			li := li
			li.Bloom, li.MaxDictBytes = c.bloom, c.maxDict
			value := func(g, i int) string {
				if c.distinct > len(vals) {
					return fmt.Sprintf("value-%04d", (i*7+g)%c.distinct)
				}
				return vals[(i/3+g)%len(vals)]
			}
			refs := map[string]*ValueRef{}
			write := func(useRef bool) []byte {
				var buf bytes.Buffer
				f := NewFile(&buf, []Leaf{li}, &parquet.Zstd)
				var col Column
				for g := range 3 {
					const rows = 1000
					col.Reset(&li, f.Codec())
					for i := 0; i < rows; i += 2 {
						v := []byte(value(g, i))
						if !useRef {
							col.Bytes(v, 2)
							continue
						}
						r := refs[string(v)]
						if r == nil {
							r = new(ValueRef)
							refs[string(v)] = r
						}
						col.BytesRef(v, 2, r)
					}
					f.BeginRowGroup(rows)
					if err := f.WriteChunk(&col); err != nil {
						t.Fatal(err)
					}
				}
				m := *footer
				if err := f.Close(&m); err != nil {
					t.Fatal(err)
				}
				return buf.Bytes()
			}
			want, got := write(false), write(true)
			if !bytes.Equal(got, want) {
				t.Fatalf("BytesRef wrote %d bytes, Bytes %d, or other bytes", len(got), len(want))
			}
			checkFile(t, got)
		})
	}
}
