package pipeline

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/queue"
)

// TestQueueCollectorRecycling: the queue's recycling shows on /metrics as
// sluice_queue_recycled_segments_total and sluice_queue_spare_bytes, equal to
// the queue's own counts once a consumer releasing as it goes has made it
// start segments in released files.
func TestQueueCollectorRecycling(t *testing.T) {
	q, err := queue.Open(queue.Options{Dir: t.TempDir(), SegmentBytes: 8 << 10, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var ends []queue.Position
	for i := range 300 {
		end, err := q.Append(make([]byte, 500))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
		if i >= 20 {
			if err := q.Release(ends[i-20]); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := q.Stats()
	if st.Recycled == 0 || st.SpareBytes == 0 {
		t.Fatalf("no recycling to export: %+v", st)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newQueueCollector(func() *queue.Queue { return q }))
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			got[mf.GetName()] = c.GetValue()
		} else {
			got[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	if v := got["sluice_queue_recycled_segments_total"]; v != float64(st.Recycled) {
		t.Errorf("sluice_queue_recycled_segments_total = %v, want %d", v, st.Recycled)
	}
	if v := got["sluice_queue_spare_bytes"]; v != float64(st.SpareBytes) {
		t.Errorf("sluice_queue_spare_bytes = %v, want %d", v, st.SpareBytes)
	}
}
