package exporter

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports every Runner's stats at scrape time.
type Collector struct {
	runners func() []*Runner

	sent, sentBytes, bad, skipped, failed, retried, dropped, droppedBytes *prometheus.Desc
	lagBytes, lagSeconds, breaker, breakerOpened, droppedPoints           *prometheus.Desc
	trimmedExemplars, fallbacks, rejected, inFlight, splits               *prometheus.Desc
}

// NewCollector returns a collector over the runners runners returns.
func NewCollector(runners func() []*Runner) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append([]string{"exporter"}, labels...), nil)
	}
	return &Collector{
		runners:          runners,
		sent:             d("sluice_exporter_sent_records_total", "Queue records (OTLP requests) delivered: every endpoint accepted them."),
		sentBytes:        d("sluice_exporter_sent_bytes_total", "Bytes of OTLP bodies in delivered records, before compression."),
		bad:              d("sluice_exporter_bad_records_total", "Queue records skipped because they do not parse."),
		skipped:          d("sluice_exporter_skipped_records_total", "Queue records of signals this exporter does not forward."),
		failed:           d("sluice_exporter_failed_requests_total", "Requests that failed (transport error or non-2xx), retried or not.", "endpoint"),
		retried:          d("sluice_exporter_retried_requests_total", "Failed requests retried (429, 5xx, transport errors).", "endpoint"),
		dropped:          d("sluice_exporter_dropped_requests_total", "Requests refused for good (4xx other than 429) and dropped; a 413 only for a request of one sample, histogram or record, which cannot be split.", "endpoint"),
		splits:           d("sluice_exporter_split_requests_total", "Requests an endpoint refused as too large (413) and that were sent again as two requests of half the series (remote write) or records (OTLP over HTTP).", "endpoint"),
		droppedBytes:     d("sluice_exporter_dropped_bytes_total", "Queue bytes this exporter skipped: reason=max_backlog_bytes or max_backlog_age (its bounds), queue_full (the queue's drop_oldest deleted them first).", "reason"),
		lagBytes:         d("sluice_exporter_queue_lag_bytes", "Queue bytes acknowledged but not yet delivered by this exporter."),
		lagSeconds:       d("sluice_exporter_queue_lag_seconds", "Age of the oldest queue segment holding undelivered data; 0 when caught up."),
		breaker:          d("sluice_exporter_breaker_state", "Circuit breaker of an endpoint: 0 closed, 1 half-open, 2 open.", "endpoint"),
		droppedPoints:    d("sluice_exporter_dropped_points_total", "Data points the exporter's format cannot carry (remote write 1.0: delta sums and histograms, unknown types), dropped; and metric bodies that do not decode (reason=bad_body).", "reason"),
		breakerOpened:    d("sluice_exporter_breaker_opened_total", "Times an endpoint's breaker opened.", "endpoint"),
		trimmedExemplars: d("sluice_exporter_exemplars_trimmed_total", "Exemplars whose labels passed OpenMetrics' 128 runes and were sent with trace_id and span_id only (remote write)."),
		rejected:         d("sluice_exporter_rejected_items_total", "Items (log records, data points, spans) an endpoint refused within a request it accepted (an OTLP partial success); not retried.", "endpoint"),
		inFlight:         d("sluice_exporter_requests_in_flight", "Requests of an endpoint being sent now (at most its concurrency).", "endpoint"),
		fallbacks:        d("sluice_exporter_protocol_fallbacks_total", "Endpoints of a remote-write 2.0 exporter that get 1.0 since they answered 2.0 with 415, or with a 2xx without the X-Prometheus-Remote-Write-*-Written headers (a 1.0 receiver)."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sent, c.sentBytes, c.bad, c.skipped, c.failed, c.retried, c.dropped, c.droppedBytes, c.lagBytes, c.lagSeconds, c.breaker, c.breakerOpened, c.droppedPoints, c.trimmedExemplars, c.fallbacks, c.rejected, c.inFlight, c.splits} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	runners := c.runners()
	for _, g := range groupByName(runners) {
		n := g.name
		counter(c.sent, g.sent, n)
		counter(c.sentBytes, g.sentBytes, n)
		counter(c.bad, g.bad, n)
		counter(c.skipped, g.skipped, n)
		counter(c.droppedBytes, g.droppedBacklog, n, "max_backlog_bytes")
		counter(c.droppedBytes, g.droppedAge, n, "max_backlog_age")
		counter(c.droppedBytes, g.lost, n, "queue_full")
		ch <- prometheus.MustNewConstMetric(c.lagBytes, prometheus.GaugeValue, float64(g.lagBytes), n)
		ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, g.lagSeconds, n)
		if g.points {
			counter(c.droppedPoints, g.unsupported, n, "unsupported")
			counter(c.droppedPoints, g.badBodies, n, "bad_body")
		}
		if g.exemplars {
			counter(c.trimmedExemplars, g.trimmed, n)
		}
		if g.fallback {
			counter(c.fallbacks, g.fallbacks, n)
		}
	}
	for _, r := range runners {
		n := r.Name()
		for _, ep := range r.Endpoints() {
			counter(c.failed, ep.Stats.Failed.Load(), n, ep.Name)
			counter(c.retried, ep.Stats.Retried.Load(), n, ep.Name)
			counter(c.dropped, ep.Stats.Dropped.Load(), n, ep.Name)
			counter(c.rejected, ep.Stats.Rejected.Load(), n, ep.Name)
			counter(c.splits, ep.Stats.Splits.Load(), n, ep.Name)
			counter(c.breakerOpened, ep.Breaker.Opened(), n, ep.Name)
			ch <- prometheus.MustNewConstMetric(c.breaker, prometheus.GaugeValue, float64(ep.Breaker.State()), n, ep.Name)
			ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(ep.InFlight()), n, ep.Name)
		}
	}
}

// group is the stats of the runners of one exporter: one, or one per
// endpoint when the exporter has several (each on a cursor of its own),
// which all read the same records. A record counts as sent, bad or
// skipped once every runner got past it (the least of theirs); the lag
// and the bytes skipped are the largest endpoint's; what every runner
// counts of the same records (points a format cannot carry, trimmed
// exemplars) is the largest count, so it is not counted once per
// endpoint; protocol fallbacks, one per endpoint, add up.
type group struct {
	name                                       string
	sent, sentBytes, bad, skipped              uint64
	droppedBacklog, droppedAge, lost           uint64
	lagBytes                                   int64
	lagSeconds                                 float64
	points, exemplars, fallback                bool
	unsupported, badBodies, trimmed, fallbacks uint64
}

// groupByName groups runners by exporter name, in their order.
func groupByName(runners []*Runner) []*group {
	var out []*group
	by := map[string]*group{}
	for _, r := range runners {
		st := r.Stats()
		g := by[r.Name()]
		if g == nil {
			g = &group{name: r.Name(), sent: st.SentRecords, sentBytes: st.SentBytes, bad: st.BadRecords, skipped: st.Skipped}
			by[g.name] = g
			out = append(out, g)
		}
		g.sent, g.sentBytes = min(g.sent, st.SentRecords), min(g.sentBytes, st.SentBytes)
		g.bad, g.skipped = min(g.bad, st.BadRecords), min(g.skipped, st.Skipped)
		g.droppedBacklog = max(g.droppedBacklog, st.Cursor.DroppedBytes-st.Cursor.DroppedAge)
		g.droppedAge = max(g.droppedAge, st.Cursor.DroppedAge)
		g.lost = max(g.lost, st.Cursor.LostBytes)
		g.lagBytes, g.lagSeconds = max(g.lagBytes, st.Cursor.LagBytes), max(g.lagSeconds, st.Cursor.LagSeconds)
		if pc, ok := r.o.Sender.(pointCounter); ok {
			unsupported, bad := pc.DroppedPoints()
			g.points, g.unsupported, g.badBodies = true, max(g.unsupported, unsupported), max(g.badBodies, bad)
		}
		if ec, ok := r.o.Sender.(exemplarCounter); ok {
			g.exemplars, g.trimmed = true, max(g.trimmed, ec.TrimmedExemplars())
		}
		if fc, ok := r.o.Sender.(fallbackCounter); ok {
			g.fallback = true
			g.fallbacks += fc.Fallbacks()
		}
	}
	return out
}

// pointCounter is a Sender that converts points and may drop some.
type pointCounter interface {
	DroppedPoints() (unsupported, badBodies uint64)
}

// exemplarCounter is a Sender that may cut exemplars' labels.
type exemplarCounter interface {
	TrimmedExemplars() uint64
}

// fallbackCounter is a Sender whose endpoints may fall back to an older
// protocol.
type fallbackCounter interface {
	Fallbacks() uint64
}
