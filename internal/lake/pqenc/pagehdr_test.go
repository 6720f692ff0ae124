package pqenc

import (
	"bytes"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// TestPageHeaderEncoder: the reused encoder writes thrift.Marshal's bytes,
// header after header, also after its Column moved in memory.
func TestPageHeaderEncoder(t *testing.T) {
	cols := make([]Column, 1)
	var proto thrift.CompactProtocol
	for i := range 50 {
		h := format.PageHeader{Type: format.DataPageV2, UncompressedPageSize: int32(i * 1000), CompressedPageSize: int32(i * 37), CRC: int32(i*7919 - 3)}
		d := format.DataPageHeaderV2{NumValues: int32(i), NumNulls: int32(i / 2), NumRows: int32(i), Encoding: format.RLEDictionary,
			DefinitionLevelsByteLength: int32(i % 5), IsCompressed: thrift.New(i%3 != 0)}
		if i%2 == 0 {
			d.Statistics = format.Statistics{MinValue: bytes.Repeat([]byte{'a'}, i), MaxValue: []byte("zz"), NullCount: int64(i)}
		}
		h.DataPageHeaderV2 = thrift.New(d)
		if i%10 == 9 {
			cols = append(cols, make([]Column, len(cols))...) // move them
		}
		got, err := cols[0].header(&h)
		if err != nil {
			t.Fatal(err)
		}
		want, err := thrift.Marshal(&proto, &h)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("header %d: %x, thrift.Marshal %x", i, got, want)
		}
	}
}
