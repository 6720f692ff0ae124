package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/query/prom"
)

// A subquery without a step ([20m:]) steps by a minute, as Prometheus's
// default evaluation_interval; the engine left without the function
// panicked and the connection broke.
func TestSubqueryWithoutStep(t *testing.T) {
	base := server(t, prom.Limits{})
	at := start.Add(239 * 15 * time.Second).Format(time.RFC3339)
	for _, q := range []string{`max_over_time(test_queue_depth[20m:])`, `count_over_time(vector(1)[10m:])`} {
		code, r := get(t, base, "acme", "/api/v1/query", vals("query", q, "time", at))
		if code != 200 || r.Status != "success" {
			t.Fatalf("%s: %d %+v", q, code, r)
		}
	}
	// Ten evaluations at whole minutes in (t-10m, t].
	_, r := get(t, base, "acme", "/api/v1/query", vals("query", `count_over_time(vector(1)[10m:])`, "time", "6000"))
	if string(r.Data) != `{"resultType":"vector","result":[{"metric":{},"value":[6000,"10"]}]}` {
		t.Fatalf("count_over_time(vector(1)[10m:]): %s", r.Data)
	}
}

// /api/v1/format_query answers the expression as Prometheus prints it.
func TestFormatQuery(t *testing.T) {
	base := server(t, prom.Limits{})
	for _, send := range []func(*testing.T, string, string, string, url.Values) (int, apiResp){get, post} {
		code, r := send(t, base, "acme", "/api/v1/format_query", vals("query", `sum by(job)(rate(x{a=~"b.*"}[5m]))/ignoring(job) group_left sum(y)`))
		var s string
		if code != 200 || json.Unmarshal(r.Data, &s) != nil ||
			s != `sum by (job) (rate(x{a=~"b.*"}[5m])) / ignoring (job) group_left () sum(y)` {
			t.Fatalf("%d %+v", code, r)
		}
		if code, r := send(t, base, "acme", "/api/v1/format_query", vals("query", "sum(")); code != 400 || r.ErrorType != "bad_data" {
			t.Fatalf("sum(: %d %+v", code, r)
		}
	}
}

// rawGet is the body of a GET of tenant acme.
func rawGet(t *testing.T, base, pathQuery string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+pathQuery, nil)
	req.Header.Set("X-Scope-OrgID", "acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", pathQuery, resp.StatusCode, b)
	}
	return b
}

// Series of several match[] come in label order, as Prometheus merges
// them, so a limit keeps the first ones of that order; a cut list warns
// as Prometheus's does.
func TestSeriesOrderAndLimitWarning(t *testing.T) {
	base := server(t, prom.Limits{})
	var all, cut struct {
		Data     []map[string]string `json:"data"`
		Warnings []string            `json:"warnings"`
	}
	both := url.Values{"match[]": {"test_requests_total", "test_queue_depth"}}
	if err := json.Unmarshal(rawGet(t, base, "/api/v1/series?"+both.Encode()), &all); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range all.Data {
		names = append(names, m["__name__"])
	}
	if len(names) < 2 || !slices.IsSorted(names) || names[0] != "test_queue_depth" || all.Warnings != nil {
		t.Fatalf("series of two match[] not in label order: %v %v", names, all.Warnings)
	}
	both.Set("limit", "1")
	body := rawGet(t, base, "/api/v1/series?"+both.Encode())
	if err := json.Unmarshal(body, &cut); err != nil {
		t.Fatal(err)
	}
	if len(cut.Data) != 1 || cut.Data[0]["__name__"] != "test_queue_depth" || !slices.Equal(cut.Warnings, []string{"results truncated due to limit"}) {
		t.Fatalf("limit 1: %s", body)
	}
	for _, path := range []string{"/api/v1/labels", "/api/v1/label/__name__/values"} {
		var full, one struct {
			Data     []string `json:"data"`
			Warnings []string `json:"warnings"`
		}
		json.Unmarshal(rawGet(t, base, path), &full)
		json.Unmarshal(rawGet(t, base, path+"?limit=1"), &one)
		if len(full.Data) < 2 || full.Warnings != nil || !slices.Equal(one.Data, full.Data[:1]) || len(one.Warnings) != 1 {
			t.Fatalf("%s: %+v, limit 1: %+v", path, full, one)
		}
	}
}

// A query that panics gives its slot back: with one slot and none
// waiting, the next query is answered, not refused with 429.
func TestPanicReleasesSlot(t *testing.T) {
	base, h := serverWith(t, func(c *Config) { c.MaxConcurrency, c.MaxQueued = 1, -1 })
	boom := h.limited(func(*http.Request, string) (any, error) { panic("boom") })
	for range 3 {
		func() {
			defer func() { _ = recover() }()
			req := httptest.NewRequest(http.MethodGet, "/api/v1/query", nil)
			boom(req, "acme")
		}()
	}
	if code, r := get(t, base, "acme", "/api/v1/query", vals("query", "1", "time", "1000")); code != 200 {
		t.Fatalf("after panics: %d %+v", code, r)
	}
}

// A query's limit keeps that many series of a vector or matrix and warns
// when it cuts, as Prometheus 3; rules and alerts are empty lists.
func TestQueryLimitRulesAlerts(t *testing.T) {
	base := server(t, prom.Limits{})
	var a struct {
		Data struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
		Warnings []string `json:"warnings"`
	}
	for _, c := range []struct {
		path string
		v    url.Values
		n    int
		cut  bool
	}{
		{"/api/v1/query", vals("query", `{__name__=~"test_.*"}`, "time", endTime(), "limit", "1"), 1, true},
		{"/api/v1/query", vals("query", `{__name__=~"test_.*"}`, "time", endTime(), "limit", "100"), -1, false},
		{"/api/v1/query_range", vals("query", `{__name__=~"test_.*"}`, "start", endTime(), "end", endTime(), "step", "60", "limit", "1"), 1, true},
	} {
		a.Warnings = nil
		if err := json.Unmarshal(rawGet(t, base, c.path+"?"+c.v.Encode()), &a); err != nil {
			t.Fatal(err)
		}
		if n := len(a.Data.Result); (c.n < 0 && n < 2) || (c.n >= 0 && n != c.n) || slices.Contains(a.Warnings, "results truncated due to limit") != c.cut {
			t.Errorf("%s %v: %d series, warnings %q", c.path, c.v, len(a.Data.Result), a.Warnings)
		}
	}
	if code, r := get(t, base, "acme", "/api/v1/query", vals("query", "1", "limit", "-1")); code != 400 || r.ErrorType != "bad_data" {
		t.Errorf("limit -1: %d %+v", code, r)
	}
	for path, want := range map[string]string{"/api/v1/rules": `{"groups":[]}`, "/api/v1/alerts": `{"alerts":[]}`} {
		if code, r := get(t, base, "acme", path, nil); code != 200 || string(r.Data) != want {
			t.Errorf("%s: %d %s", path, code, r.Data)
		}
	}
}
