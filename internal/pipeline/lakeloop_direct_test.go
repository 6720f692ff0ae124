package pipeline

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
)

// plainRecord is a queue record of a plain remote write 1.0 request (the
// receiver's scanned case, encPRW1N: series count, then snappy) of n
// series whose samples carry the value seq*1000+i.
func plainRecord(t *testing.T, tenant string, seq, n int, ts int64) []byte {
	t.Helper()
	req := &prompb.WriteRequest{}
	for i := range n {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			Labels:  []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("m%d", i%3)}, {Name: "instance", Value: "h"}, {Name: "series", Value: fmt.Sprint(i)}},
			Samples: []prompb.Sample{{Value: float64(seq*1000 + i), Timestamp: ts}},
		})
	}
	raw, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	body := binary.AppendUvarint(nil, uint64(n))
	body = append(body, snappy.Encode(nil, raw)...)
	return appendRecordTo(nil, signal.KindMetrics, encPRW1N, tenant, nil, body)
}

// lakeValues counts each sample value of the metrics files the catalog
// lists.
func lakeValues(t *testing.T, root string, cat *catalog.Catalog) map[float64]int {
	t.Helper()
	segs, err := cat.List(context.Background(), catalog.Filter{Table: "metrics"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[float64]int{}
	for _, s := range segs {
		f, err := lake.OpenFile(filepath.Join(root, s.Path))
		if err != nil {
			t.Fatal(err)
		}
		var m signal.Metrics
		if err := f.ReadMetrics(&m); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for i := range m.Len() {
			out[m.Value(i)]++
		}
	}
	return out
}

// TestLakeLoopDirectAppendReplaysExactlyOnce: plain remote-write records
// go straight into the writer's partition batch (no decoded batch of the
// loop's own), and when the process dies after they were appended but
// before the checkpoint flushed them (the loop is abandoned: its buffers
// are lost with it), a new loop starting from the committed position
// writes each of them exactly once, beside the records committed before.
// The records' series recur (50 series, 10 records): the partition's known
// series (prw.PlainAppender) serve all but the first of each, in both
// loops.
func TestLakeLoopDirectAppendReplaysExactlyOnce(t *testing.T) {
	testDirectAppendReplays(t, plainRecord)
}

// TestLakeLoopDirectAppendV2ReplaysExactlyOnce is
// TestLakeLoopDirectAppendReplaysExactlyOnce for remote write 2.0 records
// (encPRW2N, with metadata on every series): prw.PlainAppender2 appends
// them, its known series serving the recurring series.
func TestLakeLoopDirectAppendV2ReplaysExactlyOnce(t *testing.T) {
	testDirectAppendReplays(t, plainRecordV2)
}

// plainRecordV2 is plainRecord as a remote write 2.0 request (encPRW2N),
// each series with metadata, its symbols in another order per record (the
// series are known by their label strings, not their references).
func plainRecordV2(t *testing.T, tenant string, seq, n int, ts int64) []byte {
	t.Helper()
	syms := []string{"", "__name__", "instance", "h", "series", "m0", "m1", "m2", "help of m", "seconds"}
	ref := map[string]uint32{}
	for i, s := range syms {
		ref[s] = uint32(i)
	}
	req := &writev2.Request{Symbols: syms}
	sym := func(s string) uint32 {
		if r, ok := ref[s]; ok {
			return r
		}
		req.Symbols = append(req.Symbols, s)
		ref[s] = uint32(len(req.Symbols) - 1)
		return ref[s]
	}
	for k := range n {
		i := (k + seq) % n // another series first, other references, per record
		req.Timeseries = append(req.Timeseries, writev2.TimeSeries{
			LabelsRefs: []uint32{1, sym(fmt.Sprintf("m%d", i%3)), 2, 3, 4, sym(fmt.Sprint(i))},
			Samples:    []writev2.Sample{{Value: float64(seq*1000 + i), Timestamp: ts}},
			Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: 8, UnitRef: 9},
		})
	}
	raw, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	body := binary.AppendUvarint(nil, uint64(n))
	body = append(body, snappy.Encode(nil, raw)...)
	return appendRecordTo(nil, signal.KindMetrics, encPRW2N, tenant, nil, body)
}

func testDirectAppendReplays(t *testing.T, record func(t *testing.T, tenant string, seq, n int, ts int64) []byte) {
	dir := t.TempDir()
	root := filepath.Join(dir, "lake")
	ctx := context.Background()
	q, err := queue.Open(queue.Options{Dir: filepath.Join(dir, "queue"), SegmentBytes: 1 << 20, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	m := newMetrics()
	open := func() *lakeLoop {
		t.Helper()
		committed, err := cat.QueuePosition(ctx, QueueName)
		if err != nil {
			t.Fatal(err)
		}
		from := queue.Position(committed)
		if committed == 0 {
			from = q.Stats().First
		}
		l, err := newLakeLoop(q, cat, lake.Options{Root: root}, from, &lakeLoop{
			log: testLogger(t), m: m, interval: time.Hour, maxBuf: 1 << 40, maxQueue: 1 << 40,
		})
		if err != nil {
			t.Fatal(err)
		}
		l.committed = queue.Position(committed)
		return l
	}
	const series = 50
	now := time.Now().Truncate(time.Hour).Add(time.Minute).UnixMilli()
	send := func(first, n int) {
		t.Helper()
		for seq := first; seq < first+n; seq++ {
			if _, err := q.Append(record(t, "acme", seq, series, now+int64(seq))); err != nil {
				t.Fatal(err)
			}
		}
	}

	l1 := open()
	send(0, 4)
	if err := l1.drain(); err != nil {
		t.Fatal(err)
	}
	if err := l1.commitCheckpoint(reasonRequest); err != nil {
		t.Fatal(err)
	}
	send(4, 6)
	if err := l1.drain(); err != nil {
		t.Fatal(err)
	}
	if st := l1.w.Stats(); st.Rows != 10*series || st.OpenPartitions != 1 || st.Files != 1 {
		t.Fatalf("writer before the crash: %+v", st)
	}
	if l1.metrics.Len() != 0 || cap(l1.metrics.Time) != 0 {
		t.Fatal("the loop decoded a plain record into a batch of its own instead of appending it to the partition")
	}
	// The crash: l1's buffered partition (records 4-9) is lost unflushed.
	l1.r.Close()

	l2 := open()
	if l2.pos != l1.committed {
		t.Fatalf("restart reads from %d, committed %d", l2.pos, l1.committed)
	}
	if err := l2.drain(); err != nil {
		t.Fatal(err)
	}
	if err := l2.commitCheckpoint(reasonRequest); err != nil {
		t.Fatal(err)
	}
	l2.r.Close()
	got := lakeValues(t, root, cat)
	for seq := range 10 {
		for i := range series {
			v := float64(seq*1000 + i)
			if got[v] != 1 {
				t.Fatalf("record %d sample %d is in the lake %d times", seq, i, got[v])
			}
		}
	}
	if len(got) != 10*series {
		t.Fatalf("%d distinct samples in the lake, want %d", len(got), 10*series)
	}
}
