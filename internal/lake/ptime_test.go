package lake

import (
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// TestWriterReusesPartitionTimes: a partition opened after a flush takes
// the partition-time slice a released partition left (as it takes its
// batch) instead of growing one from nothing, one partition at a time,
// and writes the same files as the first round did.
func TestWriterReusesPartitionTimes(t *testing.T) {
	var dec prw.Decoder
	var batches []*signal.Metrics
	for _, raw := range remoteWriteBodies(t, 4, 500) {
		m := new(signal.Metrics)
		if _, err := dec.DecodeV1(m, raw); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, m)
	}
	var segs []Segment
	w, err := NewWriter(Options{Root: filepath.Join(t.TempDir(), "lake"), Now: benchNow}, func(s Segment) error {
		segs = append(segs, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var first []int64 // the first round's partition times
	for round := range 3 {
		for _, m := range batches {
			if err := w.WriteMetrics("t", m); err != nil {
				t.Fatal(err)
			}
		}
		if len(w.parts) != 1 {
			t.Fatalf("round %d: %d partitions, want 1", round, len(w.parts))
		}
		for _, p := range w.parts {
			if round == 0 {
				first = p.ptime
			} else if &p.ptime[:1][0] != &first[:1][0] {
				t.Fatalf("round %d: the partition grew a new time slice instead of reusing the released one", round)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if len(w.freePtime) != 1 || len(w.parts) != 0 {
			t.Fatalf("round %d: %d free time slices and %d partitions after the flush, want 1 and 0", round, len(w.freePtime), len(w.parts))
		}
	}
	if len(segs) != 3 {
		t.Fatalf("%d files, want 3", len(segs))
	}
	for i, s := range segs {
		if s.Rows != 2000 || s.MinTime != segs[0].MinTime || s.MaxTime != segs[0].MaxTime {
			t.Errorf("file %d: %d rows, times %d-%d; want 2000 rows, times %d-%d", i, s.Rows, s.MinTime, s.MaxTime, segs[0].MinTime, segs[0].MaxTime)
		}
	}
}
