package httpapi

import (
	"encoding/json"
	"fmt"
	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/query/prom"
)

// lookback_delta replaces the server's lookback for one query, as
// Prometheus reads it; ignored, a client asking for a 1m lookback got
// series that stopped 3 minutes before.
func TestLookbackDeltaParameter(t *testing.T) {
	base := server(t, prom.Limits{})
	last := start.Add(239 * 15 * time.Second)
	at := func(d time.Duration) string { return last.Add(d).Format(time.RFC3339) }
	count := func(params ...string) (int, apiResp, int) {
		code, r := get(t, base, "acme", "/api/v1/query", vals(append([]string{"query", "test_queue_depth"}, params...)...))
		var d struct{ Result []any }
		json.Unmarshal(r.Data, &d)
		return code, r, len(d.Result)
	}
	for _, c := range []struct {
		params []string
		want   int
	}{
		{[]string{"time", at(3 * time.Minute)}, 1},
		{[]string{"time", at(3 * time.Minute), "lookback_delta", "1m"}, 0},
		{[]string{"time", at(3 * time.Minute), "lookback_delta", "240"}, 1},
		{[]string{"time", at(7 * time.Minute), "lookback_delta", "10m"}, 1},
		{[]string{"time", at(7 * time.Minute)}, 0},
		{[]string{"time", at(7 * time.Minute), "lookback_delta", "0"}, 0}, // 0: the server's
	} {
		if code, r, n := count(c.params...); code != 200 || n != c.want {
			t.Errorf("%v: %d %s, %d series, want %d", c.params, code, r.Data, n, c.want)
		}
	}
	// The range query reads it too: with a 30 s lookback, evaluations
	// more than 30 s after the last point have none.
	code, r := get(t, base, "acme", "/api/v1/query_range", vals("query", "test_queue_depth", "start", at(-time.Minute), "end", at(2*time.Minute),
		"step", "60", "lookback_delta", "30s"))
	var m struct {
		Result []struct{ Values [][]any }
	}
	if json.Unmarshal(r.Data, &m); code != 200 || len(m.Result) != 1 || len(m.Result[0].Values) != 2 {
		t.Errorf("range with lookback_delta 30s: %d %s, want 2 points (at -1m and 0)", code, r.Data)
	}
	for _, bad := range []string{"x", "-1m", "NaN"} {
		if code, r, _ := count("time", at(0), "lookback_delta", bad); code != 400 || r.ErrorType != "bad_data" || !strings.Contains(r.Error, "lookback_delta") {
			t.Errorf("lookback_delta %q: %d %+v", bad, code, r)
		}
	}
}

// A timeout that is not positive is bad_data, as in Prometheus 3; sluice
// took 0 and negative numbers for "no timeout given".
func TestTimeoutMustBePositive(t *testing.T) {
	base := server(t, prom.Limits{})
	for _, to := range []string{"0", "-1", "0s"} {
		code, r := get(t, base, "acme", "/api/v1/query", vals("query", "1", "timeout", to))
		if code != 400 || r.ErrorType != "bad_data" || !strings.Contains(r.Error, "timeout") {
			t.Errorf("timeout %q: %d %+v", to, code, r)
		}
	}
	if code, r := get(t, base, "acme", "/api/v1/query", vals("query", "1", "timeout", "1.5")); code != 200 {
		t.Errorf("timeout 1.5: %d %+v", code, r)
	}
}

// Annotations name their place in the query, as Prometheus 3 writes
// them ("... (1:6)"), so that an editor can point at it.
func TestAnnotationsNamePosition(t *testing.T) {
	base := server(t, prom.Limits{})
	var r struct {
		Infos []string `json:"infos"`
	}
	b := rawGet(t, base, "/api/v1/query?query="+strings.ReplaceAll("sum(rate(test_queue_depth[5m]))", "+", "%2B")+"&time="+endTime())
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Infos) != 1 || !strings.Contains(r.Infos[0], "might not be a counter") || !strings.HasSuffix(r.Infos[0], " (1:10)") {
		t.Fatalf("infos %q, want the counter info at 1:10: %s", r.Infos, b)
	}
}

// /api/v1/status/runtimeinfo and /api/v1/status/flags answer with
// Prometheus's fields; flags give sluice's query settings under
// Prometheus's flag names.
func TestRuntimeInfoAndFlags(t *testing.T) {
	base, _ := serverWith(t, func(c *Config) { c.LookbackDelta = 3 * time.Minute; c.MaxSamples = 1234; c.Timeout = 90 * time.Second })
	var ri struct{ Data map[string]any }
	if err := json.Unmarshal(rawGet(t, base, "/api/v1/status/runtimeinfo"), &ri); err != nil {
		t.Fatal(err)
	}
	// Prometheus 3's fields, every one.
	want := []string{"startTime", "CWD", "hostname", "serverTime", "reloadConfigSuccess", "lastConfigTime", "corruptionCount",
		"goroutineCount", "GOMAXPROCS", "GOMEMLIMIT", "GOGC", "GODEBUG", "storageRetention"}
	for _, k := range want {
		if _, ok := ri.Data[k]; !ok {
			t.Errorf("runtimeinfo lacks %q: %v", k, ri.Data)
		}
	}
	if len(ri.Data) != len(want) || ri.Data["reloadConfigSuccess"] != true || ri.Data["GOMAXPROCS"].(float64) < 1 {
		t.Errorf("runtimeinfo %v", ri.Data)
	}
	var fl struct{ Data map[string]string }
	if err := json.Unmarshal(rawGet(t, base, "/api/v1/status/flags"), &fl); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"query.lookback-delta": "3m", "query.max-samples": "1234", "query.timeout": "1m30s"} {
		if fl.Data[k] != v {
			t.Errorf("flags[%q] = %q, want %q (%v)", k, fl.Data[k], v, fl.Data)
		}
	}
	keys := make([]string, 0, len(fl.Data))
	for k := range fl.Data {
		keys = append(keys, k)
	}
	if !slices.Contains(keys, "query.max-concurrency") {
		t.Errorf("flags %v", keys)
	}
}

// series, labels and label values answer an end before start with an
// empty list, as Prometheus does (its range endpoints and exemplars say
// bad_data); sluice said bad_data on all of them.
func TestMetadataEndBeforeStart(t *testing.T) {
	base := server(t, prom.Limits{})
	rev := []string{"start", endTime(), "end", start.Format(time.RFC3339)}
	for _, c := range []struct {
		path   string
		params []string
	}{
		{"/api/v1/series", []string{"match[]", "test_queue_depth"}},
		{"/api/v1/labels", nil},
		{"/api/v1/labels", []string{"match[]", "test_queue_depth"}},
		{"/api/v1/label/__name__/values", nil},
		{"/api/v1/label/job/values", []string{"match[]", "test_queue_depth"}},
	} {
		// In order the range holds data: the lists are not empty.
		if code, r := get(t, base, "acme", c.path, vals(append(c.params, "start", start.Format(time.RFC3339), "end", endTime())...)); code != 200 || string(r.Data) == "[]" {
			t.Fatalf("%s %v in order: %d %s", c.path, c.params, code, r.Data)
		}
		if code, r := get(t, base, "acme", c.path, vals(append(c.params, rev...)...)); code != 200 || string(r.Data) != "[]" {
			t.Errorf("%s %v end before start: %d %+v, want 200 []", c.path, c.params, code, r)
		}
	}
	code, r := get(t, base, "acme", "/api/v1/query_exemplars", vals(append([]string{"query", "test_queue_depth"}, rev...)...))
	if code != 400 || r.ErrorType != "bad_data" || r.Error != "end timestamp must not be before start timestamp" {
		t.Errorf("exemplars end before start: %d %+v", code, r)
	}
}

// A lake file that cannot be read is the server's fault: 500 internal,
// as Prometheus answers a storage error, on every endpoint that reads
// it; it was 422 execution, which tells a client its query was wrong.
func TestUnreadableLakeIsInternal(t *testing.T) {
	l := promtest.NewLake(t)
	l.Write(t, "acme", 0, synth([]string{"a-shop"}, []string{"/a"}, 30).JSON())
	a, err := prom.NewAdapter(prom.Options{Catalog: l.Catalog, Store: l.Store})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Adapter: a, TenantHeader: "X-Scope-OrgID"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	files, _ := filepath.Glob(filepath.Join(l.Root, "metrics", "tenant=acme", "*", "*", "*.parquet"))
	if len(files) == 0 {
		t.Fatal("no files")
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		path   string
		params url.Values
	}{
		{"/api/v1/query", vals("query", "test_queue_depth", "time", endTime())},
		{"/api/v1/query", vals("query", "sum(rate(test_requests_total[5m]))", "time", endTime())},
		{"/api/v1/query_range", vals("query", "test_queue_depth", "start", fmt.Sprint(start.Unix()), "end", endTime(), "step", "60")},
		{"/api/v1/series", vals("match[]", "test_queue_depth")},
		{"/api/v1/labels", vals()},
		{"/api/v1/label/job/values", vals()},
		{"/api/v1/label/__name__/values", vals()},
		{"/api/v1/query_exemplars", vals("query", "test_queue_depth")},
		{"/api/v1/metadata", vals()},
	} {
		code, r := get(t, srv.URL, "acme", c.path, c.params)
		if code != 500 || r.ErrorType != "internal" || !strings.Contains(r.Error, ".parquet") {
			t.Errorf("%s %v: %d %s %q, want 500 internal naming the file", c.path, c.params, code, r.ErrorType, r.Error)
		}
	}
}

// A timeout outside the engine (series, labels, the catalog) says that
// it is one and what set it; the engine's own text stays Prometheus's.
// A form body past the limit says so, not "http: request body too large".
func TestTimeoutAndBodyErrorsSayWhat(t *testing.T) {
	base := server(t, prom.Limits{})
	for _, c := range []struct {
		path   string
		params url.Values
		want   string
	}{
		{"/api/v1/series", vals("match[]", "test_queue_depth", "timeout", "0.000000001"), "query timed out (1ns, the timeout parameter): "},
		{"/api/v1/labels", vals("timeout", "0.000000001"), "query timed out (1ns, the timeout parameter): "},
		{"/api/v1/query", vals("query", "test_queue_depth", "time", endTime(), "timeout", "0.000000001"), "query timed out in "},
	} {
		code, r := get(t, base, "acme", c.path, c.params)
		if code != 503 || r.ErrorType != "timeout" || !strings.HasPrefix(r.Error, c.want) {
			t.Errorf("%s %v: %d %s %q, want 503 timeout starting %q", c.path, c.params, code, r.ErrorType, r.Error, c.want)
		}
	}
	body := "query=" + strings.Repeat("a", maxFormBody)
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/query", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if code, r := do(t, req, "acme"); code != 400 || r.ErrorType != "bad_data" || r.Error != "request body is more than 1MiB, the query API's limit for a form" {
		t.Errorf("a body past the limit: %d %+v", code, r)
	}
}

// The match[] sets of one series, labels or label values request are
// read in one scan of the lake: query.max_series counts a series that
// several sets select once, and still stops a request whose union is
// over the limit.
func TestMaxSeriesCountsMatchSetsOnce(t *testing.T) {
	base := server(t, prom.Limits{MaxSeries: 1})
	p := vals("match[]", "test_queue_depth", "match[]", `{__name__="test_queue_depth"}`, "match[]", `test_queue_depth{job!=""}`, "match[]", `test_queue_depth{job=~".+"}`)
	for _, path := range []string{"/api/v1/series", "/api/v1/labels", "/api/v1/label/job/values"} {
		if code, r := get(t, base, "acme", path, p); code != 200 {
			t.Fatalf("%s, four match[] of one series, max_series 1: %d %+v", path, code, r)
		}
	}
	if code, r := get(t, base, "acme", "/api/v1/series", p); strings.Count(string(r.Data), "test_queue_depth") != 1 {
		t.Fatalf("four match[] of one series: %d %s", code, r.Data)
	}
	p.Add("match[]", "test_requests_total")
	code, r := get(t, base, "acme", "/api/v1/labels", p)
	if code != 422 || r.ErrorType != "cost_limit" || !strings.Contains(r.Error, "query.max_series), counted over all its selectors") {
		t.Fatalf("two series over five match[], max_series 1: %d %+v", code, r)
	}
}
