package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
)

// telemetrygenBin finds the OpenTelemetry telemetrygen binary:
// $SLUICE_TELEMETRYGEN, .tools/bin in the module, or PATH.
func telemetrygenBin(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("SLUICE_TELEMETRYGEN"); p != "" {
		return p
	}
	if root, err := corpustest.ModuleRoot(); err == nil {
		p := filepath.Join(root, ".tools", "bin", "telemetrygen")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("telemetrygen"); err == nil {
		return p
	}
	corpustest.Missing(tb, "the telemetrygen binary ($SLUICE_TELEMETRYGEN, .tools/bin or PATH; "+
		"go install github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@v0.161.0)")
	return ""
}

// tgChildSpans is the number of child spans per generated trace; each trace
// is a root span plus its children.
const tgChildSpans = 3

// tgRun is one telemetrygen invocation.
type tgRun struct {
	transport string // "grpc" or "http"
	signal    string // logs, metrics or traces: the telemetrygen command and the lake table
	tenant    string // sent in X-Scope-OrgID; "" sends no header (default tenant)
	n         int    // --logs, --metrics or --traces
}

func (r tgRun) lakeTenant() string {
	if r.tenant == "" {
		return "default" // runConfig keeps receivers.otlp.default_tenant
	}
	return r.tenant
}

func (r tgRun) args(s *server) []string {
	addr := s.grpc
	a := []string{r.signal, "--otlp-insecure", "--workers", "1", "--rate", "0", "--service", "telemetrygen"}
	if r.transport == "http" {
		addr = s.http
		a = append(a, "--otlp-http")
	}
	a = append(a, "--otlp-endpoint", addr, "--"+r.signal, strconv.Itoa(r.n))
	if r.signal == "traces" {
		a = append(a, "--child-spans", strconv.Itoa(tgChildSpans))
	}
	if r.tenant != "" {
		a = append(a, "--otlp-header", fmt.Sprintf("X-Scope-OrgID=%q", r.tenant))
	}
	return a
}

// tgGenerated matches telemetrygen's per-worker summary, e.g.
// `logs generated	{"worker": 0, "logs": 100}`.
var tgGenerated = regexp.MustCompile(`(?:logs|metrics|traces) generated\s+\{"worker": \d+, "(logs|metrics|traces)": (\d+)\}`)

// reportedRecords returns the lake rows the telemetrygen output reports as
// sent: log records, data points (one per gauge) or spans. It runs on the
// telemetrygen goroutines, so it returns an error rather than failing.
func reportedRecords(signal string, out []byte) (int, error) {
	total, workers := 0, 0
	for _, m := range tgGenerated.FindAllStringSubmatch(string(out), -1) {
		if m[1] != signal {
			return 0, fmt.Errorf("telemetrygen %s reported %q", signal, m[0])
		}
		n, _ := strconv.Atoi(m[2])
		total += n
		workers++
	}
	if workers != 1 {
		return 0, fmt.Errorf("telemetrygen %s: %d worker summaries, want 1:\n%s", signal, workers, tailString(out, 3000))
	}
	if signal == "traces" {
		total *= 1 + tgChildSpans
	}
	return total, nil
}

type signalTenant struct{ signal, tenant string }

// promSample matches one labelled sample of the text exposition format;
// promLabel one label in it.
var (
	promSample = regexp.MustCompile(`(?m)^(sluice_\w+)\{([^}]*)\} (\S+)$`)
	promLabel  = regexp.MustCompile(`(\w+)="([^"]*)"`)
)

// scrapeBySignalTenant sums the samples of one metric per signal and
// tenant (over any other label, such as reason), leaving out zeros.
func scrapeBySignalTenant(t *testing.T, admin, metric string) map[signalTenant]int {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatalf("scrape /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape /metrics: %d %v", resp.StatusCode, err)
	}
	got := map[signalTenant]int{}
	seen := false
	for _, m := range promSample.FindAllStringSubmatch(string(body), -1) {
		if m[1] != metric {
			continue
		}
		seen = true
		var k signalTenant
		for _, l := range promLabel.FindAllStringSubmatch(m[2], -1) {
			switch l[1] {
			case "signal":
				k.signal = l[2]
			case "tenant":
				k.tenant = l[2]
			}
		}
		v, err := strconv.ParseFloat(m[3], 64)
		// tenant="" counts requests of tenants refused or not admitted
		// (receivers.otlp.max_tenants); it is there from the start, at 0.
		if err != nil || k.signal == "" {
			t.Fatalf("metric sample %q: %v", m[0], err)
		}
		if v != 0 {
			got[k] += int(v)
		}
	}
	if !seen {
		t.Fatalf("/metrics has no %s series", metric)
	}
	return got
}

// duckdbTenantCounts counts rows per table and tenant over every Parquet
// file in the lake directory with DuckDB (so it also sees files the catalog
// does not list), and how many of them carry service_name 'telemetrygen'.
func duckdbTenantCounts(t *testing.T, lakeDir string) (rows, fromTG map[signalTenant]int) {
	t.Helper()
	script := `import duckdb, glob, sys
con = duckdb.connect()
for table in ("logs", "metrics", "traces"):
    pattern = sys.argv[1] + "/" + table + "/**/*.parquet"
    if not glob.glob(pattern, recursive=True):
        continue
    for tenant, n, tg in con.execute(
            "SELECT tenant, count(*), count(*) FILTER (WHERE service_name = 'telemetrygen') "
            "FROM read_parquet(?, hive_partitioning=true) GROUP BY tenant", [pattern]).fetchall():
        print(table, tenant, n, tg)
`
	out, err := exec.Command(python(t), "-c", script, lakeDir).CombinedOutput()
	if err != nil {
		t.Fatalf("duckdb: %v\n%s", err, out)
	}
	rows, fromTG = map[signalTenant]int{}, map[signalTenant]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("duckdb output line %q", line)
		}
		n, err1 := strconv.Atoi(f[2])
		tg, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			t.Fatalf("duckdb output line %q", line)
		}
		k := signalTenant{f[0], f[1]}
		rows[k], fromTG[k] = n, tg
	}
	return rows, fromTG
}

// lsTotalRows returns the row total of `sluice lake ls` for one table and
// tenant, read from its footer "N segments ROWS ...".
func lsTotalRows(t *testing.T, lakeDir, table, tenant string) int {
	t.Helper()
	r := run(t, "lake", "ls", "--lake", lakeDir, "--table", table, "--tenant", tenant)
	if r.code != 0 {
		t.Fatalf("lake ls --table %s --tenant %s: exit %d\n%s%s", table, tenant, r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	last := strings.Fields(lines[len(lines)-1])
	if len(last) < 3 || last[1] != "segments" {
		t.Fatalf("unexpected lake ls footer %q", lines[len(lines)-1])
	}
	n, err := strconv.Atoi(last[2])
	if err != nil {
		t.Fatalf("lake ls footer %q: %v", lines[len(lines)-1], err)
	}
	return n
}

func equalCounts(a, b map[signalTenant]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestRunTelemetrygen drives the real `sluice run` with the real
// OpenTelemetry load generator: logs, metrics and traces over gRPC and
// HTTP, each transport under its own tenant plus one run without the tenant
// header, all at once. After a SIGTERM the lake must hold exactly what
// telemetrygen reports as sent, per table and tenant, read with DuckDB over
// the directory and through the catalog with `sluice lake ls`; /metrics,
// scraped before the stop, must count the same records as accepted.
func TestRunTelemetrygen(t *testing.T) {
	bin := telemetrygenBin(t)
	python(t) // fail or skip before starting anything
	lakeDir := t.TempDir()
	s := startServer(t, runConfig(t, lakeDir))

	// Counts differ per transport so that misrouting cannot go unnoticed;
	// 350 is not a multiple of telemetrygen's batch of 100.
	runs := []tgRun{
		{"grpc", "logs", "tg-grpc", 600},
		{"grpc", "metrics", "tg-grpc", 300},
		{"grpc", "traces", "tg-grpc", 100},
		{"http", "logs", "tg-http", 350},
		{"http", "metrics", "tg-http", 250},
		{"http", "traces", "tg-http", 70},
		{"grpc", "logs", "", 77},
	}
	want := map[signalTenant]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := r.args(s)
			out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
			if err != nil {
				t.Errorf("telemetrygen %v: %v\n%s", args, err, tailString(out, 3000))
				return
			}
			n, err := reportedRecords(r.signal, out)
			if err != nil {
				t.Error(err)
				return
			}
			asked := r.n
			if r.signal == "traces" {
				asked *= 1 + tgChildSpans
			}
			if n != asked {
				t.Errorf("telemetrygen %v reports %d records sent, want %d", args, n, asked)
			}
			mu.Lock()
			want[signalTenant{r.signal, r.lakeTenant()}] += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("telemetrygen reports as sent: %v", want)

	// telemetrygen exits after its exporter got every answer, so the
	// accepted counters are final now. Everything accepted reaches the lake
	// writer within a few flush intervals.
	accepted := scrapeBySignalTenant(t, s.admin, "sluice_pipeline_accepted_records_total")
	if !equalCounts(accepted, want) {
		t.Errorf("/metrics sluice_pipeline_accepted_records_total = %v, want %v", accepted, want)
	}
	for _, metric := range []string{"sluice_pipeline_rejected_records_total", "sluice_pipeline_invalid_requests_total"} {
		if got := scrapeBySignalTenant(t, s.admin, metric); len(got) != 0 {
			t.Errorf("/metrics %s = %v, want none", metric, got)
		}
	}
	var written map[signalTenant]int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if written = scrapeBySignalTenant(t, s.admin, "sluice_lake_written_rows_total"); equalCounts(written, want) {
			break
		}
	}
	if !equalCounts(written, want) {
		t.Errorf("/metrics sluice_lake_written_rows_total = %v after 30s, want %v", written, want)
	}

	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := s.wait(t, runShutdownTimeout+10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, s.stderr)
	}

	rows, fromTG := duckdbTenantCounts(t, lakeDir)
	if !equalCounts(rows, want) {
		t.Errorf("DuckDB over the lake directory counts %v, want %v", rows, want)
	}
	if !equalCounts(fromTG, want) {
		t.Errorf("DuckDB counts %v rows with service_name 'telemetrygen', want %v", fromTG, want)
	}
	total := 0
	for k, n := range want {
		total += n
		if got := lsTotalRows(t, lakeDir, k.signal, k.tenant); got != n {
			t.Errorf("lake ls --table %s --tenant %s: %d rows, want %d", k.signal, k.tenant, got, n)
		}
	}
	assertTotalRows(t, run(t, "lake", "ls", "--lake", lakeDir).stdout, total)
	t.Logf("lake holds exactly the %d records telemetrygen sent, per table and tenant (DuckDB, lake ls, /metrics)", total)
}

func tailString(b []byte, n int) string {
	if len(b) > n {
		return "..." + string(b[len(b)-n:])
	}
	return string(b)
}
