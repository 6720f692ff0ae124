package stats

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Status is the document of /api/v1/status/sluice, which `sluice top`
// shows (docs/stats.md). Counters are totals since start-up: a reader
// takes two documents and divides the differences by the difference of
// Time for rates.
type Status struct {
	Time      float64       `json:"time"` // unix seconds
	Receivers []ReceiverRow `json:"receivers"`
	Tenants   []TenantRow   `json:"tenants"`
	Queue     QueueStatus   `json:"queue"`
	Exporters []ExporterRow `json:"exporters"`
	Lake      LakeStatus    `json:"lake"`
	Rules     []RuleRow     `json:"rules"`
	Stats     *Summary      `json:"stats,omitempty"` // nil when stats.enabled is false
}

// ReceiverRow counts the requests of one receiver (otlp/grpc, otlp/http,
// prometheus_remote_write), signal and tenant, by outcome (the otlp
// receiver's outcome label; remote write's HTTP status code).
type ReceiverRow struct {
	Receiver string            `json:"receiver"`
	Signal   string            `json:"signal"`
	Tenant   string            `json:"tenant,omitempty"`
	Requests map[string]uint64 `json:"requests"`
}

// TenantRow counts one tenant's records of one signal through the
// pipeline (sluice_pipeline_*).
type TenantRow struct {
	Tenant      string `json:"tenant"`
	Signal      string `json:"signal"`
	Received    uint64 `json:"received_records"`
	Accepted    uint64 `json:"accepted_records"`
	Rejected    uint64 `json:"rejected_records"`
	QueuedBytes uint64 `json:"queued_bytes"`
	Invalid     uint64 `json:"invalid_requests"`
}

// QueueStatus is the durable queue's depth and the lake's lag behind it.
type QueueStatus struct {
	Bytes           uint64 `json:"bytes"`
	Records         uint64 `json:"records"`
	Segments        uint64 `json:"segments"`
	DurablePosition uint64 `json:"durable_position"`
	// LakeLagBytes is the queue bytes acknowledged but not yet committed
	// to the lake (durable minus committed position).
	LakeLagBytes   uint64 `json:"lake_lag_bytes"`
	FreeDiskBytes  uint64 `json:"disk_free_bytes"`
	DroppedRecords uint64 `json:"dropped_records"`
}

// ExporterRow is one forwarding exporter and its endpoints' breakers.
type ExporterRow struct {
	Exporter    string          `json:"exporter"`
	SentRecords uint64          `json:"sent_records"`
	SentBytes   uint64          `json:"sent_bytes"`
	LagBytes    uint64          `json:"lag_bytes"`
	LagSeconds  float64         `json:"lag_seconds"`
	Endpoints   []EndpointState `json:"endpoints"`
}

// EndpointState is one exporter endpoint: its breaker (closed, half-open,
// open) and failed requests.
type EndpointState struct {
	Endpoint string `json:"endpoint"`
	Breaker  string `json:"breaker"`
	Failed   uint64 `json:"failed_requests"`
	Opened   uint64 `json:"breaker_opened"`
}

// LakeStatus is the lake loop's checkpoints.
type LakeStatus struct {
	Checkpoints        map[string]uint64 `json:"checkpoints"` // by reason
	CheckpointFailures uint64            `json:"checkpoint_failures"`
	// LastCheckpoint is the unix time of the last committed checkpoint,
	// 0 when none.
	LastCheckpoint float64 `json:"last_checkpoint"`
	Segments       uint64  `json:"segments"`
	SegmentBytes   uint64  `json:"segment_bytes"`
	WrittenRows    uint64  `json:"written_rows"`
	BufferedBytes  uint64  `json:"buffered_bytes"`
}

// RuleRow is one processing rule's counters by effect: every
// sluice_processor_<effect>_total with a rule label (rule_matched,
// rule_dropped and rule_changed as matched, dropped and changed), summed
// over its other labels.
type RuleRow struct {
	Rule    string            `json:"rule"`
	Effects map[string]uint64 `json:"effects"`
	// Metrics are the (tenant, metric) the rule dropped or changed most
	// points of, most first (dropped plus changed), at most limit of them;
	// absent for a rule that changed nothing.
	Metrics []RuleMetric `json:"metrics,omitempty"`
}

// RuleMetric is what a metric rule did to one tenant's metric since
// start-up, the metric named as PromQL names it before the rules (a
// histogram's or summary's base name): points dropped and changed,
// counted like sluice_processor_rule_dropped_total and _changed_total.
type RuleMetric struct {
	Tenant  string `json:"tenant"`
	Metric  string `json:"metric"`
	Dropped uint64 `json:"dropped"`
	Changed uint64 `json:"changed"`
	// Exceeded: a limit rule's points of series over its limit, whatever
	// its exceed_action (0 for other rules).
	Exceeded uint64 `json:"exceeded"`
}

// RuleEffect is one entry of the processor's bounded table of rule effects
// per (rule, tenant, metric) (processors.max_rule_effects).
type RuleEffect struct {
	Rule, Tenant, Metric       string
	Dropped, Changed, Exceeded uint64
}

// CollectStatus builds the status document from the process's metrics
// registry, statistics (nil when off) and rule effects (nil without
// rules: effects(tenant) returns the entries of tenant, of every tenant
// for ""). With tenant set, rows of other tenants are left out (a token
// bound to one tenant); limit bounds the metrics of the statistics (see
// Summary) and those of each rule.
func CollectStatus(g prometheus.Gatherer, s *Stats, effects func(tenant string) []RuleEffect, tenant string, limit int, now time.Time) (*Status, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	st := &Status{Time: float64(now.UnixNano()) / 1e9, Receivers: []ReceiverRow{}, Tenants: []TenantRow{},
		Exporters: []ExporterRow{}, Rules: []RuleRow{}, Lake: LakeStatus{Checkpoints: map[string]uint64{}}}
	recv := map[[3]string]*ReceiverRow{}
	tenants := map[[2]string]*TenantRow{}
	exps := map[string]*ExporterRow{}
	eps := map[[2]string]*EndpointState{}
	rules := map[string]*RuleRow{}
	var committed uint64
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			l := func(n string) string {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == n {
						return lp.GetValue()
					}
				}
				return ""
			}
			if t := l("tenant"); tenant != "" && t != "" && t != tenant {
				continue
			}
			v := value(m)
			tr := func() *TenantRow {
				k := [2]string{l("tenant"), l("signal")}
				r := tenants[k]
				if r == nil {
					r = &TenantRow{Tenant: k[0], Signal: k[1]}
					tenants[k] = r
				}
				return r
			}
			ex := func() *ExporterRow {
				n := l("exporter")
				r := exps[n]
				if r == nil {
					r = &ExporterRow{Exporter: n, Endpoints: []EndpointState{}}
					exps[n] = r
				}
				return r
			}
			ep := func() *EndpointState {
				k := [2]string{l("exporter"), l("endpoint")}
				ex()
				r := eps[k]
				if r == nil {
					r = &EndpointState{Endpoint: k[1], Breaker: "closed"}
					eps[k] = r
				}
				return r
			}
			switch name {
			case "sluice_receiver_requests_total":
				k := [3]string{"otlp/" + l("transport"), l("signal"), l("tenant")}
				r := recv[k]
				if r == nil {
					r = &ReceiverRow{Receiver: k[0], Signal: k[1], Tenant: k[2], Requests: map[string]uint64{}}
					recv[k] = r
				}
				r.Requests[l("outcome")] += uint64(v)
			case "sluice_prw_requests_total":
				k := [3]string{"prometheus_remote_write", "metrics", ""}
				r := recv[k]
				if r == nil {
					r = &ReceiverRow{Receiver: k[0], Signal: k[1], Requests: map[string]uint64{}}
					recv[k] = r
				}
				r.Requests[l("code")] += uint64(v)
			case "sluice_pipeline_received_records_total":
				tr().Received = uint64(v)
			case "sluice_pipeline_accepted_records_total":
				tr().Accepted = uint64(v)
			case "sluice_pipeline_rejected_records_total":
				tr().Rejected += uint64(v)
			case "sluice_pipeline_queued_bytes_total":
				tr().QueuedBytes = uint64(v)
			case "sluice_pipeline_invalid_requests_total":
				tr().Invalid = uint64(v)
			case "sluice_queue_bytes":
				st.Queue.Bytes = uint64(v)
			case "sluice_queue_records":
				st.Queue.Records = uint64(v)
			case "sluice_queue_segments":
				st.Queue.Segments = uint64(v)
			case "sluice_queue_durable_position":
				st.Queue.DurablePosition = uint64(v)
			case "sluice_queue_disk_free_bytes":
				st.Queue.FreeDiskBytes = uint64(v)
			case "sluice_queue_dropped_records_total":
				st.Queue.DroppedRecords = uint64(v)
			case "sluice_lake_committed_queue_position":
				committed = uint64(v)
			case "sluice_lake_checkpoints_total":
				st.Lake.Checkpoints[l("reason")] = uint64(v)
			case "sluice_lake_checkpoint_failures_total":
				st.Lake.CheckpointFailures = uint64(v)
			case "sluice_lake_last_checkpoint_timestamp_seconds":
				st.Lake.LastCheckpoint = v
			case "sluice_lake_segments_total":
				st.Lake.Segments = uint64(v)
			case "sluice_lake_segment_bytes_total":
				st.Lake.SegmentBytes = uint64(v)
			case "sluice_lake_written_rows_total":
				st.Lake.WrittenRows += uint64(v)
			case "sluice_lake_buffered_bytes":
				st.Lake.BufferedBytes = uint64(v)
			case "sluice_exporter_sent_records_total":
				ex().SentRecords = uint64(v)
			case "sluice_exporter_sent_bytes_total":
				ex().SentBytes = uint64(v)
			case "sluice_exporter_queue_lag_bytes":
				ex().LagBytes = uint64(v)
			case "sluice_exporter_queue_lag_seconds":
				ex().LagSeconds = v
			case "sluice_exporter_breaker_state":
				ep().Breaker = [...]string{"closed", "half-open", "open"}[min(max(int(v), 0), 2)]
			case "sluice_exporter_failed_requests_total":
				ep().Failed = uint64(v)
			case "sluice_exporter_breaker_opened_total":
				ep().Opened = uint64(v)
			default:
				// Every sluice_processor_<what>_total with a rule label is
				// an effect of that rule: rule_matched -> matched,
				// limit_exceeded, aggregate_emitted_points, ...
				effect, ok := strings.CutPrefix(name, "sluice_processor_")
				if effect, ok2 := strings.CutSuffix(effect, "_total"); ok && ok2 && l("rule") != "" {
					effect = strings.TrimPrefix(effect, "rule_")
					r := rules[l("rule")]
					if r == nil {
						r = &RuleRow{Rule: l("rule"), Effects: map[string]uint64{}}
						rules[r.Rule] = r
					}
					r.Effects[effect] += uint64(v)
				}
			}
		}
	}
	if st.Queue.DurablePosition > committed {
		st.Queue.LakeLagBytes = st.Queue.DurablePosition - committed
	}
	for _, k := range slices.SortedFunc(maps.Keys(recv), func(a, b [3]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]), strings.Compare(a[2], b[2]))
	}) {
		st.Receivers = append(st.Receivers, *recv[k])
	}
	for _, k := range slices.SortedFunc(maps.Keys(tenants), func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	}) {
		st.Tenants = append(st.Tenants, *tenants[k])
	}
	for _, k := range slices.SortedFunc(maps.Keys(eps), func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	}) {
		exps[k[0]].Endpoints = append(exps[k[0]].Endpoints, *eps[k])
	}
	for _, n := range slices.Sorted(maps.Keys(exps)) {
		st.Exporters = append(st.Exporters, *exps[n])
	}
	if effects != nil {
		addRuleMetrics(rules, effects(tenant), limit)
	}
	for _, n := range slices.Sorted(maps.Keys(rules)) {
		st.Rules = append(st.Rules, *rules[n])
	}
	if s != nil {
		sum := s.Summary(tenant, limit)
		st.Stats = &sum
	}
	return st, nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// addRuleMetrics puts the top limit entries of effects, by dropped plus
// changed points (then points over a limit: a limit that only reports
// drops and changes nothing), into each rule's row.
func addRuleMetrics(rules map[string]*RuleRow, effects []RuleEffect, limit int) {
	slices.SortFunc(effects, func(a, b RuleEffect) int {
		return cmp.Or(strings.Compare(a.Rule, b.Rule), cmp.Compare(b.Dropped+b.Changed, a.Dropped+a.Changed),
			cmp.Compare(b.Exceeded, a.Exceeded), strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Metric, b.Metric))
	})
	for _, e := range effects {
		if e.Dropped+e.Changed+e.Exceeded == 0 {
			continue
		}
		r := rules[e.Rule]
		if r == nil {
			r = &RuleRow{Rule: e.Rule, Effects: map[string]uint64{}}
			rules[r.Rule] = r
		}
		if len(r.Metrics) < limit {
			r.Metrics = append(r.Metrics, RuleMetric{Tenant: e.Tenant, Metric: e.Metric, Dropped: e.Dropped, Changed: e.Changed, Exceeded: e.Exceeded})
		}
	}
}
