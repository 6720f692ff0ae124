package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
)

func canonJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func promGet(t *testing.T, base, path string, v url.Values) string {
	t.Helper()
	resp, err := http.Get(base + path + "?" + v.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestAudinRawSamplesAgreeWithPrometheus sends one remote write 1.0
// request to Debian's Prometheus 2.42 and to `sluice run` and compares the
// query API's answers byte for byte: float values of every kind (-0, the
// smallest subnormal, the largest double, ±Inf, a NaN that is no stale
// marker, values needing an exponent), label values with quotes and
// non-ASCII letters, labels out of order, labels with an empty value
// (Prometheus has no such label: {a=""} is the series without a), and a
// stale marker that ends a series which then starts again.
func TestAudinRawSamplesAgreeWithPrometheus(t *testing.T) {
	pbase, stderr := startPrometheus(t, freePort(t), "global: {}\n", "--web.enable-remote-write-receiver")
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr))
	sbase := "http://" + qaddr
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Minute).UnixMilli()
	vals := []float64{math.Copysign(0, -1), 5e-324, math.MaxFloat64, math.Inf(1), math.Inf(-1), math.Float64frombits(0x7ff8000000000001),
		0.1, 1e21, 123456789.123456789, -2.5e-10, 1e-6, 9.5e-7}
	var ss []prompb.Sample
	for i, v := range vals {
		ss = append(ss, prompb.Sample{Value: v, Timestamp: t0 + int64(i)*1000 + int64(i%3)*10})
	}
	stale := math.Float64frombits(value.StaleNaN)
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "zz", Value: "ü∑ \"q\" \\"}, {Name: "__name__", Value: "cmp_vals"}, {Name: "a", Value: "x"}}, Samples: ss},
		{Labels: []prompb.Label{{Name: "__name__", Value: "cmp_empty"}, {Name: "a", Value: ""}, {Name: "b", Value: "1"}}, Samples: ss[:3]},
		{Labels: []prompb.Label{{Name: "__name__", Value: "cmp_empty"}, {Name: "b", Value: "2"}, {Name: "c", Value: ""}}, Samples: ss[3:5]},
		{Labels: []prompb.Label{{Name: "__name__", Value: "cmp_stale"}, {Name: "job", Value: "j"}}, Samples: []prompb.Sample{
			{Value: 1, Timestamp: t0}, {Value: 2, Timestamp: t0 + 15000}, {Value: stale, Timestamp: t0 + 30000}, {Value: 4, Timestamp: t0 + 90000}}},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, base := range []string{pbase, sbase} {
		api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, req); err != nil {
			t.Fatalf("write to %s: %v\n%s", base, err, stderr)
		}
	}
	sec := func(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }
	queries := []url.Values{}
	for _, at := range []int64{t0 + 20000, t0 + 45000, t0 + 95000} {
		for _, q := range []string{`cmp_vals[1m]`, `cmp_empty[1m]`, `cmp_empty{a=""}`, `cmp_empty{c=""}[1m]`, `{__name__=~"cmp_.*",a=""}`,
			`cmp_stale`, `cmp_stale[2m]`, `count_over_time(cmp_vals[1m])`, `last_over_time(cmp_empty[1m])`, `cmp_vals`} {
			queries = append(queries, url.Values{"query": {q}, "time": {sec(at)}})
		}
	}
	for _, q := range []string{`cmp_stale`, `cmp_vals`, `cmp_empty`} {
		queries = append(queries, url.Values{"query": {q}, "start": {sec(t0)}, "end": {sec(t0 + 120000)}, "step": {"7.5"}})
	}
	for _, v := range queries {
		path := "/api/v1/query"
		if v.Has("step") {
			path = "/api/v1/query_range"
		}
		p, s := promGet(t, pbase, path, v), promGet(t, sbase, path, v)
		if p != s {
			t.Errorf("%s %s:\nprometheus %s\nsluice     %s", path, v.Encode(), p, s)
		}
	}
	for _, v := range []url.Values{{"match[]": {`{__name__=~"cmp_.*"}`}}, {"match[]": {`cmp_empty`}}} {
		v.Set("start", sec(t0-60000))
		v.Set("end", sec(t0+120000))
		// The same JSON; the key order of the envelope differs.
		p, s := canonJSON(t, promGet(t, pbase, "/api/v1/series", v)), canonJSON(t, promGet(t, sbase, "/api/v1/series", v))
		if p != s {
			t.Errorf("series %s:\nprometheus %s\nsluice     %s", v.Encode(), p, s)
		}
	}
}
