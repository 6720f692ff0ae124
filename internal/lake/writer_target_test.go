package lake

import (
	"testing"
)

// TestSmallTargetFileBytes: a target smaller than a batch's interning
// tables (16 KiB and up once anything is copied in) still rolls files at
// about the target's worth of data, not a file per write: the tables are
// memory (MaxBufferedBytes), not file. Each write here is one record, as
// a live request of one log would be.
func TestSmallTargetFileBytes(t *testing.T) {
	const target = 8 << 10
	src := manyLogs(2000)
	_, segs := writeAll(t, Options{TargetFileBytes: target}, func(w *Writer) error {
		for i := range src.Len() {
			one := manyLogs(0)
			one.CopyFrom(src, i)
			if err := w.WriteLogs("t", one); err != nil {
				return err
			}
		}
		return nil
	})
	var rows int64
	for _, s := range segs {
		rows += s.Rows
	}
	if rows != int64(src.Len()) {
		t.Fatalf("rows %d, want %d", rows, src.Len())
	}
	// A log of manyLogs estimates at a few hundred bytes: a file takes
	// dozens of them.
	if per := rows / int64(len(segs)); per < 10 {
		t.Fatalf("%d files for %d rows (%d rows per file) at a %d-byte target", len(segs), rows, per, target)
	}
}
