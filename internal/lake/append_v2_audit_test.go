package lake

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// toV2 rewrites 1.0 requests as remote write 2.0 ones, as Prometheus's
// 2.0 sender writes them (one symbols table per request): every third
// metric name described (counter, help, unit; the same family described
// differently in every other request), every fifth series with start
// timestamps.
func toV2(tb testing.TB, bodies [][]byte) [][]byte {
	tb.Helper()
	out := make([][]byte, len(bodies))
	for r, raw := range bodies {
		var req prompb.WriteRequest
		if err := req.Unmarshal(raw); err != nil {
			tb.Fatal(err)
		}
		syms := []string{""}
		at := map[string]uint32{"": 0}
		ref := func(s string) uint32 {
			if i, ok := at[s]; ok {
				return i
			}
			at[s] = uint32(len(syms))
			syms = append(syms, s)
			return at[s]
		}
		v2 := &writev2.Request{}
		for i, ts := range req.Timeseries {
			var s writev2.TimeSeries
			name := ""
			for _, l := range ts.Labels {
				s.LabelsRefs = append(s.LabelsRefs, ref(l.Name), ref(l.Value))
				if l.Name == "__name__" {
					name = l.Value
				}
			}
			for _, p := range ts.Samples {
				smp := writev2.Sample{Value: p.Value, Timestamp: p.Timestamp}
				if i%5 == 0 {
					smp.StartTimestamp = p.Timestamp - 60_000
				}
				s.Samples = append(s.Samples, smp)
			}
			if len(name) > 0 && name[len(name)-1]%3 == 0 {
				help := "help of " + name
				if r%2 == 1 {
					help = "other help of " + name
				}
				s.Metadata = writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: ref(help), UnitRef: ref("seconds")}
			}
			v2.Timeseries = append(v2.Timeseries, s)
		}
		v2.Symbols = syms
		b, err := v2.Marshal()
		if err != nil {
			tb.Fatal(err)
		}
		out[r] = b
	}
	return out
}

// TestAppendMetricsV2MatchesWriteMetrics (audit20): remote write 2.0
// requests appended straight into the partitions by prw.PlainAppender2
// (the lake loop's path for a scanned 2.0 request, encPRW2N, its series
// recurring across the requests) give byte for byte the files that
// decoding each request (DecodeV2) and writing it with WriteMetrics gives,
// descriptors from the requests' metadata and start times included, with
// files rolled at the same rows (a small TargetFileBytes: near the limit
// AppendMetrics declines and the request is written row by row), and a
// request across an hour boundary declined whole.
func TestAppendMetricsV2MatchesWriteMetrics(t *testing.T) {
	v1 := remoteWriteBodies(t, 40, 1500)
	t0 := benchNow().Truncate(time.Hour).Add(-time.Second).UnixMilli()
	straddle, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: "1"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: t0}, {Value: 2, Timestamp: t0 + 2000}}},
	}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	v1 = append(v1[:20:20], append([][]byte{straddle}, v1[20:]...)...)
	bodies := toV2(t, v1)
	for _, target := range []int64{0, 1 << 20} {
		opts := Options{Now: benchNow, TargetFileBytes: target}
		var dec prw.Decoder
		var m signal.Metrics
		rootA, segsA := writeAll(t, opts, func(w *Writer) error {
			for _, raw := range bodies {
				m.Reset()
				if _, err := dec.DecodeV2(&m, raw); err != nil {
					return err
				}
				if err := w.WriteMetrics("t", &m); err != nil {
					return err
				}
			}
			return nil
		})
		var sc prw.Scanner
		var pa prw.PlainAppender2
		declined, described := 0, 0
		rootB, segsB := writeAll(t, opts, func(w *Writer) error {
			for i, raw := range bodies {
				if !sc.ScanV2(raw) {
					t.Fatalf("request %d: ScanV2 refused it", i)
				}
				if !pa.ScanTimesV2(raw) {
					t.Fatalf("request %d: ScanTimesV2 refused it", i)
				}
				attrs, descs, arena := pa.Bounds()
				est := EstimateMetricsBytes(len(pa.Times), attrs, descs, arena)
				m.Reset()
				if _, err := dec.DecodeV2(&m, raw); err != nil {
					return err
				}
				for _, d := range m.Descs {
					if m.String(d.Description) != "" {
						described++
					}
				}
				if got := estimateMetrics(&m); est < got {
					t.Fatalf("request %d: PlainAppender2's bound %d is below the decoded batch's estimate %d", i, est, got)
				}
				ok, err := w.AppendMetrics("t", pa.Times, est, pa.AppendV2)
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
		if described == 0 {
			t.Fatal("no descriptor described: the test does not cover 2.0 metadata")
		}
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
				t.Fatalf("target %d file %d: %d bytes written, %d appended, contents differ", target, i, len(fa), len(fb))
			}
		}
	}
}
