package sqlq

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// testLake is a lake built from corpus files, with the record counts the
// OTLP decoder reported per tenant: an account independent of DuckDB.
type testLake struct {
	root   string
	cat    *catalog.Catalog
	counts map[string]ingest.Result // by tenant
}

func newTestLake(t testing.TB) *testLake {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return &testLake{root: root, cat: cat, counts: map[string]ingest.Result{}}
}

func (l *testLake) ingest(t testing.TB, tenantName string, files ...string) {
	t.Helper()
	ctx := context.Background()
	w, err := lake.NewWriter(lake.Options{Root: l.root}, func(s lake.Segment) error {
		return l.cat.AddSegments(ctx, s.CatalogRow())
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ingest.Run(ctx, files, w, ingest.Options{Tenant: tenantName})
	if err != nil || len(res.Failed) > 0 {
		t.Fatalf("ingest %v: %v %v", files, err, res.Failed)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c := l.counts[tenantName]
	c.Logs += res.Logs
	c.DataPoints += res.DataPoints
	c.Spans += res.Spans
	l.counts[tenantName] = c
}

func (l *testLake) open(t testing.TB, opts Options) *Engine {
	t.Helper()
	opts.Root = l.root
	if opts.Tenant == "" {
		opts.Tenant = "default"
	}
	e, err := Open(context.Background(), l.cat, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// queryAll runs q and returns its rows.
func queryAll(t *testing.T, e *Engine, q string, maxRows int) ([]Column, [][]any, bool) {
	t.Helper()
	rows, err := e.Query(context.Background(), q, maxRows)
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		out = append(out, append([]any(nil), rows.Values()...))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	return rows.Columns, out, rows.Truncated()
}

func queryErr(t *testing.T, e *Engine, q string) error {
	t.Helper()
	rows, err := e.Query(context.Background(), q, 100)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return err
	}
	t.Fatalf("query %q succeeded, want an error", q)
	return nil
}

func count(t *testing.T, e *Engine, q string) int64 {
	t.Helper()
	_, rows, _ := queryAll(t, e, q, 0)
	if len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("%q: want one value, got %v", q, rows)
	}
	n, ok := rows[0][0].(int64)
	if !ok {
		t.Fatalf("%q: got %T %v", q, rows[0][0], rows[0][0])
	}
	return n
}

func TestViewsAreScopedToTenant(t *testing.T) {
	l := newTestLake(t)
	logs := corpustest.Files(t, "logs")
	l.ingest(t, "alpha", logs[0], logs[1])
	l.ingest(t, "alpha", corpustest.Files(t, "metrics")[0])
	l.ingest(t, "beta", logs[2])
	l.ingest(t, "beta", corpustest.Files(t, "traces")...)

	for _, tn := range []string{"alpha", "beta"} {
		e := l.open(t, Options{Tenant: tn})
		want := l.counts[tn]
		if got := count(t, e, "SELECT count(*) FROM logs"); got != want.Logs {
			t.Errorf("%s: logs = %d, want %d", tn, got, want.Logs)
		}
		if got := count(t, e, "SELECT count(*) FROM metrics"); got != want.DataPoints {
			t.Errorf("%s: metrics = %d, want %d", tn, got, want.DataPoints)
		}
		if got := count(t, e, "SELECT count(*) FROM traces"); got != want.Spans {
			t.Errorf("%s: traces = %d, want %d", tn, got, want.Spans)
		}
		_, rows, _ := queryAll(t, e, "SELECT DISTINCT tenant FROM logs", 0)
		if len(rows) != 1 || rows[0][0] != tn {
			t.Errorf("%s: tenants seen in logs: %v", tn, rows)
		}
	}
	if l.counts["alpha"].Logs == 0 || l.counts["beta"].Spans == 0 || l.counts["alpha"].Spans != 0 {
		t.Fatalf("test lake is not what the test needs: %+v", l.counts)
	}
}

// TestSandbox checks that user SQL cannot reach files other than the
// tenant's, nor lift the restriction.
func TestSandbox(t *testing.T) {
	l := newTestLake(t)
	logs := corpustest.Files(t, "logs")
	l.ingest(t, "alpha", logs[0])
	l.ingest(t, "beta", logs[1])
	other, err := filepath.Glob(filepath.Join(l.root, "logs", "tenant=beta", "*", "*", "*.parquet"))
	if err != nil || len(other) == 0 {
		t.Fatalf("no beta files: %v", err)
	}
	e := l.open(t, Options{Tenant: "alpha"})
	before := count(t, e, "SELECT count(*) FROM logs")

	for _, q := range []string{
		"SELECT count(*) FROM read_parquet('" + other[0] + "')",
		"SELECT count(*) FROM read_parquet('" + l.root + "/logs/**/*.parquet')",
		"SELECT count(*) FROM read_parquet('" + l.root + "/logs/tenant=alpha/**/*.parquet')",
		"SELECT * FROM read_csv('/etc/passwd')",
		"SELECT * FROM read_text('" + filepath.Join(l.root, "catalog.db") + "')",
		"ATTACH '" + filepath.Join(l.root, "catalog.db") + "' AS c (TYPE sqlite)",
		"COPY (SELECT 1) TO '" + filepath.Join(t.TempDir(), "x.csv") + "'",
		"INSTALL httpfs",
		"LOAD httpfs",
		"SELECT * FROM read_parquet('s3://bucket/logs/x.parquet')",
	} {
		err := queryErr(t, e, q)
		if !strings.Contains(err.Error(), "Permission Error") && !strings.Contains(err.Error(), "disabled") {
			t.Errorf("%s: want a permission error, got %v", q, err)
		}
	}
	for _, q := range []string{
		"SET enable_external_access = true",
		"RESET enable_external_access",
		"SET lock_configuration = false",
		"SET allowed_paths = ['/']",
		"SET memory_limit = '100GB'",
	} {
		if err := queryErr(t, e, q); !strings.Contains(err.Error(), "locked") {
			t.Errorf("%s: want a locked-configuration error, got %v", q, err)
		}
	}
	if after := count(t, e, "SELECT count(*) FROM logs"); after != before || before != l.counts["alpha"].Logs {
		t.Errorf("logs count %d before, %d after the attempts; ingested %d", before, after, l.counts["alpha"].Logs)
	}
}

// TestEmptyViewsMatchFiles checks that a table without files has the
// fixed columns, with the types DuckDB gives them when reading real files.
func TestEmptyViewsMatchFiles(t *testing.T) {
	l := newTestLake(t)
	for _, kind := range []string{"logs", "metrics", "traces"} {
		l.ingest(t, "full", corpustest.Files(t, kind)...)
	}
	full := l.open(t, Options{Tenant: "full"})
	empty := l.open(t, Options{Tenant: "nobody"})
	describe := func(e *Engine, table string) map[string]string {
		_, rows, _ := queryAll(t, e, "DESCRIBE "+table, 0)
		m := map[string]string{}
		for _, r := range rows {
			name := r[0].(string)
			if strings.HasPrefix(name, "attr.") || strings.HasPrefix(name, "resource.") || strings.HasPrefix(name, "scope.") {
				continue
			}
			m[name] = r[1].(string)
		}
		return m
	}
	for _, table := range []string{TableLogs, TableMetrics, TableTraces} {
		if full.Files(table) == 0 || empty.Files(table) != 0 {
			t.Fatalf("%s: files full=%d empty=%d", table, full.Files(table), empty.Files(table))
		}
		want, got := describe(full, table), describe(empty, table)
		for name, typ := range want {
			if got[name] != typ {
				t.Errorf("%s.%s: empty view has type %q, files have %q", table, name, got[name], typ)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s.%s: in the empty view but not in the files", table, name)
			}
		}
		if n := count(t, empty, "SELECT count(*) FROM "+table); n != 0 {
			t.Errorf("empty %s has %d rows", table, n)
		}
	}
}

func TestTimeRangePrunesFiles(t *testing.T) {
	l := newTestLake(t)
	l.ingest(t, "default", corpustest.Files(t, "logs")...)
	all := l.open(t, Options{})
	segs, err := l.cat.List(context.Background(), catalog.Filter{Table: "logs", Tenant: "default"})
	if err != nil || len(segs) < 2 {
		t.Fatalf("need several log segments: %d, %v", len(segs), err)
	}
	// The range of the first segment only.
	s := segs[0]
	some := l.open(t, Options{From: s.MinTime, To: s.MaxTime})
	want, err := l.cat.List(context.Background(), catalog.Filter{Table: "logs", Tenant: "default", From: s.MinTime, To: s.MaxTime})
	if err != nil {
		t.Fatal(err)
	}
	if some.Files("logs") != len(want) || some.Files("logs") >= all.Files("logs") {
		t.Errorf("pruned view reads %d files, catalog lists %d of %d", some.Files("logs"), len(want), all.Files("logs"))
	}
	var rows int64
	for _, w := range want {
		rows += w.Rows
	}
	if got := count(t, some, "SELECT count(*) FROM logs"); got != rows {
		t.Errorf("pruned logs = %d rows, segments hold %d", got, rows)
	}
}

func TestSessionIsUTC(t *testing.T) {
	t.Setenv("TZ", "America/New_York")
	e := newTestLake(t).open(t, Options{})
	_, rows, _ := queryAll(t, e, `SELECT current_setting('TimeZone'),
		strftime(date_trunc('day', TIMESTAMPTZ '2025-06-01 02:00:00+00'), '%Y-%m-%d %H:%M')`, 0)
	if rows[0][0] != "UTC" || rows[0][1] != "2025-06-01 00:00" {
		t.Errorf("session time zone: %v", rows[0])
	}
}

func TestMaxRows(t *testing.T) {
	e := newTestLake(t).open(t, Options{})
	_, rows, cut := queryAll(t, e, "SELECT range FROM range(1000000) ORDER BY range DESC;", 5)
	if !cut || len(rows) != 5 || rows[0][0] != int64(999999) || rows[4][0] != int64(999995) {
		t.Errorf("got %v cut=%v, want 999999..999995 cut", rows, cut)
	}
	if _, rows, cut = queryAll(t, e, "SELECT * FROM range(5) -- trailing comment", 5); cut || len(rows) != 5 {
		t.Errorf("exactly max rows: got %d cut=%v", len(rows), cut)
	}
	// Not a subquery: run as written and cut while reading.
	if _, rows, cut = queryAll(t, e, "PRAGMA version", 1); cut || len(rows) != 1 {
		t.Errorf("PRAGMA: got %v cut=%v", rows, cut)
	}
	cols, rows, _ := queryAll(t, e, "CREATE TABLE x AS SELECT 1 AS a; SELECT a + 1 AS b FROM x", 10)
	if len(cols) != 1 || cols[0].Name != "b" || len(rows) != 1 || rows[0][0] != int32(2) {
		t.Errorf("several statements: %v %v", cols, rows)
	}
	if _, rows, cut = queryAll(t, e, "SELECT * FROM range(100)", 0); cut || len(rows) != 100 {
		t.Errorf("no limit: %d rows cut=%v", len(rows), cut)
	}
}

func TestBadQueries(t *testing.T) {
	e := newTestLake(t).open(t, Options{})
	for q, want := range map[string]string{
		"SELEC 1":                       "Parser Error",
		"SELECT nosuch FROM logs":       "Binder Error",
		"SELECT 1/0::INTEGER FROM nope": "Catalog Error",
		"SELECT 'x'::INTEGER":           "Conversion Error",
	} {
		err := queryErr(t, e, q)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %s", q, err, want)
		}
		// Positions point into the user's text, not into the LIMIT wrapper.
		if strings.Contains(err.Error(), "LINE 2") || strings.Contains(err.Error(), "LIMIT") {
			t.Errorf("%s: error refers to the wrapper: %v", q, err)
		}
	}
	if _, err := e.Query(context.Background(), "  ;\n", 10); err == nil {
		t.Error("empty query accepted")
	}
}

func TestTimeoutInterrupts(t *testing.T) {
	e := newTestLake(t).open(t, Options{Threads: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Query(ctx, "SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b", 10)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("interrupt took %v", d)
	}
	// The session is usable afterwards.
	if n := count(t, e, "SELECT count(*) FROM range(7)"); n != 7 {
		t.Errorf("after timeout: %d", n)
	}
}

func TestMemoryLimit(t *testing.T) {
	e := newTestLake(t).open(t, Options{MemoryLimit: "64MB", Threads: 1})
	err := queryErr(t, e, "SELECT list(range) FROM range(100000000)")
	if !strings.Contains(err.Error(), "Out of Memory Error") {
		t.Errorf("got %v, want DuckDB's out-of-memory error", err)
	}
}

func TestSpillUnderSandbox(t *testing.T) {
	// A sort larger than memory spills to the private temp directory,
	// which must stay writable after file access is disabled.
	const q = "SELECT count(*), max(x) FROM (SELECT range::VARCHAR || 'padding-padding-padding' AS x FROM range(3000000) ORDER BY random())"
	e := newTestLake(t).open(t, Options{MemoryLimit: "32MB", Threads: 1})
	_, rows, _ := queryAll(t, e, q, 10)
	if len(rows) != 1 || rows[0][0] != int64(3000000) {
		t.Errorf("got %v", rows)
	}
	// Control: without a temp directory the same query does not fit.
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, s := range []string{"SET memory_limit = '32MB'", "SET threads = 1", "SET temp_directory = ''"} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(q); err == nil || !strings.Contains(err.Error(), "Out of Memory") {
		t.Errorf("control without spilling: got %v, want out of memory (the test query is too small to need spilling)", err)
	}
}

func TestMissingFileNamesS3Limit(t *testing.T) {
	l := newTestLake(t)
	l.ingest(t, "default", corpustest.Files(t, "logs")[0])
	segs, err := l.cat.List(context.Background(), catalog.Filter{Table: "logs"})
	if err != nil || len(segs) == 0 {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(l.root, filepath.FromSlash(segs[0].Path))); err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), l.cat, Options{Root: l.root, Tenant: "default"})
	if !errors.Is(err, ErrMissingFile) || !strings.Contains(err.Error(), "S3") {
		t.Errorf("got %v, want ErrMissingFile naming the S3 limitation", err)
	}
}

func TestOpenRejectsBadInput(t *testing.T) {
	l := newTestLake(t)
	if _, err := Open(context.Background(), l.cat, Options{Root: l.root, Tenant: "../x"}); err == nil {
		t.Error("bad tenant accepted")
	}
	if _, err := Open(context.Background(), l.cat, Options{Root: l.root + "/*", Tenant: "a"}); err == nil {
		t.Error("glob in root accepted")
	}
}

// TestStoreFetch reads the lake through a Store (as for S3) rather than
// the local root: the files are copied into the session's private
// directory, with their Hive layout, and the copy is bounded.
func TestStoreFetch(t *testing.T) {
	l := newTestLake(t)
	l.ingest(t, "alpha", corpustest.Files(t, "logs")...)
	l.ingest(t, "beta", corpustest.Files(t, "traces")...)
	store := lake.NewLocalStore(l.root)
	elsewhere := t.TempDir() // nothing under the local root: every file comes from the store
	e, err := Open(context.Background(), l.cat, Options{Root: elsewhere, Tenant: "alpha", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, e, "SELECT count(*) FROM logs"); got != l.counts["alpha"].Logs {
		t.Errorf("logs through the store: %d, want %d", got, l.counts["alpha"].Logs)
	}
	if got := count(t, e, "SELECT count(*) FROM logs WHERE tenant = 'alpha' AND dt IS NOT NULL AND hour IS NOT NULL"); got != l.counts["alpha"].Logs {
		t.Errorf("partition columns from the copied layout: %d rows", got)
	}
	if got := count(t, e, "SELECT count(*) FROM traces"); got != 0 {
		t.Errorf("alpha sees %d traces of beta", got)
	}
	if err := queryErr(t, e, "SELECT count(*) FROM read_parquet('"+l.root+"/traces/**/*.parquet')"); !strings.Contains(err.Error(), "Permission Error") {
		t.Errorf("reading beta's files: %v", err)
	}
	dir := e.dir
	e.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("private directory left behind: %v", err)
	}

	_, err = Open(context.Background(), l.cat, Options{Root: elsewhere, Tenant: "alpha", Store: store, MaxFetchBytes: 1000})
	if !errors.Is(err, ErrFetchTooLarge) {
		t.Errorf("got %v, want ErrFetchTooLarge", err)
	}
}
