package compact

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// benchInputs are how many segments one partition's merge reads.
const benchInputs = 8

// benchFlushRows is the least number of rows per input of the "flushes"
// shape: the corpus is repeated until every input holds this many.
const benchFlushRows = 100_000

// benchHour is the partition the "flushes" inputs are written to.
var benchHour = time.Date(2025, 6, 1, 11, 0, 0, 0, time.UTC)

// BenchmarkCompactMerge measures one partition's k-way merge, Parquet
// decode and encode included, over inputs built from the real corpus. Run
// with GOMAXPROCS=1 for rows/s per core:
//
//	GOMAXPROCS=1 go test ./internal/lake/compact -run '^$' -bench CompactMerge -benchmem
//
// Two shapes of input:
//
//   - small: the corpus dealt round robin over 8 segments written with
//     500-row row groups (fixed per-file costs dominate; every row
//     interleaves with the other inputs).
//   - flushes: 8 segments of ≥ 100K rows in one hour, as 8 successive
//     flushes of `sluice run` would write them: the corpus repeated, each
//     copy's timestamps squeezed into its own slice of the hour, copies in
//     time order over the inputs, default row groups. Rows of one service
//     (or series) then come from input 0, then input 1, ... in long runs.
func BenchmarkCompactMerge(b *testing.B) {
	b.Run("logs/small", func(b *testing.B) {
		benchMerge(b, lake.TableLogs, 500, func(t testing.TB) []func(*lake.Writer) error {
			return dealCorpus(t, "logs", benchInputs, otlp.DecodeLogs, (*lake.Writer).WriteLogs)
		})
	})
	b.Run("metrics/small", func(b *testing.B) {
		benchMerge(b, lake.TableMetrics, 500, func(t testing.TB) []func(*lake.Writer) error {
			return dealCorpus(t, "metrics", benchInputs, otlp.DecodeMetrics, (*lake.Writer).WriteMetrics)
		})
	})
	b.Run("logs/flushes", func(b *testing.B) {
		benchMerge(b, lake.TableLogs, 0, func(t testing.TB) []func(*lake.Writer) error {
			var one signal.Logs
			for _, pb := range corpus(t, "logs") {
				if err := otlp.DecodeLogs(&one, pb); err != nil {
					t.Fatal(err)
				}
			}
			lo, hi := timeSpan(one.Time, one.ObservedTime)
			per := (benchFlushRows + one.Len() - 1) / one.Len()
			var split [benchInputs]signal.Logs
			for in := range split {
				for k := range per {
					slot := in*per + k
					base := split[in].Len()
					for i := range one.Len() {
						split[in].CopyFrom(&one, i)
					}
					squeeze(split[in].Time[base:], lo, hi, slot, benchInputs*per)
					squeeze(split[in].ObservedTime[base:], lo, hi, slot, benchInputs*per)
				}
			}
			var fns []func(*lake.Writer) error
			for i := range split {
				fns = append(fns, func(w *lake.Writer) error { return w.WriteLogs("acme", &split[i]) })
			}
			return fns
		})
	})
	// flushes whose dictionaries order their values differently: the
	// odd inputs' copies of the corpus have their times mirrored
	// (flushCorpus), as flushes of different data would, so their
	// dictionary pages are remapped (pqenc/dictremap.go).
	b.Run("logs/flushes-mixed", func(b *testing.B) {
		benchMerge(b, lake.TableLogs, 0, func(t testing.TB) []func(*lake.Writer) error {
			return flushLogsMixed(t, benchInputs, 0, true)
		})
	})
	b.Run("metrics/flushes", func(b *testing.B) {
		benchMerge(b, lake.TableMetrics, 0, func(t testing.TB) []func(*lake.Writer) error {
			var one signal.Metrics
			for _, pb := range corpus(t, "metrics") {
				if err := otlp.DecodeMetrics(&one, pb); err != nil {
					t.Fatal(err)
				}
			}
			lo, hi := timeSpan(one.Time, one.StartTime)
			per := (benchFlushRows + one.Len() - 1) / one.Len()
			var split [benchInputs]signal.Metrics
			for in := range split {
				for k := range per {
					slot := in*per + k
					base := split[in].Len()
					for i := range one.Len() {
						split[in].CopyFrom(&one, i)
					}
					squeeze(split[in].Time[base:], lo, hi, slot, benchInputs*per)
					squeeze(split[in].StartTime[base:], lo, hi, slot, benchInputs*per)
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

// timeSpan returns the least and greatest non-zero times of ts.
func timeSpan(ts ...[]int64) (lo, hi int64) {
	for _, s := range ts {
		for _, t := range s {
			if t != 0 && (lo == 0 || t < lo) {
				lo = t
			}
			hi = max(hi, t)
		}
	}
	return lo, hi
}

// squeeze maps the non-zero times of ts from [lo, hi] into slot i of n
// equal slots of benchHour, keeping their order; zero (unset) stays zero.
func squeeze(ts []int64, lo, hi int64, i, n int) {
	width := int64(time.Hour) / int64(n)
	start := benchHour.UnixNano() + int64(i)*width
	span := max(hi-lo, 1)
	for j, t := range ts {
		if t != 0 {
			ts[j] = start + int64(float64(t-lo)/float64(span)*float64(width-1))
		}
	}
}

func benchMerge(b *testing.B, table string, rowGroupRows int, parts func(t testing.TB) []func(*lake.Writer) error) {
	dir := b.TempDir()
	cat, err := catalog.Open(context.Background(), filepath.Join(dir, "catalog.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cat.Close() })
	root := filepath.Join(dir, "lake")
	e := &lakeEnv{root: root, store: lake.NewLocalStore(root), cat: cat}
	e.ingestRowGroups(b, rowGroupRows, parts(b))
	jobs, err := Plan(context.Background(), cat, Options{Table: table, MaxMergeRows: 1 << 40})
	if err != nil || len(jobs) != 1 || len(jobs[0].Inputs) != benchInputs {
		b.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	job := jobs[0]
	var rows, bytesIn int64
	for _, s := range job.Inputs {
		rows += s.Rows
		bytesIn += s.Bytes
	}
	// The job is bigger than DefaultMaxMergeRows: merge it as Plan was
	// told to plan it (the decoded buffers kept between jobs scale with it).
	opts := Options{MaxMergeRows: 1 << 40}.withDefaults()
	b.ReportAllocs()
	b.SetBytes(bytesIn)
	b.ResetTimer()
	var elapsed, cpu time.Duration
	var copied, dictCopied, remapped int64
	for range b.N {
		start, cpu0 := time.Now(), cpuTime()
		res, written, err := merge(context.Background(), e.store, job, opts)
		elapsed += time.Since(start)
		cpu += cpuTime() - cpu0
		if err != nil || res.RowsOut != rows {
			b.Fatalf("merge: %+v, %v", res, err)
		}
		copied += res.PagesCopied
		dictCopied += res.DictPagesCopied
		remapped += res.DictPagesRemapped
		b.StopTimer()
		for _, s := range written {
			if err := e.store.Remove(s.Path); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(rows)*float64(b.N)/elapsed.Seconds(), "rows/s")
	// On a shared machine wall time varies with the neighbours' load; rows
	// per CPU second of this process (GC included) varies much less.
	b.ReportMetric(float64(rows)*float64(b.N)/cpu.Seconds(), "rows/cpu-s")
	b.ReportMetric(float64(rows), "rows/op")
	// Pages copied verbatim, and of them dictionary-encoded ones.
	b.ReportMetric(float64(copied)/float64(b.N), "pages-copied/op")
	b.ReportMetric(float64(dictCopied)/float64(b.N), "dict-pages-copied/op")
	// Dictionary pages whose indexes were remapped into the output's
	// dictionary (pqenc/dictremap.go).
	b.ReportMetric(float64(remapped)/float64(b.N), "dict-pages-remapped/op")
}

// ingestRowGroups is lakeEnv.ingest with rowGroupRows per row group (0:
// the default).
func (e *lakeEnv) ingestRowGroups(t testing.TB, rowGroupRows int, write []func(w *lake.Writer) error) {
	t.Helper()
	for _, fn := range write {
		var segs []catalog.Segment
		w, err := lake.NewWriter(lake.Options{
			Store: e.store, RowGroupRows: rowGroupRows,
			Now: func() time.Time { return ingestNow },
		}, func(s lake.Segment) error { segs = append(segs, s.CatalogRow()); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := fn(w); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := e.cat.AddSegments(context.Background(), segs...); err != nil {
			t.Fatal(err)
		}
	}
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
