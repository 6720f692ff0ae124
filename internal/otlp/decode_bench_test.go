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
// batch; the metrics and traces benchmarks do the same for theirs.
func BenchmarkDecodeLogs(b *testing.B) { benchDecode(b, "logs", &signal.Logs{}, DecodeLogs) }

func BenchmarkDecodeMetrics(b *testing.B) {
	benchDecode(b, "metrics", &signal.Metrics{}, DecodeMetrics)
}

func BenchmarkDecodeTraces(b *testing.B) { benchDecode(b, "traces", &signal.Spans{}, DecodeTraces) }

// benchDecode decodes the corpus files of one signal folder into batch per
// op, once untimed to count the rows and warm the batch up.
func benchDecode[B interface {
	Reset()
	Len() int
}](b *testing.B, kind string, batch B, decode func(B, []byte) error) {
	files, size := benchInputs(b, kind)
	rows := 0
	for _, f := range files {
		batch.Reset()
		if err := decode(batch, f); err != nil {
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
			if err := decode(batch, f); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportRows(b, rows)
}

// BenchmarkCountRecords counts the records of every corpus file of each
// signal per op, as the receiver does before handing a request on (its
// cost beside BenchmarkDecode*).
func BenchmarkCountRecords(b *testing.B) {
	for _, c := range []struct {
		dir  string
		kind signal.Kind
	}{{"logs", signal.KindLogs}, {"metrics", signal.KindMetrics}, {"traces", signal.KindTraces}} {
		b.Run(c.dir, func(b *testing.B) {
			files, size := benchInputs(b, c.dir)
			rows := 0
			for _, f := range files {
				n, _, _ := CountRecords(c.kind, f)
				rows += n
			}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				for _, f := range files {
					CountRecords(c.kind, f)
				}
			}
			reportRows(b, rows)
		})
	}
}
