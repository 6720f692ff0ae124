package otlp

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

func benchInputs(b *testing.B, dir string) (files [][]byte, size int) {
	for _, f := range corpus(b, dir) {
		files = append(files, f.data)
		size += len(f.data)
	}
	return files, size
}

func reportRows(b *testing.B, rows int) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(rows)*float64(b.N)/s, "rows/s")
	}
}

// BenchmarkDecodeLogs decodes every logs corpus file per op into one reused
// batch.
func BenchmarkDecodeLogs(b *testing.B) {
	files, size := benchInputs(b, "logs")
	var batch signal.Logs
	rows := 0
	for _, f := range files {
		batch.Reset()
		if err := DecodeLogs(&batch, f); err != nil {
			b.Fatal(err)
		}
		rows += batch.Len()
	}
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for b.Loop() {
		for _, f := range files {
			batch.Reset()
			if err := DecodeLogs(&batch, f); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportRows(b, rows)
}

func BenchmarkDecodeMetrics(b *testing.B) {
	files, size := benchInputs(b, "metrics")
	var batch signal.Metrics
	rows := 0
	for _, f := range files {
		batch.Reset()
		if err := DecodeMetrics(&batch, f); err != nil {
			b.Fatal(err)
		}
		rows += batch.Len()
	}
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for b.Loop() {
		for _, f := range files {
			batch.Reset()
			if err := DecodeMetrics(&batch, f); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportRows(b, rows)
}

func BenchmarkDecodeTraces(b *testing.B) {
	files, size := benchInputs(b, "traces")
	var batch signal.Spans
	rows := 0
	for _, f := range files {
		batch.Reset()
		if err := DecodeTraces(&batch, f); err != nil {
			b.Fatal(err)
		}
		rows += batch.Len()
	}
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for b.Loop() {
		for _, f := range files {
			batch.Reset()
			if err := DecodeTraces(&batch, f); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportRows(b, rows)
}
