package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/query/prom"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/stats"
)

// statusServer serves the handler with statistics of tenants acme (2
// series) and globex (1 series), and a registry with per-tenant counters.
func statusServer(t *testing.T) string {
	t.Helper()
	st, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for tenant, users := range map[string]int{"acme": 2, "globex": 1} {
		var pts []string
		for i := range users {
			pts = append(pts, `{"timeUnixNano":"1000000000","asInt":"1","attributes":[{"key":"user","value":{"stringValue":"u`+string(rune('0'+i))+`"}}]}`)
		}
		var m signal.Metrics
		if err := otlp.DecodeMetricsJSON(&m, []byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"`+tenant+`_up","gauge":{"dataPoints":[`+strings.Join(pts, ",")+`]}}]}]}]}`)); err != nil {
			t.Fatal(err)
		}
		st.Observe(tenant, &m, 100)
	}
	reg := prometheus.NewRegistry()
	acc := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_pipeline_accepted_records_total"}, []string{"signal", "tenant"})
	acc.WithLabelValues("metrics", "acme").Add(2)
	acc.WithLabelValues("metrics", "globex").Add(1)
	reg.MustRegister(acc)
	h, err := New(Config{Adapter: new(prom.Adapter), Stats: st, Gatherer: reg, Tokens: testTokens, TenantHeader: "X-Scope-OrgID"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// /api/v1/status/tsdb shows the request's tenant; /api/v1/status/sluice
// every tenant, except to a token bound to one.
func TestStatusTenants(t *testing.T) {
	base := statusServer(t)
	c := http.DefaultClient
	tsdb := func(token, tenant string) string {
		r := authGet(t, c, base+"/api/v1/status/tsdb", token, tenant)
		var v struct {
			Data stats.TSDBStatus `json:"data"`
		}
		if r.code != 200 || json.Unmarshal([]byte(r.body), &v) != nil {
			t.Fatalf("tsdb: %d %s", r.code, r.body)
		}
		var names []string
		for _, s := range v.Data.SeriesCountByMetricName {
			names = append(names, s.Name)
		}
		return strings.Join(names, ",")
	}
	if got := tsdb("read-acme", ""); got != "acme_up" {
		t.Errorf("bound token: %s", got)
	}
	if got := tsdb("read-any", "globex"); got != "globex_up" {
		t.Errorf("globex: %s", got)
	}
	status := func(token string) *stats.Status {
		r := authGet(t, c, base+"/api/v1/status/sluice?limit=5", token, "")
		var v struct {
			Data stats.Status `json:"data"`
		}
		if r.code != 200 || json.Unmarshal([]byte(r.body), &v) != nil {
			t.Fatalf("status: %d %s", r.code, r.body)
		}
		return &v.Data
	}
	tenants := func(s *stats.Status) string {
		var out []string
		for _, r := range s.Tenants {
			out = append(out, r.Tenant)
		}
		for _, r := range s.Stats.Tenants {
			out = append(out, r.Tenant)
		}
		for _, r := range s.Stats.Metrics {
			out = append(out, r.Metric)
		}
		return strings.Join(out, ",")
	}
	if got, want := tenants(status("read-any")), "acme,globex,acme,globex,acme_up,globex_up"; got != want {
		t.Errorf("unbound token sees %s, want %s", got, want)
	}
	if got, want := tenants(status("read-acme")), "acme,acme,acme_up"; got != want {
		t.Errorf("token bound to acme sees %s, want %s", got, want)
	}
	for _, q := range []string{"limit=0", "limit=x", "limit=10001"} {
		if r := authGet(t, c, base+"/api/v1/status/tsdb?"+q, "read-any", ""); r.code != 400 || !strings.Contains(r.body, "limit") {
			t.Errorf("%s: %d %s", q, r.code, r.body)
		}
	}
}
