package prw

import (
	"fmt"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestDecodeV2RefsInPieces: protobuf lets a repeated scalar field arrive
// packed in one piece, packed in several, or unpacked (one varint field a
// reference), and a parser must take each as the concatenation. A series'
// label references, and an exemplar's, decode to the same labels whichever
// way they are split, including a split between a pair's name and value.
func TestDecodeV2RefsInPieces(t *testing.T) {
	symbols := []string{"", "__name__", "m", "a", "1", "b", "2", "trace_id", "abc"}
	refs := []uint64{1, 2, 3, 4, 5, 6}
	exRefs := []uint64{7, 8}
	packed := func(xs []uint64) []byte {
		var p []byte
		for _, x := range xs {
			p = protowire.AppendVarint(p, x)
		}
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		return protowire.AppendBytes(b, p)
	}
	unpacked := func(xs []uint64) []byte {
		var b []byte
		for _, x := range xs {
			b = protowire.AppendTag(b, 1, protowire.VarintType)
			b = protowire.AppendVarint(b, x)
		}
		return b
	}
	ways := map[string]func([]uint64) []byte{
		"packed": packed,
		"packed, split inside a pair": func(xs []uint64) []byte {
			return append(packed(xs[:1]), packed(xs[1:])...)
		},
		"packed, three pieces": func(xs []uint64) []byte {
			if len(xs) < 3 {
				return append(packed(xs[:1]), packed(xs[1:])...)
			}
			return append(append(packed(xs[:3]), packed(xs[3:len(xs)-1])...), packed(xs[len(xs)-1:])...)
		},
		"unpacked":        unpacked,
		"packed then one": func(xs []uint64) []byte { return append(packed(xs[:len(xs)-1]), unpacked(xs[len(xs)-1:])...) },
	}
	request := func(labelRefs func([]uint64) []byte, exemplar bool) []byte {
		var b []byte
		for _, s := range symbols {
			b = protowire.AppendTag(b, 4, protowire.BytesType)
			b = protowire.AppendString(b, s)
		}
		var sample []byte
		sample = protowire.AppendTag(sample, 1, protowire.Fixed64Type)
		sample = protowire.AppendFixed64(sample, math.Float64bits(1.5))
		sample = protowire.AppendTag(sample, 2, protowire.VarintType)
		sample = protowire.AppendVarint(sample, 1000)
		ex := labelRefs(exRefs)
		ex = protowire.AppendTag(ex, 2, protowire.Fixed64Type)
		ex = protowire.AppendFixed64(ex, math.Float64bits(1.5))
		ex = protowire.AppendTag(ex, 3, protowire.VarintType)
		ex = protowire.AppendVarint(ex, 1000)
		ts := labelRefs(refs)
		ts = protowire.AppendTag(ts, 2, protowire.BytesType)
		ts = protowire.AppendBytes(ts, sample)
		if exemplar {
			ts = protowire.AppendTag(ts, 4, protowire.BytesType)
			ts = protowire.AppendBytes(ts, ex)
		}
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		return protowire.AppendBytes(b, ts)
	}
	render := func(t *testing.T, body []byte) string {
		t.Helper()
		var d Decoder
		var m signal.Metrics
		st, err := d.DecodeV2(&m, body)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if st.Samples != 1 || st.Exemplars != 1 {
			t.Fatalf("stats %+v, want 1 sample and 1 exemplar", st)
		}
		return fmt.Sprint(readBack(t, &m), dumpRows(&m))
	}
	want := render(t, request(packed, true))
	if want == "" {
		t.Fatal("nothing decoded")
	}
	for name, way := range ways {
		t.Run(name, func(t *testing.T) {
			if got := render(t, request(way, true)); got != want {
				t.Errorf("decoded\n%s\nwant (one packed field)\n%s", got, want)
			}
			// The receiver's scan takes the request (samples only) or
			// leaves it to the decoder, and answers as the decoder does.
			checkScanAgreesV(t, 2, request(way, false))
		})
	}
}
