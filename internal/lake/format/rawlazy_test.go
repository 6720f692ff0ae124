package format

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// TestRawChunkDeferredIndexChecks: ReadRawChunk leaves a data page v2's
// dictionary indexes to the typed decoder instead of decompressing them
// to check them, but a damaged index page is still refused, with an error
// wrapping ErrCorrupt, whichever way the chunk is decoded: by the typed
// decoder (DecodePage), by parquet-go (DecodePages, DecodePagesFrom: the
// deferred checks run first), and at once by ReadRawChunk for a chunk the
// typed decoder does not take (dictionary-encoded int64s). The same
// chunks undamaged read back whole.
func TestRawChunkDeferredIndexChecks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		node  parquet.Node
		value func(i int) parquet.Value
		typed bool
	}{
		{"byte arrays", parquet.Encoded(parquet.String(), &parquet.RLEDictionary),
			func(i int) parquet.Value { return parquet.ByteArrayValue(fmt.Appendf(nil, "value-%d", i%7)) }, true},
		{"int64", parquet.Encoded(parquet.Leaf(parquet.Int64Type), &parquet.RLEDictionary),
			func(i int) parquet.Value { return parquet.Int64Value(int64(i % 5)) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := make([]parquet.Row, 500)
			for i := range rows {
				rows[i] = parquet.Row{tc.value(i).Level(0, 1, 0)}
			}
			good, rc := smallPagesChunk(t, tc.node, &parquet.Uncompressed, rows)
			if rc.Typed() != tc.typed || len(rc.Pages) < 2 {
				t.Fatalf("typed %v with %d pages, want %v and several", rc.Typed(), len(rc.Pages), tc.typed)
			}
			p := rc.Pages[1]
			if p.Encoding != pqformat.RLEDictionary || !p.V2 {
				t.Fatalf("page 1: %s, v2 %v", p.Encoding, p.V2)
			}
			n := 0
			for pages := rc.DecodePagesFrom(0); ; {
				pg, err := pages.ReadPage()
				if err != nil {
					break
				}
				n += int(pg.NumRows())
			}
			if n != len(rows) {
				t.Fatalf("undamaged: %d rows read, want %d", n, len(rows))
			}
			// The bit width of page 1's indexes (the first byte after its
			// levels) past 32, the page's CRC made to match.
			bad := damageKeepCRC(t, good, int(rc.Base)+p.Off, p.hdrLen, p.Len, p.hdrLen+int(p.repLen+p.defLen))
			err := ReadRawChunk(firstChunk(t, bad), &rc)
			if !tc.typed {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("ReadRawChunk of a chunk the typed decoder does not take: %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadRawChunk: %v (the index checks are left to the decoder)", err)
			}
			var pd PageDecoder
			if _, _, err := pd.DecodeDict(&rc); err != nil {
				t.Fatal(err)
			}
			var out DecodedPage
			if err := pd.DecodePage(&rc, 0, &out); err != nil {
				t.Fatalf("page 0: %v", err)
			}
			if err := pd.DecodePage(&rc, 1, &out); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodePage of the damaged page: %v, want ErrCorrupt", err)
			}
			for _, k := range []int{0, 2} {
				if _, err := rc.DecodePagesFrom(k).ReadPage(); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("DecodePagesFrom(%d): %v, want ErrCorrupt", k, err)
				}
			}
		})
	}
}

// damageKeepCRC returns b with byte at of the page at off (hdrLen bytes of
// header, n in all) set past 32, and the page header's CRC rewritten to
// match its bytes: a damage only the page's own checks can find.
func damageKeepCRC(t *testing.T, b []byte, off, hdrLen, n, at int) []byte {
	t.Helper()
	h, hl, err := slowPageHeader(b[off:])
	if err != nil || hl != hdrLen {
		t.Fatalf("page header: %v (%d bytes, want %d)", err, hl, hdrLen)
	}
	var proto thrift.CompactProtocol
	for v := byte(33); v < 128; v++ {
		d := bytes.Clone(b)
		d[off+at] = v
		h.CRC = int32(crc32.ChecksumIEEE(d[off+hdrLen : off+n]))
		hb, err := thrift.Marshal(&proto, &h)
		if err != nil {
			t.Fatal(err)
		}
		if len(hb) == hdrLen {
			copy(d[off:], hb)
			return d
		}
	}
	t.Fatal("no damage keeps the header's length")
	return nil
}

// firstChunk opens the file b with Open and returns its first column chunk.
// smallPagesChunk writes rows into a file of one optional column c of
// node with pages of about 512 bytes, no page statistics and codec, and
// returns the file and its column chunk read raw.
func smallPagesChunk(t *testing.T, node parquet.Node, codec compress.Codec, rows []parquet.Row) ([]byte, RawChunk) {
	t.Helper()
	s := parquet.NewSchema("t", parquet.Group{"c": parquet.Optional(node)})
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, s, parquet.Compression(codec), parquet.PageBufferSize(512),
		parquet.DataPageStatistics(false))
	if _, err := w.WriteRows(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	var rc RawChunk
	if err := ReadRawChunk(firstChunk(t, b), &rc); err != nil {
		t.Fatal(err)
	}
	return b, rc
}

func firstChunk(t *testing.T, b []byte) parquet.ColumnChunk {
	t.Helper()
	pf, err := Open(bytes.NewReader(b), int64(len(b)), "f.parquet")
	if err != nil {
		t.Fatal(err)
	}
	return pf.RowGroups()[0].ColumnChunks()[0]
}
