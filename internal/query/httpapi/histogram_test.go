package httpapi

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/query/prom"
	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
)

// Native histogram samples are encoded as Prometheus's API encodes them:
// "histogram" in a vector, "histograms" in a matrix (beside "values" of
// float samples), each [seconds, {"count","sum","buckets"}] with the
// bucket boundary codes (0 upper-inclusive, 1 lower-inclusive, 3 both:
// the zero bucket), numbers as strings and empty buckets left out.
func TestHistogramJSON(t *testing.T) {
	l := promtest.NewLake(t)
	pt := func(ts time.Time, count, sum, first int) string {
		return fmt.Sprintf(`{"timeUnixNano":"%d","count":"%d","sum":%d,"scale":0,"zeroCount":"1","zeroThreshold":0.5,
			"positive":{"offset":0,"bucketCounts":["%d","0","2"]},"negative":{"offset":1,"bucketCounts":["3"]}}`, ts.UnixNano(), count, sum, first)
	}
	js := fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[%s]},"scopeMetrics":[{"metrics":[
		{"name":"lat","exponentialHistogram":{"aggregationTemporality":2,"dataPoints":[%s,%s]}}]}]}]}`,
		promtest.Attr("service.name", "svc"), pt(start, 10, 7, 4), pt(start.Add(15*time.Second), 11, 8, 5))
	l.Write(t, "acme", 0, []byte(js))
	a, err := prom.NewAdapter(prom.Options{Catalog: l.Catalog, Store: l.Store})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Adapter: a, TenantHeader: "X-Scope-OrgID", DefaultTenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	base := srv.URL
	t0 := start.Unix()
	h1 := `{"count":"10","sum":"7","buckets":[[1,"-4","-2","3"],[3,"-0.5","0.5","1"],[0,"1","2","4"],[0,"4","8","2"]]}`
	h2 := `{"count":"11","sum":"8","buckets":[[1,"-4","-2","3"],[3,"-0.5","0.5","1"],[0,"1","2","5"],[0,"4","8","2"]]}`
	metric := `"metric":{"__name__":"lat","job":"svc","service_name":"svc"}`
	for _, c := range []struct {
		path   string
		params []string
		want   string
	}{
		{"/api/v1/query", []string{"query", "lat", "time", fmt.Sprint(t0 + 20)},
			`{"resultType":"vector","result":[{` + metric + `,"histogram":[` + fmt.Sprint(t0+20) + `,` + h2 + `]}]}`},
		{"/api/v1/query", []string{"query", "lat[20s]", "time", fmt.Sprint(t0 + 16)},
			`{"resultType":"matrix","result":[{` + metric + `,"histograms":[[` + fmt.Sprint(t0) + `,` + h1 + `],[` + fmt.Sprint(t0+15) + `,` + h2 + `]]}]}`},
		{"/api/v1/query_range", []string{"query", `{__name__=~"lat|lat_count"}`, "start", fmt.Sprint(t0), "end", fmt.Sprint(t0 + 15), "step", "15"},
			`{"resultType":"matrix","result":[{` + metric + `,"histograms":[[` + fmt.Sprint(t0) + `,` + h1 + `],[` + fmt.Sprint(t0+15) + `,` + h2 + `]]},` +
				`{"metric":{"__name__":"lat_count","job":"svc","service_name":"svc"},"values":[[` + fmt.Sprint(t0) + `,"10"],[` + fmt.Sprint(t0+15) + `,"11"]]}]}`},
	} {
		code, r := get(t, base, "acme", c.path, vals(c.params...))
		if code != 200 || string(r.Data) != c.want {
			t.Errorf("%s %v: %d %s\n got %s\nwant %s", c.path, c.params, code, r.Error, r.Data, c.want)
		}
	}
}
