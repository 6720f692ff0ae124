package stats

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// statusRegistry holds the families CollectStatus reads, named and
// labelled as the pipeline, queue, lake, exporters and processor export
// them.
func statusRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	cv := func(name string, v float64, labels map[string]string) {
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: name}, keys)
		if err := reg.Register(c); err != nil {
			if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
				c = are.ExistingCollector.(*prometheus.CounterVec)
			} else {
				t.Fatal(err)
			}
		}
		c.With(labels).Add(v)
	}
	g := func(name string, v float64, labels map[string]string) {
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		c := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: name}, keys)
		if err := reg.Register(c); err != nil {
			c = err.(prometheus.AlreadyRegisteredError).ExistingCollector.(*prometheus.GaugeVec)
		}
		c.With(labels).Set(v)
	}
	for _, tn := range []string{"acme", "globex"} {
		cv("sluice_receiver_requests_total", 5, map[string]string{"transport": "http", "signal": "metrics", "tenant": tn, "outcome": "accepted"})
		cv("sluice_pipeline_accepted_records_total", 50, map[string]string{"signal": "metrics", "tenant": tn})
		cv("sluice_pipeline_rejected_records_total", 1, map[string]string{"signal": "metrics", "tenant": tn, "reason": "disk"})
		cv("sluice_pipeline_rejected_records_total", 2, map[string]string{"signal": "metrics", "tenant": tn, "reason": "backpressure"})
	}
	cv("sluice_prw_requests_total", 3, map[string]string{"version": "1.0", "code": "204"})
	g("sluice_queue_bytes", 4096, nil)
	g("sluice_queue_durable_position", 1000, nil)
	g("sluice_lake_committed_queue_position", 600, nil)
	cv("sluice_lake_checkpoints_total", 7, map[string]string{"reason": "interval"})
	g("sluice_lake_last_checkpoint_timestamp_seconds", 1234.5, nil)
	cv("sluice_exporter_sent_records_total", 9, map[string]string{"exporter": "otlp/b"})
	g("sluice_exporter_breaker_state", 2, map[string]string{"exporter": "otlp/b", "endpoint": "http://x"})
	cv("sluice_exporter_failed_requests_total", 4, map[string]string{"exporter": "otlp/b", "endpoint": "http://x"})
	cv("sluice_processor_rule_dropped_total", 11, map[string]string{"rule": "r1"})
	cv("sluice_processor_limit_exceeded_total", 2, map[string]string{"rule": "r1", "action": "refuse"})
	cv("sluice_processor_limit_exceeded_total", 3, map[string]string{"rule": "r1", "action": "strip_label"})
	cv("sluice_processor_reloads_total", 1, nil)
	return reg
}

func TestCollectStatus(t *testing.T) {
	reg := statusRegistry(t)
	st, err := CollectStatus(reg, nil, nil, "", 10, time.Unix(2000, 0))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(st)
	if len(st.Receivers) != 3 || st.Receivers[0].Receiver != "otlp/http" || st.Receivers[0].Tenant != "acme" ||
		st.Receivers[0].Requests["accepted"] != 5 || st.Receivers[2].Receiver != "prometheus_remote_write" || st.Receivers[2].Requests["204"] != 3 {
		t.Errorf("receivers %s", js)
	}
	if len(st.Tenants) != 2 || st.Tenants[1].Tenant != "globex" || st.Tenants[1].Accepted != 50 || st.Tenants[1].Rejected != 3 {
		t.Errorf("tenants %s", js)
	}
	if st.Queue.Bytes != 4096 || st.Queue.LakeLagBytes != 400 || st.Lake.Checkpoints["interval"] != 7 || st.Lake.LastCheckpoint != 1234.5 {
		t.Errorf("queue and lake %s", js)
	}
	if len(st.Exporters) != 1 || st.Exporters[0].SentRecords != 9 || len(st.Exporters[0].Endpoints) != 1 ||
		st.Exporters[0].Endpoints[0].Breaker != "open" || st.Exporters[0].Endpoints[0].Failed != 4 {
		t.Errorf("exporters %s", js)
	}
	if len(st.Rules) != 1 || st.Rules[0].Effects["dropped"] != 11 || st.Rules[0].Effects["limit_exceeded"] != 5 || len(st.Rules[0].Effects) != 2 {
		t.Errorf("rules %s", js)
	}
	if st.Stats != nil || st.Time != 2000 {
		t.Errorf("stats %v time %v", st.Stats, st.Time)
	}
	// One tenant's view keeps the process-wide rows.
	st, _ = CollectStatus(reg, nil, nil, "acme", 10, time.Unix(2000, 0))
	if len(st.Tenants) != 1 || st.Tenants[0].Tenant != "acme" || len(st.Receivers) != 2 || st.Queue.Bytes != 4096 || len(st.Rules) != 1 {
		t.Errorf("acme's view: %+v", st)
	}
}

// TestCollectStatusRuleMetrics: each rule's row carries its top (tenant,
// metric) entries by dropped plus changed points, then by points over a
// limit (a report-only limit's entries have only those), at most limit,
// and a tenant's view only that tenant's.
func TestCollectStatusRuleMetrics(t *testing.T) {
	reg := statusRegistry(t)
	var asked []string
	effects := func(tenant string) []RuleEffect {
		asked = append(asked, tenant)
		all := []RuleEffect{
			{Rule: "r1", Tenant: "acme", Metric: "a_total", Dropped: 3},
			{Rule: "r1", Tenant: "acme", Metric: "b_total", Dropped: 5, Changed: 1},
			{Rule: "r1", Tenant: "globex", Metric: "a_total", Dropped: 4},
			{Rule: "r2", Tenant: "acme", Metric: "c_seconds", Changed: 7},
			{Rule: "r3", Tenant: "acme", Metric: "d_total", Exceeded: 9},
			{Rule: "r3", Tenant: "acme", Metric: "e_total", Exceeded: 12},
		}
		var out []RuleEffect
		for _, e := range all {
			if tenant == "" || e.Tenant == tenant {
				out = append(out, e)
			}
		}
		return out
	}
	st, err := CollectStatus(reg, nil, effects, "", 2, time.Unix(2000, 0))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(st.Rules)
	want := `[{"rule":"r1","effects":{"dropped":11,"limit_exceeded":5},"metrics":[` +
		`{"tenant":"acme","metric":"b_total","dropped":5,"changed":1,"exceeded":0},{"tenant":"globex","metric":"a_total","dropped":4,"changed":0,"exceeded":0}]},` +
		`{"rule":"r2","effects":{},"metrics":[{"tenant":"acme","metric":"c_seconds","dropped":0,"changed":7,"exceeded":0}]},` +
		`{"rule":"r3","effects":{},"metrics":[{"tenant":"acme","metric":"e_total","dropped":0,"changed":0,"exceeded":12},{"tenant":"acme","metric":"d_total","dropped":0,"changed":0,"exceeded":9}]}]`
	if string(js) != want {
		t.Fatalf("rules\n got %s\nwant %s", js, want)
	}
	st, _ = CollectStatus(reg, nil, effects, "acme", 10, time.Unix(2000, 0))
	js, _ = json.Marshal(st.Rules[0].Metrics)
	if want := `[{"tenant":"acme","metric":"b_total","dropped":5,"changed":1,"exceeded":0},{"tenant":"acme","metric":"a_total","dropped":3,"changed":0,"exceeded":0}]`; string(js) != want {
		t.Fatalf("acme's r1 metrics %s, want %s", js, want)
	}
	if len(asked) != 2 || asked[0] != "" || asked[1] != "acme" {
		t.Fatalf("effects asked for tenants %q", asked)
	}
}
