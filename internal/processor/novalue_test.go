package processor

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// A point without a value (OTLP allows it; package prw makes one to carry
// the exemplars Prometheus sends in a series of their own) is no sample
// to aggregate: between two points of a counter it must not read as a 0,
// a reset, and it passes through to the output unaggregated.
func TestAggregateSkipsPointsWithoutValue(t *testing.T) {
	r, m := parseWith(t, `
metrics:
  - name: ctr
    action: aggregate
    interval: 1m
    flush_delay: 0s
    without: [host]
    outputs: [total, increase]
`)
	pt := func(at time.Duration, v string) string {
		return fmt.Sprintf(`{"timeUnixNano":"%d"%s,"attributes":[{"key":"host","value":{"stringValue":"a"}}]}`, t0.Add(at).UnixNano(), v)
	}
	doc := `{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"api"}}]},"scopeMetrics":[{"metrics":[{"name":"c",` +
		`"sum":{"dataPoints":[` + pt(0, `,"asDouble":10`) + `,` + pt(10*time.Second, ``) + `,` + pt(20*time.Second, `,"asDouble":15`) +
		`],"aggregationTemporality":2,"isMonotonic":true}}]}]}]}`
	var in signal.Metrics
	if err := otlp.DecodeMetricsJSON(&in, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	if in.NumberType[1] != signal.ValueEmpty {
		t.Fatalf("the middle point has value type %v", in.NumberType[1])
	}
	s := &Scratch{Tenant: "t"}
	if _, kept := r.ProcessMetrics(&in, s); kept != 1 {
		t.Fatalf("kept %d points, want the one without a value", kept)
	}
	p := `t {__name__="c_total:1m_without_host_`
	wantLines(t, flushed(t, m, 60*time.Second),
		p+`total", job="api", service_name="api"} @60s = 5`,
		p+`increase", job="api", service_name="api"} @60s = 5`)
}
