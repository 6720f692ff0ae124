package processor

import (
	"testing"
	"time"
)

// TestAggregateOutputNamesAsVmagent: output names are built as vmagent's
// stream aggregation builds them (lib/streamaggr): the by and without
// labels sorted and without duplicates whatever their order in the file,
// and vmagent's own output names sum_samples and count_samples accepted
// beside sum and count, each suffixing its own name.
func TestAggregateOutputNamesAsVmagent(t *testing.T) {
	r, m := parseWith(t, `
metrics:
  - {name: without, action: aggregate, match: req, interval: 1m, flush_delay: 0s, without: [method, host],
     outputs: [count], keep_input: true}
  - {name: by, action: aggregate, match: req, interval: 1m, flush_delay: 0s, by: [path, method, path],
     outputs: [sum_samples, count_samples, sum]}
`)
	a := map[string]string{"path": "/x", "method": "GET", "host": "a"}
	s := &Scratch{Tenant: "t"}
	r.ProcessMetrics(metricBatch(t, "req", "gauge", inPoint{a, 0, 2}, inPoint{a, 10 * time.Second, 3}), s)
	wantLines(t, flushed(t, m, 60*time.Second),
		`t {__name__="req:1m_by_method_path_count_samples", method="GET", path="/x"} @60s = 2`,
		`t {__name__="req:1m_by_method_path_sum", method="GET", path="/x"} @60s = 5`,
		`t {__name__="req:1m_by_method_path_sum_samples", method="GET", path="/x"} @60s = 5`,
		`t {__name__="req:1m_without_host_method_count", job="api", path="/x", service_name="api"} @60s = 2`)
}
