package processor

import (
	"io"

	"github.com/prometheus/client_golang/prometheus"
)

var errEOF = io.EOF

// Metrics are the processor's Prometheus counters, shared by every rule
// set a process loads, so counters survive a reload.
type Metrics struct {
	matched, dropped, changed *prometheus.CounterVec
	exceeded                  *prometheus.CounterVec
	ResourceLabelsIgnored     prometheus.Counter
	limits                    limiters // limit state, kept across reloads
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
	if reg != nil {
		for _, c := range []prometheus.Collector{m.matched, m.dropped, m.changed, m.exceeded, m.ResourceLabelsIgnored} {
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
