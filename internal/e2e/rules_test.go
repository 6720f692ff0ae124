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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/signal"
)

// rulesV1 and rulesV2 drop the same records (seq ending in 0 or 5, and
// severity below INFO, which the load generator never sends) under
// different rule names, so a reload must change nothing in what arrives.
const rulesV1 = `
logs:
  - name: drop-05-v1
    match: '{service_name="loadgen", seq=~".*[05]"}'
    action: drop
  - name: drop-debug
    action: drop
    max_severity: 4
`

const rulesV2 = `
logs:
  - name: drop-05-v2
    match: '{seq=~".*[05]", job="loadgen"}'
    action: drop
  - name: shadow-all
    action: drop
    shadow: true
`

// TestRunRulesReloadUnderLoad: a sluice run with a rules file drops the
// records a rule selects before the queue, and reloads (SIGHUP and file
// change, with an invalid file in between that must keep the old rules)
// under load lose and double nothing: every acknowledged record the rules
// keep is in the lake exactly once (the repo's reader and DuckDB), and none
// they drop is.
func TestRunRulesReloadUnderLoad(t *testing.T) {
	lakeDir := t.TempDir()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	write := func(s string) {
		t.Helper()
		// Write then rename, as editors and config management do.
		tmp := rules + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, rules); err != nil {
			t.Fatal(err)
		}
	}
	write(rulesV1)
	cfgPath := runConfig(t, lakeDir)
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, fmt.Sprintf("processors:\n  rules_file: %s\n  reload_interval: 100ms\n", rules)...)
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "validate", "--config", cfgPath); r.code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	s := startServer(t, cfgPath)

	g := newLoadGen(20)
	ctx, cancel := context.WithCancel(context.Background())
	wg := g.run(t, ctx, s.http, 4)
	step := func(d time.Duration) { time.Sleep(d) }
	step(300 * time.Millisecond)
	write("logs:\n  - {name: broken, action: explode}\n") // invalid: old rules stay
	step(300 * time.Millisecond)
	write(rulesV2)
	step(300 * time.Millisecond)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	step(300 * time.Millisecond)
	write(rulesV1)
	step(300 * time.Millisecond)
	cancel()
	wg.Wait()

	m := scrapeMetrics(t, s.admin)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := s.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("sluice run exited %d:\n%s", code, s.stderr)
	}
	if g.ackedCount() < 200 {
		t.Fatalf("only %d records acknowledged", g.ackedCount())
	}
	if v := sampleValue(m, `sluice_processor_reload_failures_total`); v < 1 {
		t.Errorf("reload failures %v, want >= 1 (the invalid file)\n%s", v, s.stderr)
	}
	if v := sampleValue(m, `sluice_processor_reloads_total`); v < 2 {
		t.Errorf("reloads %v, want >= 2", v)
	}
	if !strings.Contains(s.stderr.String(), "old rules stay in force") {
		t.Errorf("the invalid file was not logged:\n%s", s.stderr)
	}
	dropped := sampleValue(m, `sluice_processor_rule_dropped_total{rule="drop-05-v1"}`) +
		sampleValue(m, `sluice_processor_rule_dropped_total{rule="drop-05-v2"}`)
	if sampleValue(m, `sluice_processor_rule_dropped_total{rule="drop-05-v2"}`) == 0 {
		t.Errorf("rule drop-05-v2 never acted: the reload did not take effect")
	}

	check := func(reader string, counts map[int64]int) {
		t.Helper()
		g.mu.Lock()
		defer g.mu.Unlock()
		lost, doubled, leaked := 0, 0, 0
		for seq := range g.acked {
			n := counts[seq]
			drop := seq%5 == 0
			switch {
			case drop && n > 0:
				leaked++
			case !drop && n == 0:
				lost++
			case n > 1:
				doubled++
			}
		}
		for seq := range counts {
			if !g.acked[seq] && seq%5 == 0 {
				leaked++
			}
		}
		if lost+doubled+leaked > 0 {
			t.Errorf("%s: %d acknowledged records lost, %d doubled, %d dropped by the rules yet in the lake", reader, lost, doubled, leaked)
		}
	}
	counts := lakeCounts(t, lakeDir)
	check("lake reader", counts)
	if dc, ok := duckdbCounts(t, lakeDir); ok {
		check("duckdb", dc)
	}
	var wantDropped int
	g.mu.Lock()
	for seq := range g.acked {
		if seq%5 == 0 {
			wantDropped++
		}
	}
	g.mu.Unlock()
	// Requests refused or unanswered may have been processed too, so the
	// counter is at least the acknowledged dropped records.
	if int(dropped) < wantDropped {
		t.Errorf("rules counted %v dropped records, want >= %d", dropped, wantDropped)
	}
	t.Logf("acknowledged %d records, %d dropped by rules, %d in the lake", g.ackedCount(), wantDropped, len(counts))
}

func scrapeMetrics(t *testing.T, admin string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sampleValue returns the value of the sample named exactly series (name
// and labels as exposed), 0 when absent.
func sampleValue(text, series string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestRunRulesMetrics: through a real sluice run, series a rule drops never
// reach the lake, kept ones do, and a relabel's changes are what is stored
// (read back with the repo's reader and, when available, DuckDB).
func TestRunRulesMetrics(t *testing.T) {
	lakeDir := t.TempDir()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`
metrics:
  - name: no-debug
    match: 'debug_calls_total'
    action: drop
  - name: no-u3
    match: 'req_seconds{user_id="u3", job="api"}'
    action: drop
  - name: tidy
    match: '{__name__=~"req_.*"}'
    action: relabel
    relabel:
      - {action: labeldrop, regex: code}
      - {action: replace, target_label: env, replacement: prod}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := runConfig(t, lakeDir)
	cfg, _ := os.ReadFile(cfgPath)
	cfg = append(cfg, fmt.Sprintf("processors:\n  rules_file: %s\n", rules)...)
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfgPath)
	var pts []string
	for i := 0; i < 10; i++ {
		pts = append(pts, fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":%d,"attributes":[{"key":"user.id","value":{"stringValue":"u%d"}},{"key":"code","value":{"intValue":"200"}}]}`,
			time.Now().UnixNano(), i, i))
	}
	body := `{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"api"}}]},"scopeMetrics":[{"metrics":[
{"name":"req","unit":"s","gauge":{"dataPoints":[` + strings.Join(pts, ",") + `]}},
{"name":"debug.calls","sum":{"isMonotonic":true,"aggregationTemporality":2,"dataPoints":[{"timeUnixNano":"` + strconv.FormatInt(time.Now().UnixNano(), 10) + `","asInt":"7"}]}}]}]}]}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.http+"/v1/metrics", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Scope-OrgID", "rules")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d", resp.StatusCode)
	}
	m := scrapeMetrics(t, s.admin)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := s.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("sluice run exited %d:\n%s", code, s.stderr)
	}
	for series, want := range map[string]float64{
		`sluice_processor_rule_dropped_total{rule="no-debug"}`: 1,
		`sluice_processor_rule_dropped_total{rule="no-u3"}`:    1,
		`sluice_processor_rule_changed_total{rule="tidy"}`:     9,
	} {
		if v := sampleValue(m, series); v != want {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}

	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(lakeDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	segs, err := cat.List(ctx, catalog.Filter{Table: "metrics"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sg := range segs {
		f, err := lake.OpenFile(filepath.Join(lakeDir, sg.Path))
		if err != nil {
			t.Fatal(err)
		}
		var b signal.Metrics
		if err := f.ReadMetrics(&b); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for i := range b.Len() {
			name := b.String(b.Descs[b.Desc[i]].Name)
			var kv []string
			for a := b.Attr[i].Start; a < b.Attr[i].End; a++ {
				k := b.Keys.Name(b.Attrs.Key[a])
				v := b.AttrString(int(a))
				if b.Attrs.Type[a] == signal.ValueInt {
					v = strconv.FormatInt(b.AttrInt(int(a)), 10)
				}
				kv = append(kv, k+"="+v)
			}
			slices.Sort(kv)
			got = append(got, name+"{"+strings.Join(kv, ",")+"}")
		}
	}
	slices.Sort(got)
	var want []string
	for i := 0; i < 10; i++ {
		if i != 3 {
			want = append(want, fmt.Sprintf("req{env=prod,user.id=u%d}", i))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lake holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if py := os.Getenv("SLUICE_PYTHON"); py != "" {
		out, err := exec.Command(py, "-c", `import duckdb, sys
print(duckdb.connect().execute("""SELECT count(*), count(DISTINCT "attr.user.id"), count("attr.env"), sum(("attr.user.id" = 'u3')::INT)
FROM read_parquet(?, hive_partitioning=true, union_by_name=true)""", [sys.argv[1] + "/metrics/**/*.parquet"]).fetchone())`, lakeDir).CombinedOutput()
		if err != nil {
			t.Fatalf("duckdb: %v\n%s", err, out)
		}
		if g := strings.TrimSpace(string(out)); g != "(9, 9, 9, 0)" {
			t.Errorf("duckdb: (rows, users, env, u3 rows) = %s, want (9, 9, 9, 0)", g)
		}
	} else if os.Getenv("SLUICE_REQUIRE_ALL") != "" {
		t.Fatal("SLUICE_PYTHON is not set (SLUICE_REQUIRE_ALL is set, so this is a failure)")
	}
}
