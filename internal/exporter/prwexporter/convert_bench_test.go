package prwexporter

import (
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// BenchmarkOTLPToRemoteWrite1: decode an OTLP metrics body (gauges,
// counters, a histogram), convert to remote-write series and encode 1.0
// with snappy: the exporter's CPU per sample, without the network.
func BenchmarkOTLPToRemoteWrite1(b *testing.B) { benchConvert(b, encodeV1) }

// BenchmarkOTLPToRemoteWrite2: the same batch encoded as 2.0, with each
// series' metadata (type, unit, help) in the symbols table.
func BenchmarkOTLPToRemoteWrite2(b *testing.B) { benchConvert(b, encodeV2) }

// benchConvert decodes, converts and encodes one OTLP metrics body with
// encode, over and over, and reports samples per second.
func benchConvert(b *testing.B, encode func([]prompb.TimeSeries, []seriesMeta) ([]byte, error)) {
	body := testMetrics(b, time.Unix(1_800_000_000, 0), 100)
	var m signal.Metrics
	var cv converter
	samples := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		m.Reset()
		if err := otlp.DecodeMetrics(&m, body); err != nil {
			b.Fatal(err)
		}
		cv.reset()
		cv.add(&m, 0)
		cv.inTimeOrder() // as sendConverted: this batch lists each series' points in time order, series by series
		if _, err := encode(cv.series, cv.meta); err != nil {
			b.Fatal(err)
		}
		samples = len(cv.series)
	}
	b.ReportMetric(float64(samples)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
}
