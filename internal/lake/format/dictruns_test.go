package format

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// TestDictPageRuns: the runs DictPageRuns decodes from each dictionary
// page of a chunk (nulls among the values, pages of several runs) are
// the indexes DecodePage decodes, one by one, and a damaged page (its
// index bit width past 32, the CRC made to match, so that only the
// decoder can find it) is refused with an error wrapping ErrCorrupt.
func TestDictPageRuns(t *testing.T) {
	for _, codec := range []compress.Codec{&parquet.Zstd, &parquet.Uncompressed} {
		t.Run(codec.String(), func(t *testing.T) { testDictPageRuns(t, codec) })
	}
}

func testDictPageRuns(t *testing.T, codec compress.Codec) {
	rows := make([]parquet.Row, 600)
	for i := range rows {
		v := parquet.ByteArrayValue(fmt.Appendf(nil, "value-%d", (i/4)%9)).Level(0, 1, 0)
		if i%7 == 3 {
			v = parquet.NullValue().Level(0, 0, 0)
		}
		rows[i] = parquet.Row{v}
	}
	good, rc := smallPagesChunk(t, parquet.Encoded(parquet.String(), &parquet.RLEDictionary), codec, rows)
	if !rc.Typed() || len(rc.Pages) < 3 {
		t.Fatalf("typed %v with %d pages, want typed and several", rc.Typed(), len(rc.Pages))
	}
	var pd PageDecoder
	if _, _, err := pd.DecodeDict(&rc); err != nil {
		t.Fatal(err)
	}
	var pd2 PageDecoder
	nulls := 0
	for k := range rc.Pages {
		var out DecodedPage
		if err := pd.DecodePage(&rc, k, &out); err != nil {
			t.Fatalf("page %d: %v", k, err)
		}
		nulls += out.N - out.NonNull
		runs, err := pd2.DictPageRuns(&rc, k)
		if err != nil {
			t.Fatalf("page %d: %v", k, err)
		}
		var got []int32
		for j, r := range runs {
			if r.N <= 0 || j > 0 && runs[j-1].V == r.V {
				t.Fatalf("page %d: run %d of %d values of %d after %v", k, j, r.N, r.V, runs[:j])
			}
			for range r.N {
				got = append(got, r.V)
			}
		}
		if len(got) != len(out.Idx) || !bytes.Equal(fmt.Append(nil, got), fmt.Append(nil, out.Idx)) {
			t.Fatalf("page %d: runs %v, want the indexes %v", k, runs, out.Idx)
		}
	}
	if nulls == 0 {
		t.Fatal("no null decoded: the test does not test them")
	}
	if codec.CompressionCodec() != pqformat.Uncompressed {
		return // the damage is to a byte of the values as they are
	}
	p := rc.Pages[1]
	bad := damageKeepCRC(t, good, int(rc.Base)+p.Off, p.hdrLen, p.Len, p.hdrLen+int(p.repLen+p.defLen))
	if err := ReadRawChunk(firstChunk(t, bad), &rc); err != nil {
		t.Fatalf("ReadRawChunk: %v (the index checks are left to the decoder)", err)
	}
	if _, err := pd2.DictPageRuns(&rc, 0); err != nil {
		t.Fatalf("page 0: %v", err)
	}
	if _, err := pd2.DictPageRuns(&rc, 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("DictPageRuns of the damaged page: %v, want ErrCorrupt", err)
	}
}
