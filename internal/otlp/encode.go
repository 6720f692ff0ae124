package otlp

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"

	"github.com/sluice-dev/sluice/internal/signal"
)

// groupOrder returns the record indexes ordered so that records of one
// resource, then of one scope (then of one metric, when desc is given) are
// adjacent, each group in order of first appearance; nil when the batch is
// already so ordered, the common case for decoded batches.
func groupOrder(n int, res, scope, desc []uint32) []int {
	keys := [3][]uint32{res, scope, desc}
	grouped := true
	// A key value that ends a run must not start a later one; checking the
	// innermost key present is enough only when the outer ones nest, so all
	// are checked.
	for _, k := range keys {
		if k == nil {
			continue
		}
		closed := map[uint32]bool{}
		for i := 1; i < n && grouped; i++ {
			if k[i] != k[i-1] {
				closed[k[i-1]] = true
				if closed[k[i]] {
					grouped = false
				}
			}
		}
	}
	if grouped {
		return nil
	}
	// Rank each key by first appearance, then sort stably by the ranks.
	var ranks [3][]int
	for ki, k := range keys {
		if k == nil {
			continue
		}
		first := map[uint32]int{}
		ranks[ki] = make([]int, n)
		for i := 0; i < n; i++ {
			r, ok := first[k[i]]
			if !ok {
				r = len(first)
				first[k[i]] = r
			}
			ranks[ki][i] = r
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		for _, r := range ranks {
			if r == nil {
				continue
			}
			if c := cmp.Compare(r[a], r[b]); c != 0 {
				return c
			}
		}
		return 0
	})
	return order
}

func at2(order []int, k int) int {
	if order == nil {
		return k
	}
	return order[k]
}

func appendAttrsProto(dst []byte, c *signal.Common, r signal.Range, num int) []byte {
	for i := r.Start; i < r.End; i++ {
		var s int
		dst, s = beginMsg(dst, num)
		if k := c.Keys.Name(c.Attrs.Key[i]); k != "" {
			dst = appendStringField(dst, 1, k)
		}
		dst = appendAnyValueField(dst, c, 2, c.Attrs.Type[i], c.Attrs.Val[i])
		dst = endMsg(dst, s)
	}
	return dst
}

// appendAnyValueField writes an AnyValue field from a column value.
func appendAnyValueField(dst []byte, c *signal.Common, num int, t signal.ValueType, v uint64) []byte {
	switch t {
	case signal.ValueArray, signal.ValueMap:
		return appendBytesField(dst, num, c.Bytes(signal.Str(v))) // the whole AnyValue
	}
	dst, s := beginMsg(dst, num)
	switch t {
	case signal.ValueString:
		dst = appendBytesField(dst, 1, c.Bytes(signal.Str(v)))
	case signal.ValueBool:
		dst = appendVarintField(dst, 2, v)
	case signal.ValueInt:
		dst = appendVarintField(dst, 3, v)
	case signal.ValueDouble:
		dst = appendFixed64Field(dst, 4, v)
	case signal.ValueBytes:
		dst = appendBytesField(dst, 7, c.Bytes(signal.Str(v)))
	}
	return endMsg(dst, s)
}

func appendStr(dst []byte, c *signal.Common, num int, s signal.Str) []byte {
	if s.Len() == 0 {
		return dst
	}
	return appendBytesField(dst, num, c.Bytes(s))
}

func appendResourceProto(dst []byte, c *signal.Common, r uint32) []byte {
	res := &c.Resources[r]
	dst, s := beginMsg(dst, 1)
	dst = appendAttrsProto(dst, c, res.Attrs, 1)
	if res.DroppedAttrs != 0 {
		dst = appendVarintField(dst, 2, uint64(res.DroppedAttrs))
	}
	return endMsg(dst, s)
}

func appendScopeProto(dst []byte, c *signal.Common, sc uint32) []byte {
	scope := &c.Scopes[sc]
	dst, s := beginMsg(dst, 1)
	dst = appendStr(dst, c, 1, scope.Name)
	dst = appendStr(dst, c, 2, scope.Version)
	dst = appendAttrsProto(dst, c, scope.Attrs, 3)
	if scope.DroppedAttrs != 0 {
		dst = appendVarintField(dst, 4, uint64(scope.DroppedAttrs))
	}
	return endMsg(dst, s)
}

// encodeGroups writes ResourceX and ScopeX messages around the records and
// calls rec for each run of records under one scope (k to end, in order).
func encodeGroups(dst []byte, c *signal.Common, n int, res, scope []uint32, order []int,
	rec func(dst []byte, k, end int) []byte) []byte {
	for k := 0; k < n; {
		r := res[at2(order, k)]
		var rs int
		dst, rs = beginMsg(dst, 1)
		dst = appendResourceProto(dst, c, r)
		for k < n && res[at2(order, k)] == r {
			sc := scope[at2(order, k)]
			end := k
			for end < n && res[at2(order, end)] == r && scope[at2(order, end)] == sc {
				end++
			}
			var ss int
			dst, ss = beginMsg(dst, 2)
			dst = appendScopeProto(dst, c, sc)
			dst = rec(dst, k, end)
			dst = appendStr(dst, c, 3, c.Scopes[sc].SchemaURL)
			dst = endMsg(dst, ss)
			k = end
		}
		dst = appendStr(dst, c, 3, c.Resources[r].SchemaURL)
		dst = endMsg(dst, rs)
	}
	return dst
}

// AppendLogsProto appends b as an ExportLogsServiceRequest, records grouped
// under their resource and scope.
func AppendLogsProto(dst []byte, b *signal.Logs) []byte {
	n := b.Len()
	order := groupOrder(n, b.Resource, b.Scope, nil)
	return encodeGroups(dst, &b.Common, n, b.Resource, b.Scope, order, func(dst []byte, k, end int) []byte {
		for ; k < end; k++ {
			dst = appendLogRecord(dst, b, at2(order, k))
		}
		return dst
	})
}

func appendLogRecord(dst []byte, b *signal.Logs, i int) []byte {
	dst, s := beginMsg(dst, 2)
	if v := b.Time[i]; v != 0 {
		dst = appendFixed64Field(dst, 1, uint64(v))
	}
	if v := b.SeverityNum[i]; v != 0 {
		dst = appendVarintField(dst, 2, uint64(int64(v)))
	}
	dst = appendStr(dst, &b.Common, 3, b.SeverityText[i])
	if t := b.BodyType[i]; t != signal.ValueEmpty {
		dst = appendAnyValueField(dst, &b.Common, 5, t, b.Body[i])
	}
	dst = appendAttrsProto(dst, &b.Common, b.Attr[i], 6)
	if v := b.DroppedAttrs[i]; v != 0 {
		dst = appendVarintField(dst, 7, uint64(v))
	}
	if v := b.Flags[i]; v != 0 {
		dst = appendFixed32Field(dst, 8, v)
	}
	if !b.TraceID[i].IsZero() {
		dst = appendBytesField(dst, 9, b.TraceID[i][:])
	}
	if !b.SpanID[i].IsZero() {
		dst = appendBytesField(dst, 10, b.SpanID[i][:])
	}
	if v := b.ObservedTime[i]; v != 0 {
		dst = appendFixed64Field(dst, 11, uint64(v))
	}
	dst = appendStr(dst, &b.Common, 12, b.EventName[i])
	return endMsg(dst, s)
}

// AppendTracesProto appends b as an ExportTraceServiceRequest.
func AppendTracesProto(dst []byte, b *signal.Spans) []byte {
	n := b.Len()
	order := groupOrder(n, b.Resource, b.Scope, nil)
	return encodeGroups(dst, &b.Common, n, b.Resource, b.Scope, order, func(dst []byte, k, end int) []byte {
		for ; k < end; k++ {
			dst = appendSpan(dst, b, at2(order, k))
		}
		return dst
	})
}

func appendMsgs(dst []byte, c *signal.Common, num int, r signal.Range) []byte {
	for _, m := range c.Msgs[r.Start:r.End] {
		dst = appendBytesField(dst, num, c.Bytes(m))
	}
	return dst
}

func appendSpan(dst []byte, b *signal.Spans, i int) []byte {
	c := &b.Common
	dst, s := beginMsg(dst, 2)
	if !b.TraceID[i].IsZero() {
		dst = appendBytesField(dst, 1, b.TraceID[i][:])
	}
	if !b.SpanID[i].IsZero() {
		dst = appendBytesField(dst, 2, b.SpanID[i][:])
	}
	dst = appendStr(dst, c, 3, b.TraceState[i])
	if !b.ParentSpanID[i].IsZero() {
		dst = appendBytesField(dst, 4, b.ParentSpanID[i][:])
	}
	dst = appendStr(dst, c, 5, b.Name[i])
	if v := b.Kind[i]; v != 0 {
		dst = appendVarintField(dst, 6, uint64(int64(v)))
	}
	if v := b.StartTime[i]; v != 0 {
		dst = appendFixed64Field(dst, 7, uint64(v))
	}
	if v := b.EndTime[i]; v != 0 {
		dst = appendFixed64Field(dst, 8, uint64(v))
	}
	dst = appendAttrsProto(dst, c, b.Attr[i], 9)
	if v := b.DroppedAttrs[i]; v != 0 {
		dst = appendVarintField(dst, 10, uint64(v))
	}
	dst = appendMsgs(dst, c, 11, b.Events[i])
	if v := b.DroppedEvents[i]; v != 0 {
		dst = appendVarintField(dst, 12, uint64(v))
	}
	dst = appendMsgs(dst, c, 13, b.Links[i])
	if v := b.DroppedLinks[i]; v != 0 {
		dst = appendVarintField(dst, 14, uint64(v))
	}
	if b.StatusCode[i] != 0 || b.StatusMessage[i].Len() != 0 {
		var ss int
		dst, ss = beginMsg(dst, 15)
		dst = appendStr(dst, c, 2, b.StatusMessage[i])
		if v := b.StatusCode[i]; v != 0 {
			dst = appendVarintField(dst, 3, uint64(int64(v)))
		}
		dst = endMsg(dst, ss)
	}
	if v := b.Flags[i]; v != 0 {
		dst = appendFixed32Field(dst, 16, v)
	}
	return endMsg(dst, s)
}

// AppendMetricsProto appends b as an ExportMetricsServiceRequest: adjacent
// points of one descriptor become one Metric.
func AppendMetricsProto(dst []byte, b *signal.Metrics) []byte {
	n := b.Len()
	order := groupOrder(n, b.Resource, b.Scope, b.Desc)
	return encodeGroups(dst, &b.Common, n, b.Resource, b.Scope, order, func(dst []byte, k, end int) []byte {
		for k < end {
			di := b.Desc[at2(order, k)]
			e := k
			for e < end && b.Desc[at2(order, e)] == di {
				e++
			}
			dst = appendMetric(dst, b, di, order, k, e)
			k = e
		}
		return dst
	})
}

func appendMetric(dst []byte, b *signal.Metrics, di uint32, order []int, k, end int) []byte {
	c := &b.Common
	desc := &b.Descs[di]
	dst, s := beginMsg(dst, 2)
	dst = appendStr(dst, c, 1, desc.Name)
	dst = appendStr(dst, c, 2, desc.Description)
	dst = appendStr(dst, c, 3, desc.Unit)
	var num int
	switch desc.Type {
	case signal.MetricGauge:
		num = 5
	case signal.MetricSum:
		num = 7
	case signal.MetricHistogram:
		num = 9
	case signal.MetricExponentialHistogram:
		num = 10
	case signal.MetricSummary:
		num = 11
	}
	if num != 0 {
		var ds int
		dst, ds = beginMsg(dst, num)
		for ; k < end; k++ {
			i := at2(order, k)
			switch desc.Type {
			case signal.MetricGauge, signal.MetricSum:
				dst = appendNumberPoint(dst, b, i)
			case signal.MetricHistogram:
				dst = appendHistogramPoint(dst, b, i)
			case signal.MetricExponentialHistogram:
				dst = appendExpHistogramPoint(dst, b, i)
			default:
				dst = appendSummaryPoint(dst, b, i)
			}
		}
		if desc.Type != signal.MetricGauge && desc.Type != signal.MetricSummary && desc.Temporality != 0 {
			dst = appendVarintField(dst, 2, uint64(desc.Temporality))
		}
		if desc.Type == signal.MetricSum && desc.Monotonic {
			dst = appendVarintField(dst, 3, 1)
		}
		dst = endMsg(dst, ds)
	}
	dst = appendAttrsProto(dst, c, desc.Metadata, 12)
	return endMsg(dst, s)
}

func appendTimes(dst []byte, b *signal.Metrics, i int) []byte {
	if v := b.StartTime[i]; v != 0 {
		dst = appendFixed64Field(dst, 2, uint64(v))
	}
	if v := b.Time[i]; v != 0 {
		dst = appendFixed64Field(dst, 3, uint64(v))
	}
	return dst
}

func appendDouble(dst []byte, num int, v float64) []byte {
	if bits := math.Float64bits(v); bits != 0 {
		dst = appendFixed64Field(dst, num, bits)
	}
	return dst
}

func appendNumberPoint(dst []byte, b *signal.Metrics, i int) []byte {
	dst, s := beginMsg(dst, 1)
	dst = appendTimes(dst, b, i)
	if b.NumberType[i] == signal.ValueDouble {
		dst = appendFixed64Field(dst, 4, b.Number[i])
	}
	dst = appendMsgs(dst, &b.Common, 5, b.Exemplars[i])
	if b.NumberType[i] == signal.ValueInt {
		dst = appendFixed64Field(dst, 6, b.Number[i])
	}
	dst = appendAttrsProto(dst, &b.Common, b.Attr[i], 7)
	if v := b.Flags[i]; v != 0 {
		dst = appendVarintField(dst, 8, uint64(v))
	}
	return endMsg(dst, s)
}

func appendPackedFixed(dst []byte, num int, vs []uint64) []byte {
	if len(vs) == 0 {
		return dst
	}
	dst = appendTag(dst, num, wtLen)
	dst = appendVarint(dst, uint64(8*len(vs)))
	for _, v := range vs {
		dst = binary.LittleEndian.AppendUint64(dst, v)
	}
	return dst
}

func appendPackedDouble(dst []byte, num int, vs []float64) []byte {
	if len(vs) == 0 {
		return dst
	}
	dst = appendTag(dst, num, wtLen)
	dst = appendVarint(dst, uint64(8*len(vs)))
	for _, v := range vs {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
	}
	return dst
}

func appendHistogramPoint(dst []byte, b *signal.Metrics, i int) []byte {
	dst, s := beginMsg(dst, 1)
	dst = appendTimes(dst, b, i)
	if v := b.Count[i]; v != 0 {
		dst = appendFixed64Field(dst, 4, v)
	}
	if b.Has[i]&signal.HasSum != 0 {
		dst = appendFixed64Field(dst, 5, math.Float64bits(b.Sum[i]))
	}
	r := b.BucketCounts[i]
	dst = appendPackedFixed(dst, 6, b.U64[r.Start:r.End])
	r = b.Bounds[i]
	dst = appendPackedDouble(dst, 7, b.F64[r.Start:r.End])
	dst = appendMsgs(dst, &b.Common, 8, b.Exemplars[i])
	dst = appendAttrsProto(dst, &b.Common, b.Attr[i], 9)
	if v := b.Flags[i]; v != 0 {
		dst = appendVarintField(dst, 10, uint64(v))
	}
	if b.Has[i]&signal.HasMin != 0 {
		dst = appendFixed64Field(dst, 11, math.Float64bits(b.Min[i]))
	}
	if b.Has[i]&signal.HasMax != 0 {
		dst = appendFixed64Field(dst, 12, math.Float64bits(b.Max[i]))
	}
	dst = appendNativeExt(dst, b, i)
	return endMsg(dst, s)
}

// Fields of sluice's own in a histogram or exponential histogram data
// point, which OTLP has no place for and other decoders skip (unknown
// fields): a Prometheus float histogram's exact counts
// (signal.Metrics.FloatCounts, packed doubles) and the reset hint remote
// write sent (varint, its enum: 1 yes, 2 no, 3 gauge). They keep a
// remote-write batch re-encoded as OTLP (a partial write, a processing
// rule) lossless in the queue; the standard fields carry the counts
// rounded.
const (
	fieldFloatCounts = 90001
	fieldResetHint   = 90002
)

func appendNativeExt(dst []byte, b *signal.Metrics, i int) []byte {
	r := b.FloatCounts[i]
	dst = appendPackedDouble(dst, fieldFloatCounts, b.F64[r.Start:r.End])
	if h := b.Has[i] & signal.HintMask; h != 0 {
		dst = appendVarintField(dst, fieldResetHint, uint64(h>>3))
	}
	return dst
}

func zigzag32(v int32) uint64 { return uint64(uint32(v<<1) ^ uint32(v>>31)) }

func appendBuckets(dst []byte, num int, offset int32, counts []uint64) []byte {
	if offset == 0 && len(counts) == 0 {
		return dst
	}
	dst, s := beginMsg(dst, num)
	if offset != 0 {
		dst = appendVarintField(dst, 1, zigzag32(offset))
	}
	if len(counts) > 0 {
		n := 0
		for _, v := range counts {
			n += varintLen(v)
		}
		dst = appendTag(dst, 2, wtLen)
		dst = appendVarint(dst, uint64(n))
		for _, v := range counts {
			dst = appendVarint(dst, v)
		}
	}
	return endMsg(dst, s)
}

func appendExpHistogramPoint(dst []byte, b *signal.Metrics, i int) []byte {
	dst, s := beginMsg(dst, 1)
	dst = appendAttrsProto(dst, &b.Common, b.Attr[i], 1)
	dst = appendTimes(dst, b, i)
	if v := b.Count[i]; v != 0 {
		dst = appendFixed64Field(dst, 4, v)
	}
	if b.Has[i]&signal.HasSum != 0 {
		dst = appendFixed64Field(dst, 5, math.Float64bits(b.Sum[i]))
	}
	if v := b.Scale[i]; v != 0 {
		dst = appendVarintField(dst, 6, zigzag32(v))
	}
	if v := b.ZeroCount[i]; v != 0 {
		dst = appendFixed64Field(dst, 7, v)
	}
	r := b.PosCounts[i]
	dst = appendBuckets(dst, 8, b.PosOffset[i], b.U64[r.Start:r.End])
	r = b.NegCounts[i]
	dst = appendBuckets(dst, 9, b.NegOffset[i], b.U64[r.Start:r.End])
	if v := b.Flags[i]; v != 0 {
		dst = appendVarintField(dst, 10, uint64(v))
	}
	dst = appendMsgs(dst, &b.Common, 11, b.Exemplars[i])
	if b.Has[i]&signal.HasMin != 0 {
		dst = appendFixed64Field(dst, 12, math.Float64bits(b.Min[i]))
	}
	if b.Has[i]&signal.HasMax != 0 {
		dst = appendFixed64Field(dst, 13, math.Float64bits(b.Max[i]))
	}
	dst = appendDouble(dst, 14, b.ZeroThreshold[i])
	dst = appendNativeExt(dst, b, i)
	return endMsg(dst, s)
}

func appendSummaryPoint(dst []byte, b *signal.Metrics, i int) []byte {
	dst, s := beginMsg(dst, 1)
	dst = appendTimes(dst, b, i)
	if v := b.Count[i]; v != 0 {
		dst = appendFixed64Field(dst, 4, v)
	}
	dst = appendDouble(dst, 5, b.Sum[i])
	r := b.Quantiles[i]
	for q := r.Start; q+1 < r.End; q += 2 {
		var qs int
		dst, qs = beginMsg(dst, 6)
		dst = appendDouble(dst, 1, b.F64[q])
		dst = appendDouble(dst, 2, b.F64[q+1])
		dst = endMsg(dst, qs)
	}
	dst = appendAttrsProto(dst, &b.Common, b.Attr[i], 7)
	if v := b.Flags[i]; v != 0 {
		dst = appendVarintField(dst, 8, uint64(v))
	}
	return endMsg(dst, s)
}
