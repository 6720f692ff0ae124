package pqenc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/bloom"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// File writes a Parquet file chunk by chunk.
type File struct {
	Leaves []Leaf
	w      io.Writer
	off    int64
	codec  compress.Codec
	rgs    []format.RowGroup
	cidx   [][]format.ColumnIndex
	oidx   [][]format.OffsetIndex
	cur    *format.RowGroup
	proto  thrift.CompactProtocol
	filter []byte
	err    error
}

// NewFile starts a file of leaves on w, its pages compressed with codec.
func NewFile(w io.Writer, leaves []Leaf, codec compress.Codec) *File {
	f := &File{w: w, Leaves: leaves, codec: codec}
	f.write([]byte("PAR1"))
	return f
}

// Codec is the file's compression codec, for its Columns.
func (f *File) Codec() compress.Codec { return f.codec }

// Size is the number of bytes written so far.
func (f *File) Size() int64 { return f.off }

func (f *File) write(b []byte) {
	if f.err != nil {
		return
	}
	n, err := f.w.Write(b)
	f.off += int64(n)
	f.err = err
}

// BeginRowGroup starts a row group of rows rows; its chunks follow, one per
// leaf in schema order.
func (f *File) BeginRowGroup(rows int) {
	f.rgs = append(f.rgs, format.RowGroup{NumRows: int64(rows), Ordinal: int16(len(f.rgs)), FileOffset: f.off})
	f.cur = &f.rgs[len(f.rgs)-1]
	f.cidx = append(f.cidx, nil)
	f.oidx = append(f.oidx, nil)
}

// WriteChunk ends c's last page, writes its dictionary and data pages
// (and bloom filter) and adds the chunk to the row group.
func (f *File) WriteChunk(c *Column) error {
	if f.cur == nil {
		return fmt.Errorf("pqenc: chunk %v outside a row group", c.li.Path)
	}
	if c.Rows() != f.cur.NumRows {
		return fmt.Errorf("pqenc: column %v has %d rows, its row group %d", c.li.Path, c.Rows(), f.cur.NumRows)
	}
	if len(c.cut.pages) > 0 {
		// The chunk's statistics need the exact bounds of some pages
		// copied verbatim: end its last page first, whose bounds may
		// spare decoding them.
		c.endPage()
		c.resolveCutPages()
	}
	c.finish()
	if c.err != nil {
		return c.err
	}
	start := f.off
	md := c.md
	if len(c.dictOut) > 0 {
		md.DictionaryPageOffset = start
	}
	md.DataPageOffset = start + int64(len(c.dictOut))
	for i := range c.oi.PageLocations {
		c.oi.PageLocations[i].Offset += md.DataPageOffset
	}
	f.write(c.dictOut)
	f.write(c.out)
	md.TotalCompressedSize = f.off - start
	f.cur.TotalByteSize += md.TotalUncompressedSize
	f.cur.TotalCompressedSize += md.TotalCompressedSize
	if c.li.Bloom {
		f.writeBloom(&md, c.hashes, c.li.BloomBitsPerValue)
	}
	f.cur.Columns = append(f.cur.Columns, format.ColumnChunk{MetaData: md})
	g := len(f.rgs) - 1
	f.cidx[g] = append(f.cidx[g], c.ci)
	f.oidx[g] = append(f.oidx[g], c.oi)
	return f.err
}

// writeBloom writes a split block bloom filter of hashes after the chunk,
// as parquet-go does (xxHash64 of the PLAIN value, uncompressed).
func (f *File) writeBloom(md *format.ColumnMetaData, hashes []uint64, bitsPerValue uint) {
	if bitsPerValue == 0 {
		bitsPerValue = 10
	}
	n := bloom.BlockSize * bloom.NumSplitBlocksOf(int64(len(hashes)), bitsPerValue)
	if cap(f.filter) < n {
		f.filter = make([]byte, n)
	}
	f.filter = f.filter[:n]
	clear(f.filter)
	bloom.MakeSplitBlockFilter(f.filter).InsertBulk(hashes)
	var h format.BloomFilterHeader
	h.NumBytes = int32(n)
	h.Algorithm.Value = &format.SplitBlockAlgorithm{}
	h.Hash.Value = &format.XxHash{}
	h.Compression.Value = &format.BloomFilterUncompressed{}
	hb, err := thrift.Marshal(&f.proto, &h)
	if err != nil {
		f.fail(err)
		return
	}
	md.BloomFilterOffset = f.off
	f.write(hb)
	f.write(f.filter)
	md.BloomFilterLength = int32(f.off - md.BloomFilterOffset)
}

func (f *File) fail(err error) {
	if f.err == nil {
		f.err = err
	}
}

// Close writes the page indexes and the footer: meta is parquet-go's
// footer of an empty file of the same schema and options (Footer), its
// row groups and row count replaced by the file's.
func (f *File) Close(meta *format.FileMetaData) error {
	for g := range f.rgs {
		for c := range f.rgs[g].Columns {
			b, err := thrift.Marshal(&f.proto, &f.cidx[g][c])
			if err != nil {
				return err
			}
			f.rgs[g].Columns[c].ColumnIndexOffset, f.rgs[g].Columns[c].ColumnIndexLength = f.off, int32(len(b))
			f.write(b)
		}
	}
	for g := range f.rgs {
		for c := range f.rgs[g].Columns {
			b, err := thrift.Marshal(&f.proto, &f.oidx[g][c])
			if err != nil {
				return err
			}
			f.rgs[g].Columns[c].OffsetIndexOffset, f.rgs[g].Columns[c].OffsetIndexLength = f.off, int32(len(b))
			f.write(b)
		}
	}
	m := *meta
	m.NumRows = 0
	for _, rg := range f.rgs {
		m.NumRows += rg.NumRows
	}
	m.RowGroups = f.rgs
	b, err := thrift.Marshal(&f.proto, &m)
	if err != nil {
		return err
	}
	f.write(b)
	f.write(binary.LittleEndian.AppendUint32(nil, uint32(len(b))))
	f.write([]byte("PAR1"))
	return f.err
}

// Footer returns the footer parquet-go writes for an empty file of schema
// with opts: schema elements, key-value metadata, created-by and column
// orders exactly as parquet-go writes them.
func Footer(schema *parquet.Schema, opts ...parquet.WriterOption) (*format.FileMetaData, error) {
	var buf bytes.Buffer
	pw := parquet.NewWriter(&buf, append([]parquet.WriterOption{schema}, opts...)...)
	if err := pw.Close(); err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	return pf.Metadata(), nil
}
