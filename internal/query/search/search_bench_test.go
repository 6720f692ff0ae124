package search

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// benchShift separates the copies of the corpus in time: six copies per
// hour partition.
const benchShift = 10 * time.Minute

// benchCopies is how many times the corpus (6,901 logs, 1,559 spans) is
// written: SLUICE_BENCH_COPIES, default 1450 (10.0M log rows, 2.26M spans).
func benchCopies() int {
	if v, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_COPIES")); err == nil && v > 0 {
		return v
	}
	return 1450
}

var bench struct {
	once     sync.Once
	tl       *testLake
	logRows  int64
	spanRows int64
	traceID  string // a trace of a middle copy
	newest   int64  // newest corpus time after shifting
	err      error
	dirs     []string
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range bench.dirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// benchLake writes the corpus benchCopies() times, each copy 10 minutes
// after the one before and with its own trace ids. It is not timed.
func benchLake(b *testing.B) *testLake {
	b.Helper()
	bench.once.Do(func() {
		var logs []*signal.Logs
		var spans []*signal.Spans
		for _, f := range corpustest.Files(b, "logs") {
			l := new(signal.Logs)
			if bench.err = otlp.DecodeLogs(l, corpustest.Read(b, f)); bench.err != nil {
				return
			}
			logs = append(logs, l)
		}
		for _, f := range corpustest.Files(b, "traces") {
			s := new(signal.Spans)
			if bench.err = otlp.DecodeTraces(s, corpustest.Read(b, f)); bench.err != nil {
				return
			}
			spans = append(spans, s)
		}
		dir, err := os.MkdirTemp("", "sluice-search-bench-")
		if err != nil {
			bench.err = err
			return
		}
		bench.dirs = append(bench.dirs, dir)
		ctx := context.Background()
		cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(dir, "catalog.db"))
		if err != nil {
			bench.err = err
			return
		}
		store := lake.NewLocalStore(dir)
		w, err := lake.NewWriter(lake.Options{Store: store, MaxFutureSkew: 1 << 62}, func(s lake.Segment) error {
			if s.Table == "logs" {
				bench.logRows += s.Rows
			} else {
				bench.spanRows += s.Rows
			}
			return cat.AddSegments(ctx, s.CatalogRow())
		})
		if err != nil {
			bench.err = err
			return
		}
		n := benchCopies()
		for c := 0; c < n; c++ {
			d := int64(benchShift)
			if c == 0 {
				d = 0
			}
			for _, l := range logs {
				for i := range l.Time {
					if l.Time[i] != 0 {
						l.Time[i] += d
					}
					if l.ObservedTime[i] != 0 {
						l.ObservedTime[i] += d
					}
					bench.newest = max(bench.newest, l.Time[i])
				}
				if bench.err = w.WriteLogs("default", l); bench.err != nil {
					return
				}
			}
			for _, s := range spans {
				for i := range s.StartTime {
					s.StartTime[i] += d
					s.EndTime[i] += d
					s.TraceID[i][12], s.TraceID[i][13] = byte(c>>8), byte(c) // a new trace per copy
				}
				if c == n/2 && bench.traceID == "" && len(s.TraceID) > 0 {
					bench.traceID = hexID(s.TraceID[0][:])
				}
				if bench.err = w.WriteSpans("default", s); bench.err != nil {
					return
				}
			}
		}
		if bench.err = w.Close(); bench.err != nil {
			return
		}
		bench.tl = &testLake{dir: dir, cat: cat, store: store}
	})
	if bench.err != nil {
		b.Fatalf("build benchmark lake: %v", bench.err)
	}
	return bench.tl
}

func hexID(b []byte) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, hex[c>>4], hex[c&15])
	}
	return string(out)
}

// runBench serves one query b.N times on a warm handler (its file cache
// filled by a first, untimed query, as in a running server).
func runBench(b *testing.B, h http.Handler, path string, q url.Values) {
	b.Helper()
	u := path + "?" + q.Encode()
	do := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %.300s", u, rec.Code, rec.Body.String())
		}
		return rec
	}
	do()
	hh := h.(*Handler)
	before := counterValue(hh)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		do()
	}
	el := time.Since(start)
	b.StopTimer()
	rows := counterValue(hh) - before
	b.ReportMetric(float64(el.Microseconds())/1e3/float64(b.N), "ms/query")
	b.ReportMetric(rows/float64(b.N), "rows_scanned/query")
	b.ReportMetric(rows/el.Seconds(), "rows_scanned/s")
}

func counterValue(h *Handler) float64 {
	var sum float64
	for _, ep := range []string{epLogs, epSpans, epTrace} {
		c := h.rows.WithLabelValues(ep)
		m := &dto.Metric{}
		if err := c.Write(m); err == nil {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func benchHandler(b *testing.B) http.Handler {
	tl := benchLake(b)
	b.Logf("lake: %d log rows, %d spans", bench.logRows, bench.spanRows)
	return NewHandler(tl.cat, tl.store, Options{Limits: Limits{MaxRowsScanned: 1 << 40, MaxBytesScanned: 1 << 40}})
}

func BenchmarkLogsSearch(b *testing.B) {
	h := benchHandler(b)
	end := bench.newest + 1
	ns := func(t int64) string { return strconv.FormatInt(t, 10) }
	for _, bc := range []struct {
		name string
		q    url.Values
	}{
		// The newest 100 records of the whole lake: stops after the newest hour.
		{"newest100", url.Values{"start": {"0"}, "end": {ns(end)}, "limit": {"100"}}},
		// One service at warn and above over the last 24 hours.
		{"service_warn_24h", url.Values{"start": {ns(end - int64(24*time.Hour))}, "end": {ns(end)}, "service": {"android-api"}, "severity_min": {"warn"}, "limit": {"100"}}},
		// An attribute equality over the last 6 hours.
		{"attr_6h", url.Values{"start": {ns(end - int64(6*time.Hour))}, "end": {ns(end)}, "attr._cardinalhq.level": {"ERROR"}, "limit": {"100"}}},
		// A body substring that matches nothing: every row of 6 hours is read.
		{"body_miss_6h", url.Values{"start": {ns(end - int64(6*time.Hour))}, "end": {ns(end)}, "q": {"no such text"}, "limit": {"100"}}},
	} {
		b.Run(bc.name, func(b *testing.B) { runBench(b, h, logsPath, bc.q) })
	}
}

func BenchmarkTraceFetch(b *testing.B) {
	h := benchHandler(b)
	b.Run("no_hint", func(b *testing.B) { runBench(b, h, tracePrefix+bench.traceID, url.Values{}) })
}

func BenchmarkSpanSearch(b *testing.B) {
	h := benchHandler(b)
	end := bench.newest + int64(time.Hour)
	ns := func(t int64) string { return strconv.FormatInt(t, 10) }
	for _, bc := range []struct {
		name string
		q    url.Values
	}{
		{"newest100", url.Values{"start": {"0"}, "end": {ns(end)}, "limit": {"100"}}},
		{"slow_24h", url.Values{"start": {ns(end - int64(24*time.Hour))}, "end": {ns(end)}, "min_duration": {"100ms"}, "limit": {"100"}}},
		{"service_error_24h", url.Values{"start": {ns(end - int64(24*time.Hour))}, "end": {ns(end)}, "service": {"frontend"}, "status": {"error"}, "limit": {"100"}}},
	} {
		b.Run(bc.name, func(b *testing.B) { runBench(b, h, spansPath, bc.q) })
	}
}
