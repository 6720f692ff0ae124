package pipeline

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
)

const numKinds = int(signal.KindIOEvents) + 1

// metrics are the pipeline's own collectors; the receiver registers its
// sluice_receiver_* ones on the same registry.
type metrics struct {
	received, accepted, queuedBytes, invalid *prometheus.CounterVec
	rejected                                 *prometheus.CounterVec
	limited                                  *prometheus.CounterVec
	histMismatch                             *prometheus.CounterVec

	// Per (signal, tenant) series, resolved once so a request does no
	// label hashing.
	mu     sync.RWMutex
	series map[seriesKey]*series

	rows             *prometheus.CounterVec
	badRecords       prometheus.Counter
	quarantined      prometheus.Counter
	skippedBytes     prometheus.Counter
	checkpoints      *prometheus.CounterVec
	checkpointFails  prometheus.Counter
	rewinds          prometheus.Counter
	checkpointSecs   prometheus.Histogram
	checkpointRows   prometheus.Histogram
	checkpointBytes  prometheus.Histogram
	segments         prometheus.Counter
	segmentBytes     prometheus.Counter
	orphans          prometheus.Counter
	bufferedBytes    prometheus.Gauge
	uncommitted      prometheus.Gauge
	committedPos     prometheus.Gauge
	lastCheckpointTS prometheus.Gauge

	tailBytes       prometheus.Gauge
	tailBuilds      prometheus.Counter
	tailBuildErrors prometheus.Counter
	tailRetries     prometheus.Counter
	tailMerges      prometheus.Counter
}

type seriesKey struct {
	kind   signal.Kind
	tenant string
}

type series struct {
	received, accepted, queuedBytes, invalid prometheus.Counter
	rejectedFull, rejectedError              prometheus.Counter
	rejectedDisk                             prometheus.Counter
	rejectedTime                             prometheus.Counter // data points past lake.max_future_skew
	rejectedInvalid                          prometheus.Counter // OTLP histogram points of a shape OTLP forbids
	histMismatch                             prometheus.Counter // OTLP histogram points kept whose count disagrees with their buckets
}

func newMetrics() *metrics {
	st := []string{"signal", "tenant"}
	m := &metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_pipeline_received_records_total",
			Help: "Records (log records, data points, spans) in requests that decoded."}, st),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_pipeline_accepted_records_total",
			Help: "Records made durable in the queue and acknowledged."}, st),
		queuedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_pipeline_queued_bytes_total",
			Help: "Bytes of queue records appended (header and OTLP protobuf body)."}, st),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_pipeline_invalid_requests_total",
			Help: "Requests rejected as undecodable (400 / InvalidArgument); their records are not counted anywhere else."}, st),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_pipeline_rejected_records_total",
			Help: "Decoded records refused: reason=backpressure (queue full, 429), disk (free space below queue.min_free_bytes, 429), error (queue failure, 503), timestamp (OTLP data points past lake.max_future_skew, answered as a partial success) or invalid (OTLP histogram points of a shape OTLP forbids, answered as a partial success)."}, []string{"signal", "tenant", "reason"}),
		histMismatch: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_pipeline_bucket_count_mismatch_points_total",
			Help: "OTLP histogram data points stored although their count disagrees with their buckets (explicit: count other than the bucket sum; exponential: count below the buckets and zero_count); the sender gets a partial-success warning."}, []string{"signal", "tenant"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_pipeline_limited_requests_total",
			Help: "Requests refused (400 / InvalidArgument) for a limit: limit=max_attributes_per_record, max_attributes_per_request, timestamp (a time of 2^63 ns or more, or a data point past lake.max_future_skew), histogram (a histogram point of a shape OTLP forbids) or max_tenants (a new tenant past receivers.otlp.max_tenants)."}, []string{"signal", "limit"}),
		series: make(map[seriesKey]*series),

		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_lake_written_rows_total",
			Help: "Rows handed to the lake writer (replays after a crash or rewind count again)."}, st),
		badRecords: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_lake_bad_records_total",
			Help: "Queue records the lake loop could not decode or write and skipped."}),
		quarantined: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_lake_quarantined_records_total",
			Help: "Queue records (one export request each) the lake could not write and moved to <lake>/_quarantine instead; list them with sluice lake quarantine ls."}),
		skippedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_lake_skipped_queue_bytes_total",
			Help: "Queue bytes the lake loop never read: dropped (drop_oldest) or corrupt."}),
		checkpoints: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_lake_checkpoints_total",
			Help: "Committed checkpoints by reason: interval, buffered, queue, disk, shutdown, request."}, []string{"reason"}),
		checkpointFails: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_lake_checkpoint_failures_total",
			Help: "Checkpoints that failed (flush, write or catalog commit)."}),
		rewinds: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_lake_rewinds_total",
			Help: "Times the lake loop discarded uncommitted work and replayed from the committed queue position."}),
		checkpointSecs: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_lake_checkpoint_duration_seconds",
			Help: "Time to flush the writer and commit a checkpoint.", Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14)}),
		checkpointRows: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_lake_checkpoint_rows",
			Help: "Rows committed per checkpoint.", Buckets: prometheus.ExponentialBuckets(100, 4, 12)}),
		checkpointBytes: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_lake_checkpoint_bytes",
			Help: "Parquet bytes committed per checkpoint.", Buckets: prometheus.ExponentialBuckets(64<<10, 4, 10)}),
		segments: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_lake_segments_total",
			Help: "Parquet files committed to the catalog."}),
		segmentBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_lake_segment_bytes_total",
			Help: "Bytes of Parquet files committed to the catalog."}),
		orphans: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_lake_orphans_removed_total",
			Help: "Uncommitted lake files removed (or quarantined) at start-up or after a failed checkpoint."}),
		bufferedBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_lake_buffered_bytes",
			Help: "Estimated bytes buffered in the lake writer."}),
		uncommitted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_lake_uncommitted_queue_bytes",
			Help: "Queue bytes read by the lake loop since the last checkpoint."}),
		committedPos: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_lake_committed_queue_position",
			Help: "Queue position committed to the catalog."}),
		lastCheckpointTS: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_lake_last_checkpoint_timestamp_seconds",
			Help: "Unix time of the last committed checkpoint."}),

		tailBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_lake_tail_bytes",
			Help: "Bytes of in-memory Parquet files serving the unflushed tail to queries (docs/design/freshness.md)."}),
		tailBuilds: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_lake_tail_builds_total",
			Help: "Times a query read newly acknowledged queue records into the unflushed tail."}),
		tailBuildErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_lake_tail_build_errors_total",
			Help: "Failed reads of the unflushed tail; those queries missed the newest records."}),
		tailMerges: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_lake_tail_merges_total",
			Help: "Times the unflushed tail was read again into one chunk because queries had split it into many."}),
		tailRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_lake_tail_list_retries_total",
			Help: "Query listings tried again because a checkpoint committed while they listed."}),
	}
	return m
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		m.received, m.accepted, m.queuedBytes, m.invalid, m.rejected, m.limited, m.histMismatch,
		m.rows, m.badRecords, m.quarantined, m.skippedBytes, m.checkpoints, m.checkpointFails, m.rewinds,
		m.checkpointSecs, m.checkpointRows, m.checkpointBytes, m.segments, m.segmentBytes, m.orphans,
		m.bufferedBytes, m.uncommitted, m.committedPos, m.lastCheckpointTS,
		m.tailBytes, m.tailBuilds, m.tailBuildErrors, m.tailRetries, m.tailMerges,
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// seriesFor returns the consumer series of one signal and tenant. The
// tenant was validated by the receiver, so the label set stays bounded by
// the tenants clients are allowed to use.
func (m *metrics) seriesFor(kind signal.Kind, tenant string) *series {
	k := seriesKey{kind, tenant}
	m.mu.RLock()
	s := m.series[k]
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s = m.series[k]; s != nil {
		return s
	}
	sig := kind.String()
	s = &series{
		received:        m.received.WithLabelValues(sig, tenant),
		accepted:        m.accepted.WithLabelValues(sig, tenant),
		queuedBytes:     m.queuedBytes.WithLabelValues(sig, tenant),
		invalid:         m.invalid.WithLabelValues(sig, tenant),
		rejectedFull:    m.rejected.WithLabelValues(sig, tenant, "backpressure"),
		rejectedError:   m.rejected.WithLabelValues(sig, tenant, "error"),
		rejectedDisk:    m.rejected.WithLabelValues(sig, tenant, "disk"),
		rejectedTime:    m.rejected.WithLabelValues(sig, tenant, "timestamp"),
		rejectedInvalid: m.rejected.WithLabelValues(sig, tenant, "invalid"),
		histMismatch:    m.histMismatch.WithLabelValues(sig, tenant),
	}
	m.series[k] = s
	return s
}

// queueCollector exports queue.Stats at scrape time.
type queueCollector struct {
	q                                                    func() *queue.Queue
	bytes, records, segments                             *prometheus.Desc
	appends, appended, fsyncs, dropRecs, dropBytes       *prometheus.Desc
	corruptRecs, corruptBytes, tornBytes, first, durable *prometheus.Desc
	freeBytes, minFree, lowDisk                          *prometheus.Desc
	recycled, spareBytes                                 *prometheus.Desc
}

func newQueueCollector(q func() *queue.Queue) *queueCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &queueCollector{
		q:            q,
		bytes:        d("sluice_queue_bytes", "On-disk bytes of all queue segments (the queue depth)."),
		records:      d("sluice_queue_records", "Records stored in the queue (approximate after corruption)."),
		segments:     d("sluice_queue_segments", "Queue segment files."),
		appends:      d("sluice_queue_appends_total", "Successful appends."),
		appended:     d("sluice_queue_appended_records_total", "Records appended."),
		fsyncs:       d("sluice_queue_fsyncs_total", "Segment fsyncs; appends/fsyncs is the group-commit factor."),
		dropRecs:     d("sluice_queue_dropped_records_total", "Records deleted unread by drop_oldest."),
		dropBytes:    d("sluice_queue_dropped_bytes_total", "Bytes deleted unread by drop_oldest."),
		corruptRecs:  d("sluice_queue_corrupt_records_total", "Corrupt regions skipped."),
		corruptBytes: d("sluice_queue_corrupt_bytes_total", "Corrupt bytes skipped."),
		tornBytes:    d("sluice_queue_torn_bytes_total", "Torn tail bytes truncated by recovery."),
		first:        d("sluice_queue_first_position", "Oldest stored queue position."),
		durable:      d("sluice_queue_durable_position", "Queue position after the last acknowledged record."),
		freeBytes:    d("sluice_queue_disk_free_bytes", "Free bytes on the queue's file system at the last check."),
		minFree:      d("sluice_queue_min_free_bytes", "Free space the queue keeps (queue.min_free_bytes resolved); 0 when the file system cannot tell."),
		lowDisk:      d("sluice_queue_low_disk_refusals_total", "Appends refused because they would leave less than queue.min_free_bytes free."),
		recycled:     d("sluice_queue_recycled_segments_total", "Segments started in a released segment's file instead of a new zero-filled one."),
		spareBytes:   d("sluice_queue_spare_bytes", "Released segment files kept for reuse (counted against queue.max_bytes, not in sluice_queue_bytes)."),
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.bytes, c.records, c.segments, c.appends, c.appended, c.fsyncs,
		c.dropRecs, c.dropBytes, c.corruptRecs, c.corruptBytes, c.tornBytes, c.first, c.durable,
		c.freeBytes, c.minFree, c.lowDisk, c.recycled, c.spareBytes} {
		ch <- d
	}
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	q := c.q()
	if q == nil {
		return
	}
	s := q.Stats()
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	k := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	g(c.bytes, float64(s.Bytes))
	g(c.records, float64(s.Records))
	g(c.segments, float64(s.Segments))
	g(c.first, float64(s.First))
	g(c.durable, float64(s.Last))
	k(c.appends, s.Appends)
	k(c.appended, s.AppendedRecords)
	k(c.fsyncs, s.Fsyncs)
	k(c.dropRecs, s.DroppedRecords)
	k(c.dropBytes, s.DroppedBytes)
	k(c.corruptRecs, s.CorruptRecords)
	k(c.corruptBytes, s.CorruptBytes)
	k(c.tornBytes, s.TornBytes)
	g(c.freeBytes, float64(s.FreeBytes))
	g(c.minFree, float64(s.MinFreeBytes))
	k(c.lowDisk, s.LowDiskRefusals)
	k(c.recycled, s.Recycled)
	g(c.spareBytes, float64(s.SpareBytes))
}
