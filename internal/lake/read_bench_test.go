package lake

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

// BenchmarkReadSpans is BenchmarkReadLogs for the traces table: the corpus
// spans repeated to 100K, written as a lake file, read back whole.
func BenchmarkReadSpans(b *testing.B) {
	s := benchSpans(b)
	paths := writeBenchFile(b, func(w *Writer) error { return w.WriteSpans("bench", s) })
	dst := new(signal.Spans)
	runRead(b, paths, func(f *File) (int, error) {
		dst.Reset()
		err := f.ReadSpans(dst)
		return dst.Len(), err
	})
}
