package processor

import (
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/signal"
)

var errEOF = io.EOF

// Metrics are the processor's Prometheus counters, shared by every rule
// set a process loads, so counters survive a reload.
type Metrics struct {
	matched, dropped, changed *prometheus.CounterVec
	exceeded                  *prometheus.CounterVec
	ResourceLabelsIgnored     prometheus.Counter
	limits                    limiters    // limit state, kept across reloads
	aggs                      aggregators // aggregate and downsample state, kept across reloads

	aggLate, aggOverflow, aggOutOfOrder, aggEmitted *prometheus.CounterVec

	eff effects // what each rule did per tenant and metric name (effects.go)
}

// ruleCounters are one rule's counters, resolved once per load.
type ruleCounters struct {
	matched, dropped, changed prometheus.Counter
	exceeded                  prometheus.Counter
}

// NewMetrics creates the counters and registers them on reg (if not nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		matched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_processor_rule_matched_total",
			Help: "Points (log records) a processing rule's matcher selected; for a shadow rule too."}, []string{"rule"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_processor_rule_dropped_total",
			Help: "Points (log records) a rule dropped; for a shadow rule, those it would have dropped."}, []string{"rule"}),
		changed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_processor_rule_changed_total",
			Help: "Points a relabel rule changed; for a shadow rule, those it would have changed."}, []string{"rule"}),
		exceeded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_processor_limit_exceeded_total",
			Help: "Points of series over a limit rule's limit, whatever its exceed_action (refuse, strip_label, sample, report)."}, []string{"rule"}),
		ResourceLabelsIgnored: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_processor_relabel_resource_labels_ignored_total",
			Help: "Points whose relabeled job, instance or service_name could not be applied (they come from the resource; see docs/rules.md)."}),
	}
	m.aggLate = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_processor_aggregate_late_points_total",
		Help: "Points an aggregate or downsample rule did not take because their interval was already emitted (kept as they were)."}, []string{"rule"})
	m.aggOverflow = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_processor_aggregate_overflow_points_total",
		Help: "Points an aggregate or downsample rule did not take because its groups (max_groups) or counter series were full (kept as they were)."}, []string{"rule"})
	m.aggOutOfOrder = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_processor_aggregate_out_of_order_points_total",
		Help: "Counter points not newer than their series' previous one, left out of total, increase and rate_sum."}, []string{"rule"})
	m.aggEmitted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_processor_aggregate_emitted_points_total",
		Help: "Output points aggregate and downsample rules emitted."}, []string{"rule"})
	m.eff.max = DefaultMaxRuleEffects
	m.eff.overflow = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_processor_rule_effects_overflow_points_total",
		Help: "Points a rule dropped or changed that the per-metric effects table (processors.max_rule_effects) had no room for; the rule's own counters still count them."})
	if reg != nil {
		for _, c := range []prometheus.Collector{m.matched, m.dropped, m.changed, m.exceeded, m.ResourceLabelsIgnored,
			m.aggLate, m.aggOverflow, m.aggOutOfOrder, m.aggEmitted, m.eff.overflow} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) forRule(name string) *ruleCounters {
	return &ruleCounters{
		matched:  m.matched.WithLabelValues(name),
		dropped:  m.dropped.WithLabelValues(name),
		changed:  m.changed.WithLabelValues(name),
		exceeded: m.exceeded.WithLabelValues(name),
	}
}

func (m *Metrics) aggCounters(name string) *aggCounters {
	return &aggCounters{late: m.aggLate.WithLabelValues(name), overflow: m.aggOverflow.WithLabelValues(name),
		outOfOrder: m.aggOutOfOrder.WithLabelValues(name), emitted: m.aggEmitted.WithLabelValues(name)}
}

// Flush emits the output points of every aggregate and downsample rule
// whose interval (plus flush_delay) ended by now, one call of emit per
// tenant and interval, and forgets those intervals. It returns the points
// emitted and the first error emit returned. State is kept in m, across
// reloads of the rules file, so one caller flushing m emits each interval
// once. Calls are serialised.
func (m *Metrics) Flush(now time.Time, emit Emit) (int, error) {
	return m.aggs.flush(now.UnixNano(), func(_, tenant string, b *signal.Metrics) error { return emit(tenant, b) })
}

// FlushSets is Flush naming, for each call of emit, the rule set whose
// rule made the points ("" for the default one), so the caller can route
// each set's output to the pipelines that run it.
func (m *Metrics) FlushSets(now time.Time, emit EmitSet) (int, error) {
	return m.aggs.flush(now.UnixNano(), emit)
}

// HasAggregation reports whether r has aggregate or downsample rules (the
// caller then runs Flush on a timer).
func (r *Rules) HasAggregation() bool {
	if r == nil {
		return false
	}
	for i := range r.metrics {
		if r.metrics[i].agg != nil {
			return true
		}
	}
	return false
}
