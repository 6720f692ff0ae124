package sqlq

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/sluice-dev/sluice/internal/corpustest"
)

// BenchmarkLogsByService measures `SELECT service_name, count(*) FROM logs
// GROUP BY 1` over the logs corpus ingested SQLQ_BENCH_COPIES times (default
// 100), each copy its own ingest run and so its own files, as repeated
// `sluice ingest` runs leave them before compaction. DuckDB runs on one
// thread. "query" reuses a session; "open+query" includes listing the
// catalog and creating the views, as each `sluice sql` run does.
func BenchmarkLogsByService(b *testing.B) {
	copies := 100
	if s := os.Getenv("SQLQ_BENCH_COPIES"); s != "" {
		copies, _ = strconv.Atoi(s)
	}
	l := newTestLake(b)
	files := corpustest.Files(b, "logs")
	for range copies {
		l.ingest(b, "default", files...)
	}
	const q = "SELECT service_name, count(*) FROM logs GROUP BY 1"
	ctx := context.Background()
	opts := Options{Root: l.root, Tenant: "default", Threads: 1}
	run := func(b *testing.B, e *Engine) {
		rows, err := e.Query(ctx, q, 10000)
		if err != nil {
			b.Fatal(err)
		}
		var n int
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil || n == 0 {
			b.Fatalf("%d rows, %v", n, err)
		}
		rows.Close()
	}
	e, err := Open(ctx, l.cat, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	b.Logf("%d log rows in %d files", l.counts["default"].Logs, e.Files(TableLogs))
	b.Run("query", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			run(b, e)
		}
		b.ReportMetric(float64(l.counts["default"].Logs)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("open+query", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e, err := Open(ctx, l.cat, opts)
			if err != nil {
				b.Fatal(err)
			}
			run(b, e)
			e.Close()
		}
	})
}
