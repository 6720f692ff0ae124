package signal_test

import (
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// corpus decodes every binary corpus file of kind into its own batch.
func corpus[T any](t *testing.T, kind string, decode func(*T, []byte) error) []*T {
	var out []*T
	for _, f := range corpustest.Files(t, kind) {
		if !strings.Contains(f, ".binpb") {
			continue
		}
		b := new(T)
		if err := decode(b, corpustest.Read(t, f)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		corpustest.Missing(t, kind+" corpus")
	}
	return out
}

// selections are the row selections TestCopyRowsIsCopyFrom copies: the
// whole batch, a range, every third row, and rows backwards.
func selections(n int) []signal.Rows {
	var third, back []int32
	for i := 0; i < n; i += 3 {
		third = append(third, int32(i))
	}
	for i := n - 1; i >= 0; i-- {
		back = append(back, int32(i))
	}
	return []signal.Rows{{From: 0, To: n}, {From: n / 3, To: n - n/4}, {Idx: third}, {Idx: back}}
}

func rowsOf(r signal.Rows) []int {
	var out []int
	if r.Idx != nil {
		for _, i := range r.Idx {
			out = append(out, int(i))
		}
		return out
	}
	for i := r.From; i < r.To; i++ {
		out = append(out, i)
	}
	return out
}

// TestCopyRowsIsCopyFrom: CopyRows gives the batch CopyFrom row by row
// gives, for every selection shape, into an empty batch and into one that
// already holds rows of another source; every per-record field is
// compared (a field the comparison does not know fails the test, so a
// field added to a batch cannot be forgotten by CopyRows unnoticed).
func TestCopyRowsIsCopyFrom(t *testing.T) {
	logs := corpus(t, "logs", func(b *signal.Logs, pb []byte) error { return otlp.DecodeLogs(b, pb) })
	metrics := corpus(t, "metrics", func(b *signal.Metrics, pb []byte) error { return otlp.DecodeMetrics(b, pb) })
	spans := corpus(t, "traces", func(b *signal.Spans, pb []byte) error { return otlp.DecodeTraces(b, pb) })
	for _, src := range logs {
		for _, sel := range selections(src.Len()) {
			for _, pre := range []*signal.Logs{nil, logs[0]} {
				a, b := new(signal.Logs), new(signal.Logs)
				if pre != nil {
					for i := range min(pre.Len(), 50) {
						a.CopyFrom(pre, i)
					}
					b.CopyRows(pre, signal.Rows{From: 0, To: min(pre.Len(), 50)})
				}
				for _, i := range rowsOf(sel) {
					a.CopyFrom(src, i)
				}
				b.CopyRows(src, sel)
				compareBatches(t, "logs", a, b, &a.Common, &b.Common, a.Len(), b.Len())
			}
		}
	}
	for _, share := range []bool{false, true} {
		for _, src := range metrics {
			for _, sel := range selections(src.Len()) {
				a, b := new(signal.Metrics), new(signal.Metrics)
				// With ShareAttrSets (a lake partition) CopyRows looks the
				// sets up in blocks (sharedAttrRanges): the same sets,
				// shared the same way, as CopyFrom's one by one.
				a.ShareAttrSets, b.ShareAttrSets = share, share
				b.CopyFrom(metrics[0], 0) // b starts mid-stream: CopyFrom then CopyRows
				a.CopyFrom(metrics[0], 0)
				for _, i := range rowsOf(sel) {
					a.CopyFrom(src, i)
				}
				b.CopyRows(src, sel)
				compareBatches(t, "metrics", a, b, &a.Common, &b.Common, a.Len(), b.Len())
				if len(a.Descs) != len(b.Descs) {
					t.Fatalf("metrics: %d descriptors, CopyFrom made %d", len(b.Descs), len(a.Descs))
				}
				if share && (!slices.Equal(sharing(a.Attr), sharing(b.Attr)) || a.Attrs.Len() != b.Attrs.Len()) {
					t.Fatalf("metrics, shared sets: CopyRows made %d attributes, CopyFrom %d, or shared other sets", b.Attrs.Len(), a.Attrs.Len())
				}
			}
		}
	}
	for _, src := range spans {
		for _, sel := range selections(src.Len()) {
			a, b := new(signal.Spans), new(signal.Spans)
			for _, i := range rowsOf(sel) {
				a.CopyFrom(src, i)
			}
			b.CopyRows(src, sel)
			compareBatches(t, "spans", a, b, &a.Common, &b.Common, a.Len(), b.Len())
		}
	}
}

// sharing maps each record to the first record with its Range: two
// batches share their sets alike when their sharings are equal.
func sharing(attr []signal.Range) []int {
	first := map[signal.Range]int{}
	out := make([]int, len(attr))
	for i, r := range attr {
		f, ok := first[r]
		if !ok || r.Len() == 0 {
			f = i
			first[r] = i
		}
		out[i] = f
	}
	return out
}

// compareBatches compares every exported per-record field of two batches
// of one type, resolving strings, ranges and references.
func compareBatches(t *testing.T, what string, a, b any, ca, cb *signal.Common, na, nb int) {
	t.Helper()
	if na != nb {
		t.Fatalf("%s: %d rows, CopyFrom made %d", what, nb, na)
	}
	if len(ca.Resources) != len(cb.Resources) || len(ca.Scopes) != len(cb.Scopes) {
		t.Fatalf("%s: %d resources %d scopes, CopyFrom made %d and %d", what, len(cb.Resources), len(cb.Scopes), len(ca.Resources), len(ca.Scopes))
	}
	for i := range ca.Resources {
		ra, rb := ca.Resources[i], cb.Resources[i]
		if attrs(ca, ra.Attrs) != attrs(cb, rb.Attrs) || ra.DroppedAttrs != rb.DroppedAttrs || ca.String(ra.SchemaURL) != cb.String(rb.SchemaURL) {
			t.Fatalf("%s: resource %d differs", what, i)
		}
	}
	for i := range ca.Scopes {
		sa, sb := ca.Scopes[i], cb.Scopes[i]
		if attrs(ca, sa.Attrs) != attrs(cb, sb.Attrs) || sa.DroppedAttrs != sb.DroppedAttrs || ca.String(sa.SchemaURL) != cb.String(sb.SchemaURL) ||
			ca.String(sa.Name) != cb.String(sb.Name) || ca.String(sa.Version) != cb.String(sb.Version) {
			t.Fatalf("%s: scope %d differs", what, i)
		}
	}
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	typ := va.Type()
	for f := range typ.NumField() {
		sf := typ.Field(f)
		if !sf.IsExported() || sf.Anonymous || sf.Type.Kind() != reflect.Slice {
			continue
		}
		fa, fb := va.Field(f), vb.Field(f)
		switch sf.Name {
		case "Descs", "U64", "F64": // not per record; compared through Desc and the ranges
			continue
		}
		if fa.Len() != na || fb.Len() != nb {
			t.Fatalf("%s.%s: %d and %d values for %d rows", what, sf.Name, fa.Len(), fb.Len(), na)
		}
		for i := range na {
			x, y := fa.Index(i).Interface(), fb.Index(i).Interface()
			var ok bool
			switch sf.Name {
			case "Attr":
				ok = attrs(ca, x.(signal.Range)) == attrs(cb, y.(signal.Range))
			case "Events", "Links", "Exemplars":
				ok = msgs(ca, x.(signal.Range)) == msgs(cb, y.(signal.Range))
			case "BucketCounts", "PosCounts", "NegCounts":
				ok = reflect.DeepEqual(a.(*signal.Metrics).U64[x.(signal.Range).Start:x.(signal.Range).End],
					b.(*signal.Metrics).U64[y.(signal.Range).Start:y.(signal.Range).End])
			case "Bounds", "Quantiles", "FloatCounts":
				ok = f64s(a.(*signal.Metrics).F64, x.(signal.Range)) == f64s(b.(*signal.Metrics).F64, y.(signal.Range))
			case "Desc":
				da, db := a.(*signal.Metrics).Descs[x.(uint32)], b.(*signal.Metrics).Descs[y.(uint32)]
				ok = ca.String(da.Name) == cb.String(db.Name) && ca.String(da.Description) == cb.String(db.Description) &&
					ca.String(da.Unit) == cb.String(db.Unit) && da.Type == db.Type && da.Temporality == db.Temporality &&
					da.Monotonic == db.Monotonic && attrs(ca, da.Metadata) == attrs(cb, db.Metadata)
			case "Body":
				switch a.(*signal.Logs).BodyType[i] {
				case signal.ValueString, signal.ValueBytes, signal.ValueArray, signal.ValueMap:
					ok = ca.String(signal.Str(x.(uint64))) == cb.String(signal.Str(y.(uint64)))
				default:
					ok = x == y
				}
			case "Resource", "Scope":
				ok = x == y // same order of resources and scopes, compared above
			default:
				switch xv := x.(type) {
				case signal.Str:
					ok = ca.String(xv) == cb.String(y.(signal.Str))
				case float64:
					ok = math.Float64bits(xv) == math.Float64bits(y.(float64))
				case signal.Range:
					t.Fatalf("%s.%s: a range field the comparison does not know", what, sf.Name)
				default:
					ok = reflect.DeepEqual(x, y)
				}
			}
			if !ok {
				t.Fatalf("%s.%s row %d: CopyRows %v, CopyFrom %v", what, sf.Name, i, y, x)
			}
		}
	}
}

func attrs(c *signal.Common, r signal.Range) string {
	var sb strings.Builder
	for i := r.Start; i < r.End; i++ {
		sb.WriteString(c.Keys.Name(c.Attrs.Key[i]))
		sb.WriteByte(byte(c.Attrs.Type[i]))
		switch c.Attrs.Type[i] {
		case signal.ValueString, signal.ValueBytes, signal.ValueArray, signal.ValueMap:
			sb.WriteString(c.AttrString(int(i)))
		default:
			sb.WriteString(strconv.FormatUint(c.Attrs.Val[i], 16))
		}
		sb.WriteByte(0)
	}
	return sb.String()
}

func msgs(c *signal.Common, r signal.Range) string {
	var sb strings.Builder
	for _, m := range c.Msgs[r.Start:r.End] {
		sb.Write(c.Bytes(m))
		sb.WriteByte(0)
	}
	return sb.String()
}

func f64s(s []float64, r signal.Range) string {
	var sb strings.Builder
	for _, v := range s[r.Start:r.End] {
		sb.WriteString(strconv.FormatUint(math.Float64bits(v), 16))
		sb.WriteByte(',')
	}
	return sb.String()
}

// TestCopyKeepsOneCopyOfARun: a value repeated by record after record is
// kept once in the destination's arena, and a destination that was reset
// (its arena reused by other bytes) never gets a stale value.
func TestCopyKeepsOneCopyOfARun(t *testing.T) {
	build := func(val string, n int) *signal.Logs {
		l := new(signal.Logs)
		l.Resources = append(l.Resources, signal.Resource{})
		l.Scopes = append(l.Scopes, signal.Scope{})
		for i := range n {
			j := l.AppendRecord(0, 0)
			a := uint32(l.Attrs.Len())
			l.Attrs.Append(l.Keys.IDString("job"), signal.ValueString, uint64(l.AppendString(val)))
			l.Attrs.Append(l.Keys.IDString("n"), signal.ValueString, uint64(l.AppendString(strconv.Itoa(i))))
			l.Attr[j] = signal.Range{Start: a, End: uint32(l.Attrs.Len())}
		}
		return l
	}
	dst := new(signal.Logs)
	dst.CopyRows(build("api-server-0001", 100), signal.Rows{From: 0, To: 100})
	first := dst.Attrs.Val[dst.Attr[0].Start]
	for i := range 100 {
		a := dst.Attr[i].Start
		if dst.Attrs.Val[a] != first || dst.AttrString(int(a)) != "api-server-0001" || dst.AttrString(int(a+1)) != strconv.Itoa(i) {
			t.Fatalf("row %d: job %q (Str %x, first %x), n %q", i, dst.AttrString(int(a)), dst.Attrs.Val[a], first, dst.AttrString(int(a+1)))
		}
	}
	if len(dst.Buf) > len("api-server-0001")+300 {
		t.Errorf("arena of %d bytes for one repeated value and 100 short ones", len(dst.Buf))
	}
	// Reset: the old offsets now hold other bytes of the same length.
	dst.Reset()
	dst.CopyRows(build("api-server-0002", 3), signal.Rows{From: 0, To: 3})
	for i := range 3 {
		if got := dst.AttrString(int(dst.Attr[i].Start)); got != "api-server-0002" {
			t.Fatalf("after Reset, row %d: job %q", i, got)
		}
	}
}
