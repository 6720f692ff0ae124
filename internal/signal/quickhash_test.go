package signal_test

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestCopiedAndInternedSetsMeet: a set copied into a partition batch
// (CopyRows: its hash reads a short value as eight bytes of the source
// arena where the arena has them) and the same set appended straight
// (InternStrAttrs, the lake loop's remote-write path: the value's bytes
// alone) hash alike and share one Range, whichever comes first, for
// values of every length up to 20 bytes, at the end of the source arena
// and followed by other bytes.
func TestCopiedAndInternedSetsMeet(t *testing.T) {
	source := func(v string, atEnd bool) *signal.Metrics {
		src := oneMetricSource()
		c := &src.Common
		p := src.AppendPoint(0, 0, 0)
		start := uint32(c.Attrs.Len())
		c.Attrs.Append(c.Keys.IDString("job"), signal.ValueString, uint64(c.AppendString("api")))
		c.Attrs.Append(c.Keys.IDString("v"), signal.ValueString, uint64(c.AppendString(v)))
		if !atEnd {
			c.AppendString("trailing bytes")
		}
		src.Attr[p] = signal.Range{Start: start, End: uint32(c.Attrs.Len())}
		return src
	}
	for n := 0; n <= 20; n++ {
		v := strings.Repeat("x", n/2) + strings.Repeat("yz", n)[:n-n/2]
		for _, atEnd := range []bool{true, false} {
			for _, copyFirst := range []bool{true, false} {
				dst := new(signal.Metrics)
				dst.ShareAttrSets = true
				src := source(v, atEnd)
				intern := func() signal.Range {
					keys := []signal.KeyID{dst.Keys.IDString("job"), dst.Keys.IDString("v")}
					vals := [][]byte{[]byte("api"), []byte(v)[:n:n]}
					return dst.InternStrAttrs(keys, vals)
				}
				var a, b signal.Range
				if copyFirst {
					dst.CopyRows(src, signal.Rows{From: 0, To: 1})
					a, b = dst.Attr[0], intern()
				} else {
					b = intern()
					dst.CopyRows(src, signal.Rows{From: 0, To: 1})
					a = dst.Attr[0]
				}
				if a != b || dst.Attrs.Len() != 2 {
					t.Fatalf("value of %d bytes (at the arena's end %v, copied first %v): copied %v, interned %v, %d attributes stored",
						n, atEnd, copyFirst, a, b, dst.Attrs.Len())
				}
			}
		}
	}
}
