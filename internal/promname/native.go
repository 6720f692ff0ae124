package promname

import "github.com/prometheus/prometheus/model/histogram"

// NativeSpans lays dense bucket counts, the first at Prometheus bucket
// index first, out as a native histogram's spans the way Prometheus does:
// no empty bucket at either end, and more than two empty buckets in a row
// start a new span (so the result needs no Compact). bucket is called for
// every bucket the spans cover, in order, with its count (0 for an empty
// bucket kept inside a span). For an OTLP exponential histogram, first is
// the OTLP offset + 1. The query API (float buckets) and the remote-write
// exporter (delta-encoded integer buckets) both lay buckets out with it;
// float histograms' buckets are float64.
func NativeSpans[T uint64 | float64](counts []T, first int32, bucket func(c T)) []histogram.Span {
	spans := make([]histogram.Span, 0, 1)
	gap := int32(0) // empty buckets since the last non-empty one (or first)
	for i, c := range counts {
		if c == 0 {
			gap++
			continue
		}
		switch {
		case len(spans) == 0:
			spans = append(spans, histogram.Span{Offset: first + int32(i)})
		case gap > 2:
			spans = append(spans, histogram.Span{Offset: gap})
		default:
			for range gap {
				bucket(0)
			}
			spans[len(spans)-1].Length += uint32(gap)
		}
		gap = 0
		bucket(c)
		spans[len(spans)-1].Length++
	}
	return spans
}
