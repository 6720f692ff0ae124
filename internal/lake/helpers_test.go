package lake

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// fixedNow is the clock of the tests: 2025-06-01T12:30:00Z.
var fixedNow = time.Date(2025, 6, 1, 12, 30, 0, 0, time.UTC)

func readCorpus(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			tb.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			tb.Fatal(err)
		}
	}
	return b
}

// corpusFiles returns the .binpb(.gz) corpus files of kind.
func corpusFiles(tb testing.TB, kind string) []string {
	var out []string
	for _, f := range corpustest.Files(tb, kind) {
		if strings.Contains(f, ".binpb") {
			out = append(out, f)
		}
	}
	return out
}

// writeAll writes through a Writer into a temp lake and returns the
// committed segments.
func writeAll(tb testing.TB, opts Options, write func(w *Writer) error) (string, []Segment) {
	tb.Helper()
	if opts.Root == "" && opts.Store == nil {
		opts.Root = tb.TempDir()
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return fixedNow }
	}
	var segs []Segment
	w, err := NewWriter(opts, func(s Segment) error { segs = append(segs, s); return nil })
	if err != nil {
		tb.Fatal(err)
	}
	if err := write(w); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return opts.Root, segs
}

func openSeg(tb testing.TB, root string, s Segment) *File {
	tb.Helper()
	f, err := OpenFile(filepath.Join(root, filepath.FromSlash(s.Path)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return f
}

// canon renders values so that equal records render equally.
type canon struct {
	c *signal.Common
	b strings.Builder
}

func (k *canon) f(format string, args ...any) { fmt.Fprintf(&k.b, format, args...) }

func (k *canon) value(t signal.ValueType, v uint64) {
	switch t {
	case signal.ValueString:
		k.f("s%q", k.c.String(signal.Str(v)))
	case signal.ValueBytes:
		k.f("b%x", k.c.Bytes(signal.Str(v)))
	case signal.ValueInt:
		k.f("i%d", int64(v))
	case signal.ValueDouble:
		f := math.Float64frombits(v)
		if math.IsNaN(f) {
			k.f("dNaN") // payload bits are not promised through JSON
		} else {
			k.f("d%x", v)
		}
	case signal.ValueBool:
		k.f("t%d", v)
	case signal.ValueEmpty:
		k.f("e")
	case signal.ValueArray, signal.ValueMap:
		js, err := otlp.AppendAnyValueJSON(nil, k.c.Bytes(signal.Str(v)))
		if err != nil {
			k.f("ERR(%v)", err)
		}
		k.f("%d%s", t, js)
	default:
		k.f("?%d", t)
	}
}

// attrs renders a set as a map: last duplicate wins, keys sorted.
func (k *canon) attrs(r signal.Range) {
	last := map[string]int{}
	for i := r.Start; i < r.End; i++ {
		last[k.c.Keys.Name(k.c.Attrs.Key[i])] = int(i)
	}
	keys := make([]string, 0, len(last))
	for key := range last {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	k.f("{")
	for _, key := range keys {
		i := last[key]
		k.f("%q:", key)
		k.value(k.c.Attrs.Type[i], k.c.Attrs.Val[i])
		k.f(",")
	}
	k.f("}")
}

func (k *canon) resScope(res, sc uint32) {
	r := k.c.Resources[res]
	k.f("res(")
	k.attrs(r.Attrs)
	k.f(" d%d u%q) ", r.DroppedAttrs, k.c.String(r.SchemaURL))
	s := k.c.Scopes[sc]
	k.f("scope(%q %q ", k.c.String(s.Name), k.c.String(s.Version))
	k.attrs(s.Attrs)
	k.f(" d%d u%q) ", s.DroppedAttrs, k.c.String(s.SchemaURL))
}

func (k *canon) msgs(kind nestedKind, r signal.Range) {
	if r.Len() == 0 {
		k.f("[] ")
		return
	}
	var scratch [][]byte
	js, err := appendMsgsJSON(nil, k.c, kind, r, &scratch)
	if err != nil {
		k.f("ERR(%v)", err)
	}
	k.f("%s ", js)
}

func canonLogs(l *signal.Logs) []string {
	out := make([]string, l.Len())
	for i := range out {
		k := canon{c: &l.Common}
		k.resScope(l.Resource[i], l.Scope[i])
		k.f("t%d o%d sev%d %q body:", l.Time[i], l.ObservedTime[i], l.SeverityNum[i], l.String(l.SeverityText[i]))
		k.value(l.BodyType[i], l.Body[i])
		k.f(" attrs")
		k.attrs(l.Attr[i])
		k.f(" d%d f%d %x %x %q", l.DroppedAttrs[i], l.Flags[i], l.TraceID[i], l.SpanID[i], l.String(l.EventName[i]))
		out[i] = k.b.String()
	}
	slices.Sort(out)
	return out
}

func canonMetrics(m *signal.Metrics) []string {
	out := make([]string, m.Len())
	for i := range out {
		k := canon{c: &m.Common}
		d := m.Descs[m.Desc[i]]
		k.f("%q %q %q %s %s mono=%v meta", m.String(d.Name), m.String(d.Description), m.String(d.Unit), d.Type, d.Temporality, d.Monotonic)
		k.attrs(d.Metadata)
		k.resScope(m.Resource[i], m.Scope[i])
		k.f("st%d t%d attrs", m.StartTime[i], m.Time[i])
		k.attrs(m.Attr[i])
		k.f(" f%d sid%x num:", m.Flags[i], m.SeriesID[i])
		if m.NumberType[i] == signal.ValueEmpty {
			k.f("none")
		} else {
			k.value(m.NumberType[i], m.Number[i])
		}
		k.f(" c%d has%d", m.Count[i], m.Has[i])
		for _, x := range []struct {
			bit uint8
			v   float64
		}{{signal.HasSum, m.Sum[i]}, {signal.HasMin, m.Min[i]}, {signal.HasMax, m.Max[i]}} {
			if m.Has[i]&x.bit != 0 {
				k.f(" %x", math.Float64bits(x.v))
			}
		}
		u := func(r signal.Range) { k.f(" %v", m.U64[r.Start:r.End]) }
		fl := func(r signal.Range) {
			k.f(" [")
			for _, x := range m.F64[r.Start:r.End] {
				k.f("%x,", math.Float64bits(x))
			}
			k.f("]")
		}
		u(m.BucketCounts[i])
		fl(m.Bounds[i])
		k.f(" s%d z%d zt%x po%d", m.Scale[i], m.ZeroCount[i], math.Float64bits(m.ZeroThreshold[i]), m.PosOffset[i])
		u(m.PosCounts[i])
		k.f(" no%d", m.NegOffset[i])
		u(m.NegCounts[i])
		fl(m.Quantiles[i])
		k.f(" fc")
		fl(m.FloatCounts[i])
		k.f(" ex")
		k.msgs(nestedExemplar, m.Exemplars[i])
		out[i] = k.b.String()
	}
	slices.Sort(out)
	return out
}

func canonSpans(s *signal.Spans) []string {
	out := make([]string, s.Len())
	for i := range out {
		k := canon{c: &s.Common}
		k.resScope(s.Resource[i], s.Scope[i])
		k.f("%x %x %x %q f%d %q k%d st%d et%d attrs", s.TraceID[i], s.SpanID[i], s.ParentSpanID[i], s.String(s.TraceState[i]),
			s.Flags[i], s.String(s.Name[i]), s.Kind[i], s.StartTime[i], s.EndTime[i])
		k.attrs(s.Attr[i])
		k.f(" d%d ev", s.DroppedAttrs[i])
		k.msgs(nestedEvent, s.Events[i])
		k.f(" de%d ln", s.DroppedEvents[i])
		k.msgs(nestedLink, s.Links[i])
		k.f(" dl%d sc%d %q", s.DroppedLinks[i], s.StatusCode[i], s.String(s.StatusMessage[i]))
		out[i] = k.b.String()
	}
	slices.Sort(out)
	return out
}

func compareCanon(t *testing.T, want, got []string) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("rows: wrote %d, read %d", len(want), len(got))
	}
	bad := 0
	for i := range want {
		if want[i] != got[i] {
			if bad < 3 {
				t.Errorf("row %d differs:\nwant %s\ngot  %s", i, trunc(want[i]), trunc(got[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d rows differ", bad, len(want))
	}
}

func trunc(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "…"
	}
	return s
}

// Batch builders for hand-made test data.

func mustProto(tb testing.TB, js string) []byte {
	tb.Helper()
	b, err := otlp.AppendAnyValueProto(nil, []byte(js))
	if err != nil {
		tb.Fatalf("AnyValue %s: %v", js, err)
	}
	return b
}

// attr appends one pair to c.
func attr(c *signal.Common, key string, t signal.ValueType, v any) {
	var x uint64
	switch val := v.(type) {
	case string:
		x = uint64(c.AppendString(val))
	case []byte:
		x = uint64(c.AppendBytes(val))
	case int64:
		x = uint64(val)
	case int:
		x = uint64(int64(val))
	case float64:
		x = math.Float64bits(val)
	case bool:
		if val {
			x = 1
		}
	case nil:
	}
	c.Attrs.Append(c.Keys.IDString(key), t, x)
}

func addResource(c *signal.Common, kv func()) uint32 {
	start := uint32(c.Attrs.Len())
	kv()
	c.Resources = append(c.Resources, signal.Resource{Attrs: signal.Range{Start: start, End: uint32(c.Attrs.Len())}})
	return uint32(len(c.Resources) - 1)
}

func addScope(c *signal.Common, name, version string, kv func()) uint32 {
	start := uint32(c.Attrs.Len())
	kv()
	c.Scopes = append(c.Scopes, signal.Scope{
		Name: c.AppendString(name), Version: c.AppendString(version),
		Attrs: signal.Range{Start: start, End: uint32(c.Attrs.Len())},
	})
	return uint32(len(c.Scopes) - 1)
}

func attrRange(c *signal.Common, kv func()) signal.Range {
	start := uint32(c.Attrs.Len())
	kv()
	return signal.Range{Start: start, End: uint32(c.Attrs.Len())}
}

// listFiles returns the committed .parquet files under root.
func listFiles(tb testing.TB, root string) []string {
	tb.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
	return out
}
