package otlp

// Test helpers: the corpus, and a canonical text view of records built from
// pdata (an independent decoder) and from our batches. Nested messages kept
// raw in batches are wrapped into a request with protowire and decoded by
// pdata, so no expected value comes from the code under test.

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/signal"
)

type corpusFile struct {
	name string
	data []byte
}

var (
	corpusMu    sync.Mutex
	corpusCache = map[string][]corpusFile{}
)

// corpus returns the uncompressed files of one signal folder, read once per
// test binary. Callers must not modify them.
func corpus(tb testing.TB, signalDir string) []corpusFile {
	tb.Helper()
	corpusMu.Lock()
	defer corpusMu.Unlock()
	if c, ok := corpusCache[signalDir]; ok {
		return c
	}
	var out []corpusFile
	for _, path := range corpustest.Files(tb, signalDir) {
		if strings.Contains(filepath.Base(path), ".binpb") {
			out = append(out, corpusFile{filepath.Base(path), corpustest.Read(tb, path)})
		}
	}
	if len(out) == 0 {
		corpustest.Missing(tb, "corpus .binpb files in otlp/"+signalDir)
	}
	corpusCache[signalDir] = out
	return out
}

// ---- canonical text of pdata values ----

func canonValue(v pcommon.Value) string {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return fmt.Sprintf("s:%q", v.Str())
	case pcommon.ValueTypeInt:
		return fmt.Sprintf("i:%d", v.Int())
	case pcommon.ValueTypeDouble:
		return fmt.Sprintf("d:%x", math.Float64bits(v.Double()))
	case pcommon.ValueTypeBool:
		return fmt.Sprintf("b:%t", v.Bool())
	case pcommon.ValueTypeBytes:
		return fmt.Sprintf("y:%x", v.Bytes().AsRaw())
	case pcommon.ValueTypeSlice:
		var sb strings.Builder
		sb.WriteString("a:[")
		for i := 0; i < v.Slice().Len(); i++ {
			sb.WriteString(canonValue(v.Slice().At(i)))
			sb.WriteByte(',')
		}
		sb.WriteString("]")
		return sb.String()
	case pcommon.ValueTypeMap:
		return "m:" + canonMap(v.Map())
	}
	return "e"
}

// canonMap is order-independent; duplicate keys keep the last value, as
// pdata's AsRaw does, and the pair count is part of the text.
func canonMap(m pcommon.Map) string {
	kv := map[string]string{}
	n := 0
	m.Range(func(k string, v pcommon.Value) bool {
		kv[k] = canonValue(v)
		n++
		return true
	})
	return canonPairs(kv, n)
}

func canonPairs(kv map[string]string, n int) string {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	fmt.Fprintf(&sb, "{%d|", n)
	for _, k := range keys {
		fmt.Fprintf(&sb, "%q=%s;", k, kv[k])
	}
	sb.WriteString("}")
	return sb.String()
}

func canonResource(r pcommon.Resource, schema string) string {
	return fmt.Sprintf("res{%s d=%d u=%q}", canonMap(r.Attributes()), r.DroppedAttributesCount(), schema)
}

func canonScope(s pcommon.InstrumentationScope, schema string) string {
	return fmt.Sprintf("scope{%q %q %s d=%d u=%q}", s.Name(), s.Version(), canonMap(s.Attributes()), s.DroppedAttributesCount(), schema)
}

// ---- canonical text of batch values ----

func pbField(dst []byte, num protowire.Number, msg []byte) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendBytes(dst, msg)
}

// wrap3 nests a record message in request → resource → scope.
func wrap3(rec []byte) []byte {
	scope := pbField(nil, 2, rec)
	res := pbField(nil, 2, scope)
	return pbField(nil, 1, res)
}

func anyViaPdata(tb testing.TB, raw []byte) pcommon.Value {
	rec := pbField(nil, 5, raw) // LogRecord.body
	var u plog.ProtoUnmarshaler
	ld, err := u.UnmarshalLogs(wrap3(rec))
	if err != nil {
		tb.Fatalf("pdata rejects AnyValue %x: %v", raw, err)
	}
	return ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Body()
}

func canonBatchValue(tb testing.TB, c *signal.Common, t signal.ValueType, v uint64) string {
	switch t {
	case signal.ValueString:
		return fmt.Sprintf("s:%q", c.String(signal.Str(v)))
	case signal.ValueInt:
		return fmt.Sprintf("i:%d", int64(v))
	case signal.ValueDouble:
		return fmt.Sprintf("d:%x", v)
	case signal.ValueBool:
		return fmt.Sprintf("b:%t", v != 0)
	case signal.ValueBytes:
		return fmt.Sprintf("y:%x", c.Bytes(signal.Str(v)))
	case signal.ValueArray, signal.ValueMap:
		return canonValue(anyViaPdata(tb, c.Bytes(signal.Str(v))))
	}
	return "e"
}

func canonBatchAttrs(tb testing.TB, c *signal.Common, r signal.Range) string {
	kv := map[string]string{}
	for i := r.Start; i < r.End; i++ {
		kv[c.Keys.Name(c.Attrs.Key[i])] = canonBatchValue(tb, c, c.Attrs.Type[i], c.Attrs.Val[i])
	}
	return canonPairs(kv, r.Len())
}

func canonBatchResource(tb testing.TB, c *signal.Common, r uint32) string {
	res := c.Resources[r]
	return fmt.Sprintf("res{%s d=%d u=%q}", canonBatchAttrs(tb, c, res.Attrs), res.DroppedAttrs, c.String(res.SchemaURL))
}

func canonBatchScope(tb testing.TB, c *signal.Common, s uint32) string {
	sc := c.Scopes[s]
	return fmt.Sprintf("scope{%q %q %s d=%d u=%q}", c.String(sc.Name), c.String(sc.Version),
		canonBatchAttrs(tb, c, sc.Attrs), sc.DroppedAttrs, c.String(sc.SchemaURL))
}

// ---- logs ----

func canonLogRecord(lr plog.LogRecord) string {
	return fmt.Sprintf("t=%d obs=%d sev=%d st=%q body=%s attrs=%s d=%d f=%d tid=%x sid=%x ev=%q",
		lr.Timestamp(), lr.ObservedTimestamp(), lr.SeverityNumber(), lr.SeverityText(), canonValue(lr.Body()),
		canonMap(lr.Attributes()), lr.DroppedAttributesCount(), lr.Flags(), [16]byte(lr.TraceID()), [8]byte(lr.SpanID()), lr.EventName())
}

func pdataLogs(ld plog.Logs) []string {
	var out []string
	for i := 0; i < ld.ResourceLogs().Len(); i++ {
		rl := ld.ResourceLogs().At(i)
		res := canonResource(rl.Resource(), rl.SchemaUrl())
		for j := 0; j < rl.ScopeLogs().Len(); j++ {
			sl := rl.ScopeLogs().At(j)
			sc := canonScope(sl.Scope(), sl.SchemaUrl())
			for k := 0; k < sl.LogRecords().Len(); k++ {
				out = append(out, res+" "+sc+" "+canonLogRecord(sl.LogRecords().At(k)))
			}
		}
	}
	return out
}

func batchLogs(tb testing.TB, b *signal.Logs) []string {
	out := make([]string, b.Len())
	c := &b.Common
	for i := range out {
		out[i] = canonBatchResource(tb, c, b.Resource[i]) + " " + canonBatchScope(tb, c, b.Scope[i]) + " " +
			fmt.Sprintf("t=%d obs=%d sev=%d st=%q body=%s attrs=%s d=%d f=%d tid=%x sid=%x ev=%q",
				b.Time[i], b.ObservedTime[i], b.SeverityNum[i], c.String(b.SeverityText[i]),
				canonBatchValue(tb, c, b.BodyType[i], b.Body[i]), canonBatchAttrs(tb, c, b.Attr[i]),
				b.DroppedAttrs[i], b.Flags[i], [16]byte(b.TraceID[i]), [8]byte(b.SpanID[i]), c.String(b.EventName[i]))
	}
	return out
}

// ---- traces ----

func canonEvent(e ptrace.SpanEvent) string {
	return fmt.Sprintf("ev{%d %q %s %d}", e.Timestamp(), e.Name(), canonMap(e.Attributes()), e.DroppedAttributesCount())
}

func canonLink(l ptrace.SpanLink) string {
	return fmt.Sprintf("ln{%x %x %q %s %d %d}", [16]byte(l.TraceID()), [8]byte(l.SpanID()), l.TraceState().AsRaw(),
		canonMap(l.Attributes()), l.DroppedAttributesCount(), l.Flags())
}

func canonSpanHead(s ptrace.Span) string {
	return fmt.Sprintf("tid=%x sid=%x ts=%q p=%x f=%d n=%q k=%d st=%d en=%d attrs=%s da=%d de=%d dl=%d sc=%d sm=%q",
		[16]byte(s.TraceID()), [8]byte(s.SpanID()), s.TraceState().AsRaw(), [8]byte(s.ParentSpanID()), s.Flags(), s.Name(),
		s.Kind(), s.StartTimestamp(), s.EndTimestamp(), canonMap(s.Attributes()), s.DroppedAttributesCount(),
		s.DroppedEventsCount(), s.DroppedLinksCount(), s.Status().Code(), s.Status().Message())
}

func canonSpan(s ptrace.Span) string {
	var sb strings.Builder
	sb.WriteString(canonSpanHead(s))
	for i := 0; i < s.Events().Len(); i++ {
		sb.WriteString(" " + canonEvent(s.Events().At(i)))
	}
	for i := 0; i < s.Links().Len(); i++ {
		sb.WriteString(" " + canonLink(s.Links().At(i)))
	}
	return sb.String()
}

func pdataTraces(td ptrace.Traces) []string {
	var out []string
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		res := canonResource(rs.Resource(), rs.SchemaUrl())
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			sc := canonScope(ss.Scope(), ss.SchemaUrl())
			for k := 0; k < ss.Spans().Len(); k++ {
				out = append(out, res+" "+sc+" "+canonSpan(ss.Spans().At(k)))
			}
		}
	}
	return out
}

func spanViaPdata(tb testing.TB, field protowire.Number, raw []byte) ptrace.Span {
	var u ptrace.ProtoUnmarshaler
	td, err := u.UnmarshalTraces(wrap3(pbField(nil, field, raw)))
	if err != nil {
		tb.Fatalf("pdata rejects span field %d %x: %v", field, raw, err)
	}
	return td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
}

func batchTraces(tb testing.TB, b *signal.Spans) []string {
	out := make([]string, b.Len())
	c := &b.Common
	for i := range out {
		var sb strings.Builder
		sb.WriteString(canonBatchResource(tb, c, b.Resource[i]) + " " + canonBatchScope(tb, c, b.Scope[i]) + " ")
		fmt.Fprintf(&sb, "tid=%x sid=%x ts=%q p=%x f=%d n=%q k=%d st=%d en=%d attrs=%s da=%d de=%d dl=%d sc=%d sm=%q",
			[16]byte(b.TraceID[i]), [8]byte(b.SpanID[i]), c.String(b.TraceState[i]), [8]byte(b.ParentSpanID[i]), b.Flags[i],
			c.String(b.Name[i]), b.Kind[i], b.StartTime[i], b.EndTime[i], canonBatchAttrs(tb, c, b.Attr[i]),
			b.DroppedAttrs[i], b.DroppedEvents[i], b.DroppedLinks[i], b.StatusCode[i], c.String(b.StatusMessage[i]))
		for _, m := range c.Msgs[b.Events[i].Start:b.Events[i].End] {
			sb.WriteString(" " + canonEvent(spanViaPdata(tb, 11, c.Bytes(m)).Events().At(0)))
		}
		for _, m := range c.Msgs[b.Links[i].Start:b.Links[i].End] {
			sb.WriteString(" " + canonLink(spanViaPdata(tb, 13, c.Bytes(m)).Links().At(0)))
		}
		out[i] = sb.String()
	}
	return out
}

// ---- metrics ----

func canonExemplar(e pmetric.Exemplar) string {
	v := ""
	switch e.ValueType() {
	case pmetric.ExemplarValueTypeInt:
		v = fmt.Sprintf("i:%d", e.IntValue())
	case pmetric.ExemplarValueTypeDouble:
		v = fmt.Sprintf("d:%x", math.Float64bits(e.DoubleValue()))
	}
	return fmt.Sprintf("ex{%s %d %s %x %x}", canonMap(e.FilteredAttributes()), e.Timestamp(), v, [16]byte(e.TraceID()), [8]byte(e.SpanID()))
}

func canonExemplars(s pmetric.ExemplarSlice) string {
	var sb strings.Builder
	for i := 0; i < s.Len(); i++ {
		sb.WriteString(canonExemplar(s.At(i)))
	}
	return sb.String()
}

func exemplarViaPdata(tb testing.TB, raw []byte) pmetric.Exemplar {
	dp := pbField(nil, 5, raw)
	gauge := pbField(nil, 1, dp)
	metric := pbField(nil, 5, gauge)
	var u pmetric.ProtoUnmarshaler
	md, err := u.UnmarshalMetrics(wrap3(metric))
	if err != nil {
		tb.Fatalf("pdata rejects exemplar %x: %v", raw, err)
	}
	return md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).Exemplars().At(0)
}

func f64s(vs []float64) string {
	var sb strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&sb, "%x,", math.Float64bits(v))
	}
	return sb.String()
}

func pdataMetrics(md pmetric.Metrics) []string {
	var out []string
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		res := canonResource(rm.Resource(), rm.SchemaUrl())
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			sm := rm.ScopeMetrics().At(j)
			sc := canonScope(sm.Scope(), sm.SchemaUrl())
			for k := 0; k < sm.Metrics().Len(); k++ {
				m := sm.Metrics().At(k)
				var temp int32
				mono := false
				switch m.Type() {
				case pmetric.MetricTypeSum:
					temp, mono = int32(m.Sum().AggregationTemporality()), m.Sum().IsMonotonic()
				case pmetric.MetricTypeHistogram:
					temp = int32(m.Histogram().AggregationTemporality())
				case pmetric.MetricTypeExponentialHistogram:
					temp = int32(m.ExponentialHistogram().AggregationTemporality())
				}
				head := fmt.Sprintf("%s %s m{%q %q %q t=%d tmp=%d mono=%t md=%s}", res, sc, m.Name(), m.Description(), m.Unit(),
					m.Type(), temp, mono, canonMap(m.Metadata()))
				pt := func(s string) { out = append(out, head+" "+s) }
				switch m.Type() {
				case pmetric.MetricTypeGauge, pmetric.MetricTypeSum:
					var dps pmetric.NumberDataPointSlice
					if m.Type() == pmetric.MetricTypeSum {
						dps = m.Sum().DataPoints()
					} else {
						dps = m.Gauge().DataPoints()
					}
					for p := 0; p < dps.Len(); p++ {
						dp := dps.At(p)
						v := "e"
						switch dp.ValueType() {
						case pmetric.NumberDataPointValueTypeInt:
							v = fmt.Sprintf("i:%d", dp.IntValue())
						case pmetric.NumberDataPointValueTypeDouble:
							v = fmt.Sprintf("d:%x", math.Float64bits(dp.DoubleValue()))
						}
						pt(fmt.Sprintf("st=%d t=%d a=%s f=%d ex=%s v=%s", dp.StartTimestamp(), dp.Timestamp(),
							canonMap(dp.Attributes()), dp.Flags(), canonExemplars(dp.Exemplars()), v))
					}
				case pmetric.MetricTypeHistogram:
					dps := m.Histogram().DataPoints()
					for p := 0; p < dps.Len(); p++ {
						dp := dps.At(p)
						pt(fmt.Sprintf("st=%d t=%d a=%s f=%d ex=%s c=%d s=%t:%x min=%t:%x max=%t:%x b=%v e=%s", dp.StartTimestamp(), dp.Timestamp(),
							canonMap(dp.Attributes()), dp.Flags(), canonExemplars(dp.Exemplars()), dp.Count(),
							dp.HasSum(), math.Float64bits(dp.Sum()), dp.HasMin(), math.Float64bits(dp.Min()), dp.HasMax(), math.Float64bits(dp.Max()),
							dp.BucketCounts().AsRaw(), f64s(dp.ExplicitBounds().AsRaw())))
					}
				case pmetric.MetricTypeExponentialHistogram:
					dps := m.ExponentialHistogram().DataPoints()
					for p := 0; p < dps.Len(); p++ {
						dp := dps.At(p)
						pt(fmt.Sprintf("st=%d t=%d a=%s f=%d ex=%s c=%d s=%t:%x min=%t:%x max=%t:%x sc=%d zc=%d zt=%x pos=%d:%v neg=%d:%v",
							dp.StartTimestamp(), dp.Timestamp(), canonMap(dp.Attributes()), dp.Flags(), canonExemplars(dp.Exemplars()), dp.Count(),
							dp.HasSum(), math.Float64bits(dp.Sum()), dp.HasMin(), math.Float64bits(dp.Min()), dp.HasMax(), math.Float64bits(dp.Max()),
							dp.Scale(), dp.ZeroCount(), math.Float64bits(dp.ZeroThreshold()),
							dp.Positive().Offset(), dp.Positive().BucketCounts().AsRaw(), dp.Negative().Offset(), dp.Negative().BucketCounts().AsRaw()))
					}
				case pmetric.MetricTypeSummary:
					dps := m.Summary().DataPoints()
					for p := 0; p < dps.Len(); p++ {
						dp := dps.At(p)
						var q []float64
						for x := 0; x < dp.QuantileValues().Len(); x++ {
							q = append(q, dp.QuantileValues().At(x).Quantile(), dp.QuantileValues().At(x).Value())
						}
						pt(fmt.Sprintf("st=%d t=%d a=%s f=%d c=%d s=%x q=%s", dp.StartTimestamp(), dp.Timestamp(),
							canonMap(dp.Attributes()), dp.Flags(), dp.Count(), math.Float64bits(dp.Sum()), f64s(q)))
					}
				}
			}
		}
	}
	return out
}

func batchMetrics(tb testing.TB, b *signal.Metrics) []string {
	out := make([]string, b.Len())
	c := &b.Common
	for i := range out {
		d := b.Descs[b.Desc[i]]
		head := fmt.Sprintf("%s %s m{%q %q %q t=%d tmp=%d mono=%t md=%s}", canonBatchResource(tb, c, b.Resource[i]),
			canonBatchScope(tb, c, b.Scope[i]), c.String(d.Name), c.String(d.Description), c.String(d.Unit),
			d.Type, d.Temporality, d.Monotonic, canonBatchAttrs(tb, c, d.Metadata))
		var ex strings.Builder
		for _, m := range c.Msgs[b.Exemplars[i].Start:b.Exemplars[i].End] {
			ex.WriteString(canonExemplar(exemplarViaPdata(tb, c.Bytes(m))))
		}
		attrs := canonBatchAttrs(tb, c, b.Attr[i])
		u64 := func(r signal.Range) []uint64 { return append([]uint64{}, b.U64[r.Start:r.End]...) }
		has := func(bit uint8) bool { return b.Has[i]&bit != 0 }
		var s string
		switch d.Type {
		case signal.MetricGauge, signal.MetricSum:
			v := "e"
			switch b.NumberType[i] {
			case signal.ValueInt:
				v = fmt.Sprintf("i:%d", int64(b.Number[i]))
			case signal.ValueDouble:
				v = fmt.Sprintf("d:%x", b.Number[i])
			}
			s = fmt.Sprintf("st=%d t=%d a=%s f=%d ex=%s v=%s", b.StartTime[i], b.Time[i], attrs, b.Flags[i], ex.String(), v)
		case signal.MetricHistogram:
			s = fmt.Sprintf("st=%d t=%d a=%s f=%d ex=%s c=%d s=%t:%x min=%t:%x max=%t:%x b=%v e=%s", b.StartTime[i], b.Time[i],
				attrs, b.Flags[i], ex.String(), b.Count[i],
				has(signal.HasSum), math.Float64bits(b.Sum[i]), has(signal.HasMin), math.Float64bits(b.Min[i]), has(signal.HasMax), math.Float64bits(b.Max[i]),
				u64(b.BucketCounts[i]), f64s(b.F64[b.Bounds[i].Start:b.Bounds[i].End]))
		case signal.MetricExponentialHistogram:
			s = fmt.Sprintf("st=%d t=%d a=%s f=%d ex=%s c=%d s=%t:%x min=%t:%x max=%t:%x sc=%d zc=%d zt=%x pos=%d:%v neg=%d:%v",
				b.StartTime[i], b.Time[i], attrs, b.Flags[i], ex.String(), b.Count[i],
				has(signal.HasSum), math.Float64bits(b.Sum[i]), has(signal.HasMin), math.Float64bits(b.Min[i]), has(signal.HasMax), math.Float64bits(b.Max[i]),
				b.Scale[i], b.ZeroCount[i], math.Float64bits(b.ZeroThreshold[i]),
				b.PosOffset[i], u64(b.PosCounts[i]), b.NegOffset[i], u64(b.NegCounts[i]))
		case signal.MetricSummary:
			s = fmt.Sprintf("st=%d t=%d a=%s f=%d c=%d s=%x q=%s", b.StartTime[i], b.Time[i], attrs, b.Flags[i], b.Count[i],
				math.Float64bits(b.Sum[i]), f64s(b.F64[b.Quantiles[i].Start:b.Quantiles[i].End]))
		}
		out[i] = head + " " + s
	}
	return out
}

// sameRecords reports the first difference between two record views.
func sameRecords(tb testing.TB, what string, want, got []string) {
	tb.Helper()
	if len(want) != len(got) {
		tb.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			tb.Fatalf("%s: record %d differs\n got: %s\nwant: %s", what, i, got[i], want[i])
		}
	}
}
