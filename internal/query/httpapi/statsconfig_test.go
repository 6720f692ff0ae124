package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/query/prom"
)

// queryStats is the stats object of a query answer, as Prometheus writes it.
type queryStats struct {
	Timings map[string]float64 `json:"timings"`
	Samples struct {
		PerStep     [][2]float64 `json:"totalQueryableSamplesPerStep"`
		Total       *int64       `json:"totalQueryableSamples"`
		Peak        *int         `json:"peakSamples"`
		SamplesRead int64        `json:"samplesRead"`
	} `json:"samples"`
}

// stats=all and stats=true on query and query_range answer Prometheus's
// "stats" after the result: the engine's timings in seconds and the
// samples it read (per step with "all"); without the parameter there is
// none, and an unknown value gets Prometheus 3's deprecation warning.
func TestQueryStats(t *testing.T) {
	base := server(t, prom.Limits{})
	end := start.Add(59 * time.Minute)
	rng := func(kv ...string) []string {
		return append([]string{"query", "test_queue_depth", "start", fmt.Sprint(start.Unix()), "end", fmt.Sprint(end.Unix()), "step", "300"}, kv...)
	}
	for _, c := range []struct {
		path    string
		params  []string
		stats   bool
		steps   int // per-step entries wanted (stats=all on a range query)
		warning string
	}{
		{"/api/v1/query_range", rng("stats", "all"), true, 12, ""},
		{"/api/v1/query_range", rng("stats", "true"), true, 0, ""},
		{"/api/v1/query_range", rng(), false, 0, ""},
		{"/api/v1/query", []string{"query", "sum(test_queue_depth)", "time", endTime(), "stats", "all"}, true, 1, ""},
		{"/api/v1/query", []string{"query", "test_queue_depth", "time", endTime(), "stats", "yes"}, true, 0, `value "yes" for parameter "stats" is deprecated`},
	} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			name := fmt.Sprintf("%s %s %v", method, c.path, c.params)
			p := vals(c.params...)
			req, _ := http.NewRequest(method, base+c.path+"?"+p.Encode(), nil)
			if method == http.MethodPost {
				req, _ = http.NewRequest(method, base+c.path, strings.NewReader(p.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			req.Header.Set("X-Scope-OrgID", "acme")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var r struct {
				Status string `json:"status"`
				Data   struct {
					ResultType string          `json:"resultType"`
					Result     json.RawMessage `json:"result"`
					Stats      *queryStats     `json:"stats"`
				} `json:"data"`
				Warnings []string `json:"warnings"`
			}
			if err := json.Unmarshal(body, &r); err != nil || resp.StatusCode != 200 || r.Status != "success" {
				t.Fatalf("%s: %d %v %s", name, resp.StatusCode, err, body)
			}
			// Prometheus's field order: stats follow the result.
			if r.Data.Stats != nil && !strings.Contains(string(body), `],"stats":{"timings":{"evalTotalTime":`) {
				t.Errorf("%s: stats not after the result, or not as Prometheus orders them: %.300s", name, body)
			}
			if got := r.Data.Stats != nil; got != c.stats {
				t.Fatalf("%s: stats present %t, want %t: %s", name, got, c.stats, body)
			}
			if c.warning != "" && (len(r.Warnings) != 1 || !strings.HasPrefix(r.Warnings[0], c.warning)) {
				t.Errorf("%s: warnings %q, want one starting %q", name, r.Warnings, c.warning)
			}
			if c.warning == "" && len(r.Warnings) > 0 {
				t.Errorf("%s: warnings %q", name, r.Warnings)
			}
			if !c.stats {
				continue
			}
			st := r.Data.Stats
			for _, k := range []string{"evalTotalTime", "resultSortTime", "queryPreparationTime", "innerEvalTime", "execQueueTime", "execTotalTime"} {
				if v, ok := st.Timings[k]; !ok || v < 0 || v > 60 {
					t.Errorf("%s: timings.%s = %v (present %t), want seconds", name, k, v, ok)
				}
			}
			if st.Timings["execTotalTime"] <= 0 {
				t.Errorf("%s: execTotalTime %v, want > 0", name, st.Timings["execTotalTime"])
			}
			if st.Samples.Total == nil || *st.Samples.Total <= 0 || st.Samples.Peak == nil || *st.Samples.Peak <= 0 {
				t.Errorf("%s: samples %s, want totalQueryableSamples and peakSamples above 0", name, body)
			}
			if len(st.Samples.PerStep) != c.steps {
				t.Errorf("%s: %d entries per step, want %d", name, len(st.Samples.PerStep), c.steps)
			}
			var sum int64
			for _, s := range st.Samples.PerStep {
				sum += int64(s[1])
			}
			if c.steps > 0 && sum != *st.Samples.Total {
				t.Errorf("%s: per-step samples add up to %d, total %d", name, sum, *st.Samples.Total)
			}
			if c.steps == 12 && st.Samples.PerStep[0][0] != float64(start.Unix()) {
				t.Errorf("%s: first step at %v, want %d", name, st.Samples.PerStep[0][0], start.Unix())
			}
		}
	}
	// An error has no stats.
	code, r := get(t, base, "acme", "/api/v1/query", vals("query", "sum(", "stats", "all"))
	if code != 400 || r.ErrorType != "bad_data" || strings.Contains(string(r.Data), "stats") {
		t.Errorf("bad query with stats=all: %d %+v", code, r)
	}
}

// /api/v1/status/config answers Prometheus's shape, {"yaml": ...}, with
// the configuration Prometheus prints for an empty global section
// (evaluation_interval: the step of a subquery without one), on GET and
// POST, behind the same tenant checks as every endpoint.
func TestStatusConfig(t *testing.T) {
	base := server(t, prom.Limits{})
	want := "global:\n  scrape_interval: 1m\n  scrape_timeout: 10s\n  evaluation_interval: 1m\n"
	for _, f := range []func(*testing.T, string, string, string, map[string][]string) (int, apiResp){
		func(t *testing.T, b, tn, p string, v map[string][]string) (int, apiResp) { return get(t, b, tn, p, v) },
		func(t *testing.T, b, tn, p string, v map[string][]string) (int, apiResp) { return post(t, b, tn, p, v) },
	} {
		code, r := f(t, base, "acme", "/api/v1/status/config", nil)
		var d map[string]string
		if err := json.Unmarshal(r.Data, &d); code != 200 || err != nil || len(d) != 1 || d["yaml"] != want {
			t.Errorf("status/config: %d %v %s, want {\"yaml\": %q}", code, err, r.Data, want)
		}
	}
	if code, r := get(t, base, "bad tenant!", "/api/v1/status/config", nil); code != 400 || r.ErrorType != "bad_data" {
		t.Errorf("invalid tenant header: %d %+v", code, r)
	}
}
