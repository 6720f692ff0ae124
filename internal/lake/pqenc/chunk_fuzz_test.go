package pqenc

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// FuzzChunkRead reads every chunk of corrupted files: Read or a page's
// decoding fails with an error, or the chunk's rows are copied whole
// (CopyRows, CopyRowsPages: dictionary pages copied verbatim or, into a
// column whose dictionary the input's does not extend, remapped) into a
// new file; never a panic or a hang.
func FuzzChunkRead(f *testing.F) {
	s := testSchema()
	rnd := rand.New(rand.NewPCG(1, 2))
	f.Add(writeWithParquetGo(f, s, randomRows(rnd, s, 300, "a"), 120))
	f.Add(writeWithParquetGo(f, s, randomRows(rnd, s, 40, "b"), 40))
	f.Add(dictPagesSeed(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := openFuzzed(data)
		if err != nil {
			return
		}
		// Corrupt sizes make parquet-go allocate what they claim: keep
		// them to what a small file can hold (this tests Read, not them).
		for _, rg := range pf.Metadata().RowGroups {
			for _, cc := range rg.Columns {
				if md := cc.MetaData; md.TotalUncompressedSize > 1<<20 || md.NumValues > 1<<16 || rg.NumRows > 1<<16 {
					return
				}
			}
		}
		fs := pf.Schema()
		var leaves []Leaf
		for _, p := range fs.Columns() {
			leaf, _ := fs.Lookup(p...)
			li, err := NewLeaf(leaf)
			if err != nil {
				return
			}
			// Bloom filters on every other byte-array leaf: the others'
			// dictionary pages may be copied verbatim (dictcopy.go).
			li.MaxDictBytes, li.Bloom = 64, li.Kind == parquet.ByteArray && len(leaves)%2 == 0
			leaves = append(leaves, li)
		}
		out := NewFile(io.Discard, leaves, &parquet.Zstd)
		var ch Chunk
		var c Column
		for _, rg := range pf.RowGroups() {
			ccs := rg.ColumnChunks()
			if len(ccs) != len(leaves) {
				return
			}
			out.BeginRowGroup(int(rg.NumRows()))
			for j, cc := range ccs {
				li := &leaves[j]
				if err := ch.Read(cc, int(li.MaxDef), int(li.MaxRep), 1<<20); err != nil {
					return
				}
				if int64(ch.Rows()) != rg.NumRows() {
					return
				}
				c.Reset(li, out.Codec())
				c.AllowDictPages(true)
				if j%4 == 1 && li.Dict {
					// A dictionary the input's does not extend: its
					// whole pages are remapped (dictremap.go).
					c.dict.index([]byte("\xffremap"))
				}
				// Pages are decoded as the copies reach them (or copied
				// verbatim, CopyRowsPages): a page that fails to decode
				// stops the chunk with Err, and the column with it.
				for k := 0; ch.Row() < ch.Rows() && ch.Err() == nil; k++ {
					n := min(ch.Rows()-ch.Row(), 7+93*(k%2))
					switch {
					case k%2 == 1:
						c.CopyRowsPages(&ch, n)
					case !ch.SkipNulls(n):
						c.CopyRows(&ch, n)
					default:
						c.Null(n)
					}
				}
				if ch.Err() != nil {
					return
				}
				if err := out.WriteChunk(&c); err != nil {
					t.Fatalf("write a chunk that was read: %v", err)
				}
			}
		}
	})
}

func openFuzzed(data []byte) (pf *parquet.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = io.ErrUnexpectedEOF // parquet-go panics on some corrupt footers
		}
	}()
	return parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
}

// dictPagesSeed is a file of two optional dictionary-encoded string
// columns written by pqenc (data pages v2 of 50 rows), whose second
// column's pages FuzzChunkRead copies verbatim or remaps.
func dictPagesSeed(f *testing.F) []byte {
	defer func(n int) { pageRows = n }(pageRows)
	pageRows = 50
	node := parquet.Optional(parquet.Encoded(parquet.String(), &parquet.RLEDictionary))
	s := parquet.NewSchema("t", parquet.Group{"a": node, "b": node})
	footer, err := Footer(s, parquet.Compression(&parquet.Zstd))
	if err != nil {
		f.Fatal(err)
	}
	var leaves []Leaf
	for _, p := range s.Columns() {
		leaf, _ := s.Lookup(p...)
		li, err := NewLeaf(leaf)
		if err != nil {
			f.Fatal(err)
		}
		li.Path = p
		leaves = append(leaves, li)
	}
	var buf bytes.Buffer
	out := NewFile(&buf, leaves, &parquet.Zstd)
	for rg := range 2 {
		const n = 240
		out.BeginRowGroup(n)
		for j := range leaves {
			var c Column
			c.Reset(&leaves[j], out.Codec())
			for i := range n {
				c.Str([]string{"", "alpha", "bravo", "charlie", "delta"}[(i/(3+j+rg))%5], 1)
			}
			if err := out.WriteChunk(&c); err != nil {
				f.Fatal(err)
			}
		}
	}
	if err := out.Close(footer); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes()
}
