package stats

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
)

// Stat is one entry of a top list, in Prometheus's format.
type Stat struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// HeadStats is Prometheus's headStats over a tenant's active series.
// sluice keeps no chunks: ChunkCount is always 0. MinTime and MaxTime are
// the oldest and newest point times (ms) of the two windows, 0 when none.
type HeadStats struct {
	NumSeries     uint64 `json:"numSeries"`
	NumLabelPairs int    `json:"numLabelPairs"`
	ChunkCount    int64  `json:"chunkCount"`
	MinTime       int64  `json:"minTime"`
	MaxTime       int64  `json:"maxTime"`
}

// TSDBStatus is the data of Prometheus's /api/v1/status/tsdb.
type TSDBStatus struct {
	HeadStats                   HeadStats `json:"headStats"`
	SeriesCountByMetricName     []Stat    `json:"seriesCountByMetricName"`
	LabelValueCountByLabelName  []Stat    `json:"labelValueCountByLabelName"`
	MemoryInBytesByLabelName    []Stat    `json:"memoryInBytesByLabelName"`
	SeriesCountByLabelValuePair []Stat    `json:"seriesCountByLabelValuePair"`
}

// TSDB returns the statistics of tenant's active series, each list cut to
// its limit largest entries (ties by name).
func (s *Stats) TSDB(tenant string, limit int) TSDBStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roll(s.now().UnixNano() / int64(s.cfg.Window))
	out := TSDBStatus{}
	t := s.tenants[tenant]
	if t == nil {
		out.SeriesCountByMetricName, out.LabelValueCountByLabelName = []Stat{}, []Stat{}
		out.MemoryInBytesByLabelName, out.SeriesCountByLabelValuePair = []Stat{}, []Stat{}
		return out
	}
	var byMetric []Stat
	for _, m := range s.metrics {
		if m.tenant != t {
			continue
		}
		if n := m.series[0] + m.series[1]; n > 0 {
			byMetric = append(byMetric, Stat{m.name, uint64(n)})
			out.HeadStats.NumSeries += uint64(n)
		}
	}
	var pl pairLists
	for _, p := range s.pairs {
		if p.tenant != t {
			continue
		}
		if n := p.cnt[0] + p.cnt[1]; n > 0 {
			pl.add(p.name, p.value, p.valueLen, uint64(n))
		}
	}
	lo, hi := min(t.minT[0], t.minT[1]), max(t.maxT[0], t.maxT[1])
	if lo <= hi {
		out.HeadStats.MinTime, out.HeadStats.MaxTime = lo/1e6, hi/1e6
	}
	out.SeriesCountByMetricName = top(byMetric, limit)
	pl.fill(&out, limit)
	return out
}

// pairLists builds the per-label lists of a TSDBStatus from (label, value,
// series count) pairs: distinct values and bytes of values per label name,
// series per pair.
type pairLists struct {
	values, memory map[string]uint64
	byPair         []Stat
	pairs          int
}

// add counts one pair held by n series; valueLen is the value's length
// (the value kept may be cut).
func (l *pairLists) add(name, value string, valueLen int, n uint64) {
	if l.values == nil {
		l.values, l.memory = map[string]uint64{}, map[string]uint64{}
	}
	l.pairs++
	l.values[name]++
	l.memory[name] += uint64(valueLen) * n
	l.byPair = append(l.byPair, Stat{name + "=" + value, n})
}

// fill sets out's label lists, each cut to its limit largest entries, and
// its number of label pairs.
func (l *pairLists) fill(out *TSDBStatus, limit int) {
	out.HeadStats.NumLabelPairs = l.pairs
	out.LabelValueCountByLabelName = top(fromMap(l.values), limit)
	out.MemoryInBytesByLabelName = top(fromMap(l.memory), limit)
	out.SeriesCountByLabelValuePair = top(l.byPair, limit)
}

func fromMap(m map[string]uint64) []Stat {
	out := make([]Stat, 0, len(m))
	for k, v := range m {
		out = append(out, Stat{k, v})
	}
	return out
}

// top sorts by value (largest first), then name, and keeps limit entries.
func top(s []Stat, limit int) []Stat {
	slices.SortFunc(s, func(a, b Stat) int {
		if c := cmp.Compare(b.Value, a.Value); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if s == nil {
		s = []Stat{}
	}
	return s[:min(len(s), limit)]
}

// TenantSummary is one tenant's totals. Series counts Prometheus series;
// rates cover the two windows (see the package doc); Samples and Bytes
// count since start-up.
type TenantSummary struct {
	Tenant        string  `json:"tenant"`
	Series        int64   `json:"series"`
	SamplesPerSec float64 `json:"samples_per_second"`
	BytesPerSec   float64 `json:"bytes_per_second"`
	Samples       uint64  `json:"samples_total"`
	Bytes         uint64  `json:"bytes_total"`
}

// MetricSummary is one metric name of one tenant; fields as in
// TenantSummary. Bytes are the queue record bytes of each batch split
// over its samples evenly. SamplesBeforeRules counts the samples that
// arrived while processing rules were loaded, before the rules ran:
// compared with Samples it says what the rules removed (or, for a
// relabel's or an aggregate's output name, added).
type MetricSummary struct {
	Tenant        string  `json:"tenant"`
	Metric        string  `json:"metric"`
	Series        int64   `json:"series"`
	SamplesPerSec float64 `json:"samples_per_second"`
	BytesPerSec   float64 `json:"bytes_per_second"`
	Samples       uint64  `json:"samples_total"`
	Bytes         uint64  `json:"bytes_total"`
	Before        uint64  `json:"samples_before_rules_total"`
}

// Summary is what `sluice top` shows of the statistics.
type Summary struct {
	WindowSeconds float64 `json:"window_seconds"`
	// TrackedSeries are OTLP series in the table, MaxSeries its bound.
	TrackedSeries int `json:"tracked_series"`
	MaxSeries     int `json:"max_series"`
	// Points of untracked series, untracked metric names and label pairs
	// since start-up (stats.max_*); above zero, counts are lower bounds.
	OverflowSeries     uint64          `json:"overflow_series"`
	OverflowMetrics    uint64          `json:"overflow_metrics"`
	OverflowLabelPairs uint64          `json:"overflow_label_pairs"`
	Tenants            []TenantSummary `json:"tenants"`
	// Metrics holds the limit largest by series, the limit largest by
	// samples/s and the limit with the most samples the rules removed
	// (one list, by series).
	Metrics []MetricSummary `json:"metrics"`
	// Labels are the limit labels with the most distinct values within
	// one metric family: where a cardinality explosion shows.
	Labels []LabelSummary `json:"labels"`
}

// LabelSummary is one label of one metric family (the name before
// _bucket, _sum, _count): its distinct values and OTLP series (a
// histogram counts once) among the active ones.
type LabelSummary struct {
	Tenant string `json:"tenant"`
	Metric string `json:"metric"`
	Label  string `json:"label"`
	Values uint64 `json:"values"`
	Series uint64 `json:"series"`
}

// Summary returns the statistics of one tenant, or of all when tenant is
// "", with at most 3*limit metrics and limit labels.
func (s *Stats) Summary(tenant string, limit int) Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixNano()
	s.roll(now / int64(s.cfg.Window))
	span := time.Duration(now - max(s.start, (s.epoch-1)*int64(s.cfg.Window))).Seconds()
	span = math.Max(span, 1e-3)
	out := Summary{WindowSeconds: s.cfg.Window.Seconds(), TrackedSeries: s.used, MaxSeries: s.cfg.MaxSeries,
		OverflowSeries: s.overSeries, OverflowMetrics: s.overMetrics, OverflowLabelPairs: s.overPairs,
		Tenants: []TenantSummary{}, Metrics: []MetricSummary{}, Labels: []LabelSummary{}}
	series := map[*tenantStats]int64{}
	var ms []MetricSummary
	for _, m := range s.metrics {
		if tenant != "" && m.tenant.name != tenant {
			continue
		}
		n := m.series[0] + m.series[1]
		if n == 0 && m.samples == [2]int64{} && m.before == 0 {
			continue // a descriptor without points
		}
		series[m.tenant] += n
		ms = append(ms, MetricSummary{Tenant: m.tenant.name, Metric: m.name, Series: n,
			SamplesPerSec: float64(m.samples[0]+m.samples[1]) / span, BytesPerSec: (m.bytes[0] + m.bytes[1]) / span,
			Samples: m.total, Bytes: uint64(m.totBytes), Before: m.before})
	}
	for _, t := range s.tenants {
		if tenant != "" && t.name != tenant {
			continue
		}
		out.Tenants = append(out.Tenants, TenantSummary{Tenant: t.name, Series: series[t],
			SamplesPerSec: float64(t.samples[0]+t.samples[1]) / span, BytesPerSec: (t.bytes[0] + t.bytes[1]) / span,
			Samples: t.total, Bytes: uint64(t.totBytes)})
	}
	slices.SortFunc(out.Tenants, func(a, b TenantSummary) int { return strings.Compare(a.Tenant, b.Tenant) })
	byName := func(a, b MetricSummary) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Metric, b.Metric))
	}
	slices.SortFunc(ms, func(a, b MetricSummary) int { return cmp.Or(cmp.Compare(b.Series, a.Series), byName(a, b)) })
	keep := ms[:min(limit, len(ms))]
	rest := slices.Clone(ms[len(keep):])
	slices.SortFunc(rest, func(a, b MetricSummary) int {
		return cmp.Or(cmp.Compare(b.SamplesPerSec, a.SamplesPerSec), byName(a, b))
	})
	out.Metrics = append(out.Metrics, keep...)
	n := min(limit, len(rest))
	out.Metrics = append(out.Metrics, rest[:n]...)
	rest = rest[n:]
	removed := func(m MetricSummary) uint64 { return m.Before - min(m.Before, m.Samples) }
	slices.SortFunc(rest, func(a, b MetricSummary) int { return cmp.Or(cmp.Compare(removed(b), removed(a)), byName(a, b)) })
	for _, m := range rest[:min(limit, len(rest))] {
		if removed(m) > 0 {
			out.Metrics = append(out.Metrics, m)
		}
	}
	slices.SortFunc(out.Metrics, func(a, b MetricSummary) int { return cmp.Or(cmp.Compare(b.Series, a.Series), byName(a, b)) })
	labels := map[*familyLabel]*LabelSummary{}
	for _, p := range s.fpairs {
		n := p.cnt[0] + p.cnt[1]
		if n <= 0 || (tenant != "" && p.fl.tenant.name != tenant) {
			continue
		}
		l := labels[p.fl]
		if l == nil {
			l = &LabelSummary{Tenant: p.fl.tenant.name, Metric: p.fl.family, Label: p.fl.name}
			labels[p.fl] = l
		}
		l.Values++
		l.Series += uint64(n)
	}
	out.Labels = make([]LabelSummary, 0, len(labels))
	for _, l := range labels {
		out.Labels = append(out.Labels, *l)
	}
	slices.SortFunc(out.Labels, func(a, b LabelSummary) int {
		return cmp.Or(cmp.Compare(b.Values, a.Values), strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Metric, b.Metric), strings.Compare(a.Label, b.Label))
	})
	out.Labels = out.Labels[:min(limit, len(out.Labels))]
	return out
}

// collector exports the statistics' own health at scrape time.
type collector struct {
	s                                  *Stats
	active, tracked                    *prometheus.Desc
	overSeries, overMetrics, overPairs *prometheus.Desc
}

// Collector returns the sluice_stats_* metrics of s.
func (s *Stats) Collector() prometheus.Collector {
	return &collector{s: s,
		active:  prometheus.NewDesc("sluice_stats_active_series", "Active Prometheus series per tenant (seen in the current or previous stats.window).", []string{"tenant"}, nil),
		tracked: prometheus.NewDesc("sluice_stats_tracked_series", "OTLP series in the statistics' table (at most stats.max_series).", nil, nil),
		overSeries: prometheus.NewDesc("sluice_stats_series_overflow_total",
			"Points of new series the statistics did not track because stats.max_series were active; counts are lower bounds while it grows.", nil, nil),
		overMetrics: prometheus.NewDesc("sluice_stats_metrics_overflow_total",
			"Metric names the statistics did not track because stats.max_metrics (tenant, name) entries existed.", nil, nil),
		overPairs: prometheus.NewDesc("sluice_stats_label_pairs_overflow_total",
			"Label pairs the statistics did not track because stats.max_label_pairs existed.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.active, c.tracked, c.overSeries, c.overMetrics, c.overPairs} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	s.roll(s.now().UnixNano() / int64(s.cfg.Window))
	active := map[string]int64{}
	for _, t := range s.tenants {
		active[t.name] += 0
	}
	for _, m := range s.metrics {
		active[m.tenant.name] += m.series[0] + m.series[1]
	}
	used, os, om, op := s.used, s.overSeries, s.overMetrics, s.overPairs
	s.mu.Unlock()
	for t, n := range active {
		ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(n), t)
	}
	ch <- prometheus.MustNewConstMetric(c.tracked, prometheus.GaugeValue, float64(used))
	ch <- prometheus.MustNewConstMetric(c.overSeries, prometheus.CounterValue, float64(os))
	ch <- prometheus.MustNewConstMetric(c.overMetrics, prometheus.CounterValue, float64(om))
	ch <- prometheus.MustNewConstMetric(c.overPairs, prometheus.CounterValue, float64(op))
}

// Tally builds a TSDBStatus from series given one by one: the lake's series
// of a window, for a process that does not see data arrive (`sluice
// query-server`). Its lists mean what TSDB's do, over those series.
type Tally struct {
	metrics map[string]uint64
	pairs   map[[2]string]uint64
	series  uint64
}

// Add counts one series (distinct series only: the caller deduplicates).
func (t *Tally) Add(l labels.Labels) {
	if t.metrics == nil {
		t.metrics, t.pairs = map[string]uint64{}, map[[2]string]uint64{}
	}
	t.series++
	l.Range(func(p labels.Label) {
		if p.Name == labels.MetricName {
			t.metrics[p.Value]++
		}
		t.pairs[[2]string{p.Name, p.Value}]++
	})
}

// Status returns the counted series' statistics, each list cut to its
// limit largest entries (ties by name); mint and maxt (ms) are the window.
func (t *Tally) Status(limit int, mint, maxt int64) TSDBStatus {
	out := TSDBStatus{HeadStats: HeadStats{NumSeries: t.series}}
	if t.series > 0 {
		out.HeadStats.MinTime, out.HeadStats.MaxTime = mint, maxt
	}
	var pl pairLists
	for p, n := range t.pairs { // __name__ counts as a label, as in TSDB
		pl.add(p[0], p[1], len(p[1]), n)
	}
	out.SeriesCountByMetricName = top(fromMap(t.metrics), limit)
	pl.fill(&out, limit)
	return out
}
