package compact

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// benchInputs are how many segments the corpus is dealt over, round robin,
// so that the merge interleaves all of them.
const benchInputs = 8

// BenchmarkCompactMerge measures one partition's k-way merge, Parquet
// decode and encode included, over inputs built from the real corpus.
// Run with GOMAXPROCS=1 for rows/s per core:
//
//	GOMAXPROCS=1 go test ./internal/lake/compact -run '^$' -bench CompactMerge -benchmem
func BenchmarkCompactMerge(b *testing.B) {
	b.Run("logs", func(b *testing.B) {
		benchMerge(b, lake.TableLogs, func(t testing.TB) []func(*lake.Writer) error {
			var split [benchInputs]signal.Logs
			for _, pb := range corpus(t, "logs") {
				var l signal.Logs
				if err := otlp.DecodeLogs(&l, pb); err != nil {
					t.Fatal(err)
				}
				for i := range l.Len() {
					split[i%benchInputs].CopyFrom(&l, i)
				}
			}
			var fns []func(*lake.Writer) error
			for i := range split {
				fns = append(fns, func(w *lake.Writer) error { return w.WriteLogs("acme", &split[i]) })
			}
			return fns
		})
	})
	b.Run("metrics", func(b *testing.B) {
		benchMerge(b, lake.TableMetrics, func(t testing.TB) []func(*lake.Writer) error {
			var split [benchInputs]signal.Metrics
			for _, pb := range corpus(t, "metrics") {
				var m signal.Metrics
				if err := otlp.DecodeMetrics(&m, pb); err != nil {
					t.Fatal(err)
				}
				for i := range m.Len() {
					split[i%benchInputs].CopyFrom(&m, i)
				}
			}
			var fns []func(*lake.Writer) error
			for i := range split {
				fns = append(fns, func(w *lake.Writer) error { return w.WriteMetrics("acme", &split[i]) })
			}
			return fns
		})
	})
}

func benchMerge(b *testing.B, table string, parts func(t testing.TB) []func(*lake.Writer) error) {
	dir := b.TempDir()
	cat, err := catalog.Open(context.Background(), filepath.Join(dir, "catalog.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cat.Close() })
	root := filepath.Join(dir, "lake")
	e := &lakeEnv{root: root, store: lake.NewLocalStore(root), cat: cat}
	e.ingest(b, parts(b))
	jobs, err := Plan(context.Background(), cat, Options{Table: table})
	if err != nil || len(jobs) != 1 {
		b.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	job := jobs[0]
	var rows, bytesIn int64
	for _, s := range job.Inputs {
		rows += s.Rows
		bytesIn += s.Bytes
	}
	opts := Options{}.withDefaults()
	b.ReportAllocs()
	b.SetBytes(bytesIn)
	b.ResetTimer()
	var elapsed time.Duration
	for range b.N {
		start := time.Now()
		res, written, err := merge(context.Background(), e.store, job, opts)
		elapsed += time.Since(start)
		if err != nil || res.RowsOut != rows {
			b.Fatalf("merge: %+v, %v", res, err)
		}
		b.StopTimer()
		for _, s := range written {
			if err := e.store.Remove(s.Path); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(rows)*float64(b.N)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(rows), "rows/op")
}
