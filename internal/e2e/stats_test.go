package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
)

// getJSON GETs base+path as tenant and decodes the Prometheus envelope's
// data into v.
func getJSON(t *testing.T, base, path, tenant string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("X-Scope-OrgID", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("GET %s: %d %v %s", path, resp.StatusCode, err, body.Error)
	}
	if err := json.Unmarshal(body.Data, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

type tsdbStat struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

type tsdbStatus struct {
	HeadStats struct {
		NumSeries uint64 `json:"numSeries"`
		MinTime   int64  `json:"minTime"`
		MaxTime   int64  `json:"maxTime"`
	} `json:"headStats"`
	SeriesCountByMetricName     []tsdbStat `json:"seriesCountByMetricName"`
	LabelValueCountByLabelName  []tsdbStat `json:"labelValueCountByLabelName"`
	MemoryInBytesByLabelName    []tsdbStat `json:"memoryInBytesByLabelName"`
	SeriesCountByLabelValuePair []tsdbStat `json:"seriesCountByLabelValuePair"`
}

// checkTSDBAgainstSeries compares /api/v1/status/tsdb of tenant with the
// series the query API listed: per metric name, per label (distinct
// values) and per pair. It returns the series count per metric name.
func checkTSDBAgainstSeries(t *testing.T, base, tenant string, series []map[string]string) map[string]uint64 {
	t.Helper()
	byName := map[string]uint64{}
	values := map[string]map[string]bool{}
	pairs := map[string]uint64{}
	for _, ls := range series {
		byName[ls["__name__"]]++
		for k, v := range ls {
			if values[k] == nil {
				values[k] = map[string]bool{}
			}
			values[k][v] = true
			pairs[k+"="+v]++
		}
	}
	var st tsdbStatus
	getJSON(t, base, "/api/v1/status/tsdb?limit=1000", tenant, &st)
	if st.HeadStats.NumSeries != uint64(len(series)) {
		t.Errorf("numSeries %d, the query API lists %d", st.HeadStats.NumSeries, len(series))
	}
	check := func(what string, got []tsdbStat, want map[string]uint64) {
		t.Helper()
		g := map[string]uint64{}
		for _, s := range got {
			g[s.Name] = s.Value
		}
		if len(g) != len(want) {
			t.Errorf("%s: %d entries, want %d: %v vs %v", what, len(g), len(want), g, want)
		}
		for k, v := range want {
			if g[k] != v {
				t.Errorf("%s[%s] = %d, want %d", what, k, g[k], v)
			}
		}
	}
	check("seriesCountByMetricName", st.SeriesCountByMetricName, byName)
	counts := map[string]uint64{}
	for k, vs := range values {
		counts[k] = uint64(len(vs))
	}
	check("labelValueCountByLabelName", st.LabelValueCountByLabelName, counts)
	check("seriesCountByLabelValuePair", st.SeriesCountByLabelValuePair, pairs)
	return byName
}

// TestRunStatusTSDBAndTop: after sluice run ingested known series,
// /api/v1/status/tsdb as Grafana asks for it gives exactly the series and
// label values the query API lists (per metric name, per label, per
// pair), only for the request's tenant; and `sluice top --once` prints
// the tenant and its metrics, and what the rule did per metric.
func TestRunStatusTSDBAndTop(t *testing.T) {
	lakeDir := t.TempDir()
	cfg := runConfig(t, lakeDir)
	qaddr := freePort(t)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("query:\n  addr: \"\"\n"), []byte("query:\n  addr: "+qaddr+"\n"), 1)
	// A shadow rule counts what it would drop and changes nothing: top
	// shows it under rules.
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("metrics:\n  - {name: would-drop-depth, match: test_queue_depth, action: drop, shadow: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b = append(b, "processors:\n  rules_file: "+rules+"\n"...)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg)

	t0 := time.Now().Add(-time.Hour).Truncate(time.Minute)
	synth := promtest.Synth{Start: t0, Interval: 15 * time.Second, Points: 20, Services: []string{"checkout", "cart"},
		Routes: []string{"/a", "/b", "/c"}, CounterStep: 1, Bounds: []float64{0.1, 1}, HistStep: []int{1, 1, 1}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.http+"/v1/metrics", bytes.NewReader(synth.JSON()))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Scope-OrgID", "acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d", resp.StatusCode)
	}
	base := "http://" + qaddr

	// What the query API lists (the unflushed tail shows it at once).
	// 2 services × 3 routes × (gauge, counter, histogram with 3 buckets,
	// _sum and _count) = 42 series; wait until the query API lists them.
	var series []map[string]string
	for deadline := time.Now().Add(60 * time.Second); ; {
		series = nil
		getJSON(t, base, "/api/v1/series?"+url.Values{"match[]": {`{__name__=~".+"}`},
			"start": {t0.Add(-time.Minute).Format(time.RFC3339)}, "end": {time.Now().Format(time.RFC3339)}}.Encode(), "acme", &series)
		if len(series) == 42 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("query API lists %d series, want 42\n%s", len(series), s.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	byName := checkTSDBAgainstSeries(t, base, "acme", series)
	pairs := map[string]bool{}
	for _, ls := range series {
		for k, v := range ls {
			pairs[k+"="+v] = true
		}
	}
	var st tsdbStatus
	getJSON(t, base, "/api/v1/status/tsdb?limit=1000", "acme", &st)
	if want := t0.UnixMilli(); st.HeadStats.MinTime != want {
		t.Errorf("minTime %d, want %d", st.HeadStats.MinTime, want)
	}

	// Grafana's default request: the 10 largest of each, largest first.
	var top10 tsdbStatus
	getJSON(t, base, "/api/v1/status/tsdb", "acme", &top10)
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if byName[names[i]] != byName[names[j]] {
			return byName[names[i]] > byName[names[j]]
		}
		return names[i] < names[j]
	})
	if len(top10.SeriesCountByLabelValuePair) != min(10, len(pairs)) || top10.SeriesCountByMetricName[0].Name != names[0] {
		t.Errorf("default limit: %d pairs, first metric %v, want %s", len(top10.SeriesCountByLabelValuePair), top10.SeriesCountByMetricName[0], names[0])
	}
	var other tsdbStatus
	getJSON(t, base, "/api/v1/status/tsdb", "globex", &other)
	if other.HeadStats.NumSeries != 0 || len(other.SeriesCountByMetricName) != 0 {
		t.Errorf("tenant globex sees %+v", other)
	}

	r := run(t, "top", "--once", "--interval", "200ms", "--url", base)
	if r.code != 0 {
		t.Fatalf("sluice top --once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"sluice top", "otlp/http", "acme", "test_queue_depth", "checkpoints", "would-drop-depth", "LABELS BY DISTINCT VALUES", "http_route"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("sluice top --once lacks %q:\n%s", want, r.stdout)
		}
	}
	// The shadow rule matched the depth series' points and would have
	// dropped them all.
	hdr := regexp.MustCompile(`(?m)^RULE .*$`).FindString(r.stdout)
	row := regexp.MustCompile(`(?m)^would-drop-depth .*$`).FindString(r.stdout)
	effects := map[string]string{}
	if h, v := strings.Fields(hdr), strings.Fields(row); len(h) == len(v) {
		for i := range h {
			effects[h[i]] = v[i]
		}
	}
	if effects["MATCHED"] != "120" || effects["DROPPED"] != "120" || effects["CHANGED"] != "0" {
		t.Errorf("rules section: %v, want matched 120, dropped 120 (2 services × 3 routes × 20 points), changed 0:\n%s", effects, r.stdout)
	}
	// ... and its per-metric line: every one of them, of tenant acme (a
	// drop rule has no limit: none over it).
	if !regexp.MustCompile(`(?m)^METRICS OF would-drop-depth +TENANT +DROPPED +CHANGED +OVER LIMIT +DROPPED/S +CHANGED/S$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^  test_queue_depth +acme +120 +0 +0 +\S+ +\S+$`).MatchString(r.stdout) {
		t.Errorf("rules section lacks would-drop-depth's line for acme's test_queue_depth (dropped 120, changed 0, over limit 0):\n%s", r.stdout)
	}
	if r := run(t, "top", "--once", "--url", "http://"+freePort(t)); r.code == 0 || !strings.Contains(r.stderr, "/api/v1/status/sluice") {
		t.Errorf("top against nothing: exit %d %s", r.code, r.stderr)
	}
}

// TestQueryServerStatusTSDBFromLake: `sluice query-server` does not see
// data arrive, so its /api/v1/status/tsdb counts the lake's series with a
// point in the last 2 × stats.window: exactly the series /api/v1/series
// lists over that window, of the request's tenant only, and nothing of
// data older than the window.
func TestQueryServerStatusTSDBFromLake(t *testing.T) {
	lakeDir := t.TempDir()
	dir := t.TempDir()
	now := time.Now()
	for i, s := range []promtest.Synth{
		// Recent: inside the default window (2 × 5m).
		{Start: now.Add(-4 * time.Minute).Truncate(time.Second), Interval: 15 * time.Second, Points: 8, Services: []string{"checkout", "cart"},
			Routes: []string{"/a", "/b", "/c"}, CounterStep: 1, Bounds: []float64{0.1, 1}, HistStep: []int{1, 1, 1}},
		// Old: an hour ago, another service; not counted.
		{Start: now.Add(-time.Hour).Truncate(time.Second), Interval: 15 * time.Second, Points: 8, Services: []string{"legacy"},
			Routes: []string{"/old"}, CounterStep: 1, Bounds: []float64{0.1, 1}, HistStep: []int{1, 1, 1}},
	} {
		f := filepath.Join(dir, fmt.Sprintf("m%d.json", i))
		if err := os.WriteFile(f, s.JSON(), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := run(t, "ingest", "--lake", lakeDir, "--tenant", "acme", "--progress", "never", f); r.code != 0 {
			t.Fatalf("ingest: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	cfg := writeConfig(t, fmt.Sprintf("receivers:\n  otlp:\n    tenant_header: X-Scope-OrgID\nlake:\n  root: %s\n", lakeDir))
	base := "http://" + startQueryServer(t, "--config", cfg)

	var series []map[string]string
	getJSON(t, base, "/api/v1/series?"+url.Values{"match[]": {`{__name__=~".+"}`},
		"start": {now.Add(-10 * time.Minute).Format(time.RFC3339)}, "end": {time.Now().Format(time.RFC3339)}}.Encode(), "acme", &series)
	// 2 services × 3 routes × (gauge, counter, histogram: 3 buckets, _sum, _count).
	if len(series) != 42 {
		t.Fatalf("the query API lists %d series in the window, want 42", len(series))
	}
	checkTSDBAgainstSeries(t, base, "acme", series)
	var st tsdbStatus
	getJSON(t, base, "/api/v1/status/tsdb?limit=1000", "acme", &st)
	for _, p := range st.SeriesCountByLabelValuePair {
		if strings.Contains(p.Name, "legacy") {
			t.Errorf("data older than the window is counted: %v", p)
		}
	}
	var other tsdbStatus
	getJSON(t, base, "/api/v1/status/tsdb", "globex", &other)
	if other.HeadStats.NumSeries != 0 || len(other.SeriesCountByMetricName) != 0 {
		t.Errorf("tenant globex sees %+v", other)
	}
}
