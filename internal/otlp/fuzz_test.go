package otlp

import (
	"bytes"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Seeds are one record from each corpus file, shrunk (few attributes,
// short strings) so that they keep real shapes yet stay small: the fuzzer
// minimizes every new input, at a cost that grows with the square of its size.
func shrinkMap(m pcommon.Map) {
	n := 0
	m.RemoveIf(func(_ string, v pcommon.Value) bool {
		n++
		if n > 3 {
			return true
		}
		shrinkValue(v)
		return false
	})
}

func shrinkValue(v pcommon.Value) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		if s := v.Str(); len(s) > 8 {
			v.SetStr(strings.ToValidUTF8(s[:8], ""))
		}
	case pcommon.ValueTypeMap:
		shrinkMap(v.Map())
	case pcommon.ValueTypeSlice:
		sl := v.Slice()
		k := 0
		sl.RemoveIf(func(pcommon.Value) bool { k++; return k > 2 })
		for i := 0; i < sl.Len(); i++ {
			shrinkValue(sl.At(i))
		}
	}
}

func shrinkResourceScope(r pcommon.Resource, s pcommon.InstrumentationScope) {
	shrinkMap(r.Attributes())
	shrinkMap(s.Attributes())
}

func seedLogs(f *testing.F) {
	for _, c := range corpus(f, "logs") {
		ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(c.data)
		if err != nil {
			f.Fatal(err)
		}
		out := plog.NewLogs()
		rl := out.ResourceLogs().AppendEmpty()
		ld.ResourceLogs().At(0).Resource().CopyTo(rl.Resource())
		sl := rl.ScopeLogs().AppendEmpty()
		ld.ResourceLogs().At(0).ScopeLogs().At(0).Scope().CopyTo(sl.Scope())
		lr := sl.LogRecords().AppendEmpty()
		ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).CopyTo(lr)
		shrinkResourceScope(rl.Resource(), sl.Scope())
		shrinkMap(lr.Attributes())
		shrinkValue(lr.Body())
		pb, _ := (&plog.ProtoMarshaler{}).MarshalLogs(out)
		f.Add(pb)
	}
	f.Add([]byte{})
}

func seedMetrics(f *testing.F) {
	for _, c := range corpus(f, "metrics") {
		md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(c.data)
		if err != nil {
			f.Fatal(err)
		}
		// One metric of each type found, each with one point.
		seen := map[pmetric.MetricType]bool{}
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			sms := rms.At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					m := ms.At(k)
					if seen[m.Type()] {
						continue
					}
					seen[m.Type()] = true
					out := pmetric.NewMetrics()
					rm := out.ResourceMetrics().AppendEmpty()
					rms.At(i).Resource().CopyTo(rm.Resource())
					sm := rm.ScopeMetrics().AppendEmpty()
					sms.At(j).Scope().CopyTo(sm.Scope())
					nm := sm.Metrics().AppendEmpty()
					m.CopyTo(nm)
					shrinkResourceScope(rm.Resource(), sm.Scope())
					shrinkMetric(nm)
					pb, _ := (&pmetric.ProtoMarshaler{}).MarshalMetrics(out)
					f.Add(pb)
				}
			}
		}
	}
	pb, _ := (&pmetric.ProtoMarshaler{}).MarshalMetrics(richMetrics())
	f.Add(pb)
}

func shrinkMetric(m pmetric.Metric) {
	switch m.Type() {
	case pmetric.MetricTypeGauge, pmetric.MetricTypeSum:
		var dps pmetric.NumberDataPointSlice
		if m.Type() == pmetric.MetricTypeSum {
			dps = m.Sum().DataPoints()
		} else {
			dps = m.Gauge().DataPoints()
		}
		k := 0
		dps.RemoveIf(func(pmetric.NumberDataPoint) bool { k++; return k > 1 })
		if dps.Len() > 0 {
			shrinkMap(dps.At(0).Attributes())
		}
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		k := 0
		dps.RemoveIf(func(pmetric.HistogramDataPoint) bool { k++; return k > 1 })
		if dps.Len() > 0 {
			shrinkMap(dps.At(0).Attributes())
		}
	}
}

func seedTraces(f *testing.F) {
	for _, c := range corpus(f, "traces") {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(c.data)
		if err != nil {
			f.Fatal(err)
		}
		out := ptrace.NewTraces()
		rs := out.ResourceSpans().AppendEmpty()
		td.ResourceSpans().At(0).Resource().CopyTo(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		td.ResourceSpans().At(0).ScopeSpans().At(0).Scope().CopyTo(ss.Scope())
		sp := ss.Spans().AppendEmpty()
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).CopyTo(sp)
		shrinkResourceScope(rs.Resource(), ss.Scope())
		shrinkMap(sp.Attributes())
		pb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(out)
		f.Add(pb)
	}
	pb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(richTraces())
	f.Add(pb)
}

// roundTrip checks that a decoded batch re-encodes to bytes that decode to
// a batch encoding to the same bytes, and that pdata reads them with the
// same record count.
func roundTripLogs(t *testing.T, b *signal.Logs) {
	p1 := AppendLogsProto(nil, b)
	var b2 signal.Logs
	if err := DecodeLogs(&b2, p1); err != nil {
		t.Fatalf("re-decode: %v", err)
	}
	if p2 := AppendLogsProto(nil, &b2); !bytes.Equal(p1, p2) {
		t.Fatalf("encode not stable:\n%x\n%x", p1, p2)
	}
	ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(p1)
	if err != nil || ld.LogRecordCount() != b.Len() {
		t.Fatalf("pdata reads our encoding: %v, %d records, want %d", err, ld.LogRecordCount(), b.Len())
	}
}

func roundTripMetrics(t *testing.T, b *signal.Metrics) {
	p1 := AppendMetricsProto(nil, b)
	var b2 signal.Metrics
	if err := DecodeMetrics(&b2, p1); err != nil {
		t.Fatalf("re-decode: %v", err)
	}
	if p2 := AppendMetricsProto(nil, &b2); !bytes.Equal(p1, p2) {
		t.Fatalf("encode not stable:\n%x\n%x", p1, p2)
	}
	if b2.Len() != b.Len() {
		t.Fatalf("%d points after round trip, want %d", b2.Len(), b.Len())
	}
	md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(p1)
	if err != nil || md.DataPointCount() != b.Len() {
		t.Fatalf("pdata reads our encoding: %v, %d points, want %d", err, md.DataPointCount(), b.Len())
	}
}

func roundTripTraces(t *testing.T, b *signal.Spans) {
	p1 := AppendTracesProto(nil, b)
	var b2 signal.Spans
	if err := DecodeTraces(&b2, p1); err != nil {
		t.Fatalf("re-decode: %v", err)
	}
	if p2 := AppendTracesProto(nil, &b2); !bytes.Equal(p1, p2) {
		t.Fatalf("encode not stable:\n%x\n%x", p1, p2)
	}
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(p1)
	if err != nil || td.SpanCount() != b.Len() {
		t.Fatalf("pdata reads our encoding: %v, %d spans, want %d", err, td.SpanCount(), b.Len())
	}
}

func FuzzDecodeLogs(f *testing.F) {
	seedLogs(f)
	f.Fuzz(func(t *testing.T, pb []byte) {
		var b signal.Logs
		b.AppendString("x") // decoding appends after existing data
		before := shape(&b)
		if err := DecodeLogs(&b, pb); err != nil {
			if !isSentinel(err) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			if after := shape(&b); !equalShape(before, after) {
				t.Fatalf("failed decode changed the batch: %v -> %v", before, after)
			}
			return
		}
		roundTripLogs(t, &b)
	})
}

func FuzzDecodeMetrics(f *testing.F) {
	seedMetrics(f)
	f.Add(floatHistogramBody()) // sluice's float count and reset hint fields
	f.Fuzz(func(t *testing.T, pb []byte) {
		var b signal.Metrics
		if err := DecodeMetrics(&b, pb); err != nil {
			if !isSentinel(err) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			if b.Len() != 0 || len(b.Buf) != 0 || len(b.Descs) != 0 || b.Attrs.Len() != 0 || len(b.U64) != 0 {
				t.Fatalf("failed decode left data")
			}
			return
		}
		roundTripMetrics(t, &b)
	})
}

func FuzzDecodeTraces(f *testing.F) {
	seedTraces(f)
	f.Fuzz(func(t *testing.T, pb []byte) {
		var b signal.Spans
		if err := DecodeTraces(&b, pb); err != nil {
			if !isSentinel(err) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			if b.Len() != 0 || len(b.Buf) != 0 || len(b.Msgs) != 0 || b.Attrs.Len() != 0 {
				t.Fatalf("failed decode left data")
			}
			return
		}
		roundTripTraces(t, &b)
	})
}

func FuzzDecodeJSON(f *testing.F) {
	// Small documents keep the fuzzer's minimization quick.
	f.Add([]byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"arrayValue":{"values":[{"intValue":"1"}]}}}]},"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"s","events":[{"name":"e"}],"links":[{"traceId":"0102030405060708090a0b0c0d0e0f10"}]}]}]}]}`))
	f.Add([]byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"m","sum":{"aggregationTemporality":2,"isMonotonic":true,"dataPoints":[{"asDouble":"NaN","exemplars":[{"asInt":"3"}]}]}},{"name":"h","histogram":{"dataPoints":[{"count":"2","sum":1.5,"bucketCounts":["1","1"],"explicitBounds":[1]}]}},{"name":"s","summary":{"dataPoints":[{"quantileValues":[{"quantile":0.5,"value":1}]}]}}]}]}]}`))
	f.Add([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"1","body":{"kvlistValue":{"values":[{"key":"a","value":{"bytesValue":"AAE="}}]}}}]}]}]}` + "\n" + `{"resourceLogs":[]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		k, format, err := Sniff(js)
		if err != nil || format != FormatJSON {
			return
		}
		switch k {
		case signal.KindLogs:
			var b signal.Logs
			if DecodeLogsJSON(&b, js) == nil {
				roundTripLogs(t, &b)
			}
		case signal.KindMetrics:
			var b signal.Metrics
			if DecodeMetricsJSON(&b, js) == nil {
				roundTripMetrics(t, &b)
			}
		case signal.KindTraces:
			var b signal.Spans
			if DecodeTracesJSON(&b, js) == nil {
				roundTripTraces(t, &b)
			}
		}
	})
}

func FuzzAnyValueJSON(f *testing.F) {
	var s signal.Spans
	pb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(richTraces())
	if err := DecodeTraces(&s, pb); err != nil {
		f.Fatal(err)
	}
	for i := 0; i < s.Attrs.Len(); i++ {
		if t := s.Attrs.Type[i]; t == signal.ValueArray || t == signal.ValueMap {
			raw := s.Bytes(signal.Str(s.Attrs.Val[i]))
			f.Add(raw)
			js, _ := AppendAnyValueJSON(nil, raw)
			f.Add(js)
		}
	}
	f.Add([]byte(`{"doubleValue":"NaN"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		// As JSON: JSON → protobuf → JSON → protobuf is stable.
		if p1, err := AppendAnyValueProto(nil, in); err == nil {
			j1, err := AppendAnyValueJSON(nil, p1)
			if err != nil {
				t.Fatalf("our protobuf %x does not convert back: %v", p1, err)
			}
			p2, err := AppendAnyValueProto(nil, j1)
			if err != nil || !bytes.Equal(p1, p2) {
				t.Fatalf("not stable: %s -> %x -> %s -> %x (%v)", in, p1, j1, p2, err)
			}
		}
		// As protobuf: protobuf → JSON → protobuf → JSON is stable.
		if j1, err := AppendAnyValueJSON(nil, in); err == nil {
			p1, err := AppendAnyValueProto(nil, j1)
			if err != nil {
				t.Fatalf("our JSON %s does not parse: %v", j1, err)
			}
			j2, err := AppendAnyValueJSON(nil, p1)
			if err != nil || !bytes.Equal(j1, j2) {
				t.Fatalf("not stable: %x -> %s -> %x -> %s (%v)", in, j1, p1, j2, err)
			}
		}
	})
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
