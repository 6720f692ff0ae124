package lake

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// TestAppendMetricsMatchesWriteMetrics: remote-write requests appended
// straight into the partitions (Writer.AppendMetrics with prw.Appender, and
// with prw.PlainAppender, the lake loop's path for a plain request, whose
// series recur across the requests) give byte for byte the files that
// decoding each request and writing it with WriteMetrics gives, with files
// rolled at the same rows (a small TargetFileBytes: near the limit
// AppendMetrics declines and the record is written row by row), and a
// request whose samples straddle two partition hours is declined whole.
func TestAppendMetricsMatchesWriteMetrics(t *testing.T) {
	bodies := remoteWriteBodies(t, 40, 1500)
	// A request across an hour boundary: AppendMetrics declines it.
	t0 := benchNow().Truncate(time.Hour).Add(-time.Second).UnixMilli()
	straddle := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: "1"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: t0}, {Value: 2, Timestamp: t0 + 2000}}},
	}}
	sb, err := straddle.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	bodies = append(bodies[:20:20], append([][]byte{sb}, bodies[20:]...)...)
	for _, target := range []int64{0, 1 << 20} {
		opts := Options{Now: benchNow, TargetFileBytes: target}
		var dec prw.Decoder
		var m signal.Metrics
		rootA, segsA := writeAll(t, opts, func(w *Writer) error {
			for _, raw := range bodies {
				m.Reset()
				if _, err := dec.DecodeV1(&m, raw); err != nil {
					return err
				}
				if err := w.WriteMetrics("t", &m); err != nil {
					return err
				}
			}
			return nil
		})
		for _, plain := range []bool{false, true} {
			var sc prw.Scanner
			var app prw.Appender
			var pa prw.PlainAppender
			declined := 0
			rootB, segsB := writeAll(t, opts, func(w *Writer) error {
				for i, raw := range bodies {
					if !sc.ScanV1(raw) {
						t.Fatalf("request %d: not plain", i)
					}
					est := EstimateMetricsBytes(sc.Samples(), sc.Attrs, len(sc.Names), sc.ArenaBytes())
					m.Reset()
					if _, err := dec.DecodeV1(&m, raw); err != nil {
						return err
					}
					if got := estimateMetrics(&m); got != est {
						t.Fatalf("request %d: EstimateMetricsBytes %d, the decoded batch's estimate %d", i, est, got)
					}
					times, fill := sc.Time, func(dst *signal.Metrics) bool { app.AppendV1(dst, &sc); return true }
					if plain {
						if !pa.ScanTimesV1(raw) {
							t.Fatalf("request %d: ScanTimesV1 refused it", i)
						}
						attrs, descs, arena := pa.Bounds()
						if pest := EstimateMetricsBytes(len(pa.Times), attrs, descs, arena); pest < est {
							t.Fatalf("request %d: PlainAppender's bound %d is below the estimate %d", i, pest, est)
						} else {
							est = pest
						}
						times, fill = pa.Times, pa.AppendV1
					}
					ok, err := w.AppendMetrics("t", times, est, fill)
					if err != nil {
						return err
					}
					if ok {
						continue
					}
					declined++
					if err := w.WriteMetrics("t", &m); err != nil {
						return err
					}
				}
				return nil
			})
			if len(segsA) != len(segsB) {
				t.Fatalf("target %d: %d files written, %d appended", target, len(segsA), len(segsB))
			}
			if target == 0 && (declined != 1 || len(segsA) != 2) {
				t.Fatalf("default target: %d requests declined (want the straddling one), %d files (want 2)", declined, len(segsA))
			}
			if target > 0 && (declined < 2 || len(segsA) < 4) {
				t.Fatalf("small target: %d requests declined, %d files: the limits were not reached", declined, len(segsA))
			}
			for i := range segsA {
				a, b := segsA[i], segsB[i]
				if a.Rows != b.Rows || a.MinTime != b.MinTime || a.MaxTime != b.MaxTime || a.Bytes != b.Bytes || a.SchemaHash != b.SchemaHash {
					t.Fatalf("target %d file %d: written %+v, appended %+v", target, i, a, b)
				}
				fa, err := os.ReadFile(filepath.Join(rootA, filepath.FromSlash(a.Path)))
				if err != nil {
					t.Fatal(err)
				}
				fb, err := os.ReadFile(filepath.Join(rootB, filepath.FromSlash(b.Path)))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(fa, fb) {
					t.Fatalf("target %d plain %v file %d: %d bytes written, %d appended, contents differ", target, plain, i, len(fa), len(fb))
				}
			}
		}
	}
}

// TestAppendMetricsRefuses: a tenant the lake refuses is an error, as for
// WriteMetrics, and nothing is appended; an empty request is declined.
func TestAppendMetricsRefuses(t *testing.T) {
	w, err := NewWriter(Options{Root: t.TempDir(), Now: benchNow}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	called := false
	fill := func(*signal.Metrics) bool { called = true; return true }
	if ok, err := w.AppendMetrics("bad/tenant", []int64{1}, 100, fill); ok || err == nil {
		t.Fatalf("invalid tenant: ok %v, err %v", ok, err)
	}
	if ok, err := w.AppendMetrics("t", nil, 0, fill); ok || err != nil {
		t.Fatalf("no points: ok %v, err %v", ok, err)
	}
	// fill appending a wrong count is the caller's bug: an error.
	if ok, err := w.AppendMetrics("t", []int64{benchNow().UnixNano(), benchNow().UnixNano()}, 100, func(dst *signal.Metrics) bool { dst.AppendPoint(0, 0, 0); return true }); ok || err == nil {
		t.Fatalf("short fill: ok %v, err %v", ok, err)
	}
	if called {
		t.Fatal("fill called for a declined append")
	}
	// fill declining after it appended (a request its scan refused): the
	// partition is cut back, nothing is counted, and the next append works.
	now := benchNow().UnixNano()
	rows := w.Stats().Rows
	if ok, err := w.AppendMetrics("u", []int64{now}, 100, func(dst *signal.Metrics) bool { dst.AppendPoint(0, 0, 0); return false }); ok || err != nil {
		t.Fatalf("declining fill: ok %v, err %v", ok, err)
	}
	if got := w.Stats().Rows; got != rows {
		t.Fatalf("declining fill: rows %d -> %d", rows, got)
	}
	var n0 int
	if ok, err := w.AppendMetrics("u", []int64{now}, 100, func(dst *signal.Metrics) bool { n0 = dst.Len(); dst.AppendPoint(0, 0, 0); return true }); !ok || err != nil {
		t.Fatalf("fill after a declined one: ok %v, err %v", ok, err)
	}
	if n0 != 0 {
		t.Fatalf("the declined fill left %d points in the partition", n0)
	}
}
