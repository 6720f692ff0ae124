package httpapi

import (
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
