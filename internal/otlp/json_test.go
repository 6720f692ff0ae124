package otlp

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/sluice-dev/sluice/internal/signal"
)

func TestJSONCorpus(t *testing.T) {
	var lines []byte
	total := 0
	for _, f := range corpus(t, "logs") {
		var u plog.ProtoUnmarshaler
		ld, _ := u.UnmarshalLogs(f.data)
		var jm plog.JSONMarshaler
		js, err := jm.MarshalLogs(ld)
		if err != nil {
			t.Fatal(err)
		}
		var b signal.Logs
		if err := DecodeLogsJSON(&b, js); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		sameRecords(t, f.name+" json", pdataLogs(ld), batchLogs(t, &b))
		if k, fm, err := Sniff(js); k != signal.KindLogs || fm != FormatJSON || err != nil {
			t.Fatalf("Sniff = %v %v %v", k, fm, err)
		}
		lines = append(append(lines, js...), '\n')
		total += b.Len()
	}
	var b signal.Logs
	if err := DecodeLogsJSON(&b, lines); err != nil || b.Len() != total {
		t.Fatalf("JSON lines: %v, %d records, want %d", err, b.Len(), total)
	}
	// A bad line rolls back the whole call.
	n := b.Len()
	if err := DecodeLogsJSON(&b, append(append([]byte{}, lines...), `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"zz"}]}]}]}`...)); err == nil || b.Len() != n {
		t.Fatalf("bad line: %v, %d records, want %d", err, b.Len(), n)
	}

	for _, f := range corpus(t, "metrics")[:3] {
		var u pmetric.ProtoUnmarshaler
		md, _ := u.UnmarshalMetrics(f.data)
		var jm pmetric.JSONMarshaler
		js, _ := jm.MarshalMetrics(md)
		var b signal.Metrics
		if err := DecodeMetricsJSON(&b, js); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		sameRecords(t, f.name+" json", pdataMetrics(md), batchMetrics(t, &b))
	}
	for _, f := range corpus(t, "traces") {
		var u ptrace.ProtoUnmarshaler
		td, _ := u.UnmarshalTraces(f.data)
		var jm ptrace.JSONMarshaler
		js, _ := jm.MarshalTraces(td)
		var b signal.Spans
		if err := DecodeTracesJSON(&b, js); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		sameRecords(t, f.name+" json", pdataTraces(td), batchTraces(t, &b))
	}
}

// richTraces builds spans whose events, links and attributes use every
// value type, including NaN and infinities, with pdata.
func richTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	sp.SetName("op \"quoted\" \n ünïcode \u2028 \x01")
	attrs := sp.Attributes()
	fill := func(m pcommon.Map) {
		m.PutStr("s", "v\t\"\\")
		m.PutInt("i", -1<<63)
		m.PutDouble("nan", math.NaN())
		m.PutDouble("inf", math.Inf(1))
		m.PutDouble("ninf", math.Inf(-1))
		m.PutDouble("negzero", math.Copysign(0, -1))
		m.PutDouble("tiny", 5e-324)
		m.PutBool("f", false)
		m.PutEmptyBytes("b").FromRaw([]byte{0, 0xff, 0x10})
		m.PutEmpty("empty")
		sl := m.PutEmptySlice("arr")
		sl.AppendEmpty().SetStr("x")
		sl.AppendEmpty().SetInt(7)
		sl.AppendEmpty().SetEmptyMap().PutDouble("d", 1.5)
		sl.AppendEmpty()
		m.PutEmptySlice("emptyarr")
		m.PutEmptyMap("emptymap")
		m.PutEmptyMap("map").PutEmptySlice("inner").AppendEmpty().SetBool(true)
	}
	fill(attrs)
	ev := sp.Events().AppendEmpty()
	ev.SetName("ev")
	ev.SetTimestamp(123456789)
	ev.SetDroppedAttributesCount(3)
	fill(ev.Attributes())
	sp.Events().AppendEmpty() // all defaults
	ln := sp.Links().AppendEmpty()
	ln.SetTraceID(pcommon.TraceID{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9})
	ln.SetSpanID(pcommon.SpanID{8, 8, 8, 8, 8, 8, 8, 8})
	ln.TraceState().FromRaw("a=b")
	ln.SetFlags(0x301)
	ln.SetDroppedAttributesCount(1)
	fill(ln.Attributes())
	sp.Links().AppendEmpty()
	return td
}

func richMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("g")
	m.Metadata().PutStr("unit.hint", "x")
	m.Metadata().PutEmptyMap("m").PutInt("k", 1)
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetDoubleValue(math.NaN())
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -0.0, 1e300} {
		e := dp.Exemplars().AppendEmpty()
		e.SetDoubleValue(v)
		e.SetTimestamp(99)
		e.SetTraceID(pcommon.TraceID{1})
		e.SetSpanID(pcommon.SpanID{2})
		e.FilteredAttributes().PutStr("k", "v")
	}
	e := dp.Exemplars().AppendEmpty()
	e.SetIntValue(-5)
	dp.Exemplars().AppendEmpty()
	return md
}

// nestedMessages gathers every raw nested message of a batch by kind.
type nestedMessages struct{ anyValues, events, links, exemplars [][]byte }

func collectNested(c *signal.Common, n *nestedMessages) {
	for i := 0; i < c.Attrs.Len(); i++ {
		if t := c.Attrs.Type[i]; t == signal.ValueArray || t == signal.ValueMap {
			n.anyValues = append(n.anyValues, c.Bytes(signal.Str(c.Attrs.Val[i])))
		}
	}
}

func gatherNested(t *testing.T) nestedMessages {
	var n nestedMessages
	var pm ptrace.ProtoMarshaler
	pb, _ := pm.MarshalTraces(richTraces())
	traces := [][]byte{pb}
	for _, f := range corpus(t, "traces") {
		traces = append(traces, f.data)
	}
	for _, pb := range traces {
		var s signal.Spans
		if err := DecodeTraces(&s, pb); err != nil {
			t.Fatal(err)
		}
		collectNested(&s.Common, &n)
		for i := range s.Len() {
			for _, m := range s.Msgs[s.Events[i].Start:s.Events[i].End] {
				n.events = append(n.events, s.Bytes(m))
			}
			for _, m := range s.Msgs[s.Links[i].Start:s.Links[i].End] {
				n.links = append(n.links, s.Bytes(m))
			}
		}
	}
	var mm pmetric.ProtoMarshaler
	mpb, _ := mm.MarshalMetrics(richMetrics())
	metrics := [][]byte{mpb}
	for _, f := range corpus(t, "metrics") {
		metrics = append(metrics, f.data)
	}
	for _, pb := range metrics {
		var m signal.Metrics
		if err := DecodeMetrics(&m, pb); err != nil {
			t.Fatal(err)
		}
		collectNested(&m.Common, &n)
		for _, x := range m.Msgs {
			n.exemplars = append(n.exemplars, m.Bytes(x))
		}
	}
	for _, f := range corpus(t, "logs") {
		var l signal.Logs
		if err := DecodeLogs(&l, f.data); err != nil {
			t.Fatal(err)
		}
		collectNested(&l.Common, &n)
	}
	return n
}

// TestNestedJSONRoundTrip: protobuf → JSON → protobuf gives the same bytes,
// and pdata reads our JSON to the same value it reads from the protobuf.
func TestNestedJSONRoundTrip(t *testing.T) {
	n := gatherNested(t)
	t.Logf("%d any values, %d events, %d links, %d exemplars", len(n.anyValues), len(n.events), len(n.links), len(n.exemplars))
	if len(n.events) == 0 || len(n.links) == 0 || len(n.exemplars) == 0 || len(n.anyValues) == 0 {
		t.Fatal("missing nested messages to test")
	}
	for _, pb := range n.anyValues {
		js, err := AppendAnyValueJSON(nil, pb)
		if err != nil {
			t.Fatal(err)
		}
		back, err := AppendAnyValueProto(nil, js)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if !bytes.Equal(back, pb) {
			t.Fatalf("AnyValue round trip:\n json %s\n got  %x\n want %x", js, back, pb)
		}
		doc := `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":` + string(js) + `}]}]}]}`
		var u plog.JSONUnmarshaler
		ld, err := u.UnmarshalLogs([]byte(doc))
		if err != nil {
			t.Fatalf("pdata rejects %s: %v", js, err)
		}
		got := canonValue(ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Body())
		if want := canonValue(anyViaPdata(t, pb)); got != want {
			t.Fatalf("pdata reads %s as %s, want %s", js, got, want)
		}
	}
	lists := []struct {
		name  string
		msgs  [][]byte
		enc   func([]byte, [][]byte) ([]byte, error)
		split func([]byte, func([]byte)) error
		check func(js []byte)
	}{
		{"events", n.events, AppendEventsJSON, SplitEventsJSON, func(js []byte) {
			doc := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"events":` + string(js) + `}]}]}]}`
			var u ptrace.JSONUnmarshaler
			td, err := u.UnmarshalTraces([]byte(doc))
			if err != nil {
				t.Fatalf("pdata rejects %s: %v", js, err)
			}
			evs := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Events()
			for i := 0; i < evs.Len(); i++ {
				if got, want := canonEvent(evs.At(i)), canonEvent(spanViaPdata(t, 11, n.events[i]).Events().At(0)); got != want {
					t.Fatalf("event %d: pdata reads %s, want %s", i, got, want)
				}
			}
		}},
		{"links", n.links, AppendLinksJSON, SplitLinksJSON, func(js []byte) {
			doc := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"links":` + string(js) + `}]}]}]}`
			var u ptrace.JSONUnmarshaler
			td, err := u.UnmarshalTraces([]byte(doc))
			if err != nil {
				t.Fatalf("pdata rejects %s: %v", js, err)
			}
			ls := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Links()
			for i := 0; i < ls.Len(); i++ {
				if got, want := canonLink(ls.At(i)), canonLink(spanViaPdata(t, 13, n.links[i]).Links().At(0)); got != want {
					t.Fatalf("link %d: pdata reads %s, want %s", i, got, want)
				}
			}
		}},
		{"exemplars", n.exemplars, AppendExemplarsJSON, SplitExemplarsJSON, func(js []byte) {
			doc := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"exemplars":` + string(js) + `}]}}]}]}]}`
			var u pmetric.JSONUnmarshaler
			md, err := u.UnmarshalMetrics([]byte(doc))
			if err != nil {
				t.Fatalf("pdata rejects %s: %v", js, err)
			}
			ex := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).Exemplars()
			for i := 0; i < ex.Len(); i++ {
				if got, want := canonExemplar(ex.At(i)), canonExemplar(exemplarViaPdata(t, n.exemplars[i])); got != want {
					t.Fatalf("exemplar %d: pdata reads %s, want %s", i, got, want)
				}
			}
		}},
	}
	for _, l := range lists {
		for start := 0; start < len(l.msgs); start += 50 {
			chunk := l.msgs[start:min(start+50, len(l.msgs))]
			js, err := l.enc(nil, chunk)
			if err != nil {
				t.Fatalf("%s: %v", l.name, err)
			}
			if !json.Valid(js) {
				t.Fatalf("%s: invalid JSON %s", l.name, js)
			}
			var back [][]byte
			if err := l.split(js, func(m []byte) { back = append(back, bytes.Clone(m)) }); err != nil {
				t.Fatalf("%s: %s: %v", l.name, js, err)
			}
			if len(back) != len(chunk) {
				t.Fatalf("%s: %d back, want %d", l.name, len(back), len(chunk))
			}
			for i := range chunk {
				if !bytes.Equal(back[i], chunk[i]) {
					t.Fatalf("%s round trip:\n json %s\n got  %x\n want %x", l.name, js, back[i], chunk[i])
				}
			}
			if start == 0 {
				l.check(js)
			}
		}
	}
}

func TestAttrsJSON(t *testing.T) {
	var pm pmetric.ProtoMarshaler
	pb, _ := pm.MarshalMetrics(richMetrics())
	var m signal.Metrics
	if err := DecodeMetrics(&m, pb); err != nil {
		t.Fatal(err)
	}
	var tr signal.Spans
	tpb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(richTraces())
	if err := DecodeTraces(&tr, tpb); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		c *signal.Common
		r signal.Range
	}{{&m.Common, m.Descs[0].Metadata}, {&tr.Common, tr.Attr[0]}} {
		js, err := AppendAttrsJSON(nil, c.c, c.r)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(js) {
			t.Fatalf("invalid JSON %s", js)
		}
		var dst signal.Logs
		dst.AppendString("prefix")
		r, err := AppendAttrsFromJSON(&dst.Common, js)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if got, want := canonBatchAttrs(t, &dst.Common, r), canonBatchAttrs(t, c.c, c.r); got != want {
			t.Fatalf("attrs round trip\n got %s\nwant %s", got, want)
		}
		before := shape(&dst)
		if _, err := AppendAttrsFromJSON(&dst.Common, []byte(`[{"key":"a","value":{"intValue":"1"}},{"key":"b","value":{"intValue":"x"}}]`)); err == nil {
			t.Fatal("bad int accepted")
		}
		if after := shape(&dst); !slices.Equal(before, after) {
			t.Fatalf("failed parse changed batch: %v -> %v", before, after)
		}
	}
}

func TestNestedJSONErrors(t *testing.T) {
	for js, want := range map[string]error{
		`[{"traceId":"0102"}]`:                ErrIDLength,
		`[{"spanId":"zz00000000000000"}]`:     ErrJSON,
		`[{"name":"\udc00x","flags":"nope"}]`: ErrJSON,
		`[{"droppedAttributesCount":-1}]`:     ErrJSON,
		`{"traceId":""}`:                      ErrJSON,
		`[{"attributes":[{"key":"k","value":{"intValue":"9223372036854775808"}}]}]`: ErrJSON,
	} {
		err := SplitLinksJSON([]byte(js), func([]byte) {})
		if !errors.Is(err, want) {
			t.Errorf("SplitLinksJSON(%s) = %v, want %v", js, err, want)
		}
	}
	if _, err := AppendAnyValueProto(nil, []byte(`{"stringValue":"a"} x`)); !errors.Is(err, ErrJSON) {
		t.Errorf("trailing data: %v", err)
	}
	if _, err := AppendAnyValueJSON(nil, []byte{0x0a, 0x01, 0xff}); !errors.Is(err, ErrInvalidUTF8) {
		t.Errorf("bad UTF-8: %v", err)
	}
	if _, err := AppendAnyValueJSON(nil, []byte{0x0a, 0x05}); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated: %v", err)
	}
}

func TestNaNJSONText(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{math.NaN(), `{"doubleValue":"NaN"}`}, {math.Inf(1), `{"doubleValue":"Infinity"}`}, {math.Inf(-1), `{"doubleValue":"-Infinity"}`}} {
		pb := fFixed64(4, math.Float64bits(c.v))
		js, err := AppendAnyValueJSON(nil, pb)
		if err != nil || string(js) != c.want {
			t.Fatalf("%v: %s %v, want %s", c.v, js, err, c.want)
		}
		back, err := AppendAnyValueProto(nil, js)
		if err != nil || !bytes.Equal(back, pb) {
			t.Fatalf("%s: %x %v, want %x", js, back, err, pb)
		}
	}
}
