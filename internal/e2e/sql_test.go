package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake/s3store/s3test"
	"github.com/sluice-dev/sluice/internal/pipeline"
)

// sqlJSON runs `sluice sql --format json` and returns the objects.
func sqlJSON(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	r := run(t, append([]string{"sql", "--format", "json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("sluice sql %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	var out []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("sluice sql %v: output is not a JSON array: %v\n%s", args, err, r.stdout)
	}
	return out
}

// keyCounts turns rows {"k": key, "n": count} into a map; a null key is "<null>".
func sqlKeyCounts(t *testing.T, rows []map[string]any) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	for _, r := range rows {
		k, _ := r["k"].(string)
		if r["k"] == nil {
			k = "<null>"
		}
		n, ok := r["n"].(float64)
		if !ok {
			t.Fatalf("count is %T in %v", r["n"], r)
		}
		m[k] = int64(n)
	}
	return m
}

// pyCounts counts rows by key with the Python DuckDB over the files
// themselves (a glob, not the catalog), for one tenant.
func sqlPyCounts(t *testing.T, lake, table, keyCol, tenantName string) map[string]int64 {
	t.Helper()
	script := `import duckdb, json, sys
lake, table, key, tenant = sys.argv[1:5]
con = duckdb.connect()
rows = con.execute(
    f'SELECT "{key}", count(*) FROM read_parquet(?, hive_partitioning=true) WHERE tenant = ? GROUP BY 1',
    [f"{lake}/{table}/**/*.parquet", tenant]).fetchall()
print(json.dumps({("<null>" if k is None else k): n for k, n in rows}))
`
	out, err := exec.Command(python(t), "-c", script, lake, table, keyCol, tenantName).CombinedOutput()
	if err != nil {
		t.Fatalf("python duckdb: %v\n%s", err, out)
	}
	m := map[string]int64{}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("python output %q: %v", out, err)
	}
	return m
}

func sqlEqualCounts(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: the independent count is empty", what)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s %q: sluice sql %d, DuckDB over the files %d", what, k, got[k], n)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s %q: only sluice sql has it (%d)", what, k, got[k])
		}
	}
}

func sqlSum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestSQLCorpusCounts ingests the corpus and checks that counts by key
// through `sluice sql` equal what Python's DuckDB computes over the files.
func TestSQLCorpusCounts(t *testing.T) {
	lake := t.TempDir()
	if r := run(t, "ingest", "--lake", lake, "--progress", "never", filepath.Join(corpustest.Dir(t), "otlp")); r.code != 0 {
		t.Fatalf("ingest: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, c := range []struct {
		table, key string
		total      int64
	}{
		{"logs", "service_name", 6901},
		{"traces", "service_name", 1559},
		{"metrics", "metric_name", 112934},
		{"metrics", "service_name", 112934},
	} {
		got := sqlKeyCounts(t, sqlJSON(t, "--lake", lake,
			`SELECT "`+c.key+`" AS k, count(*) AS n FROM `+c.table+` GROUP BY 1`))
		sqlEqualCounts(t, c.table+" by "+c.key, got, sqlPyCounts(t, lake, c.table, c.key, "default"))
		if sqlSum(got) != c.total {
			t.Errorf("%s: %d rows in total, the corpus has %d", c.table, sqlSum(got), c.total)
		}
	}

	// The docs' recipe for engines reading the live files directly: the
	// file list from `lake ls --paths`, read through a DuckDB variable.
	ls := run(t, "lake", "ls", "--lake", lake, "--table", "logs", "--tenant", "default", "--paths")
	listFile := filepath.Join(t.TempDir(), "files.txt")
	if err := os.WriteFile(listFile, []byte(ls.stdout), 0o644); err != nil || ls.code != 0 {
		t.Fatalf("lake ls --paths: exit %d %v\n%s", ls.code, err, ls.stderr)
	}
	script := `import duckdb, sys
con = duckdb.connect()
con.execute("SET VARIABLE files = (SELECT list(column0) FROM read_csv(?, header = false, columns = {'column0': 'VARCHAR'}))", [sys.argv[1]])
print(con.execute("SELECT count(*) FROM read_parquet(getvariable('files'), union_by_name = true, hive_partitioning = true)").fetchone()[0])
`
	if out, err := exec.Command(python(t), "-c", script, listFile).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "6901" {
		t.Errorf("DuckDB over the lake ls --paths list: %v\n%s", err, out)
	}

	// CSV and the table agree with JSON on a query with NULLs and attributes.
	q := `SELECT service_name, "attr.http.route" AS route, count(*) AS n FROM traces GROUP BY ALL ORDER BY n DESC, 1, 2 LIMIT 5`
	js := sqlJSON(t, "--lake", lake, q)
	csvOut := run(t, "sql", "--lake", lake, "--format", "csv", q)
	lines := strings.Split(strings.TrimSpace(csvOut.stdout), "\n")
	if csvOut.code != 0 || lines[0] != "service_name,route,n" || len(lines) != len(js)+1 {
		t.Errorf("csv: exit %d\n%s\njson: %v", csvOut.code, csvOut.stdout, js)
	}
	tbl := run(t, "sql", "--lake", lake, q)
	if tbl.code != 0 || !strings.Contains(tbl.stdout, "service_name") || !strings.HasSuffix(tbl.stdout, "(5 rows)\n") {
		t.Errorf("table: exit %d\n%s%s", tbl.code, tbl.stdout, tbl.stderr)
	}

	// --max-rows cuts and says so; the query is read from stdin with "-".
	cmd := exec.Command(sluiceBin, "sql", "--lake", lake, "--format", "csv", "--max-rows", "3", "-")
	cmd.Stdin = strings.NewReader("SELECT timestamp, body FROM logs ORDER BY timestamp;\n")
	var errBuf strings.Builder
	cmd.Stderr = &errBuf
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("stdin query: %v\n%s", err, errBuf.String())
	}
	if n := strings.Count(string(out), "\n"); n < 4 || !strings.Contains(errBuf.String(), "cut at 3 rows") {
		t.Errorf("--max-rows 3: %d lines, stderr %q\n%s", n, errBuf.String(), out)
	}
}

// TestSQLTenancy puts two tenants in one lake: each sees only its rows,
// and cannot read the other's files by path.
func TestSQLTenancy(t *testing.T) {
	lake := t.TempDir()
	logs := corpustest.Files(t, "logs")
	for tenantName, files := range map[string][]string{"alpha": logs[:2], "beta": logs[2:]} {
		args := append([]string{"ingest", "--lake", lake, "--tenant", tenantName, "--progress", "never"}, files...)
		if r := run(t, args...); r.code != 0 {
			t.Fatalf("ingest %s: exit %d\n%s%s", tenantName, r.code, r.stdout, r.stderr)
		}
	}
	// sluice sql reads beside a running `sluice run`: it needs no lock.
	lock, err := pipeline.LockLake(lake)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()

	for _, tn := range []string{"alpha", "beta"} {
		got := sqlKeyCounts(t, sqlJSON(t, "--lake", lake, "--tenant", tn, "SELECT tenant AS k, count(*) AS n FROM logs GROUP BY 1"))
		want := sqlPyCounts(t, lake, "logs", "tenant", tn)
		sqlEqualCounts(t, tn+" logs by tenant", got, want)
		if len(got) != 1 {
			t.Errorf("tenant %s sees tenants %v", tn, got)
		}
		byService := sqlKeyCounts(t, sqlJSON(t, "--lake", lake, "--tenant", tn, "SELECT service_name AS k, count(*) AS n FROM logs GROUP BY 1"))
		sqlEqualCounts(t, tn+" logs by service", byService, sqlPyCounts(t, lake, "logs", "service_name", tn))
	}
	if a, b := sqlPyCounts(t, lake, "logs", "tenant", "alpha"), sqlPyCounts(t, lake, "logs", "tenant", "beta"); a["alpha"] == 0 || b["beta"] == 0 {
		t.Fatalf("both tenants need rows: %v %v", a, b)
	}

	betaFiles, _ := filepath.Glob(filepath.Join(lake, "logs", "tenant=beta", "*", "*", "*.parquet"))
	if len(betaFiles) == 0 {
		t.Fatal("no beta files")
	}
	for _, q := range []string{
		"SELECT count(*) FROM read_parquet('" + betaFiles[0] + "')",
		"SELECT count(*) FROM read_parquet('" + lake + "/logs/**/*.parquet', hive_partitioning = true)",
		"SET enable_external_access = true",
	} {
		r := run(t, "sql", "--lake", lake, "--tenant", "alpha", q)
		if r.code != 1 || !(strings.Contains(r.stderr, "Permission Error") || strings.Contains(r.stderr, "locked")) {
			t.Errorf("%s: exit %d, want 1 with DuckDB's refusal\n%s%s", q, r.code, r.stdout, r.stderr)
		}
	}
}

func TestSQLErrors(t *testing.T) {
	lake := t.TempDir()
	if r := run(t, "ingest", "--lake", lake, "--progress", "never", corpustest.Files(t, "logs")[0]); r.code != 0 {
		t.Fatalf("ingest: exit %d\n%s", r.code, r.stderr)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"SELEC service_name FROM logs"}, 1, "Parser Error: syntax error at or near \"SELEC\""},
		{[]string{"SELECT nosuch FROM logs"}, 1, "Binder Error: Referenced column \"nosuch\" not found"},
		{[]string{"SELECT * FROM nosuch"}, 1, "Catalog Error: Table with name nosuch does not exist"},
		{[]string{"--format", "yaml", "SELECT 1"}, 2, "--format"},
		{[]string{"--tenant", "../etc", "SELECT 1"}, 2, "--tenant"},
		{[]string{"--from", "yesterday", "SELECT 1"}, 2, "--from"},
		{[]string{"  ;  "}, 2, "empty query"},
		{[]string{"--memory-limit", "lots", "SELECT 1"}, 2, "Memory must have a number"},
		{[]string{}, 2, "takes 1 argument"},
	} {
		r := run(t, append([]string{"sql", "--lake", lake}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s%s", c.args, r.code, c.code, c.want, r.stdout, r.stderr)
		}
	}
	if r := run(t, "sql", "--lake", filepath.Join(lake, "nope"), "SELECT 1"); r.code != 2 {
		t.Errorf("missing lake: exit %d\n%s", r.code, r.stderr)
	}
}

// TestSQLTimeout runs a query that would take minutes: --timeout stops it
// with a clear error within a few seconds.
func TestSQLTimeout(t *testing.T) {
	lake := t.TempDir()
	if r := run(t, "ingest", "--lake", lake, "--progress", "never", corpustest.Files(t, "logs")[0]); r.code != 0 {
		t.Fatalf("ingest: exit %d\n%s", r.code, r.stderr)
	}
	start := time.Now()
	r := run(t, "sql", "--lake", lake, "--timeout", "1s", "--threads", "1",
		"SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b")
	took := time.Since(start)
	if r.code != 1 || !strings.Contains(r.stderr, "timed out after 1s") {
		t.Errorf("exit %d, want 1 with a timeout message\n%s%s", r.code, r.stdout, r.stderr)
	}
	if took > 5*time.Second {
		t.Errorf("took %v to stop", took)
	}
}

// TestSQLS3 queries a lake whose files are in a real S3 server: with
// --s3-bucket the tenant's files are fetched (no DuckDB extension), and
// without it the error names the limitation.
func TestSQLS3(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t)
	state := t.TempDir()
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+s3test.AccessKey, "AWS_SECRET_ACCESS_KEY="+s3test.SecretKey,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PROFILE=", "AWS_SESSION_TOKEN=")
	s3args := []string{"--s3-bucket", bucket, "--s3-prefix", "lake", "--s3-endpoint", srv.Endpoint, "--s3-region", "us-east-1"}
	sluice := func(args ...string) (string, string, int) {
		cmd := exec.Command(sluiceBin, args...)
		cmd.Env = env
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}
	logs := corpustest.Files(t, "logs")
	for tn, files := range map[string][]string{"alpha": logs[:3], "beta": logs[3:]} {
		args := append(append([]string{"ingest", "--lake", state, "--tenant", tn, "--progress", "never"}, s3args...), files...)
		if out, errOut, code := sluice(args...); code != 0 {
			t.Fatalf("ingest: exit %d\n%s%s", code, out, errOut)
		}
	}
	// versitygw keeps objects as plain files: DuckDB in Python counts them.
	stored := filepath.Join(srv.Dir, bucket, "lake")
	for _, tn := range []string{"alpha", "beta"} {
		out, errOut, code := sluice(append([]string{"sql", "--lake", state, "--tenant", tn, "--format", "json",
			"SELECT service_name AS k, count(*) AS n FROM logs GROUP BY 1"}, s3args...)...)
		if code != 0 {
			t.Fatalf("sql over S3: exit %d\n%s%s", code, out, errOut)
		}
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		sqlEqualCounts(t, tn+" logs over S3", sqlKeyCounts(t, rows), sqlPyCounts(t, stored, "logs", "service_name", tn))
	}

	_, errOut, code := sluice("sql", "--lake", state, "--tenant", "alpha", "SELECT count(*) FROM logs")
	if code != 1 || !strings.Contains(errOut, "segment file missing") || !strings.Contains(errOut, "S3") {
		t.Errorf("without --s3-bucket: exit %d, want 1 naming the S3 limitation\n%s", code, errOut)
	}
}
