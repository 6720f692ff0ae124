package pqenc

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// FuzzChunkRead reads every chunk of corrupted files: Read either fails
// with an error or yields a chunk whose rows CopyRows copies whole into a
// new file, never a panic.
func FuzzChunkRead(f *testing.F) {
	s := testSchema()
	rnd := rand.New(rand.NewPCG(1, 2))
	f.Add(writeWithParquetGo(f, s, randomRows(rnd, s, 300, "a"), 120))
	f.Add(writeWithParquetGo(f, s, randomRows(rnd, s, 40, "b"), 40))
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
			li.MaxDictBytes, li.Bloom = 64, li.Kind == parquet.ByteArray
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
				for ch.Row() < ch.Rows() {
					n := min(ch.Rows()-ch.Row(), 7)
					if !ch.SkipNulls(n) {
						c.CopyRows(&ch, n)
					} else {
						c.Null(n)
					}
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
