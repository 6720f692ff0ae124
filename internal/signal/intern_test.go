package signal_test

import (
	"strconv"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestCopyInternsValues: a copy keeps one Str per distinct (key, string
// value) of the destination, across records, sources and keys, so the
// lake's encoder can compare attribute values by offset; values of
// different keys are never merged, and a reset forgets everything.
func TestCopyInternsValues(t *testing.T) {
	src := new(signal.Logs)
	c := &src.Common
	res := uint32(len(c.Resources))
	c.Resources = append(c.Resources, signal.Resource{})
	c.Scopes = append(c.Scopes, signal.Scope{})
	// Values "a", "b", "a", ..., each appended anew, under keys k and j;
	// "a" under k and under j must stay apart.
	for i := range 300 {
		r := src.AppendRecord(res, 0)
		start := uint32(c.Attrs.Len())
		v := "a"
		if i%3 == 1 {
			v = "b" + strconv.Itoa(i%7)
		}
		c.Attrs.Append(c.Keys.IDString("k"), signal.ValueString, uint64(c.AppendString(v)))
		c.Attrs.Append(c.Keys.IDString("j"), signal.ValueString, uint64(c.AppendString("a")))
		src.Attr[r] = signal.Range{Start: start, End: uint32(c.Attrs.Len())}
	}
	dst := new(signal.Logs)
	for round := range 2 {
		dst.Reset()
		dst.CopyRows(src, signal.Rows{From: 0, To: 150})
		for i := 150; i < 300; i++ {
			dst.CopyFrom(src, i) // the same values from a second call
		}
		byValue := map[[2]string]uint64{}
		for r := range dst.Len() {
			for i := dst.Attr[r].Start; i < dst.Attr[r].End; i++ {
				k := dst.Keys.Name(dst.Attrs.Key[i])
				v := dst.AttrString(int(i))
				want := src.AttrString(int(src.Attr[r].Start + i - dst.Attr[r].Start))
				if v != want {
					t.Fatalf("round %d row %d key %s: %q, want %q", round, r, k, v, want)
				}
				if s, ok := byValue[[2]string{k, v}]; ok && s != dst.Attrs.Val[i] {
					t.Fatalf("round %d row %d key %s: value %q at Str %x and %x, want one", round, r, k, v, s, dst.Attrs.Val[i])
				}
				byValue[[2]string{k, v}] = dst.Attrs.Val[i]
			}
		}
		if byValue[[2]string{"k", "a"}] == byValue[[2]string{"j", "a"}] {
			t.Fatalf("round %d: keys k and j share a Str for %q", round, "a")
		}
		// Distinct values: "a" under two keys and "b0".."b6", once each.
		if want := 1 + 1 + 7*2; len(dst.Buf) != want {
			t.Fatalf("round %d: arena of %d bytes, want %d (one copy per distinct value)", round, len(dst.Buf), want)
		}
	}
}
