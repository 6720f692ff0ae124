package e2e

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
)

// TestQueryServerAdmin: `sluice query-server --admin-addr` serves the
// admin server of `sluice run` over its own registry: /metrics with the
// query API's requests by endpoint and code, their durations, the
// admission gauges and the listener's connection counters, in a format
// `promtool check metrics` accepts, and /healthz and /readyz. Without the
// flag there is no admin address.
func TestQueryServerAdmin(t *testing.T) {
	tool := promtool(t)
	lake := t.TempDir()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	in := filepath.Join(t.TempDir(), "synth.json")
	synth := promtest.Synth{Start: t0, Interval: 15 * time.Second, Points: 40, Services: []string{"checkout"},
		Routes: []string{"/a"}, CounterStep: 1, Bounds: []float64{1}, HistStep: []int{1, 1}}
	if err := os.WriteFile(in, synth.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "ingest", "--lake", lake, "--progress", "never", in); r.code != 0 {
		t.Fatalf("ingest exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if a := startQueryServerAddrs(t, "--lake", lake); a["admin"] != "" {
		t.Errorf("no --admin-addr, yet admin=%s", a["admin"])
	}
	addrs := startQueryServerAddrs(t, "--lake", lake, "--admin-addr", "127.0.0.1:0")
	q, admin := "http://"+addrs["query"], "http://"+addrs["admin"]
	if addrs["admin"] == "" || addrs["admin"] == addrs["query"] {
		t.Fatalf("listening line fields %v: want an admin address of its own", addrs)
	}
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	at := url.Values{"time": {t0.Add(5 * time.Minute).Format(time.RFC3339)}}
	for range 3 {
		if code, body := get(q + "/api/v1/query?query=test_queue_depth&" + at.Encode()); code != 200 {
			t.Fatalf("query: %d %s", code, body)
		}
	}
	if code, _ := get(q + "/api/v1/query?query=sum("); code != 400 {
		t.Fatalf("bad query: %d", code)
	}
	if code, _ := get(q + "/api/v1/labels"); code != 200 {
		t.Fatalf("labels: %d", code)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _ := get(admin + p); code != 200 {
			t.Errorf("%s: %d", p, code)
		}
	}
	if code, _ := get(admin + "/debug/pprof/"); code != 404 {
		t.Errorf("/debug/pprof/ without admin.pprof: %d, want 404", code)
	}
	code, m := get(admin + "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, m)
	}
	for series, want := range map[string]float64{
		`sluice_query_requests_total{code="200",endpoint="query"}`:            3,
		`sluice_query_requests_total{code="400",endpoint="query"}`:            1,
		`sluice_query_requests_total{code="200",endpoint="labels"}`:           1,
		`sluice_query_request_duration_seconds_count{endpoint="query"}`:       4,
		`sluice_query_request_duration_seconds_count{endpoint="query_range"}`: 0,
		`sluice_query_running`: 0,
		`sluice_query_queued`:  0,
		`sluice_http_connections_refused_total{server="query API"}`: 0,
	} {
		if !strings.Contains(m, "\n"+series+" ") {
			t.Errorf("/metrics lacks %s", series)
			continue
		}
		if got := sampleValue(m, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	for _, name := range []string{"sluice_query_rows_scanned_total", "sluice_query_files_opened_total", "sluice_query_refused_total", "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(m, "\n# TYPE "+name+" ") {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	cmd := exec.Command(tool, "check", "metrics")
	cmd.Stdin = strings.NewReader(m)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
