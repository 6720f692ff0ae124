package lake

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

const benchRows = 100_000

// corpusPayloads returns the raw protobuf of every corpus file of kind.
func corpusPayloads(b testing.TB, kind string) [][]byte {
	var out [][]byte
	for _, f := range corpusFiles(b, kind) {
		out = append(out, readCorpus(b, f))
	}
	return out
}

// repeatLogs decodes the corpus and repeats its records up to n rows.
func benchLogs(b *testing.B) (*signal.Logs, [][]byte) {
	pbs := corpusPayloads(b, "logs")
	one := new(signal.Logs)
	for _, pb := range pbs {
		if err := otlp.DecodeLogs(one, pb); err != nil {
			b.Fatal(err)
		}
	}
	l := new(signal.Logs)
	for l.Len() < benchRows {
		for i := range one.Len() {
			l.CopyFrom(one, i)
		}
	}
	return l, pbs
}

func benchMetrics(b *testing.B) (*signal.Metrics, [][]byte) {
	pbs := corpusPayloads(b, "metrics")
	one := new(signal.Metrics)
	for _, pb := range pbs {
		if err := otlp.DecodeMetrics(one, pb); err != nil {
			b.Fatal(err)
		}
	}
	m := new(signal.Metrics)
	for m.Len() < benchRows {
		for i := range one.Len() {
			m.CopyFrom(one, i)
		}
	}
	return m, pbs
}

func benchSpans(b *testing.B) *signal.Spans {
	one := new(signal.Spans)
	for _, pb := range corpusPayloads(b, "traces") {
		if err := otlp.DecodeTraces(one, pb); err != nil {
			b.Fatal(err)
		}
	}
	s := new(signal.Spans)
	for s.Len() < benchRows {
		for i := range one.Len() {
			s.CopyFrom(one, i)
		}
	}
	return s
}

// benchNow is after every corpus record, so no partition time is replaced.
var benchNow = func() time.Time { return time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC) }

// runWrite times write over b.N iterations and reports rows/s and bytes
// allocated per row. One Writer serves every iteration, flushed after each,
// as a long-running ingester uses it: its buffers are warm after the first.
//
// Each runs twice: pqenc is the lake's encoder, parquet-go the encoder
// ingest used before it (the oracle of TestOracleEncoder), for comparing
// the two on one machine at one time.
func runWrite(b *testing.B, rows int, write func(w *Writer) error) {
	b.Run("pqenc", func(b *testing.B) { runWriteWith(b, rows, nil, write) })
	b.Run("parquet-go", func(b *testing.B) { runWriteWith(b, rows, oracleEncodeFile, write) })
}

func runWriteWith(b *testing.B, rows int, enc func(*Writer, *partition, io.Writer, *Segment) error, write func(w *Writer) error) {
	root := filepath.Join(b.TempDir(), "lake")
	w, err := NewWriter(Options{Root: root, Now: benchNow}, nil)
	if err != nil {
		b.Fatal(err)
	}
	w.encodeWith = enc
	defer w.Close()
	var ms0, ms1 runtime.MemStats
	var files, fileBytes int64
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	runtime.ReadMemStats(&ms0)
	for i := 0; i < b.N; i++ {
		s0 := w.Stats()
		cpu0 := cpuTime()
		if err := write(w); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - cpu0
		s := w.Stats()
		files, fileBytes = s.Files-s0.Files, s.FileBytes-s0.FileBytes
		b.StopTimer()
		_ = os.RemoveAll(root)
		b.StartTimer()
	}
	runtime.ReadMemStats(&ms1)
	b.StopTimer()
	total := float64(rows) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "rows/s")
	// CPU time varies much less than wall time on a shared machine
	// (GOMAXPROCS=1: one core; GC included).
	b.ReportMetric(total/cpu.Seconds(), "rows/cpu-s")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/total, "B/row")
	b.ReportMetric(float64(fileBytes)/float64(rows), "file_B/row")
	b.ReportMetric(float64(files), "files")
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWriteLogs: a decoded batch → sorted, encoded, zstd Parquet files.
func BenchmarkWriteLogs(b *testing.B) {
	l, _ := benchLogs(b)
	runWrite(b, l.Len(), func(w *Writer) error { return w.WriteLogs("bench", l) })
}

// BenchmarkWriteLogsFromProto includes decoding: OTLP file bytes → Parquet.
func BenchmarkWriteLogsFromProto(b *testing.B) {
	_, pbs := benchLogs(b)
	one := new(signal.Logs)
	rows := 0
	reps := 0
	for rows < benchRows {
		for _, pb := range pbs {
			one.Reset()
			if err := otlp.DecodeLogs(one, pb); err != nil {
				b.Fatal(err)
			}
			rows += one.Len()
		}
		reps++
	}
	batch := new(signal.Logs)
	runWrite(b, rows, func(w *Writer) error {
		for range reps {
			for _, pb := range pbs {
				batch.Reset()
				if err := otlp.DecodeLogs(batch, pb); err != nil {
					return err
				}
				if err := w.WriteLogs("bench", batch); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func BenchmarkWriteMetrics(b *testing.B) {
	m, _ := benchMetrics(b)
	runWrite(b, m.Len(), func(w *Writer) error { return w.WriteMetrics("bench", m) })
}

// BenchmarkWriteTraces: decoded corpus spans → sorted, encoded, zstd
// Parquet files (with the trace_id bloom filter).
func BenchmarkWriteTraces(b *testing.B) {
	s := benchSpans(b)
	runWrite(b, s.Len(), func(w *Writer) error { return w.WriteSpans("bench", s) })
}

// writeBenchFile writes one file of the batch and returns its path.
func writeBenchFile(b *testing.B, write func(w *Writer) error) []string {
	root := b.TempDir()
	var paths []string
	w, err := NewWriter(Options{Root: root, Now: benchNow}, func(s Segment) error {
		paths = append(paths, filepath.Join(root, filepath.FromSlash(s.Path)))
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := write(w); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return paths
}

func runRead(b *testing.B, paths []string, read func(f *File) (int, error)) {
	b.ReportAllocs()
	b.ResetTimer()
	rows := 0
	cpu0 := benchCPUTime()
	for i := 0; i < b.N; i++ {
		rows = 0
		for _, p := range paths {
			f, err := OpenFile(p)
			if err != nil {
				b.Fatal(err)
			}
			n, err := read(f)
			if err != nil {
				b.Fatal(err)
			}
			rows += n
			_ = f.Close()
		}
	}
	b.StopTimer()
	cpu := benchCPUTime() - cpu0
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	// Wall time varies with a shared machine's load; rows per CPU second
	// of the process (GC included) much less.
	b.ReportMetric(float64(rows)*float64(b.N)/cpu.Seconds(), "rows/cpu-s")
}

// benchCPUTime is the user and system CPU time of the process so far.
func benchCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkReadLogs(b *testing.B) {
	l, _ := benchLogs(b)
	paths := writeBenchFile(b, func(w *Writer) error { return w.WriteLogs("bench", l) })
	dst := new(signal.Logs)
	runRead(b, paths, func(f *File) (int, error) {
		dst.Reset()
		err := f.ReadLogs(dst)
		return dst.Len(), err
	})
}

func BenchmarkReadMetrics(b *testing.B) {
	m, _ := benchMetrics(b)
	paths := writeBenchFile(b, func(w *Writer) error { return w.WriteMetrics("bench", m) })
	dst := new(signal.Metrics)
	runRead(b, paths, func(f *File) (int, error) {
		dst.Reset()
		err := f.ReadMetrics(dst)
		return dst.Len(), err
	})
}

// remoteWriteBatches decodes n remote-write 1.0 requests of perReq series
// shaped as scripts/bench-relay.sh's load (TestRelayLoad: 30,000 series of
// one sample each per request, 8 labels, 50 metric names), each into its
// own batch, as the lake loop hands them to the writer.
func remoteWriteBatches(b *testing.B, n, perReq int) []*signal.Metrics {
	var dec prw.Decoder
	out := make([]*signal.Metrics, n)
	for r, raw := range remoteWriteBodies(b, n, perReq) {
		out[r] = new(signal.Metrics)
		if _, err := dec.DecodeV1(out[r], raw); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// remoteWriteBodies are remoteWriteBatches's requests, encoded (snappy
// decoded, as the lake loop decodes a record's body).
func remoteWriteBodies(b testing.TB, n, perReq int) [][]byte {
	return remoteWriteBodiesSamples(b, n, perReq, 1)
}

// remoteWriteBodiesSamples is remoteWriteBodies with perReq series of k
// samples each per request (a sender that batches several scrapes).
func remoteWriteBodiesSamples(b testing.TB, n, perReq, k int) [][]byte {
	const series, nLabels = 30_000, 8
	t0 := benchNow().Add(-30 * time.Minute).UnixMilli()
	extra := []string{"instance", "job", "pod", "namespace", "container", "zone", "path", "code", "method"}
	out := make([][]byte, n)
	for r := range out {
		req := &prompb.WriteRequest{}
		for i := range perReq {
			id := (r*perReq + i) % series
			ls := []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("relay_metric_%d", id%50)}}
			for k := 0; k < nLabels-2; k++ {
				ls = append(ls, prompb.Label{Name: extra[k], Value: fmt.Sprintf("%s-%d", extra[k], (id>>uint(k))%97+id%7)})
			}
			ls = append(ls, prompb.Label{Name: "series", Value: strconv.Itoa(id)})
			sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
			ts := prompb.TimeSeries{Labels: ls}
			for j := range k {
				ts.Samples = append(ts.Samples, prompb.Sample{Value: float64(r*perReq + i + j), Timestamp: t0 + int64(r*k+j)*1000})
			}
			req.Timeseries = append(req.Timeseries, ts)
		}
		raw, err := req.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		out[r] = raw
	}
	return out
}

// BenchmarkWriteRemoteWrite: the lake writer's part of remote write ->
// lake: 200 decoded requests of 1,500 samples (8 labels, no resource
// attributes) written one by one and flushed as one file.
func BenchmarkWriteRemoteWrite(b *testing.B) {
	batches := remoteWriteBatches(b, 200, 1500)
	rows := 0
	for _, m := range batches {
		rows += m.Len()
	}
	runWrite(b, rows, func(w *Writer) error {
		for _, m := range batches {
			if err := w.WriteMetrics("bench", m); err != nil {
				return err
			}
		}
		return nil
	})
}

// BenchmarkRemoteWriteToLake: the lake loop's part of remote write ->
// lake from the decoded request bytes (snappy aside): decode-copy decodes
// each request into a batch and writes it (WriteMetrics copies it into the
// partition), append scans it and appends its points straight into the
// partition (prw.Appender, Writer.AppendMetrics), as the lake loop does
// for a plain request before plake6; plain appends it with
// prw.PlainAppender, as the lake loop does now (a series the partition
// holds found by its label bytes: 30,000 series, each ten times in the
// file). 200 requests of 1,500 samples, one file; decode-copy-100 and
// plain-100 are on 3,000 requests of 100 samples (each brings its own
// descriptor of each of its 50 metrics).
func BenchmarkRemoteWriteToLake(b *testing.B) {
	bodies := remoteWriteBodies(b, 200, 1500)
	rows := 200 * 1500
	decodeCopy := func(b *testing.B, bodies [][]byte) {
		var dec prw.Decoder
		var m signal.Metrics
		runWriteWith(b, rows, nil, func(w *Writer) error {
			for _, raw := range bodies {
				m.Reset()
				if _, err := dec.DecodeV1(&m, raw); err != nil {
					return err
				}
				if err := w.WriteMetrics("bench", &m); err != nil {
					return err
				}
			}
			return nil
		})
	}
	b.Run("decode-copy", func(b *testing.B) { decodeCopy(b, bodies) })
	small := remoteWriteBodies(b, 3000, 100)
	b.Run("decode-copy-100", func(b *testing.B) { decodeCopy(b, small) })
	b.Run("append", func(b *testing.B) {
		var sc prw.Scanner
		var app prw.Appender
		runWriteWith(b, rows, nil, func(w *Writer) error {
			for _, raw := range bodies {
				if !sc.ScanV1(raw) {
					return errors.New("not plain")
				}
				est := EstimateMetricsBytes(sc.Samples(), sc.Attrs, len(sc.Names), sc.ArenaBytes())
				ok, err := w.AppendMetrics("bench", sc.Time, est, func(dst *signal.Metrics) bool { app.AppendV1(dst, &sc); return true })
				if err != nil {
					return err
				}
				if !ok {
					return errors.New("not appended")
				}
			}
			return nil
		})
	})
	plain := func(b *testing.B, bodies [][]byte, rows int) {
		var pa prw.PlainAppender
		runWriteWith(b, rows, nil, func(w *Writer) error {
			for _, raw := range bodies {
				if !pa.ScanTimesV1(raw) {
					return errors.New("not plain")
				}
				attrs, descs, arena := pa.Bounds()
				ok, err := w.AppendMetrics("bench", pa.Times, EstimateMetricsBytes(len(pa.Times), attrs, descs, arena), pa.AppendV1)
				if err != nil {
					return err
				}
				if !ok {
					return errors.New("not appended")
				}
			}
			return nil
		})
	}
	b.Run("plain", func(b *testing.B) { plain(b, bodies, rows) })
	b.Run("plain-100", func(b *testing.B) { plain(b, small, rows) })
}

// BenchmarkCopyIntoPartition: the copy into a metrics partition alone
// (signal.Metrics.CopyRows into a batch with ShareAttrSets, as the
// writer's place does), of the remote-write shaped batches and of the
// corpus; no encode. One destination serves every iteration, reset after
// each, as a partition batch is reused.
func BenchmarkCopyIntoPartition(b *testing.B) {
	run := func(b *testing.B, batches []*signal.Metrics) {
		rows := 0
		for _, m := range batches {
			rows += m.Len()
		}
		dst := new(signal.Metrics)
		dst.ShareAttrSets = true
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			dst.Reset()
			for _, m := range batches {
				dst.CopyRows(m, signal.Rows{From: 0, To: m.Len()})
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "rows/cpu-s")
	}
	b.Run("remote-write", func(b *testing.B) { run(b, remoteWriteBatches(b, 200, 1500)) })
	b.Run("remote-write-5-samples", func(b *testing.B) {
		var dec prw.Decoder
		var batches []*signal.Metrics
		for _, raw := range remoteWriteBodiesSamples(b, 200, 300, 5) {
			m := new(signal.Metrics)
			if _, err := dec.DecodeV1(m, raw); err != nil {
				b.Fatal(err)
			}
			batches = append(batches, m)
		}
		run(b, batches)
	})
	b.Run("corpus", func(b *testing.B) {
		var batches []*signal.Metrics
		for _, pb := range corpusPayloads(b, "metrics") {
			m := new(signal.Metrics)
			if err := otlp.DecodeMetrics(m, pb); err != nil {
				b.Fatal(err)
			}
			batches = append(batches, m)
		}
		run(b, batches)
	})
}
