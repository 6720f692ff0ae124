package prom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/promname"
	"github.com/sluice-dev/sluice/internal/prw"
)

// ErrLimit is wrapped by every error that stops a query for exceeding a
// configured limit (series, samples or bytes).
var ErrLimit = errors.New("query limit exceeded")

// Limits bound what one query may read. Zero means unlimited.
type Limits struct {
	MaxSeries  int   // series a query may select, over all its selectors
	MaxSamples int64 // samples a query may load from the lake
	MaxBytes   int64 // compressed column bytes a query may read
	// Charge, when set, is told the memory (SampleBytes a sample) of the
	// samples a query loads; an error from it stops the query and should
	// wrap ErrLimit. The caller's memory budget lives behind it.
	Charge func(bytes int64) error
}

// SampleBytes is what one loaded sample holds in memory: a timestamp and
// a value.
const SampleBytes = 16

// Stats count what queries read.
type Stats struct {
	Files, RowGroups, Rows, Bytes, Series, Samples atomic.Int64
	RollupFiles                                    atomic.Int64 // metrics_rollup files read
	// RollupSelects counts selectors answered (in part) from rollups;
	// RollupFallbacks those that tried and read raw points because what
	// they select has no exact rollup aggregate; RollupSeriesRaw the series
	// read again from raw points because their data did not allow one.
	RollupSelects, RollupFallbacks, RollupSeriesRaw atomic.Int64
}

// Options configure an Adapter.
type Options struct {
	Catalog *catalog.Catalog
	Store   lake.Store
	Logger  *slog.Logger
	// Registerer gets the sluice_query_* counters; nil registers nothing.
	Registerer prometheus.Registerer
	// IndexCacheFiles bounds the per-file metric indexes kept (default 10000).
	IndexCacheFiles int
	// LabelCacheSeries bounds the series label sets kept (default 1,000,000).
	LabelCacheSeries int
	// Rollups lets selectors that a rollup tier answers exactly read
	// metrics_rollup (see rollupUse); it needs the query's statement in
	// the context (WithStatement).
	Rollups bool
	// Tail adds the unflushed tail to the raw segments (tail.go); Store
	// must open its paths.
	Tail lake.TailSource
}

// Adapter reads Prometheus series from the metrics table of the lake. It
// is safe for concurrent use; every query is scoped to one tenant.
type Adapter struct {
	cat     *catalog.Catalog
	store   lake.Store
	log     *slog.Logger
	idx     *indexCache
	labels  *labelCache
	rollups bool
	tail    lake.TailSource

	srcMu   sync.Mutex
	srcRows map[string]int64 // rollup path -> sluice.rollup.source_rows

	// Stats accumulate over all queries (for tests and benchmarks).
	Stats Stats

	rowsTotal, bytesTotal, filesTotal prometheus.Counter
	rollupSelects, rollupFallbacks    prometheus.Counter
	rollupSeriesRaw                   prometheus.Counter
}

// NewAdapter returns an Adapter over the catalog and store.
func NewAdapter(o Options) (*Adapter, error) {
	if o.Catalog == nil || o.Store == nil {
		return nil, errors.New("prom: adapter needs a catalog and a store")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.IndexCacheFiles <= 0 {
		o.IndexCacheFiles = 10000
	}
	if o.LabelCacheSeries <= 0 {
		o.LabelCacheSeries = 1_000_000
	}
	a := &Adapter{
		cat: o.Catalog, store: o.Store, log: o.Logger, rollups: o.Rollups, tail: o.Tail, srcRows: map[string]int64{},
		idx:    newIndexCache(o.IndexCacheFiles),
		labels: &labelCache{max: o.LabelCacheSeries, m: map[labelKey]labels.Labels{}},
		rowsTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_query_rows_scanned_total",
			Help: "Metric rows read from the lake by PromQL queries."}),
		bytesTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_query_bytes_scanned_total",
			Help: "Compressed column bytes read from the lake by PromQL queries."}),
		filesTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_query_files_opened_total",
			Help: "Lake files opened by PromQL queries."}),
		rollupSelects: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_query_rollup_selects_total",
			Help: "PromQL selectors answered (in part) from metrics_rollup."}),
		rollupFallbacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_query_rollup_fallbacks_total",
			Help: "PromQL selectors that tried metrics_rollup and read raw points because the rollup could not give the exact answer."}),
		rollupSeriesRaw: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_query_rollup_series_raw_total",
			Help: "Series of PromQL selectors read from raw points after their rollups could not give the exact answer."}),
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{a.rowsTotal, a.bytesTotal, a.filesTotal, a.rollupSelects, a.rollupFallbacks, a.rollupSeriesRaw} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("prom: register metrics: %w", err)
			}
		}
	}
	return a, nil
}

// Queryable returns a storage.Queryable over the tenant's metrics. The
// limits apply to each query separately (one Querier per query).
func (a *Adapter) Queryable(tenant string, lim Limits) storage.Queryable {
	return storage.QueryableFunc(func(mint, maxt int64) (storage.Querier, error) {
		return a.Querier(tenant, lim, mint, maxt), nil
	})
}

// Querier returns a Querier of the tenant's metrics over [mint, maxt]
// (ms): what Queryable hands the engine, with the methods for several
// match[] sets (SeriesOf, LabelNamesOf, LabelValuesOf) besides.
func (a *Adapter) Querier(tenant string, lim Limits, mint, maxt int64) *Querier {
	return &Querier{a: a, tenant: tenant, lim: lim, mint: mint, maxt: maxt}
}

// Querier reads one tenant's series for one query. Its limits count over
// all its Selects. Not safe for concurrent Selects (the engine does not
// issue any).
type Querier struct {
	a          *Adapter
	tenant     string
	lim        Limits
	mint, maxt int64
	series     int
	samples    int64
	bytes      int64
	tailHeld   []func() // tail files listed by this querier (tail.go)
}

// Close releases the tail files the querier listed; series own their
// samples.
func (q *Querier) Close() error { q.releaseTail(); return nil }

// Select returns the series matching ms with samples in the hinted range
// (milliseconds, inclusive), sorted by labels.
func (q *Querier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	labelsOnly := false
	if hints != nil {
		mint, maxt = hints.Start, hints.End
		labelsOnly = hints.Func == "series"
	}
	ss, err := q.selectSeries(ctx, mint, maxt, labelsOnly, hints, [][]*labels.Matcher{ms})
	if err != nil {
		return storage.ErrSeriesSet(storageErr(err))
	}
	return &seriesSet{s: ss, i: -1}
}

// storageErr marks a failure to read the lake (a segment missing or
// corrupt, the store or catalog unreachable) as the engine's ErrStorage,
// which the API answers as Prometheus does a storage error: 500 internal,
// a fault of the server that a client may retry, not 422 for its query.
// A limit, and the query's own deadline or cancellation, stay as they are.
func storageErr(err error) error {
	if err == nil || errors.Is(err, ErrLimit) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return promql.ErrStorage{Err: err}
}

// LabelNames returns the label names of the matching series.
func (q *Querier) LabelNames(ctx context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	v, err := q.LabelNamesOf(ctx, [][]*labels.Matcher{ms})
	return v, nil, err
}

// LabelValues returns the values of label name on the matching series.
func (q *Querier) LabelValues(ctx context.Context, name string, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	v, err := q.LabelValuesOf(ctx, name, [][]*labels.Matcher{ms})
	return v, nil, err
}

// SeriesOf returns the label sets of the series with a point in the
// querier's range that any of sets selects (the match[] sets of
// /api/v1/series), sorted, each once. One scan of the lake serves every
// set: a file is read when some set may select from it, a metric's rows
// when some set's __name__ matchers take the metric.
func (q *Querier) SeriesOf(ctx context.Context, sets [][]*labels.Matcher) ([]labels.Labels, error) {
	ss, err := q.selectSeries(ctx, q.mint, q.maxt, true, nil, sets)
	if err != nil {
		return nil, storageErr(err)
	}
	out := make([]labels.Labels, len(ss))
	for i, s := range ss {
		out[i] = s.lbls
	}
	return out, nil
}

// LabelNamesOf returns the label names of the series any of sets selects,
// sorted, in one scan (SeriesOf).
func (q *Querier) LabelNamesOf(ctx context.Context, sets [][]*labels.Matcher) ([]string, error) {
	ss, err := q.selectSeries(ctx, q.mint, q.maxt, true, nil, sets)
	if err != nil {
		return nil, storageErr(err)
	}
	set := map[string]struct{}{}
	for _, s := range ss {
		s.lbls.Range(func(l labels.Label) { set[l.Name] = struct{}{} })
	}
	return sortedKeys(set), nil
}

// LabelValuesOf returns the values of label name on the series any of
// sets selects, sorted, in one scan (SeriesOf). __name__ with a set that
// selects everything is answered from the file indexes alone.
func (q *Querier) LabelValuesOf(ctx context.Context, name string, sets [][]*labels.Matcher) ([]string, error) {
	if name == labels.MetricName && slices.ContainsFunc(sets, func(ms []*labels.Matcher) bool { return len(ms) == 0 }) {
		names, err := q.metricNames(ctx)
		return names, storageErr(err)
	}
	ss, err := q.selectSeries(ctx, q.mint, q.maxt, true, nil, sets)
	if err != nil {
		return nil, storageErr(err)
	}
	set := map[string]struct{}{}
	for _, s := range ss {
		if v := s.lbls.Get(name); v != "" {
			set[v] = struct{}{}
		}
	}
	return sortedKeys(set), nil
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// metricNames answers label values of __name__ from file indexes alone.
func (q *Querier) metricNames(ctx context.Context) ([]string, error) {
	set := map[string]struct{}{}
	err := q.eachFile(ctx, q.mint, q.maxt, func(_ *parquet.File, idx *fileIndex) error {
		for _, rg := range idx.rgs {
			for _, r := range rg.runs {
				for _, o := range r.desc.outputs {
					set[o.name] = struct{}{}
				}
			}
		}
		return nil
	}, true)
	return sortedKeys(set), err
}

// eachFile lists the tenant's live metrics segments overlapping [mint,
// maxt] (ms) that some matcher set may select from (every one without
// sets) and calls fn with each opened file and its index. With indexOnly,
// files whose index is cached are not opened (fn gets nil).
func (q *Querier) eachFile(ctx context.Context, mint, maxt int64, fn func(*parquet.File, *fileIndex) error, indexOnly bool, sets ...[]*labels.Matcher) error {
	if len(sets) == 0 {
		sets = [][]*labels.Matcher{nil}
	}
	tasks, err := q.plan(ctx, mint, maxt, sets, nil)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if err := ctx.Err(); err != nil {
			return err
		}
		if indexOnly {
			if idx := q.a.idx.get(t.path); idx != nil {
				if err := fn(nil, idx); err != nil {
					return err
				}
				continue
			}
		}
		if err := q.withFile(t.path, fn); err != nil {
			return err
		}
	}
	return nil
}

// taskMode says how a query reads a file.
type taskMode uint8

const (
	modeRaw    taskMode = iota // a raw metrics file: its points
	modeRollup                 // a metrics_rollup file: one tier's windows, as rollupUse says
)

type fileTask struct {
	path string
	mode taskMode
}

type hourKey struct {
	day  string
	hour int
}

// start is the hour's first instant in unix ns (ok false for a malformed
// partition).
func (h hourKey) start() (int64, bool) {
	d, err := time.Parse(time.DateOnly, h.day)
	if err != nil || h.hour < 0 || h.hour > 23 {
		return 0, false
	}
	return d.Add(time.Duration(h.hour) * time.Hour).UnixNano(), true
}

// plan lists the files a selector reads: every live raw segment
// overlapping [mint, maxt] (ms), or with ru (a range function the rollups
// answer exactly, see rollupUse) per hour the coarsest tier ru allows
// that is fresh for the hour (computed from the hour's current raw rows)
// instead of the hour's raw segments. Hours without such a tier read raw
// segments; hours whose raw data is gone (retention) read their rollups.
// The hours served from rollups are recorded in ru.hours. With several
// matcher sets (a union), a segment is read when any set may select from
// it.
func (q *Querier) plan(ctx context.Context, mint, maxt int64, sets [][]*labels.Matcher, ru *rollupUse) ([]fileTask, error) {
	f := catalog.Filter{Table: lake.TableMetrics, Tenant: q.tenant, From: msToNs(mint), To: msToNs(maxt) + 999_999}
	prunes := make([]segmentPrune, len(sets))
	for i, ms := range sets {
		prunes[i] = pruneOf(ms)
	}
	skip := func(seg catalog.Segment) bool {
		for _, p := range prunes {
			if !p.skips(seg) {
				return false
			}
		}
		return true
	}
	service := ""
	if len(prunes) > 0 && !slices.ContainsFunc(prunes, func(p segmentPrune) bool { return p.service != prunes[0].service }) {
		service = prunes[0].service // the catalog filters by one service
	}
	if ru == nil {
		f.Service = service // else every raw segment counts for freshness
	}
	segs, err := q.listRaw(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list segments of tenant %q: %w", q.tenant, err)
	}
	var tasks []fileTask
	raw := map[hourKey][]catalog.Segment{}
	for _, seg := range segs {
		if seg.Tenant != q.tenant {
			continue // never trust a filter to keep tenants apart
		}
		raw[hourKey{seg.Day, seg.Hour}] = append(raw[hourKey{seg.Day, seg.Hour}], seg)
	}
	var rolls map[hourKey]map[int][]catalog.Segment
	if ru != nil {
		f.Table = rollupTable
		rs, err := q.a.cat.List(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("list rollups of tenant %q: %w", q.tenant, err)
		}
		rolls = map[hourKey]map[int][]catalog.Segment{}
		for _, seg := range rs {
			if seg.Tenant != q.tenant || seg.Level <= 0 || !ru.grid.fits(int64(seg.Level)*1000) {
				continue
			}
			h := hourKey{seg.Day, seg.Hour}
			if rolls[h] == nil {
				rolls[h] = map[int][]catalog.Segment{}
			}
			rolls[h][seg.Level] = append(rolls[h][seg.Level], seg)
		}
	}
	hours := make([]hourKey, 0, len(raw)+len(rolls))
	for h := range raw {
		hours = append(hours, h)
	}
	for h := range rolls {
		if _, ok := raw[h]; !ok {
			hours = append(hours, h)
		}
	}
	slices.SortFunc(hours, func(a, b hourKey) int {
		if c := strings.Compare(a.day, b.day); c != 0 {
			return c
		}
		return a.hour - b.hour
	})
	for _, h := range hours {
		if tier := q.freshTier(h, raw[h], rolls[h]); tier > 0 {
			hs, _ := h.start()
			ru.hours[hs] = true
			for _, seg := range rolls[h][tier] {
				if !skip(seg) {
					tasks = append(tasks, fileTask{seg.Path, modeRollup})
				}
			}
			continue
		}
		for _, seg := range raw[h] {
			if !skip(seg) {
				tasks = append(tasks, fileTask{seg.Path, modeRaw})
			}
		}
	}
	return tasks, nil
}

// segmentPrune is what a matcher set tells of the segments it may select
// from: service_name="x" excludes segments that record their services and
// lack x; __name__="y" those whose recorded OTLP metric names cannot map
// to y.
type segmentPrune struct{ service, name string }

func pruneOf(ms []*labels.Matcher) segmentPrune {
	var p segmentPrune
	for _, m := range ms {
		if m.Type != labels.MatchEqual || m.Value == "" {
			continue
		}
		switch m.Name {
		case labelServiceName:
			p.service = m.Value
		case labels.MetricName:
			p.name = m.Value
		}
	}
	return p
}

func (p segmentPrune) skips(seg catalog.Segment) bool {
	return lacks(seg.Services, p.service) || !mayHoldMetric(seg.MetricNames, p.name)
}

// lacks reports whether a segment's recorded services exclude service
// (an empty list is unknown, so it matches), as catalog.Filter.Service.
func lacks(services []string, service string) bool {
	return service != "" && len(services) > 0 && !slices.Contains(services, service)
}

// freshTier returns the coarsest tier (level, in seconds) of the hour's
// rollups that reflects its current raw rows, or 0. An hour with a raw
// segment holding points outside the hour (a far-future point is filed
// under its arrival hour, and rollups leave it out) or with rows in the
// unflushed tail has none.
func (q *Querier) freshTier(h hourKey, raw []catalog.Segment, byLevel map[int][]catalog.Segment) int {
	hs, ok := h.start()
	if !ok {
		return 0
	}
	var rows int64
	for _, s := range raw {
		if s.MinTime < hs || s.MaxTime >= hs+int64(time.Hour) || lake.IsTailPath(s.Path) {
			return 0 // the unflushed tail's rows are in no rollup yet
		}
		rows += s.Rows
	}
	best := 0
	for level, rs := range byLevel {
		if level <= best {
			continue
		}
		fresh := true
		for _, r := range rs {
			if len(raw) == 0 {
				break // raw data gone: the rollup is all there is
			}
			if n, ok := q.a.sourceRows(r.Path, q.a.store); !ok || n != rows {
				fresh = false
				break
			}
		}
		if fresh {
			best = level
		}
	}
	return best
}

func (q *Querier) withFile(path string, fn func(*parquet.File, *fileIndex) error) (err error) {
	// parquet-go may panic on corrupt pages; one bad file fails the query
	// with its name instead of the process.
	defer format.Recover(&err, "read segment %q", path)
	r, err := lake.OpenSegment(q.a.store, path)
	if err != nil {
		return fmt.Errorf("open segment %q: %w", path, err)
	}
	defer r.Close()
	pf, err := format.Open(readerAt{r}, r.Size(), path, parquet.SkipBloomFilters(true))
	if err != nil {
		return err
	}
	q.a.filesTotal.Inc()
	q.a.Stats.Files.Add(1)
	idx := q.a.idx.get(path)
	if idx == nil {
		if idx, err = buildIndex(pf); err != nil {
			return fmt.Errorf("index segment %q: %w", path, err)
		}
		q.a.idx.put(path, idx)
	}
	if err := fn(pf, idx); err != nil {
		if errors.Is(err, ErrLimit) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return fmt.Errorf("read segment %q: %w", path, err)
	}
	return nil
}

type readerAt struct {
	r interface {
		ReadAt([]byte, int64) (int, error)
	}
}

func (r readerAt) ReadAt(p []byte, off int64) (int, error) { return r.r.ReadAt(p, off) }

func msToNs(ms int64) int64 {
	if ms > math.MaxInt64/1_000_000-1 {
		return math.MaxInt64 - 1_000_000
	}
	if ms < math.MinInt64/1_000_000+1 {
		return math.MinInt64 + 1_000_000
	}
	return ms * 1_000_000
}

// selectSeries reads the matching series. Label sets that several lake
// series share (they differ only in resource attributes that are not
// labels) merge into one series. A selector the rollups can answer
// exactly (rollupUse) reads them for the hours they cover; series whose
// data does not allow the exact answer are read again from raw points
// (seriesRollup.bad), and when what it selects does not (errInexact),
// the whole selector is. Several matcher sets select their union (a
// series any set matches) in one scan; only labels-only selects have
// more than one.
func (q *Querier) selectSeries(ctx context.Context, mint, maxt int64, labelsOnly bool, hints *storage.SelectHints, sets [][]*labels.Matcher) ([]*series, error) {
	if mint > maxt || len(sets) == 0 {
		return nil, nil
	}
	if ru := q.rollupUse(ctx, hints, labelsOnly); ru != nil {
		series, samples := q.series, q.samples
		out, err := q.scanTasks(ctx, mint, maxt, labelsOnly, sets, ru, nil)
		if !errors.Is(err, errInexact) {
			return out, err
		}
		// The bytes read stay counted; series and samples are read again.
		q.series, q.samples = series, samples
		q.a.Stats.RollupFallbacks.Add(1)
		q.a.rollupFallbacks.Inc()
	}
	return q.scanTasks(ctx, mint, maxt, labelsOnly, sets, nil, nil)
}

// scanTasks plans and reads one selector: raw points only when ru is
// nil (of the lake series in only, when not nil), else per hour a rollup
// tier or raw points (plan).
func (q *Querier) scanTasks(ctx context.Context, mint, maxt int64, labelsOnly bool, sets [][]*labels.Matcher, ru *rollupUse, only map[uint64]bool) ([]*series, error) {
	nameSets := nameMatchers(sets)
	sc := &scan{q: q, sets: sets, labelsOnly: labelsOnly, mint: msToNs(mint), maxt: msToNs(maxt) + 999_999,
		byHash: map[uint64][]*series{}, bySID: map[sidKey]*series{}, only: only}
	tasks, err := q.plan(ctx, mint, maxt, sets, ru)
	if err != nil {
		return nil, err
	}
	if ru != nil && len(ru.hours) > 0 {
		sc.ru = ru // else every hour is raw: nothing to check
	}
	read := func(pf *parquet.File, idx *fileIndex) error {
		if idx.rollup {
			q.a.Stats.RollupFiles.Add(1)
		}
		for g := range idx.rgs {
			rg := &idx.rgs[g]
			if rg.minT > rg.maxT || rg.maxT < sc.mint || rg.minT > sc.maxt {
				continue
			}
			counted := false
			for _, r := range rg.runs {
				outs := matchingOutputs(r.desc, nameSets, sc.outs[:0])
				if len(outs) == 0 {
					continue
				}
				sc.outs = outs
				if err := ctx.Err(); err != nil {
					return err
				}
				if sc.ru != nil && !sc.ru.serves(r.desc.kind) {
					return errInexact
				}
				if !counted {
					q.a.Stats.RowGroups.Add(1)
					counted = true
				}
				if idx.rollup {
					err = sc.readRollupRun(pf, idx, g, r)
				} else {
					err = sc.readRun(pf, idx, g, r)
				}
				if err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, t := range tasks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := q.withFile(t.path, read); err != nil {
			return nil, err
		}
	}
	out := sc.all
	if sc.ru == nil {
		for _, s := range out {
			s.finish()
		}
	} else {
		var bad map[uint64]bool
		served := false
		good := out[:0]
		for _, s := range out {
			if !sc.ru.finish(s) {
				if bad == nil {
					bad = map[uint64]bool{}
				}
				for _, id := range s.ru.sids {
					bad[id] = true
				}
				q.series-- // counted again when read from raw points
				q.a.Stats.RollupSeriesRaw.Add(1)
				q.a.rollupSeriesRaw.Inc()
				continue
			}
			served = served || s.ru.win
			s.ru = nil
			good = append(good, s)
		}
		if served {
			q.a.Stats.RollupSelects.Add(1)
			q.a.rollupSelects.Inc()
		}
		out = good
		if len(bad) > 0 {
			raw, err := q.scanTasks(ctx, mint, maxt, labelsOnly, sets, nil, bad)
			if err != nil {
				return nil, err
			}
			out = append(out, raw...)
		}
	}
	slices.SortFunc(out, func(a, b *series) int { return labels.Compare(a.lbls, b.lbls) })
	return out, nil
}

// nameMatchers returns the __name__ matchers of each set.
func nameMatchers(sets [][]*labels.Matcher) [][]*labels.Matcher {
	out := make([][]*labels.Matcher, len(sets))
	for i, ms := range sets {
		for _, m := range ms {
			if m.Name == labels.MetricName {
				out[i] = append(out[i], m)
			}
		}
	}
	return out
}

// matchingOutputs appends the outputs of d whose name some set of
// __name__ matchers takes.
func matchingOutputs(d *metricDesc, nameSets [][]*labels.Matcher, dst []output) []output {
	for _, o := range d.outputs {
		if slices.ContainsFunc(nameSets, func(ms []*labels.Matcher) bool { return matchesAll(ms, o.name) }) {
			dst = append(dst, o)
		}
	}
	return dst
}

// matchesAll says whether v meets every matcher of ms (of one label).
func matchesAll(ms []*labels.Matcher, v string) bool {
	for _, m := range ms {
		if !m.Matches(v) {
			return false
		}
	}
	return true
}

// labelCache holds the label set (without __name__) of lake series by
// tenant, series_id and whether the series was sent by remote write: a
// series' labels are a function of its attributes, which its id hashes,
// and of how they are named (remote write: verbatim; OTLP: mapped; the id
// does not hash the scope), so they are read from the file once.
type labelCache struct {
	mu  sync.Mutex
	max int
	m   map[labelKey]labels.Labels
}

type labelKey struct {
	tenant string
	id     uint64
	rw     bool
}

func (c *labelCache) get(tenant string, id uint64, rw bool) (labels.Labels, bool) {
	c.mu.Lock()
	l, ok := c.m[labelKey{tenant, id, rw}]
	c.mu.Unlock()
	return l, ok
}

func (c *labelCache) put(tenant string, id uint64, rw bool, l labels.Labels) {
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m) // crude but bounded; entries are cheap to rebuild
	}
	c.m[labelKey{tenant, id, rw}] = l
	c.mu.Unlock()
}

func formatLabelValue(v parquet.Value, kind byte) string {
	switch kind {
	case 'i':
		return strconv.FormatInt(v.Int64(), 10)
	case 'd':
		return strconv.FormatFloat(v.Double(), 'g', -1, 64)
	case 'b':
		return strconv.FormatBool(v.Boolean())
	}
	return string(v.ByteArray())
}

type attrLabel = promname.AttrLabel

// Metadata describes one Prometheus metric name.
type Metadata struct {
	Name, Type, Help, Unit string
}

// Metadata lists the metric names of the tenant (all of them, or only
// metric when it is not "") with their Prometheus type and unit, from the
// file indexes. An OTLP metric has the type and OTLP unit its Prometheus
// name is derived from and no help (descriptions are not indexed); a
// remote-write metric has the type, help and unit sent with it (each
// distinct one), or type "unknown" when it was sent without metadata.
func (a *Adapter) Metadata(ctx context.Context, tenant, metric string) (_ []Metadata, err error) {
	defer func() { err = storageErr(err) }()
	q := &Querier{a: a, tenant: tenant, mint: math.MinInt64 / 2_000_000, maxt: math.MaxInt64 / 2_000_000}
	defer q.Close()
	seen := map[Metadata]struct{}{}
	var out []Metadata
	add := func(m Metadata) {
		if _, ok := seen[m]; !ok {
			seen[m] = struct{}{}
			out = append(out, m)
		}
	}
	bare := map[string]bool{} // remote-write names with rows sent without metadata
	err = q.eachFile(ctx, q.mint, q.maxt, func(_ *parquet.File, idx *fileIndex) error {
		for _, rg := range idx.rgs {
			for _, r := range rg.runs {
				d := r.desc
				if d.kind == kindUnsupported || (metric != "" && d.base != metric) {
					continue
				}
				dm := idx.meta[d]
				if dm == nil || dm.otlp {
					add(Metadata{Name: d.base, Type: d.promType(), Unit: d.unit})
				}
				if dm == nil {
					continue
				}
				for _, m := range dm.rw {
					if m.bare {
						bare[d.base] = true
					} else {
						add(Metadata{Name: d.base, Type: m.typ, Help: m.help, Unit: m.unit})
					}
				}
			}
		}
		return nil
	}, true)
	if err != nil {
		return nil, err
	}
	// Metadata sent without series (Prometheus sends it so): kept by
	// family in the catalog.
	fams, err := a.cat.ListFamilyMetadata(ctx, tenant, metric)
	if err != nil {
		return nil, err
	}
	for _, f := range fams {
		add(Metadata{Name: f.Name, Type: f.Type, Help: f.Help, Unit: f.Unit})
	}
	// Rows without metadata add "unknown" only to a name nothing else
	// describes, neither itself nor its family.
	has := map[string]bool{}
	for _, m := range out {
		has[m.Name] = true
	}
	described := func(name string) bool {
		for f := range prw.FamilyOf(name) {
			if has[f] {
				return true
			}
		}
		return false
	}
	for name := range bare {
		if !described(name) {
			out = append(out, Metadata{Name: name, Type: "unknown"})
		}
	}
	slices.SortStableFunc(out, func(x, y Metadata) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// rollupTable is the rollup table.
const rollupTable = format.TableRollup

// sourceRows reads (once per file) the raw row count a rollup file was
// computed from; ok is false when it cannot be read.
func (a *Adapter) sourceRows(path string, store lake.Store) (int64, bool) {
	a.srcMu.Lock()
	n, ok := a.srcRows[path]
	a.srcMu.Unlock()
	if ok {
		return n, true
	}
	r, err := lake.OpenSegment(store, path)
	if err != nil {
		return 0, false
	}
	defer r.Close()
	pf, err := format.Open(readerAt{r}, r.Size(), path, parquet.SkipBloomFilters(true))
	if err != nil {
		return 0, false
	}
	v, _ := pf.Lookup(format.MetaRollupSourceRows)
	n, err = strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false
	}
	a.srcMu.Lock()
	if len(a.srcRows) > 100_000 {
		clear(a.srcRows)
	}
	a.srcRows[path] = n
	a.srcMu.Unlock()
	return n, true
}
