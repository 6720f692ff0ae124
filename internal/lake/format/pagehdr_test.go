package format

import (
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// pageHeaderSeeds are headers as the lake's writers and parquet-go write
// them: data pages v1 and v2, with and without statistics, dictionary
// pages.
func pageHeaderSeeds(t testing.TB) [][]byte {
	var proto thrift.CompactProtocol
	hs := []pqformat.PageHeader{
		{Type: pqformat.DataPageV2, UncompressedPageSize: 1 << 20, CompressedPageSize: 5000, CRC: -12345,
			DataPageHeaderV2: thrift.New(pqformat.DataPageHeaderV2{NumValues: 9000, NumNulls: 12, NumRows: 8000,
				Encoding: pqformat.DeltaLengthByteArray, DefinitionLevelsByteLength: 30, RepetitionLevelsByteLength: 7,
				IsCompressed: thrift.New(true)})},
		{Type: pqformat.DataPageV2, UncompressedPageSize: 100, CompressedPageSize: 90,
			DataPageHeaderV2: thrift.New(pqformat.DataPageHeaderV2{NumValues: 1, NumRows: 1, Encoding: pqformat.RLEDictionary,
				IsCompressed: thrift.New(false), Statistics: pqformat.Statistics{NullCount: 3,
					MinValue: []byte("a long minimum value of a page"), MaxValue: []byte("the maximum value, longer")}})},
		{Type: pqformat.DataPageV2, UncompressedPageSize: 100, CompressedPageSize: 90,
			DataPageHeaderV2: thrift.New(pqformat.DataPageHeaderV2{NumValues: 1, NumRows: 1, Encoding: pqformat.RLEDictionary,
				Statistics: pqformat.Statistics{Min: []byte{}, Max: []byte("x"), MinValue: []byte{}, MaxValue: []byte("x"), DistinctCount: 1}})},
		{Type: pqformat.DataPage, UncompressedPageSize: 64, CompressedPageSize: 64, CRC: 7,
			DataPageHeader: thrift.New(pqformat.DataPageHeader{NumValues: 8, Encoding: pqformat.Plain,
				DefinitionLevelEncoding: pqformat.RLE, RepetitionLevelEncoding: pqformat.RLE,
				Statistics: pqformat.Statistics{MinValue: []byte{1, 0, 0, 0}, MaxValue: []byte{9, 0, 0, 0}}})},
		{Type: pqformat.DictionaryPage, UncompressedPageSize: 300, CompressedPageSize: 200,
			DictionaryPageHeader: thrift.New(pqformat.DictionaryPageHeader{NumValues: 30, Encoding: pqformat.Plain, IsSorted: true})},
		{Type: pqformat.DictionaryPage, UncompressedPageSize: 300, CompressedPageSize: 200,
			DictionaryPageHeader: thrift.New(pqformat.DictionaryPageHeader{NumValues: 30, Encoding: pqformat.PlainDictionary})},
	}
	var seeds [][]byte
	for _, h := range hs {
		b, err := thrift.Marshal(&proto, &h)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, append(b, 0xde, 0xad)) // the page's bytes follow
	}
	return seeds
}

// slowPageHeader is parquet-go's decoding of a page header, what
// fastPageHeader must give whenever it takes one.
func slowPageHeader(b []byte) (pqformat.PageHeader, int, error) {
	var proto thrift.CompactProtocol
	br := proto.NewReaderFromBytes(b)
	var h pqformat.PageHeader
	err := thrift.NewDecoder(br).Decode(&h)
	return h, br.BytesRead(), err
}

func TestFastPageHeader(t *testing.T) {
	for i, b := range pageHeaderSeeds(t) {
		var h pqformat.PageHeader
		n, ok := fastPageHeader(b, &h)
		want, wn, err := slowPageHeader(b)
		if err != nil || !ok {
			t.Fatalf("header %d: fast ok %v, parquet-go error %v", i, ok, err)
		}
		if n != wn || n != len(b)-2 || !reflect.DeepEqual(h, want) {
			t.Fatalf("header %d: fast (%d bytes) %+v\nparquet-go (%d bytes) %+v", i, n, h, wn, want)
		}
		// Cut short anywhere, it is not taken.
		for k := range n {
			var h pqformat.PageHeader
			if _, ok := fastPageHeader(b[:k], &h); ok {
				t.Fatalf("header %d cut to %d of %d bytes taken", i, k, n)
			}
		}
	}
}

// FuzzFastPageHeader: whatever fastPageHeader takes, parquet-go's decoder
// takes too, with the same length and the same header.
func FuzzFastPageHeader(f *testing.F) {
	for _, b := range pageHeaderSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h pqformat.PageHeader
		n, ok := fastPageHeader(b, &h)
		if !ok {
			return
		}
		want, wn, err := slowPageHeader(b)
		if err != nil {
			t.Fatalf("fast took %d bytes %+v, parquet-go fails: %v", n, h, err)
		}
		if n != wn || !reflect.DeepEqual(h, want) {
			t.Fatalf("fast (%d bytes) %+v\nparquet-go (%d bytes) %+v", n, h, wn, want)
		}
	})
}
