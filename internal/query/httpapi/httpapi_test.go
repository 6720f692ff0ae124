package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/query/prom"
	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
)

var start = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func synth(services, routes []string, step float64) promtest.Synth {
	return promtest.Synth{Start: start, Interval: 15 * time.Second, Points: 240, Services: services, Routes: routes,
		CounterStep: step, Bounds: []float64{0.1, 0.5, 1}, HistStep: []int{1, 2, 1, 0}}
}

// server starts the API on 127.0.0.1:0 over a lake with tenants "acme" and
// "globex" holding the same metric names with different services, routes
// and values; globex also has a gauge with a label acme does not have.
func server(t *testing.T, lim prom.Limits) string {
	t.Helper()
	base, _ := serverWith(t, func(c *Config) { c.Limits = lim })
	return base
}

// serverWith is server with the handler's Config adjusted by set.
func serverWith(t *testing.T, set func(*Config)) (string, *Handler) {
	t.Helper()
	l := promtest.NewLake(t)
	l.Write(t, "acme", 0, synth([]string{"a-shop"}, []string{"/a"}, 30).JSON())
	secret := fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[%s]},"scopeMetrics":[{"metrics":[
		{"name":"test.queue.depth","gauge":{"dataPoints":[{"attributes":[%s],"timeUnixNano":"%d","asDouble":99}]}}]}]}]}`,
		promtest.Attr("service.name", "g-shop"), promtest.Attr("secret.key", "s3"), start.Add(time.Minute).UnixNano())
	l.Write(t, "globex", 0, synth([]string{"g-shop"}, []string{"/g1", "/g2"}, 60).JSON(), []byte(secret))
	a, err := prom.NewAdapter(prom.Options{Catalog: l.Catalog, Store: l.Store})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Adapter: a, TenantHeader: "X-Scope-OrgID", DefaultTenant: "default"}
	set(&cfg)
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, h
}

type apiResp struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

func get(t *testing.T, base, tenant, path string, params url.Values) (int, apiResp) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path+"?"+params.Encode(), nil)
	return do(t, req, tenant)
}

func post(t *testing.T, base, tenant, path string, params url.Values) (int, apiResp) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(params.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return do(t, req, tenant)
}

func do(t *testing.T, req *http.Request, tenant string) (int, apiResp) {
	t.Helper()
	if tenant != "" {
		req.Header.Set("X-Scope-OrgID", tenant)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r apiResp
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s %s: response %q is not JSON: %v", req.Method, req.URL, b, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	return resp.StatusCode, r
}

func vals(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v
}

func endTime() string { return fmt.Sprint(start.Add(239 * 15 * time.Second).Unix()) }

func TestErrors(t *testing.T) {
	base := server(t, prom.Limits{MaxSeries: 1})
	rfc := start.Format(time.RFC3339)
	for _, c := range []struct {
		name, path string
		params     url.Values
		tenant     string
		code       int
		typ, msg   string
	}{
		{"invalid promql", "/api/v1/query", vals("query", "sum(rate(x[5m])"), "acme", 400, "bad_data", "parse error"},
		{"empty query", "/api/v1/query", vals("query", ""), "acme", 400, "bad_data", "empty query"},
		{"bad time", "/api/v1/query", vals("query", "up", "time", "yesterday"), "acme", 400, "bad_data", "cannot parse"},
		{"end before start", "/api/v1/query_range", vals("query", "up", "start", "2000", "end", "1000", "step", "15"), "acme", 400, "bad_data", "end timestamp must not be before start time"},
		{"zero step", "/api/v1/query_range", vals("query", "up", "start", "1000", "end", "2000", "step", "0"), "acme", 400, "bad_data", "zero or negative"},
		{"too many points", "/api/v1/query_range", vals("query", "up", "start", "0", "end", "200000", "step", "1s"), "acme", 400, "bad_data", "maximum resolution of 11,000 points"},
		{"missing step", "/api/v1/query_range", vals("query", "up", "start", rfc, "end", rfc), "acme", 400, "bad_data", "step"},
		{"invalid tenant", "/api/v1/query", vals("query", "up"), "no/such tenant", 400, "bad_data", "invalid tenant"},
		{"series without match", "/api/v1/series", vals(), "acme", 400, "bad_data", "no match[]"},
		{"bad match", "/api/v1/series", vals("match[]", "{"), "acme", 400, "bad_data", "match[]"},
		{"series limit", "/api/v1/query", vals("query", "test_queue_depth", "time", endTime()), "globex", 422, "cost_limit", "query.max_series"},
		{"bad label name", "/api/v1/label/%FF/values", vals(), "acme", 400, "bad_data", "invalid label name"},
	} {
		code, r := get(t, base, c.tenant, c.path, c.params)
		if code != c.code || r.Status != "error" || r.ErrorType != c.typ || !strings.Contains(r.Error, c.msg) {
			t.Errorf("%s: got %d %s %q %q, want %d %s containing %q", c.name, code, r.Status, r.ErrorType, r.Error, c.code, c.typ, c.msg)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, base+"/api/v1/query?query=up", nil)
	if code, _ := do(t, req, "acme"); code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d", code)
	}
}

func TestSamplesAndBytesLimits(t *testing.T) {
	for _, lim := range []prom.Limits{{MaxSamples: 10}, {MaxBytes: 10}} {
		base := server(t, lim)
		code, r := get(t, base, "acme", "/api/v1/query", vals("query", "sum(rate(test_requests_total[1h]))", "time", endTime()))
		if code != 422 || r.ErrorType != "cost_limit" || !strings.Contains(r.Error, "query.max_") {
			t.Errorf("limits %+v: %d %s %q", lim, code, r.ErrorType, r.Error)
		}
	}
}

type vectorResult struct {
	ResultType string `json:"resultType"`
	Result     []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
		Values [][2]any          `json:"values"`
	} `json:"result"`
}

func TestQueryGETAndPOST(t *testing.T) {
	base := server(t, prom.Limits{})
	for _, send := range []func(*testing.T, string, string, string, url.Values) (int, apiResp){get, post} {
		code, r := send(t, base, "acme", "/api/v1/query", vals("query", `sum by (service_name) (rate(test_requests_total[5m]))`,
			"time", start.Add(239*15*time.Second).Format(time.RFC3339)))
		if code != 200 || r.Status != "success" {
			t.Fatalf("%d %+v", code, r)
		}
		var v vectorResult
		if err := json.Unmarshal(r.Data, &v); err != nil {
			t.Fatal(err)
		}
		// acme's one route grows by 30 every 15 s: 2 per second.
		if v.ResultType != "vector" || len(v.Result) != 1 || v.Result[0].Metric["service_name"] != "a-shop" ||
			!near(v.Result[0].Value[1], 2) || v.Result[0].Value[0] != float64(start.Add(239*15*time.Second).Unix()) {
			t.Fatalf("%s", r.Data)
		}
	}
	code, r := get(t, base, "acme", "/api/v1/query_range", vals("query", `test_queue_depth`,
		"start", fmt.Sprint(start.Unix()), "end", fmt.Sprint(start.Add(10*time.Minute).Unix()), "step", "5m"))
	if code != 200 {
		t.Fatalf("%d %+v", code, r)
	}
	var m vectorResult
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatal(err)
	}
	if m.ResultType != "matrix" || len(m.Result) != 1 || !strings.Contains(string(r.Data), fmt.Sprintf(`"values":[[%d,"0"],[%d,"20"],[%d,"40"]]`,
		start.Unix(), start.Add(5*time.Minute).Unix(), start.Add(10*time.Minute).Unix())) {
		t.Fatalf("%s", r.Data)
	}
	code, r = get(t, base, "acme", "/api/v1/query", vals("query", "1+1", "time", "1000.5"))
	if code != 200 || string(r.Data) != `{"resultType":"scalar","result":[1000.5,"2"]}` {
		t.Fatalf("scalar: %d %s", code, r.Data)
	}
	code, r = get(t, base, "acme", "/api/v1/metadata", vals("metric", "test_latency_seconds"))
	if code != 200 || string(r.Data) != `{"test_latency_seconds":[{"help":"","type":"histogram","unit":"s"}]}` {
		t.Fatalf("metadata: %d %s", code, r.Data)
	}
}

func near(v any, want float64) bool {
	s, _ := v.(string)
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && math.Abs(f-want) < 1e-9
}

func strs(t *testing.T, r apiResp) []string {
	t.Helper()
	var s []string
	if err := json.Unmarshal(r.Data, &s); err != nil {
		t.Fatalf("%s: %v", r.Data, err)
	}
	return s
}

// Two tenants hold the same metric names; each sees only its own series,
// through every endpoint, and a request without the header sees the
// (empty) default tenant.
func TestTenancy(t *testing.T) {
	base := server(t, prom.Limits{})
	at := vals("query", `count by (service_name, http_route) (test_queue_depth)`, "time", endTime())
	for tenant, want := range map[string]string{"acme": "a-shop /a", "globex": "g-shop /g1,g-shop /g2", "": ""} {
		code, r := get(t, base, tenant, "/api/v1/query", at)
		var v vectorResult
		if code != 200 || json.Unmarshal(r.Data, &v) != nil {
			t.Fatalf("%s: %d %+v", tenant, code, r)
		}
		var got []string
		for _, s := range v.Result {
			got = append(got, s.Metric["service_name"]+" "+s.Metric["http_route"])
		}
		slices.Sort(got)
		if strings.Join(got, ",") != want {
			t.Errorf("tenant %q query: %v, want %s", tenant, got, want)
		}

		code, r = get(t, base, tenant, "/api/v1/series", vals("match[]", `{__name__=~"test_.+"}`))
		var series []map[string]string
		if code != 200 || json.Unmarshal(r.Data, &series) != nil {
			t.Fatalf("%s series: %d %+v", tenant, code, r)
		}
		for _, s := range series {
			if !strings.Contains(want, s["service_name"]+" ") {
				t.Errorf("tenant %q sees series %v", tenant, s)
			}
		}
		if (len(series) == 0) != (want == "") {
			t.Errorf("tenant %q: %d series", tenant, len(series))
		}

		_, r = get(t, base, tenant, "/api/v1/labels", vals())
		names := strs(t, r)
		if slices.Contains(names, "secret_key") != (tenant == "globex") {
			t.Errorf("tenant %q label names %v", tenant, names)
		}
		_, r = get(t, base, tenant, "/api/v1/label/service_name/values", vals())
		svcs := strings.Join(strs(t, r), ",")
		wantSvc := map[string]string{"acme": "a-shop", "globex": "g-shop", "": ""}[tenant]
		if svcs != wantSvc {
			t.Errorf("tenant %q service_name values %q, want %q", tenant, svcs, wantSvc)
		}
		_, r = get(t, base, tenant, "/api/v1/label/__name__/values", vals())
		if n := len(strs(t, r)); (n == 5) != (tenant != "") {
			t.Errorf("tenant %q: %d metric names", tenant, n)
		}
	}
}

// The search API on the same port takes the query section's limits.
func TestFromConfigSearchLimits(t *testing.T) {
	c := config.Default()
	c.Query.MaxBytes = 1 << 20
	c.Query.Timeout = config.Duration(7 * time.Second)
	so := FromConfig(c).SearchOptions
	if so.Limits.MaxBytesScanned != 1<<20 || so.Limits.Timeout != 7*time.Second {
		t.Fatalf("search limits %+v, want max bytes 1 MiB and timeout 7s", so.Limits)
	}
}
