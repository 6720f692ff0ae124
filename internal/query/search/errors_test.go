package search

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type apiErr struct {
	Status, ErrorType, Error string
}

func (c *client) wantError(path string, q url.Values, code int, typ, contains string) {
	c.tb.Helper()
	got, body := c.get(path, q)
	var e apiErr
	if err := json.Unmarshal(body, &e); err != nil {
		c.tb.Fatalf("GET %s?%s: %d, body %.300q is not a JSON error: %v", path, q.Encode(), got, body, err)
	}
	if got != code || e.Status != "error" || e.ErrorType != typ || !strings.Contains(e.Error, contains) {
		c.tb.Errorf("GET %s?%s: %d %+v, want %d %s containing %q", path, q.Encode(), got, e, code, typ, contains)
	}
}

func TestBadParameters(t *testing.T) {
	tl := buildLake(t, 0, []copySpec{{"default", 0}}, nil)
	c := serve(t, tl, Options{})
	logs, spans := "/api/v1/logs/search", "/api/v1/traces/search"
	for _, tc := range []struct {
		path     string
		q        url.Values
		contains string
	}{
		{logs, url.Values{"servce": {"x"}}, `unknown parameter "servce"`},
		{logs, url.Values{"start": {"yesterday"}}, `invalid parameter "start"`},
		{logs, url.Values{"end": {"2025-13-01T00:00:00Z"}}, `invalid parameter "end"`},
		{logs, wide("start", "2026-01-01T00:00:00Z", "end", "2025-01-01T00:00:00Z"), "must be after start"},
		{logs, wide("start", "2026-01-01T00:00:00Z", "end", "2026-01-01T00:00:00Z"), "must be after start"},
		{logs, wide("start", "99999999999999"), "outside the years"},
		{logs, wide("limit", "0"), `invalid parameter "limit"`},
		{logs, wide("limit", "ten"), `invalid parameter "limit"`},
		{logs, wide("severity_min", "loud"), `invalid parameter "severity_min"`},
		{logs, wide("attr_re.k", "("), "invalid regular expression"},
		{logs, wide("cursor", "!!"), `invalid parameter "cursor"`},
		{logs, url.Values{"service": {"a", "b"}}, "given 2 times"},
		{logs, wide("name", "x"), `unknown parameter "name"`},
		{spans, wide("min_duration", "soon"), `invalid parameter "min_duration"`},
		{spans, wide("min_duration", "2s", "max_duration", "1s"), "min_duration"},
		{spans, wide("status", "bad"), `invalid parameter "status"`},
		{spans, wide("q", "x"), `unknown parameter "q"`},
		{"/api/v1/traces/0102030405060708090a0b0c0d0e0f10", url.Values{"limit": {"1"}}, `unknown parameter "limit"`},
		{"/api/v1/traces/nothex", nil, "invalid trace id"},
	} {
		c.wantError(tc.path, tc.q, http.StatusBadRequest, "bad_data", tc.contains)
	}
	c.wantError("/api/v1/logs/nothing", nil, http.StatusNotFound, "not_found", "no search endpoint")
	req, _ := http.NewRequest(http.MethodPost, c.url+logs, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

func TestLimits(t *testing.T) {
	tl := buildLake(t, 500, []copySpec{{"default", 0}, {"default", -time.Hour}}, nil)
	reg := prometheus.NewRegistry()
	c := serve(t, tl, Options{Registerer: reg, Limits: Limits{MaxRowsScanned: 2000, MaxLimit: 50}})
	logs := "/api/v1/logs/search"
	// A filter that matches nothing must scan every row: no early stop.
	c.wantError(logs, wide("q", "no such body"), http.StatusUnprocessableEntity, "limit_exceeded", "more than 2000 rows")
	c.wantError(logs, wide("limit", "51"), http.StatusUnprocessableEntity, "limit_exceeded", "limit 51 is above the maximum of 50")
	c.wantError("/api/v1/traces/search", wide("name", "no such span"), http.StatusUnprocessableEntity, "limit_exceeded", "rows")
	// A time range that the catalog narrows to the July file of each copy (2 x 525 rows) stays under the limit.
	recs, last := c.lines(logs, url.Values{"start": {"2025-07-23T00:00:00Z"}, "end": {"2025-07-24T00:00:00Z"}, "q": {"no such body"}})
	if len(recs) != 0 || last["scanned_rows"] != 1050.0 {
		t.Fatalf("narrow range: %d records, final %v", len(recs), last)
	}
	c2 := serve(t, tl, Options{Limits: Limits{MaxBytesScanned: 1000}})
	c2.wantError(logs, wide("q", "no such body"), http.StatusUnprocessableEntity, "limit_exceeded", "more than 1000 bytes")

	if n := counter(t, reg, "sluice_query_search_requests_total", "endpoint", "logs_search", "code", "422"); n != 2 {
		t.Errorf("422 requests counted %v, want 2", n)
	}
	if n := counter(t, reg, "sluice_query_search_rows_scanned_total", "endpoint", "logs_search"); n == 0 {
		t.Error("rows scanned not counted")
	}
	// A second handler on the same registry shares the counters.
	_ = NewHandler(tl.cat, tl.store, Options{Registerer: reg})
}

// counter sums the samples of a counter whose labels include kv.
func counter(t *testing.T, reg *prometheus.Registry, name string, kv ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(kv); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == kv[i] && lp.GetValue() == kv[i+1] {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func TestTimeout(t *testing.T) {
	tl := buildLake(t, 100, []copySpec{{"default", 0}, {"default", time.Hour}}, nil)
	c := serve(t, tl, Options{Limits: Limits{Timeout: time.Nanosecond}})
	c.wantError("/api/v1/logs/search", wide("q", "no such body"), http.StatusServiceUnavailable, "timeout", "timed out")
}
