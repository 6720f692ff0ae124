package signal_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/sluice-dev/sluice/internal/otlp"
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
		// The table that interned them is memory the writer counts.
		if n := dst.CopyTableBytes(); n <= 0 || n > 10<<20 {
			t.Fatalf("round %d: copy tables of %d bytes, want some and at most 10 MiB", round, n)
		}
	}
}

// oneMetricSource is a metrics batch with one resource, one scope and one
// descriptor (metric "m"), all index 0, and no points yet.
func oneMetricSource() *signal.Metrics {
	src := new(signal.Metrics)
	c := &src.Common
	c.Resources = append(c.Resources, signal.Resource{})
	c.Scopes = append(c.Scopes, signal.Scope{})
	src.Descs = append(src.Descs, signal.MetricDesc{Name: c.AppendString("m")})
	return src
}

// TestCopySharesAttrSets: with ShareAttrSets, records whose attribute
// sets are equal get one Range and the set is stored once; without it
// (every batch but the lake writer's partitions) each record keeps its
// own, so changing one record's attributes in place never changes another.
func TestCopySharesAttrSets(t *testing.T) {
	src := oneMetricSource()
	c := &src.Common
	for i := range 100 {
		p := src.AppendPoint(0, 0, 0)
		start := uint32(c.Attrs.Len())
		c.Attrs.Append(c.Keys.IDString("series"), signal.ValueString, uint64(c.AppendString(strconv.Itoa(i%10))))
		c.Attrs.Append(c.Keys.IDString("n"), signal.ValueInt, uint64(i%10))
		if i%10 == 9 {
			c.Attrs.Append(c.Keys.IDString("extra"), signal.ValueBool, 1)
		}
		src.Attr[p] = signal.Range{Start: start, End: uint32(c.Attrs.Len())}
	}
	for _, share := range []bool{true, false} {
		dst := new(signal.Metrics)
		dst.ShareAttrSets = share
		dst.CopyRows(src, signal.Rows{From: 0, To: 50})
		for i := 50; i < 100; i++ {
			dst.CopyFrom(src, i)
		}
		ranges := map[int]signal.Range{}
		for p := range dst.Len() {
			r := dst.Attr[p]
			if r.Len() != src.Attr[p].Len() {
				t.Fatalf("share %v point %d: %d attributes, want %d", share, p, r.Len(), src.Attr[p].Len())
			}
			for j := range uint32(r.Len()) {
				if got, want := dst.AttrString(int(r.Start+j)), src.AttrString(int(src.Attr[p].Start+j)); dst.Attrs.Type[r.Start+j] == signal.ValueString && got != want {
					t.Fatalf("share %v point %d: value %q, want %q", share, p, got, want)
				}
			}
			prev, seen := ranges[p%10]
			switch {
			case share && seen && prev != r:
				t.Fatalf("point %d: set at %v, its equal at %v, want one Range", p, r, prev)
			case !share && seen && prev == r:
				t.Fatalf("point %d: shares Range %v without ShareAttrSets", p, r)
			}
			ranges[p%10] = r
		}
		want := 2*100 + 10 // every set
		if share {
			want = 2*10 + 1 // each distinct set once
		}
		if dst.Attrs.Len() != want {
			t.Fatalf("share %v: %d attribute pairs stored, want %d", share, dst.Attrs.Len(), want)
		}
		dst.Reset()
		if dst.ShareAttrSets != share {
			t.Fatalf("Reset changed ShareAttrSets")
		}
	}
}

// TestCopySharesOnlyEqualSets: sets whose hashes meet (values of one
// length that differ only between their first and last eight bytes) are
// compared in full and kept apart.
func TestCopySharesOnlyEqualSets(t *testing.T) {
	src := oneMetricSource()
	c := &src.Common
	vals := []string{"prefix--X--suffix", "prefix--Y--suffix", "prefix--X--suffix", "prefix--Z--suffix"}
	for _, v := range vals {
		p := src.AppendPoint(0, 0, 0)
		start := uint32(c.Attrs.Len())
		c.Attrs.Append(c.Keys.IDString("k"), signal.ValueString, uint64(c.AppendString(v)))
		src.Attr[p] = signal.Range{Start: start, End: uint32(c.Attrs.Len())}
	}
	dst := new(signal.Metrics)
	dst.ShareAttrSets = true
	dst.CopyRows(src, signal.Rows{From: 0, To: src.Len()})
	for p, v := range vals {
		if got := dst.AttrString(int(dst.Attr[p].Start)); got != v {
			t.Fatalf("point %d: %q, want %q", p, got, v)
		}
	}
	if dst.Attr[0] != dst.Attr[2] || dst.Attr[0] == dst.Attr[1] || dst.Attr[1] == dst.Attr[3] {
		t.Fatalf("sets %v: want points 0 and 2 to share one, the others their own", dst.Attr)
	}
}

// TestCopySharesResources: with ShareAttrSets, copies of equal resources
// and scopes (each decoded request brings its own) are one resource and
// one scope of the destination, and every point keeps the content of its
// own; without it each source's are copied. The corpus metrics, copied
// twice from two decodes.
func TestCopySharesResources(t *testing.T) {
	srcs := corpus(t, "metrics", func(m *signal.Metrics, b []byte) error { return otlp.DecodeMetrics(m, b) })
	res := func(c *signal.Common, r uint32) string {
		x := c.Resources[r]
		return attrs(c, x.Attrs) + fmt.Sprintf("|%d|%q", x.DroppedAttrs, c.String(x.SchemaURL))
	}
	scope := func(c *signal.Common, s uint32) string {
		x := c.Scopes[s]
		return attrs(c, x.Attrs) + fmt.Sprintf("|%d|%q|%q|%q", x.DroppedAttrs, c.String(x.SchemaURL), c.String(x.Name), c.String(x.Version))
	}
	var plain, shared signal.Metrics
	shared.ShareAttrSets = true
	for range 2 {
		for _, src := range srcs {
			plain.CopyRows(src, signal.Rows{From: 0, To: src.Len()})
			shared.CopyRows(src, signal.Rows{From: 0, To: src.Len()})
		}
	}
	distinctRes, distinctScopes := map[string]bool{}, map[string]bool{}
	for p := range plain.Len() {
		if a, b := res(&plain.Common, plain.Resource[p]), res(&shared.Common, shared.Resource[p]); a != b {
			t.Fatalf("point %d: resource %s, want %s", p, b, a)
		}
		if a, b := scope(&plain.Common, plain.Scope[p]), scope(&shared.Common, shared.Scope[p]); a != b {
			t.Fatalf("point %d: scope %s, want %s", p, b, a)
		}
		distinctRes[res(&plain.Common, plain.Resource[p])] = true
		distinctScopes[scope(&plain.Common, plain.Scope[p])] = true
	}
	if len(shared.Resources) != len(distinctRes) || len(shared.Scopes) != len(distinctScopes) {
		t.Fatalf("shared: %d resources and %d scopes for %d and %d distinct ones", len(shared.Resources), len(shared.Scopes), len(distinctRes), len(distinctScopes))
	}
	if len(plain.Resources) <= len(shared.Resources) {
		t.Fatalf("the corpus repeats no resource: %d copied, %d shared", len(plain.Resources), len(shared.Resources))
	}
	t.Logf("%d points: %d resources and %d scopes copied, %d and %d shared", plain.Len(), len(plain.Resources), len(plain.Scopes), len(shared.Resources), len(shared.Scopes))
}

// TestCopySharesResourcesOnly: ShareResources alone (the lake writer's
// logs and spans partitions) shares resources and scopes but not record
// attribute sets. The corpus spans, copied twice.
func TestCopySharesResourcesOnly(t *testing.T) {
	srcs := corpus(t, "traces", func(s *signal.Spans, b []byte) error { return otlp.DecodeTraces(s, b) })
	var plain, shared signal.Spans
	shared.ShareResources = true
	for range 2 {
		for _, src := range srcs {
			plain.CopyRows(src, signal.Rows{From: 0, To: src.Len()})
			shared.CopyRows(src, signal.Rows{From: 0, To: src.Len()})
		}
	}
	distinct := map[string]bool{}
	for p := range plain.Len() {
		a := attrs(&plain.Common, plain.Resources[plain.Resource[p]].Attrs)
		if b := attrs(&shared.Common, shared.Resources[shared.Resource[p]].Attrs); a != b {
			t.Fatalf("span %d: resource %s, want %s", p, b, a)
		}
		if a, b := attrs(&plain.Common, plain.Attr[p]), attrs(&shared.Common, shared.Attr[p]); a != b {
			t.Fatalf("span %d: attributes %s, want %s", p, b, a)
		}
		distinct[a] = true
	}
	if len(shared.Resources) != len(distinct) || len(plain.Resources) <= len(shared.Resources) {
		t.Fatalf("%d resources copied, %d shared, %d distinct", len(plain.Resources), len(shared.Resources), len(distinct))
	}
	// Record sets are not shared: every span keeps its own range.
	for p := 1; p < shared.Len(); p++ {
		if r := shared.Attr[p]; r.Len() > 0 && r == shared.Attr[p-1] {
			t.Fatalf("spans %d and %d share an attribute set without ShareAttrSets", p-1, p)
		}
	}
}

// TestCopySharedSourceRanges: points that share one Range in the source
// (the samples of one remote-write series) get one copy with
// ShareAttrSets, copied in one CopyRows or point by point, and copies of
// their own without it (a batch whose attributes may be changed in place).
func TestCopySharedSourceRanges(t *testing.T) {
	src := oneMetricSource()
	c := &src.Common
	set := func(v string) signal.Range {
		start := uint32(c.Attrs.Len())
		c.Attrs.Append(c.Keys.IDString("job"), signal.ValueString, uint64(c.AppendString("api")))
		c.Attrs.Append(c.Keys.IDString("pod"), signal.ValueString, uint64(c.AppendString(v)))
		return signal.Range{Start: start, End: uint32(c.Attrs.Len())}
	}
	a, b := set("a"), set("b")
	empty := signal.Range{Start: uint32(c.Attrs.Len()), End: uint32(c.Attrs.Len())}
	order := []signal.Range{a, a, a, b, empty, empty, a, a}
	for _, r := range order {
		p := src.AppendPoint(0, 0, 0)
		src.Attr[p] = r
	}
	for _, share := range []bool{true, false} {
		for _, bulk := range []bool{true, false} {
			dst := new(signal.Metrics)
			dst.ShareAttrSets = share
			if bulk {
				dst.CopyRows(src, signal.Rows{From: 0, To: src.Len()})
			} else {
				for i := range src.Len() {
					dst.CopyFrom(src, i)
				}
			}
			seen := map[signal.Range]int{}
			for p, r := range order {
				d := dst.Attr[p]
				if d.Len() != r.Len() {
					t.Fatalf("share %v bulk %v point %d: %d attributes, want %d", share, bulk, p, d.Len(), r.Len())
				}
				for j := range uint32(r.Len()) {
					if got, want := dst.AttrString(int(d.Start+j)), src.AttrString(int(r.Start+j)); got != want {
						t.Fatalf("share %v bulk %v point %d: value %q, want %q", share, bulk, p, got, want)
					}
				}
				if r.Len() > 0 {
					seen[d]++
				}
			}
			// With sharing: set a once, set b once; without: each point
			// with attributes its own.
			if want := 2; share && len(seen) != want || !share && len(seen) != 6 {
				t.Fatalf("share %v bulk %v: %d distinct sets for the points with attributes: %v", share, bulk, len(seen), dst.Attr)
			}
		}
	}
}
