package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/sluice-dev/sluice/internal/corpustest"
)

// searchGet calls the search API of a running query server and returns
// the status and body.
func searchGet(t *testing.T, base, tenant, path string, q url.Values) (int, []byte) {
	t.Helper()
	u := "http://" + base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if tenant != "" {
		req.Header.Set("X-Scope-OrgID", tenant)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// searchCount pages through a search and returns how many records it gave.
func searchCount(t *testing.T, base, tenant, path string, q url.Values) int {
	t.Helper()
	n := 0
	q.Set("limit", "5000")
	for {
		code, body := searchGet(t, base, tenant, path, q)
		if code != http.StatusOK {
			if code == http.StatusNotFound && !strings.Contains(string(body), "errorType") {
				t.Fatalf("GET %s: 404 from the query server itself: `sluice query-server` does not mount the search API "+
					"(internal/cli/query.go: set hc.Search = search.NewHandler(cat, store, ...))", path)
			}
			t.Fatalf("GET %s?%s: %d %.500s", path, q.Encode(), code, body)
		}
		sc := bufio.NewScanner(strings.NewReader(string(body)))
		sc.Buffer(nil, 1<<24)
		var last map[string]any
		lines := 0
		for sc.Scan() {
			lines++
			last = nil
			if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
				t.Fatalf("line %.200q: %v", sc.Text(), err)
			}
		}
		if lines == 0 {
			t.Fatalf("GET %s: empty body", path)
		}
		n += lines - 1
		cur, ok := last["cursor"].(string)
		if !ok {
			if last["done"] != true {
				t.Fatalf("final line %v", last)
			}
			return n
		}
		q.Set("cursor", cur)
	}
}

// duckCounts runs count(*) queries with DuckDB (through $SLUICE_PYTHON)
// over the lake's Parquet files: an independent reader of what sluice
// wrote.
func duckCounts(t *testing.T, lake string, queries []string) []int {
	t.Helper()
	script := `import duckdb, json, sys
lake = sys.argv[1]
con = duckdb.connect()
con.execute(f"CREATE VIEW logs AS SELECT * FROM read_parquet('{lake}/logs/**/*.parquet', hive_partitioning=true, union_by_name=true)")
con.execute(f"CREATE VIEW traces AS SELECT * FROM read_parquet('{lake}/traces/**/*.parquet', hive_partitioning=true, union_by_name=true)")
print(json.dumps([con.execute(q).fetchone()[0] for q in json.loads(sys.stdin.read())]))
`
	in, _ := json.Marshal(queries)
	cmd := exec.Command(python(t), "-c", script, lake)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("duckdb: %v\n%s", err, stderr)
	}
	var counts []int
	if err := json.Unmarshal(out, &counts); err != nil {
		t.Fatalf("duckdb output %q: %v", out, err)
	}
	return counts
}

// TestSearchAgainstDuckDB ingests the corpus with `sluice ingest` (twice,
// for two tenants), serves it with `sluice query-server`, and checks the
// logs and traces search API against DuckDB SQL over the same files.
func TestSearchAgainstDuckDB(t *testing.T) {
	lake, addr := searchLake(t)

	wide := func(kv ...string) url.Values {
		q := url.Values{"start": {"2025-01-01T00:00:00Z"}, "end": {"2027-01-01T00:00:00Z"}}
		for i := 0; i+1 < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return q
	}
	const tw = "tenant = 'default' AND coalesce(timestamp, observed_timestamp) IS NOT NULL"
	cases := []struct {
		name, path string
		q          url.Values
		sql        string
	}{
		{"all logs", "/api/v1/logs/search", wide(), "SELECT count(*) FROM logs WHERE " + tw},
		{"service", "/api/v1/logs/search", wide("service", "android-api"),
			"SELECT count(*) FROM logs WHERE " + tw + " AND service_name = 'android-api'"},
		{"severity_min=warn", "/api/v1/logs/search", wide("severity_min", "warn"),
			"SELECT count(*) FROM logs WHERE " + tw + " AND severity_number >= 13"},
		{"body substring", "/api/v1/logs/search", wide("q", "playback"),
			"SELECT count(*) FROM logs WHERE " + tw + " AND contains(body, 'playback')"},
		{"attr regex", "/api/v1/logs/search", wide("attr_re._cardinalhq.level", "ERR.*|WARN"),
			"SELECT count(*) FROM logs WHERE " + tw + " AND regexp_full_match(\"attr._cardinalhq.level\", 'ERR.*|WARN')"},
		{"all spans", "/api/v1/traces/search", wide(), "SELECT count(*) FROM traces WHERE tenant = 'default' AND start_timestamp IS NOT NULL"},
		{"slow spans", "/api/v1/traces/search", wide("min_duration", "10ms"),
			"SELECT count(*) FROM traces WHERE tenant = 'default' AND start_timestamp IS NOT NULL AND duration_ns >= 10000000"},
		{"error spans of a service", "/api/v1/traces/search", wide("service", "api-gateway", "status", "error"),
			"SELECT count(*) FROM traces WHERE tenant = 'default' AND start_timestamp IS NOT NULL AND service_name = 'api-gateway' AND status_code = 2"},
	}
	var sqls []string
	for _, c := range cases {
		sqls = append(sqls, c.sql)
	}
	// One trace: the one with the most spans.
	const traceSQL = "SELECT trace_id FROM traces WHERE tenant = 'default' AND trace_id IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1"
	want := duckCounts(t, lake, sqls)
	for i, c := range cases {
		if want[i] == 0 {
			t.Fatalf("%s: DuckDB counts 0; the case tests nothing", c.name)
		}
		if got := searchCount(t, addr, "", c.path, c.q); got != want[i] {
			t.Errorf("%s: search gave %d records, DuckDB counts %d", c.name, got, want[i])
		}
	}

	traceID := duckString(t, lake, traceSQL)
	spans := duckCounts(t, lake, []string{fmt.Sprintf("SELECT count(*) FROM traces WHERE tenant = 'default' AND trace_id = '%s'", traceID)})[0]
	code, body := searchGet(t, addr, "", "/api/v1/traces/"+traceID, nil)
	if code != http.StatusOK {
		t.Fatalf("trace %s: %d %.300s", traceID, code, body)
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
	if err != nil {
		t.Fatalf("trace %s: not OTLP JSON: %v", traceID, err)
	}
	if td.SpanCount() != spans {
		t.Errorf("trace %s: %d spans, DuckDB counts %d", traceID, td.SpanCount(), spans)
	}

	// Tenancy: beta sees the same counts (its own copy), an unknown tenant nothing.
	if got := searchCount(t, addr, "beta", "/api/v1/logs/search", wide()); got != want[0] {
		t.Errorf("tenant beta: %d logs, want %d", got, want[0])
	}
	if got := searchCount(t, addr, "gamma", "/api/v1/logs/search", wide()); got != 0 {
		t.Errorf("tenant gamma: %d logs, want 0", got)
	}
	if code, _ := searchGet(t, addr, "gamma", "/api/v1/traces/"+traceID, nil); code != http.StatusNotFound {
		t.Errorf("tenant gamma fetching a default trace: %d, want 404", code)
	}
	if code, _ := searchGet(t, addr, "", "/api/v1/logs/search", url.Values{"sevrity": {"1"}}); code != http.StatusBadRequest {
		t.Errorf("unknown parameter: %d, want 400", code)
	}
}

func duckString(t *testing.T, lake, q string) string {
	t.Helper()
	script := `import duckdb, sys
lake = sys.argv[1]
con = duckdb.connect()
con.execute(f"CREATE VIEW traces AS SELECT * FROM read_parquet('{lake}/traces/**/*.parquet', hive_partitioning=true, union_by_name=true)")
print(con.execute(sys.argv[2]).fetchone()[0])
`
	out, err := exec.Command(python(t), "-c", script, lake, q).Output()
	if err != nil {
		t.Fatalf("duckdb %s: %v", q, err)
	}
	return strings.TrimSpace(string(out))
}

// searchLake ingests the corpus logs and traces for tenants default and
// beta with `sluice ingest` and serves the lake with `sluice query-server`
// (tenant header X-Scope-OrgID); it returns the lake and the address.
func searchLake(t *testing.T) (string, string) {
	lake := t.TempDir()
	dir := corpustest.Dir(t)
	for _, tenant := range []string{"default", "beta"} {
		for _, kind := range []string{"logs", "traces"} {
			if r := run(t, "ingest", "--lake", lake, "--tenant", tenant, "--progress", "never", filepath.Join(dir, "otlp", kind)); r.code != 0 {
				t.Fatalf("ingest %s: exit %d\n%s", kind, r.code, r.stderr)
			}
		}
	}
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(cfg, []byte("receivers:\n  otlp:\n    tenant_header: X-Scope-OrgID\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return lake, startQueryServer(t, "--lake", lake, "--config", cfg)
}
