package lake

import (
	"os"
	"testing"
	"time"
)

// TestWriteSampleLake writes a small lake to $SLUICE_SAMPLE_LAKE for
// checking with external engines (DuckDB, pyarrow); skipped otherwise.
func TestWriteSampleLake(t *testing.T) {
	dir := os.Getenv("SLUICE_SAMPLE_LAKE")
	if dir == "" {
		t.Skip("set SLUICE_SAMPLE_LAKE to write a sample lake")
	}
	w, err := NewWriter(Options{Root: dir, Now: func() time.Time { return fixedNow }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteLogs("acme", hostileLogs(t)); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteLogs("acme", manyLogs(1000)); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMetrics("acme", testMetrics(t)); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSpans("acme", testSpans(t)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
