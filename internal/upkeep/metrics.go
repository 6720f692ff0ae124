package upkeep

import "github.com/prometheus/client_golang/prometheus"

// Task names, the task label of the metrics and logs.
const (
	taskCompaction = "compaction"
	taskRollup     = "rollup"
	taskRetention  = "retention"
	taskSweep      = "sweep"
)

// Results of a task pass.
const (
	resultOK        = "ok"
	resultError     = "error"
	resultCancelled = "cancelled"
)

type metrics struct {
	runs         *prometheus.CounterVec
	replaced     *prometheus.CounterVec
	bytesDeleted prometheus.Counter
	lastSuccess  *prometheus.GaugeVec
}

func newMetrics() *metrics {
	return &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_upkeep_runs_total",
			Help: "Upkeep task passes by task (compaction, rollup, retention, sweep) and result (ok, error, cancelled)."}, []string{"task", "result"}),
		replaced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_upkeep_segments_replaced_total",
			Help: "Segments marked replaced by an upkeep task: compaction and rollup inputs, partitions past retention."}, []string{"task"}),
		bytesDeleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_upkeep_bytes_deleted_total",
			Help: "Bytes of replaced segment files the sweeper deleted."}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_upkeep_last_success_timestamp_seconds",
			Help: "Unix time of the last upkeep task pass that ended without error, by task."}, []string{"task"}),
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.runs, m.replaced, m.bytesDeleted, m.lastSuccess} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
