package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunAggregateQueryable: a real `sluice run` with a rules file that
// aggregates one metric by a label and downsamples another; the emitted
// series flow into the queue and the lake like received ones and are
// answered by sluice's PromQL API with hand-computed values, and the
// aggregated inputs are not stored.
func TestRunAggregateQueryable(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`
metrics:
  - {name: by-path, action: aggregate, match: agg_req, interval: 1m, flush_delay: 0s, by: [path], outputs: [sum, count, max]}
  - {name: thin, action: downsample, match: agg_temp, interval: 1m, flush_delay: 0s, outputs: [avg]}
  - {name: lat-by-path, action: aggregate, match: agg_lat, interval: 1m, flush_delay: 0s, by: [path], outputs: [histogram]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := freshConfig(t, lakeDir, qaddr)
	cfg, _ := os.ReadFile(cfgPath)
	cfg = append(cfg, fmt.Sprintf("processors:\n  rules_file: %s\n", rules)...)
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfgPath)
	// One whole minute, ended three minutes ago: its interval is over, so
	// the next flush emits it.
	start := time.Now().Truncate(time.Minute).Add(-3 * time.Minute)
	end := start.Add(time.Minute)
	pt := func(at time.Duration, v float64, kv ...string) string {
		var attrs []string
		for i := 0; i < len(kv); i += 2 {
			attrs = append(attrs, fmt.Sprintf(`{"key":%q,"value":{"stringValue":%q}}`, kv[i], kv[i+1]))
		}
		return fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":%v,"attributes":[%s]}`, start.Add(at).UnixNano(), v, strings.Join(attrs, ","))
	}
	body := `{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"agg"}}]},"scopeMetrics":[{"metrics":[
{"name":"agg_req","gauge":{"dataPoints":[` + strings.Join([]string{
		pt(5*time.Second, 1, "path", "/x", "host", "a"), pt(10*time.Second, 3, "path", "/x", "host", "b"),
		pt(20*time.Second, 8, "path", "/x", "host", "a"), pt(30*time.Second, 7, "path", "/y", "host", "a")}, ",") + `]}},
{"name":"agg_temp","gauge":{"dataPoints":[` + strings.Join([]string{
		pt(0, 1, "host", "a"), pt(20*time.Second, 2, "host", "a"), pt(40*time.Second, 6, "host", "a")}, ",") + `]}},
{"name":"agg_lat","histogram":{"aggregationTemporality":2,"dataPoints":[` + strings.Join([]string{
		hpt(start, 5*time.Second, "a", `"1","2","0"`, 3, 1.5), hpt(start, 10*time.Second, "b", `"0","1","1"`, 2, 3),
		hpt(start, 20*time.Second, "a", `"2","3","1"`, 6, 4)}, ",") + `]}}]}]}]}`
	resp, err := http.Post("http://"+s.http+"/v1/metrics", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d", resp.StatusCode)
	}
	base := "http://" + qaddr
	want := map[string]float64{
		`agg_req:1m_by_path_sum{path="/x"}`:   12,
		`agg_req:1m_by_path_count{path="/x"}`: 3,
		`agg_req:1m_by_path_max{path="/x"}`:   8,
		`agg_req:1m_by_path_sum{path="/y"}`:   7,
		`agg_temp{host="a", job="agg"}`:       3,
		// Output histogram: host a's last point plus host b's, [2 3 1] + [0 1 1].
		`agg_lat:1m_by_path_histogram_bucket{path="/x", le="0.1"}`:  2,
		`agg_lat:1m_by_path_histogram_bucket{path="/x", le="1"}`:    6,
		`agg_lat:1m_by_path_histogram_bucket{path="/x", le="+Inf"}`: 8,
		`agg_lat:1m_by_path_histogram_count{path="/x"}`:             8,
		`agg_lat:1m_by_path_histogram_sum{path="/x"}`:               7,
	}
	deadline := time.Now().Add(60 * time.Second)
	for expr, w := range want {
		for {
			got := queryCount(t, base, "", expr, end)
			if got == w {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s at the interval's end = %v, want %v\n%s", expr, got, w, s.stderr)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The aggregated and downsampled inputs were not stored: only the
	// output point at the interval's end is there.
	if got := queryCount(t, base, "", `count_over_time(agg_req[5m])`, end.Add(time.Minute)); got != -1 {
		t.Errorf("agg_req inputs stored: count_over_time = %v", got)
	}
	if got := queryCount(t, base, "", `count_over_time(agg_temp[5m])`, end.Add(time.Minute)); got != 1 {
		t.Errorf("agg_temp: %v points in the lake, want the 1 downsampled", got)
	}
	m := scrapeMetrics(t, s.admin)
	for series, w := range map[string]float64{
		`sluice_processor_rule_dropped_total{rule="by-path"}`:             4,
		`sluice_processor_rule_dropped_total{rule="thin"}`:                3,
		`sluice_processor_aggregate_emitted_points_total{rule="by-path"}`: 6,
		`sluice_processor_aggregate_emitted_points_total{rule="thin"}`:    1,
	} {
		if v := sampleValue(m, series); v != w {
			t.Errorf("%s = %v, want %v", series, v, w)
		}
	}
}

// hpt is a cumulative histogram point (bounds 0.1, 1) of host on path /x
// at start+at, for TestRunAggregateQueryable.
func hpt(start time.Time, at time.Duration, host, counts string, count int, sum float64) string {
	return fmt.Sprintf(`{"timeUnixNano":"%d","count":"%d","sum":%g,"bucketCounts":[%s],"explicitBounds":[0.1,1],"attributes":[{"key":"host","value":{"stringValue":%q}},{"key":"path","value":{"stringValue":"/x"}}]}`,
		start.Add(at).UnixNano(), count, sum, counts, host)
}
