package lake

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

func TestColumnNames(t *testing.T) {
	keys := []string{"a.b", "a_b", "a#int", "a", "a%23int", "a%int", "%", "#", "%25", "", " ", "ключ 🔑", "x#", "#map", "a%2"}
	seen := map[string]string{}
	for s := range numAttrScopes {
		for _, k := range keys {
			for vt := range numValueTypes {
				name := string(appendColumnName(nil, s, k, signal.ValueType(vt)))
				id := scopePrefixes[s] + "|" + k + "|" + signal.ValueType(vt).String()
				if prev, dup := seen[name]; dup {
					t.Fatalf("%q and %q share column %q", prev, id, name)
				}
				seen[name] = id
				gs, gk, gt, ok := parseColumnName(name)
				if !ok || gs != s || gk != k || gt != signal.ValueType(vt) {
					t.Fatalf("parse(%q) = %v %q %v %v, want %v %q %v", name, gs, gk, gt, ok, s, k, vt)
				}
			}
		}
	}
	for _, bad := range []string{"timestamp", "attr.a#nope", "attr.a#b#int", "attr.a%zz", "resourcex"} {
		if _, _, _, ok := parseColumnName(bad); ok {
			t.Errorf("parseColumnName(%q) accepted", bad)
		}
	}
}

func TestTenantValidation(t *testing.T) {
	w, err := NewWriter(Options{Root: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "..", ".", "a/b", "a b", strings.Repeat("x", 65), "é"} {
		if err := w.WriteLogs(bad, new(signal.Logs)); err == nil {
			t.Errorf("tenant %q accepted", bad)
		}
	}
	if err := w.WriteLogs("acme_1.prod-eu", new(signal.Logs)); err != nil {
		t.Errorf("good tenant rejected: %v", err)
	}
}

// hostileLogs builds records that stress naming, types and partitioning.
func hostileLogs(t testing.TB) *signal.Logs {
	l := new(signal.Logs)
	c := &l.Common
	arr := mustProto(t, `{"arrayValue":{"values":[{"intValue":"1"},{"stringValue":"x"},{"kvlistValue":{"values":[{"key":"k","value":{"boolValue":true}}]}}]}}`)
	kv := mustProto(t, `{"kvlistValue":{"values":[{"key":"a","value":{"doubleValue":1.5}},{"key":"b","value":{}}]}}`)
	r0 := addResource(c, func() {
		attr(c, "service.name", signal.ValueString, "checkout")
		attr(c, "host.name", signal.ValueString, "h1")
		attr(c, "a#int", signal.ValueString, "res-a#int")
	})
	r1 := addResource(c, func() {
		attr(c, "service.name", signal.ValueInt, 42) // not a string: typed column
		attr(c, "service.name", signal.ValueString, "")
		attr(c, "service.name", signal.ValueInt, 43) // last wins
		attr(c, "arr", signal.ValueArray, arr)
	})
	r2 := addResource(c, func() {}) // no service at all
	c.Resources[r2].DroppedAttrs = 3
	c.Resources[r2].SchemaURL = c.AppendString("https://opentelemetry.io/schemas/1.26.0")
	s0 := addScope(c, "lib", "1.2.3", func() { attr(c, "scope.k", signal.ValueBool, true) })
	s1 := addScope(c, "", "", func() {})
	c.Scopes[s1].DroppedAttrs = 7

	huge := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	now := fixedNow.UnixNano()
	type rec struct {
		res, sc  uint32
		tm, obs  int64
		bodyType signal.ValueType
		body     any
		attrs    func()
	}
	recs := []rec{
		{r0, s0, now - 1e9, now, signal.ValueString, "hello", func() {
			attr(c, "a.b", signal.ValueString, "dot")
			attr(c, "a_b", signal.ValueString, "underscore")
			attr(c, "a#int", signal.ValueString, "hash-int-string")
			attr(c, "a", signal.ValueInt, 7)
			attr(c, "a%23int", signal.ValueString, "percent")
			attr(c, "with space", signal.ValueString, "sp")
			attr(c, "ключ 🔑", signal.ValueString, "unicode")
			attr(c, "", signal.ValueString, "empty key")
		}},
		{r0, s0, now - 2e9, 0, signal.ValueString, "", func() {
			attr(c, "a", signal.ValueString, "a as string") // same key, other type, other row
			attr(c, "nan", signal.ValueDouble, math.NaN())
			attr(c, "inf", signal.ValueDouble, math.Inf(1))
			attr(c, "ninf", signal.ValueDouble, math.Inf(-1))
			attr(c, "negzero", signal.ValueDouble, math.Copysign(0, -1))
			attr(c, "b", signal.ValueBool, false)
			attr(c, "bytes", signal.ValueBytes, []byte{0, 1, 2, 255})
			attr(c, "emptybytes", signal.ValueBytes, []byte{})
			attr(c, "arr", signal.ValueArray, arr)
			attr(c, "map", signal.ValueMap, kv)
			attr(c, "nothing", signal.ValueEmpty, nil)
			attr(c, "es", signal.ValueString, "")
		}},
		{r1, s1, 0, now - 3600e9, signal.ValueInt, int64(-5), func() { // partition by observed time
			attr(c, "dup", signal.ValueString, "first")
			attr(c, "dup", signal.ValueInt, 2)
			attr(c, "dup", signal.ValueString, "last wins")
			attr(c, "huge", signal.ValueString, huge)
		}},
		{r1, s0, now + 48*3600e9, 0, signal.ValueMap, kv, func() { // far future: ingest time
			attr(c, "dup2", signal.ValueString, "x")
			attr(c, "dup2", signal.ValueDouble, 2.5)
		}},
		{r2, s1, 0, 0, signal.ValueEmpty, nil, func() {}},
		{r2, s1, -5, -5, signal.ValueDouble, math.NaN(), func() {}},
		{r2, s0, now, now, signal.ValueBytes, []byte("raw"), func() {}},
		{r2, s0, now, now, signal.ValueArray, arr, func() {}},
		{r0, s0, now, now, signal.ValueBool, true, func() {}},
		{r0, s0, now, now, signal.ValueDouble, math.Inf(-1), func() {}},
	}
	for i, r := range recs {
		j := l.AppendRecord(r.res, r.sc)
		l.Time[j], l.ObservedTime[j] = r.tm, r.obs
		l.SeverityNum[j] = int32(i % 25)
		if i%2 == 0 {
			l.SeverityText[j] = c.AppendString("INFO")
		}
		l.BodyType[j] = r.bodyType
		switch v := r.body.(type) {
		case string:
			l.Body[j] = uint64(c.AppendString(v))
		case []byte:
			l.Body[j] = uint64(c.AppendBytes(v))
		case int64:
			l.Body[j] = uint64(v)
		case float64:
			l.Body[j] = math.Float64bits(v)
		case bool:
			l.Body[j] = 1
		}
		l.Attr[j] = attrRange(c, r.attrs)
		l.DroppedAttrs[j] = uint32(i)
		l.Flags[j] = uint32(i * 3)
		if i%3 != 2 {
			l.TraceID[j] = signal.TraceID{1, 2, 3, byte(i), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff}
			l.SpanID[j] = signal.SpanID{0xab, byte(i)}
		}
		if i == 1 {
			l.EventName[j] = c.AppendString("evt")
		}
	}
	return l
}

func TestLogsRoundTripHostile(t *testing.T) {
	src := hostileLogs(t)
	root, segs := writeAll(t, Options{}, func(w *Writer) error { return w.WriteLogs("t1", src) })
	if len(segs) < 2 {
		t.Fatalf("want several hour partitions, got %d segments", len(segs))
	}
	got := new(signal.Logs)
	hours := map[string]bool{}
	for _, s := range segs {
		f := openSeg(t, root, s)
		if f.Table() != TableLogs || f.NumRows() != s.Rows {
			t.Fatalf("segment %+v: table %s rows %d", s, f.Table(), f.NumRows())
		}
		for _, k := range []string{MetaTable, MetaTenant, MetaLevel, MetaSchemaVersion, MetaMinTime, MetaMaxTime} {
			if _, ok := f.Lookup(k); !ok {
				t.Errorf("footer lacks %s", k)
			}
		}
		if err := f.ReadLogs(got); err != nil {
			t.Fatal(err)
		}
		hours[s.Day+"/"+string(rune('0'+s.Hour/10))+string(rune('0'+s.Hour%10))] = true
	}
	compareCanon(t, canonLogs(src), canonLogs(got))
	for _, want := range []string{"2025-06-01/12", "2025-06-01/11"} {
		if !hours[want] {
			t.Errorf("no partition %s among %v", want, hours)
		}
	}
	// Resources are shared again: at most the three distinct ones per file.
	if len(got.Resources) > 3*len(segs) {
		t.Errorf("resources not deduplicated: %d", len(got.Resources))
	}
}

// TestJSONCacheFull runs the hostile round trip with a JSON cache that is
// full at once, so nested values take the uncached path.
func TestJSONCacheFull(t *testing.T) {
	defer func(n int) { maxJSONCacheEntries = n }(maxJSONCacheEntries)
	maxJSONCacheEntries = 0
	one := hostileLogs(t)
	src := new(signal.Logs)
	for range 300 { // several chunks share resources with nested values
		for i := range one.Len() {
			src.CopyFrom(one, i)
		}
	}
	root, segs := writeAll(t, Options{}, func(w *Writer) error { return w.WriteLogs("t1", src) })
	got := new(signal.Logs)
	for _, s := range segs {
		if err := openSeg(t, root, s).ReadLogs(got); err != nil {
			t.Fatal(err)
		}
	}
	compareCanon(t, canonLogs(src), canonLogs(got))
}

func TestPartitionRule(t *testing.T) {
	l := new(signal.Logs)
	c := &l.Common
	r := addResource(c, func() {})
	s := addScope(c, "", "", func() {})
	now := fixedNow.UnixNano()
	cases := []struct{ tm, obs int64 }{
		{now - 5*3600e9, 0},        // own time
		{0, now - 2*3600e9},        // observed
		{now + 25*3600e9, 0},       // too far ahead: now
		{now + 23*3600e9, 0},       // within skew: own time
		{-1, -1},                   // now
		{now + 30*3600e9, now - 1}, // observed
	}
	for _, cs := range cases {
		i := l.AppendRecord(r, s)
		l.Time[i], l.ObservedTime[i] = cs.tm, cs.obs
	}
	var w *Writer
	_, segs := writeAll(t, Options{}, func(ww *Writer) error { w = ww; return ww.WriteLogs("t", l) })
	if got := w.Stats().ReplacedTimes; got != 4 {
		t.Errorf("ReplacedTimes = %d, want 4", got)
	}
	got := map[int64]int64{}
	for _, sg := range segs {
		got[sg.MinTime] += sg.Rows
		if sg.MinTime/hourNs != sg.MaxTime/hourNs {
			t.Errorf("segment spans hours: %+v", sg)
		}
	}
	want := map[int64]int64{now - 5*3600e9: 1, now - 2*3600e9: 1, now + 23*3600e9: 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("partition min time %d: %d rows, want %d (all %v)", k, got[k], v, got)
		}
	}
}

func testMetrics(t testing.TB) *signal.Metrics {
	m := new(signal.Metrics)
	c := &m.Common
	r0 := addResource(c, func() { attr(c, "service.name", signal.ValueString, "api") })
	r1 := addResource(c, func() { attr(c, "host", signal.ValueString, "h") })
	s0 := addScope(c, "meter", "v1", func() {})
	desc := func(name string, typ signal.MetricType, temp signal.Temporality, mono bool, meta func()) uint32 {
		m.Descs = append(m.Descs, signal.MetricDesc{
			Name: c.AppendString(name), Description: c.AppendString("about " + name), Unit: c.AppendString("ms"),
			Type: typ, Temporality: temp, Monotonic: mono, Metadata: attrRange(c, meta),
		})
		return uint32(len(m.Descs) - 1)
	}
	gauge := desc("g", signal.MetricGauge, 0, false, func() {})
	sum := desc("s", signal.MetricSum, signal.TemporalityCumulative, true, func() {
		attr(c, "meta.k", signal.ValueString, "v")
		attr(c, "meta.n", signal.ValueInt, 3)
	})
	hist := desc("h", signal.MetricHistogram, signal.TemporalityDelta, false, func() {})
	exp := desc("e", signal.MetricExponentialHistogram, signal.TemporalityDelta, false, func() {})
	summ := desc("q", signal.MetricSummary, 0, false, func() {})
	now := fixedNow.UnixNano()
	ex, err := otlpExemplars(`[{"timeUnixNano":"5","asDouble":1.5,"traceId":"0102030405060708090a0b0c0d0e0f10","filteredAttributes":[{"key":"x","value":{"stringValue":"y"}}]}]`, c)
	if err != nil {
		t.Fatal(err)
	}
	pt := func(d, res uint32, attrs func()) int {
		i := m.AppendPoint(d, res, s0)
		m.Time[i], m.StartTime[i] = now-int64(i)*1e9, now-3600e9
		m.Attr[i] = attrRange(c, attrs)
		return i
	}
	for j, v := range []float64{1.5, math.NaN(), math.Inf(1), math.Inf(-1), 0} {
		i := pt(gauge, r0, func() { attr(c, "k", signal.ValueInt, j) })
		m.NumberType[i], m.Number[i] = signal.ValueDouble, math.Float64bits(v)
	}
	i := pt(gauge, r1, func() {})
	m.NumberType[i], m.Number[i] = signal.ValueInt, uint64(1<<62+1) // not exact as a double
	i = pt(gauge, r1, func() {})                                    // no value at all
	i = pt(sum, r0, func() { attr(c, "k", signal.ValueString, "v") })
	m.NumberType[i], m.Number[i] = signal.ValueInt, uint64(math.MaxUint64) // -1
	m.Exemplars[i] = ex
	m.Flags[i] = 1
	i = pt(hist, r0, func() {})
	m.Count[i], m.Sum[i], m.Min[i], m.Max[i], m.Has[i] = 10, 55, 1, 9, signal.HasSum|signal.HasMin|signal.HasMax
	m.BucketCounts[i] = u64s(m, 2, 3, 5)
	m.Bounds[i] = f64s(m, 2, 5)
	i = pt(hist, r0, func() { attr(c, "empty", signal.ValueBool, true) }) // empty histogram
	i = pt(hist, r1, func() {})
	m.Count[i], m.Has[i] = 4, 0
	m.BucketCounts[i] = u64s(m, 4)
	i = pt(exp, r0, func() {})
	m.Count[i], m.Sum[i], m.Has[i] = 12, 30, signal.HasSum
	m.Scale[i], m.ZeroCount[i], m.ZeroThreshold[i] = 2, 1, 1e-9
	m.PosOffset[i], m.PosCounts[i] = -3, u64s(m, 1, 0, 4, 5)
	m.NegOffset[i], m.NegCounts[i] = 1, u64s(m, 1)
	i = pt(exp, r0, func() {}) // empty exponential histogram
	m.Scale[i] = -1
	i = pt(summ, r1, func() {})
	m.Count[i], m.Sum[i], m.Has[i] = 3, 7.5, signal.HasSum
	m.Quantiles[i] = f64s(m, 0, 1, 0.5, 2.5, 1, 4)
	// Remote-write native histograms: float counts (fractional, and
	// whole), reset hints.
	i = pt(exp, r1, func() { attr(c, "kind", signal.ValueString, "float") })
	m.Sum[i], m.Has[i] = -2.5, signal.HasSum|signal.HintNoReset
	m.Scale[i], m.ZeroThreshold[i], m.PosOffset[i], m.NegOffset[i] = 3, 1e-3, -2, 4
	m.SetFloatCounts(i, true, 7.1/3, 0.1, []float64{0.2, 0, 1.0 / 3, 1e-300, 2.5}, 3)
	i = pt(exp, r1, func() { attr(c, "kind", signal.ValueString, "whole") })
	m.Sum[i], m.Has[i] = 4, signal.HasSum|signal.HintReset
	m.Scale[i] = -4
	m.SetFloatCounts(i, true, 3, 0, []float64{1, 2}, 2)
	i = pt(exp, r1, func() { attr(c, "kind", signal.ValueString, "gauge") })
	m.Count[i], m.Has[i] = 2, signal.HintGauge
	m.PosCounts[i] = u64s(m, 2)
	i = pt(hist, r1, func() { attr(c, "kind", signal.ValueString, "float") })
	m.Sum[i], m.Has[i] = 1.25, signal.HasSum|signal.HintGauge
	m.Bounds[i] = f64s(m, 0.5, 1)
	m.SetFloatCounts(i, false, 0.75, 0, []float64{0.25, 0.5, 0}, 0)
	m.ComputeSeriesIDs()
	return m
}

func otlpExemplars(js string, c *signal.Common) (signal.Range, error) {
	var sink msgSink
	return parseMsgsJSON(c, nestedExemplar, []byte(js), &sink, sink.add)
}

func u64s(m *signal.Metrics, v ...uint64) signal.Range {
	s := uint32(len(m.U64))
	m.U64 = append(m.U64, v...)
	return signal.Range{Start: s, End: uint32(len(m.U64))}
}

func f64s(m *signal.Metrics, v ...float64) signal.Range {
	s := uint32(len(m.F64))
	m.F64 = append(m.F64, v...)
	return signal.Range{Start: s, End: uint32(len(m.F64))}
}

func TestMetricsRoundTrip(t *testing.T) {
	src := testMetrics(t)
	root, segs := writeAll(t, Options{}, func(w *Writer) error { return w.WriteMetrics("t", src) })
	got := new(signal.Metrics)
	for _, s := range segs {
		if len(s.MetricNames) == 0 {
			t.Errorf("segment without metric names: %+v", s)
		}
		if err := openSeg(t, root, s).ReadMetrics(got); err != nil {
			t.Fatal(err)
		}
	}
	compareCanon(t, canonMetrics(src), canonMetrics(got))
}

func TestSketch(t *testing.T) {
	m := testMetrics(t)
	sk := newSketcher()
	var buf []byte
	for i := range m.Len() {
		typ := m.Descs[m.Desc[i]].Type
		b, ok := sk.encode(m, i, typ, &buf)
		isDist := typ == signal.MetricHistogram || typ == signal.MetricExponentialHistogram
		empty := m.Count[i] == 0
		if ok != (isDist && !empty) {
			t.Errorf("point %d (%s, count %d): sketch %v", i, typ, m.Count[i], ok)
			continue
		}
		if !ok {
			continue
		}
		mp, _ := mapping.NewLogarithmicMapping(SketchRelativeAccuracy)
		s, err := ddsketch.DecodeDDSketch(b, store.DefaultProvider, mp)
		if err != nil {
			t.Fatal(err)
		}
		want := float64(m.Count[i])
		if fc := m.FloatCounts[i]; fc.Len() > 0 { // a float histogram's sketch holds its exact bucket counts
			want = 0
			for _, c := range m.F64[fc.Start+1 : fc.End] {
				want += c
			}
		}
		if math.Abs(s.GetCount()-want) > 1e-12 {
			t.Errorf("point %d: sketch count %v, want %v", i, s.GetCount(), want)
		}
	}
}

func testSpans(t testing.TB) *signal.Spans {
	s := new(signal.Spans)
	c := &s.Common
	r := addResource(c, func() { attr(c, "service.name", signal.ValueString, "web") })
	sc := addScope(c, "tracer", "", func() {})
	now := fixedNow.UnixNano()
	var sink msgSink
	for i := range 5 {
		j := s.AppendSpan(r, sc)
		s.TraceID[j] = signal.TraceID{byte(i + 1), 9}
		s.SpanID[j] = signal.SpanID{byte(i + 1)}
		if i > 0 {
			s.ParentSpanID[j] = signal.SpanID{1}
		}
		s.TraceState[j] = c.AppendString("k=v")
		s.Name[j] = c.AppendString("GET /x")
		s.Kind[j] = int32(i % 6)
		s.StartTime[j], s.EndTime[j] = now-int64(i)*1e6, now
		s.Attr[j] = attrRange(c, func() { attr(c, "http.status_code", signal.ValueInt, 200+i) })
		s.StatusCode[j] = int32(i % 3)
		if i == 2 {
			s.StatusMessage[j] = c.AppendString("boom")
			var err error
			s.Events[j], err = parseMsgsJSON(c, nestedEvent, []byte(`[{"timeUnixNano":"7","name":"exception","attributes":[{"key":"a","value":{"intValue":"1"}}],"droppedAttributesCount":1}]`), &sink, sink.add)
			if err != nil {
				t.Fatal(err)
			}
			s.Links[j], err = parseMsgsJSON(c, nestedLink, []byte(`[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","traceState":"x=y"}]`), &sink, sink.add)
			if err != nil {
				t.Fatal(err)
			}
			s.DroppedEvents[j], s.DroppedLinks[j] = 2, 3
		}
	}
	return s
}

func TestSpansRoundTrip(t *testing.T) {
	src := testSpans(t)
	root, segs := writeAll(t, Options{}, func(w *Writer) error { return w.WriteSpans("t", src) })
	got := new(signal.Spans)
	for _, s := range segs {
		if err := openSeg(t, root, s).ReadSpans(got); err != nil {
			t.Fatal(err)
		}
	}
	compareCanon(t, canonSpans(src), canonSpans(got))
}

func TestCorpusRoundTrip(t *testing.T) {
	for _, kind := range []string{"logs", "metrics", "traces"} {
		t.Run(kind, func(t *testing.T) {
			for _, path := range corpusFiles(t, kind) {
				pb := readCorpus(t, path)
				opts := Options{Now: func() time.Time { return fixedNow }, RowGroupRows: 1000}
				switch kind {
				case "logs":
					src := new(signal.Logs)
					if err := otlp.DecodeLogs(src, pb); err != nil {
						t.Fatalf("%s: %v", path, err)
					}
					root, segs := writeAll(t, opts, func(w *Writer) error { return w.WriteLogs("c", src) })
					got := new(signal.Logs)
					for _, s := range segs {
						if err := openSeg(t, root, s).ReadLogs(got); err != nil {
							t.Fatal(err)
						}
					}
					compareCanon(t, canonLogs(src), canonLogs(got))
				case "metrics":
					src := new(signal.Metrics)
					if err := otlp.DecodeMetrics(src, pb); err != nil {
						t.Fatalf("%s: %v", path, err)
					}
					root, segs := writeAll(t, opts, func(w *Writer) error { return w.WriteMetrics("c", src) })
					got := new(signal.Metrics)
					for _, s := range segs {
						if err := openSeg(t, root, s).ReadMetrics(got); err != nil {
							t.Fatal(err)
						}
					}
					compareCanon(t, canonMetrics(src), canonMetrics(got))
				case "traces":
					src := new(signal.Spans)
					if err := otlp.DecodeTraces(src, pb); err != nil {
						t.Fatalf("%s: %v", path, err)
					}
					root, segs := writeAll(t, opts, func(w *Writer) error { return w.WriteSpans("c", src) })
					got := new(signal.Spans)
					for _, s := range segs {
						if err := openSeg(t, root, s).ReadSpans(got); err != nil {
							t.Fatal(err)
						}
					}
					compareCanon(t, canonSpans(src), canonSpans(got))
				}
			}
		})
	}
}
