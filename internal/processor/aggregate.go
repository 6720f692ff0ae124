package processor

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Aggregation (action aggregate, like vmagent's stream aggregation) and
// downsampling (action downsample) share one engine: matched gauge and sum
// points are folded into per-group state, per interval aligned to the
// clock by the point's own timestamp, and Flush emits one point per group
// and output at the interval's end once the interval (plus flush_delay)
// is over. A group is a set of output labels: by/without labels of the
// input series (aggregate), or the whole series (downsample).
//
// State lives in Metrics (by rule name and settings), so it survives a
// reload of the rules file, and one Flush caller emits it: a reload
// neither loses nor doubles an interval. It is not durable: a restart
// loses the open intervals.

// aggSpec is what an aggregator's state depends on.
type aggSpec struct {
	interval, delay time.Duration
	outputs         string // joined, in order
	downsample      bool
	maxGroups       int
	relabels        string // input and output relabel configs, as YAML
}

// Output kinds.
const (
	outSum uint8 = iota
	outCount
	outMin
	outMax
	outAvg
	outLast
	outTotal
	outIncrease
	outRateSum
	outQuantiles
	outHistogramBucket
	outHistogram    // explicit-bucket histogram inputs: their buckets summed per group
	outTotalProm    // total without the first sample of new series
	outIncreaseProm // increase without the first sample of new series
	outRateAvg
	outCountSeries
	outUniqueSamples
	outStddev
	outStdvar
)

var outputNames = map[string]uint8{
	"sum": outSum, "count": outCount, "min": outMin, "max": outMax, "avg": outAvg, "last": outLast,
	"total": outTotal, "increase": outIncrease, "rate_sum": outRateSum, "histogram_bucket": outHistogramBucket,
	"histogram": outHistogram, "total_prometheus": outTotalProm, "increase_prometheus": outIncreaseProm,
	"rate_avg": outRateAvg, "count_series": outCountSeries, "unique_samples": outUniqueSamples,
	"stddev": outStddev, "stdvar": outStdvar,
	// vmagent's names for sum and count, so its configs carry over with
	// their output names.
	"sum_samples": outSum, "count_samples": outCount,
}

// downsampleOutputs are the outputs downsample allows.
var downsampleOutputs = map[string]bool{"sum": true, "count": true, "min": true, "max": true, "avg": true, "last": true}

// aggOutput is one compiled output.
type aggOutput struct {
	kind      uint8
	name      string    // as written, "quantiles(0.5, 0.9)" as "quantiles"
	quantiles []float64 // outQuantiles
}

// parseOutputs compiles outputs like ["sum", "quantiles(0.5, 0.99)"].
func parseOutputs(in []string, downsample bool) ([]aggOutput, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("outputs is required")
	}
	var out []aggOutput
	seen := map[string]bool{}
	for _, o := range in {
		o = strings.TrimSpace(o)
		var ao aggOutput
		if rest, ok := strings.CutPrefix(o, "quantiles("); ok && strings.HasSuffix(rest, ")") {
			ao = aggOutput{kind: outQuantiles, name: "quantiles"}
			for _, f := range strings.Split(strings.TrimSuffix(rest, ")"), ",") {
				q, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
				if err != nil || !(q >= 0 && q <= 1) {
					return nil, fmt.Errorf("output %q: quantile %q is not a number in [0, 1]", o, f)
				}
				ao.quantiles = append(ao.quantiles, q)
			}
		} else if k, ok := outputNames[o]; ok {
			ao = aggOutput{kind: k, name: o}
		} else {
			return nil, fmt.Errorf("unknown output %q (want sum, count, sum_samples, count_samples, min, max, avg, last, stddev, stdvar, count_series, unique_samples, total, total_prometheus, increase, increase_prometheus, rate_sum, rate_avg, quantiles(...), histogram_bucket, histogram)", o)
		}
		if downsample && !downsampleOutputs[ao.name] {
			return nil, fmt.Errorf("output %q is not a downsample output (want avg, min, max, sum, last, count)", o)
		}
		if seen[ao.name] {
			return nil, fmt.Errorf("output %q given twice", ao.name)
		}
		seen[ao.name] = true
		out = append(out, ao)
	}
	return out, nil
}

// aggTarget is what a series feeds, computed once per series (decision).
type aggTarget struct {
	key        uint64        // the group, before the tenant is mixed in
	cumulative bool          // the series is a cumulative counter (or a gauge), not a delta sum
	hist       bool          // the series is an explicit-bucket histogram (output histogram)
	own        bool          // the series' own (downsample), not interned: its decision counts it
	labels     labels.Labels // output labels, without __name__
	prefix     string        // output names: prefix + "_" + output (aggregate)
	desc       outDesc       // downsample with one output: the input's metric

	// The group of the last point fed through this target, guarded by the
	// aggregator's mutex. A flushed interval takes no more points, so a
	// group found here is never one already emitted.
	cur      *aggGroup
	curStart int64
	curG     uint64
}

// outDesc is the OTLP metric a downsample with one output writes: the
// input's own, so PromQL shows the same series.
type outDesc struct {
	name, unit, description string
	typ                     signal.MetricType
	temporality             signal.Temporality
	monotonic               bool
}

// aggregator is one aggregate or downsample rule's state.
type aggregator struct {
	mu           sync.Mutex
	set          string // the rule set (ParseSet) the rule is in; "" for the default one
	spec         aggSpec
	outputs      []aggOutput
	outRelabel   []*relabel.Config // output_relabel_configs
	needCtr      bool              // an output needs per-series counter state
	needQ        bool              // an output needs the values (quantiles)
	needH        bool              // histogram_bucket
	needSeries   bool              // count_series
	needUniq     bool              // unique_samples
	needStd      bool              // stddev, stdvar
	needExtra    bool              // any of the three: the group has a groupExtra
	histOut      bool              // output histogram: takes explicit-bucket histogram points
	scalarOut    bool              // an output other than histogram: takes gauge and sum points
	hseries      int               // histogram series with a last point in all open buckets
	buckets      map[int64]*aggBucket
	last         *aggBucket // the bucket of the previous point (most are in it)
	totals       map[uint64]*aggTotal
	series       map[uint64]*ctrSeries
	targets      map[aggTargetKey]*aggTarget // shared by the decisions of a group's series
	flushed      int64                       // end of the last interval flushed, unix ns
	groups       int                         // groups in all open buckets
	distinct     int                         // series ids and values held for count_series and unique_samples
	warmEnd      int64                       // total, increase: first samples count from the interval starting here
	warmSet      bool
	emptyFlushes int // retired: flushes in a row that found it empty
	c            *aggCounters
}

type aggBucket struct {
	start  int64
	groups map[uint64]*aggGroup
}

// aggGroup accumulates one group's points of one interval.
type aggGroup struct {
	tenant string
	t      *aggTarget
	sum    float64
	count  uint64
	min    float64
	max    float64
	last   float64
	lastT  int64
	inc    float64     // increase: reset-aware deltas in the interval
	first  float64     // total, increase: first values of new series (past the warm-up)
	rate   float64     // rate_sum: sum over series of their current inc/dt
	rateN  int         // rate_avg: the series in rate
	extra  *groupExtra // stddev, stdvar, count_series, unique_samples: few rules ask
	values []float64
	hist   map[int32]uint64
	total  *aggTotal

	// Output histogram: the bounds of the group's first histogram point;
	// delta inputs add into hcounts, hcount and hsum; cumulative ones
	// keep each series' last point of the interval in hlast.
	hbounds []float64
	hcounts []uint64
	hcount  uint64
	hsum    float64
	hlast   map[uint64]*histLast
}

// groupExtra is a group's state for the outputs few rules ask for, apart
// so that the group the common outputs update stays small.
type groupExtra struct {
	mean, m2 float64              // stddev, stdvar: running mean and sum of squared deviations (Welford)
	series   map[uint64]struct{}  // count_series
	uniq     map[float64]struct{} // unique_samples
}

// histLast is a cumulative histogram series' last point of an interval.
type histLast struct {
	t      int64
	counts []uint64
	count  uint64
	sum    float64
}

// aggTotal is a group's running total (output total) of the intervals
// emitted so far, kept across intervals while the group keeps getting
// points. Intervals are emitted in order, so an interval's total is this
// plus its own increase, however many intervals are open at once.
type aggTotal struct {
	v     float64 // total_prometheus
	first float64 // what total adds: first values of new series
	seen  int64   // start of the last interval with a point
}

// ctrSeries is one input series' counter state.
type ctrSeries struct {
	last   float64
	lastT  int64
	bucket int64   // interval of inc and firstT
	inc    float64 // reset-aware increase in that interval
	firstT int64   // time of the sample before the interval's first delta
	rate   float64 // this series' contribution to its group's rate
	rated  bool    // rate holds a contribution (counted in the group's rateN)
}

type aggCounters struct {
	late, overflow, outOfOrder, emitted countAdder
}

type countAdder interface{ Add(float64) }

// maxQuantileValues bounds the values a group keeps per interval for
// quantiles; past it a deterministic reservoir sample is kept.
const maxQuantileValues = 4096

// maxCounterSeries bounds the input series an aggregator keeps counter
// state for (total, increase, rate_sum: 16 bytes of key and about 64 of
// state each); points of further series are not aggregated (overflow).
const maxCounterSeries = 1 << 21

// stale is how many intervals without a point drop a group's total and a
// series' counter state. It is also the warm-up of total and increase:
// during the first stale intervals of an aggregator a series seen for the
// first time may be an old one (sluice just started), so its first value
// is only a baseline, as in total_prometheus; later a new series counts
// from 0 (vmagent: staleness_interval).
const stale = 5

// maxDistinct bounds the series ids (count_series) and values
// (unique_samples) an aggregator holds across its open intervals; past it
// further ones are not recorded (counted as overflow), so these outputs
// undercount rather than grow without bound.
const maxDistinct = 1 << 21

type aggTargetKey struct {
	key        uint64
	cumulative bool
	hist       bool
}

// intern returns the aggregator's target equal to at, so the series of
// one group share one (their decisions hold a pointer, not a copy of the
// output labels). The table starts over past twice max_groups.
func (a *aggregator) intern(at *aggTarget) *aggTarget {
	k := aggTargetKey{at.key, at.cumulative, at.hist}
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.targets[k]; t != nil && t.prefix == at.prefix && labels.Equal(t.labels, at.labels) {
		return t
	}
	if len(a.targets) >= 2*a.spec.maxGroups {
		clear(a.targets)
	}
	a.targets[k] = at
	return at
}

func newAggregator(spec aggSpec, outs []aggOutput) *aggregator {
	a := &aggregator{spec: spec, outputs: outs, buckets: map[int64]*aggBucket{}, targets: map[aggTargetKey]*aggTarget{},
		totals: map[uint64]*aggTotal{}, series: map[uint64]*ctrSeries{}}
	for _, o := range outs {
		switch o.kind {
		case outTotal, outIncrease, outRateSum, outTotalProm, outIncreaseProm, outRateAvg:
			a.needCtr = true
		case outCountSeries:
			a.needSeries = true
		case outUniqueSamples:
			a.needUniq = true
		case outStddev, outStdvar:
			a.needStd = true
		case outQuantiles:
			a.needQ = true
		case outHistogramBucket:
			a.needH = true
		}
		a.needExtra = a.needSeries || a.needUniq || a.needStd
		if o.kind == outHistogram {
			a.histOut = true
		} else {
			a.scalarOut = true
		}
	}
	return a
}

// bucketLocked returns the bucket of the clock-aligned interval holding t,
// made on first use, or nil (counted as late) when that interval was
// already flushed. a.mu must be held.
func (a *aggregator) bucketLocked(t int64) *aggBucket {
	iv := int64(a.spec.interval)
	start := t - t%iv
	if t < 0 && t%iv != 0 {
		start -= iv
	}
	if start+iv <= a.flushed {
		a.c.late.Add(1)
		return nil
	}
	b := a.last
	if b == nil || b.start != start {
		b = a.buckets[start]
		if b == nil {
			b = &aggBucket{start: start, groups: map[uint64]*aggGroup{}}
			a.buckets[start] = b
		}
		a.last = b
	}
	return b
}

// add folds a point (value v at t of input series id, of a cumulative
// counter when cumulative) into group g of target at. It reports false
// when the point was not taken (late, or beyond max_groups): the caller
// keeps it as it was.
func (a *aggregator) add(g uint64, tenant string, at *aggTarget, id uint64, t int64, v float64, cumulative bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.bucketLocked(t)
	if b == nil {
		return false
	}
	start := b.start
	var cs *ctrSeries
	if a.needCtr && cumulative {
		cs = a.series[id]
		if cs == nil && len(a.series) >= maxCounterSeries {
			a.c.overflow.Add(1)
			return false
		}
	}
	// Most points find their group through the target (the group of the
	// series' last point), without a map lookup.
	var gr *aggGroup
	if at.curStart == start && at.curG == g && at.cur != nil {
		gr = at.cur
	} else {
		gr = b.groups[g]
	}
	if gr == nil {
		if a.groups >= a.spec.maxGroups {
			a.c.overflow.Add(1)
			return false
		}
		a.groups++
		gr = &aggGroup{tenant: strings.Clone(tenant), t: at, min: math.Inf(1), max: math.Inf(-1), lastT: math.MinInt64}
		b.groups[g] = gr
	}
	at.cur, at.curStart, at.curG = gr, start, g
	gr.sum += v
	gr.count++
	gr.min = math.Min(gr.min, v)
	gr.max = math.Max(gr.max, v)
	if t >= gr.lastT {
		gr.last, gr.lastT = v, t
	}
	if a.needQ {
		if len(gr.values) < maxQuantileValues {
			gr.values = append(gr.values, v)
		} else if k := mix(id^uint64(t)) % gr.count; k < maxQuantileValues {
			gr.values[k] = v
		}
	}
	if a.needExtra {
		a.addExtra(gr, id, v)
	}
	if a.needH {
		if gr.hist == nil {
			gr.hist = map[int32]uint64{}
		}
		if vb, ok := vmBucket(v); ok {
			gr.hist[vb]++
		}
	}
	if a.needCtr {
		a.counter(g, gr, cs, start, id, t, v, cumulative)
	}
	return true
}

// addExtra folds value v of input series id into the state of stddev,
// stdvar, count_series and unique_samples. a.mu must be held.
func (a *aggregator) addExtra(gr *aggGroup, id uint64, v float64) {
	x := gr.extra
	if x == nil {
		x = &groupExtra{}
		gr.extra = x
	}
	if a.needStd {
		// Welford's update: numerically stable where sum of squares is not.
		d := v - x.mean
		x.mean += d / float64(gr.count)
		x.m2 += d * (v - x.mean)
	}
	if a.needSeries {
		if x.series == nil {
			x.series = map[uint64]struct{}{}
		}
		if _, ok := x.series[id]; !ok && a.roomForDistinct() {
			x.series[id] = struct{}{}
		}
	}
	if a.needUniq {
		if x.uniq == nil {
			x.uniq = map[float64]struct{}{}
		}
		if _, ok := x.uniq[v]; !ok && a.roomForDistinct() {
			x.uniq[v] = struct{}{}
		}
	}
}

// roomForDistinct reports whether one more series id or value may be
// held for count_series or unique_samples, and takes it; past
// maxDistinct it counts an overflow. a.mu must be held.
func (a *aggregator) roomForDistinct() bool {
	if a.distinct >= maxDistinct {
		a.c.overflow.Add(1)
		return false
	}
	a.distinct++
	return true
}

// counter updates the counter outputs with the point's reset-aware
// increase. The first sample of a series (or a delta point's value) is
// its baseline: a cumulative series contributes from its second sample.
func (a *aggregator) counter(g uint64, gr *aggGroup, s *ctrSeries, start int64, id uint64, t int64, v float64, cumulative bool) {
	if gr.total == nil {
		tot := a.totals[g]
		if tot == nil {
			tot = &aggTotal{}
			a.totals[g] = tot
		}
		gr.total = tot
	}
	gr.total.seen = max(gr.total.seen, start)
	var d float64
	if !cumulative {
		d = v // a delta point is its own increase
		gr.inc += d
		return
	}
	if !a.warmSet {
		a.warmEnd, a.warmSet = start+stale*int64(a.spec.interval), true
	}
	if s == nil {
		a.series[id] = &ctrSeries{last: v, lastT: t, bucket: start, firstT: t}
		if start >= a.warmEnd {
			gr.first += v // a new series counts from 0 (total, increase)
		}
		return
	}
	if t <= s.lastT {
		a.c.outOfOrder.Add(1)
		return
	}
	d = v - s.last
	if v < s.last {
		d = v // a reset: the counter restarted from 0
	}
	if s.bucket != start {
		s.bucket, s.inc, s.firstT, s.rate, s.rated = start, 0, s.lastT, 0, false
	}
	s.inc += d
	s.last, s.lastT = v, t
	gr.inc += d
	r := s.inc / (float64(t-s.firstT) / 1e9)
	gr.rate += r - s.rate
	s.rate = r
	if !s.rated {
		s.rated = true
		gr.rateN++
	}
}

// histogram_bucket buckets values as vmagent does (VictoriaMetrics'
// metrics.Histogram): per power of ten from 1e-9 to 1e18, 18 buckets of
// width 0.5·10^e ((1.0, 1.5], (1.5, 2.0], ... (9.5, 10]·10^e), each
// holding its upper bound (Prometheus' le), named "<start>...<end>" with
// one decimal ("1.5e0...2.0e0"); 0 has the bucket "0...0", values below
// 1e-9 "0...1.0e-9", values above 1e18 "1.0e18...+Inf". Negative values
// and NaN are not counted.
const (
	vmE10Min      = -9
	vmE10Max      = 18
	vmPerDecade   = 18
	vmBucketZero  = -1
	vmBucketLower = -2
	vmBucketUpper = -3
	vmEps         = 0.005 // how near a bucket's upper bound counts as on it
)

// vmBucket returns v's bucket: (decade-vmE10Min)·18+offset, or one of
// vmBucketZero, vmBucketLower, vmBucketUpper; ok is false for a negative
// value or NaN.
func vmBucket(v float64) (b int32, ok bool) {
	switch {
	case v != v || v < 0:
		return 0, false
	case v == 0:
		return vmBucketZero, true
	case math.IsInf(v, 1):
		return vmBucketUpper, true
	}
	e10 := int(math.Floor(math.Log10(v)))
	if e10 < vmE10Min {
		return vmBucketLower, true
	}
	if e10 >= vmE10Max {
		if e10 == vmE10Max && math.Abs(math.Pow10(e10)-v) < vmEps {
			return (vmE10Max-vmE10Min)*vmPerDecade - 1, true // 1e18 is the last bucket's bound
		}
		return vmBucketUpper, true
	}
	m := (v/math.Pow10(e10) - 1) * 2
	off := min(max(int(m), 0), vmPerDecade-1)
	idx := (e10-vmE10Min)*vmPerDecade + off
	if math.Abs(float64(off)-m) < vmEps {
		idx-- // on a bound: the bucket below holds it
		if idx < 0 {
			return vmBucketLower, true
		}
	}
	return int32(idx), true
}

// vmOrder sorts buckets by value: zero, lower, the decades, upper.
func vmOrder(b int32) int64 {
	switch b {
	case vmBucketZero:
		return -2
	case vmBucketLower:
		return -1
	case vmBucketUpper:
		return math.MaxInt32
	}
	return int64(b)
}

// vmRange is the vmrange label of bucket b.
func vmRange(b int32) string {
	switch b {
	case vmBucketZero:
		return "0...0"
	case vmBucketLower:
		return fmt.Sprintf("0...1.0e%d", vmE10Min)
	case vmBucketUpper:
		return fmt.Sprintf("1.0e%d...+Inf", vmE10Max)
	}
	e10, off := int(b)/vmPerDecade+vmE10Min, int(b)%vmPerDecade
	bound := func(e10, k int) string { // 1 + k/2 times 10^e10, k in 0..18
		if k == 2*9 {
			return fmt.Sprintf("1.0e%d", e10+1)
		}
		return fmt.Sprintf("%.1fe%d", 1+float64(k)/2, e10)
	}
	return bound(e10, off) + "..." + bound(e10, off+1)
}

// Emit receives the output points of one tenant; the batch is only valid
// during the call.
type Emit func(tenant string, b *signal.Metrics) error

// EmitSet is Emit with the rule set (ParseSet; "" for the default one)
// whose rule made the points.
type EmitSet func(set, tenant string, b *signal.Metrics) error

// flush emits every interval that ended (end + flush_delay <= now), in
// order, per tenant into out (reset per tenant), and forgets it.
func (a *aggregator) flush(now int64, out *signal.Metrics, emit Emit) (points int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	iv := int64(a.spec.interval)
	var starts []int64
	for s := range a.buckets {
		if s+iv+int64(a.spec.delay) <= now {
			starts = append(starts, s)
		}
	}
	slices.Sort(starts)
	for _, s := range starts {
		b := a.buckets[s]
		keys := make([]uint64, 0, len(b.groups))
		for k := range b.groups {
			keys = append(keys, k)
		}
		// Tenants apart, each in a stable order (tests and output files).
		sort.Slice(keys, func(i, j int) bool {
			gi, gj := b.groups[keys[i]], b.groups[keys[j]]
			if gi.tenant != gj.tenant {
				return gi.tenant < gj.tenant
			}
			return keys[i] < keys[j]
		})
		for i := 0; i < len(keys); {
			tenant := b.groups[keys[i]].tenant
			out.Reset()
			w := newOutWriter(out)
			for ; i < len(keys) && b.groups[keys[i]].tenant == tenant; i++ {
				g := b.groups[keys[i]]
				a.emitGroup(w, g, s+iv, iv)
				if g.total != nil {
					g.total.v += g.inc
					g.total.first += g.first
				}
				if g.extra != nil {
					a.distinct -= len(g.extra.series) + len(g.extra.uniq)
				}
			}
			points += out.Len()
			if out.Len() > 0 {
				if e := emit(tenant, out); e != nil && err == nil {
					err = e
				}
			}
		}
		a.groups -= len(b.groups)
		for _, g := range b.groups {
			a.hseries -= len(g.hlast)
			if g.t.cur == g {
				// The target (held by the series' cached decision) lets
				// go of the emitted group: an idle series would keep it.
				g.t.cur = nil
			}
		}
		delete(a.buckets, s)
		if a.last == b {
			a.last = nil
		}
		a.flushed = max(a.flushed, s+iv)
	}
	if len(starts) > 0 {
		a.expire(starts[len(starts)-1])
	}
	a.c.emitted.Add(float64(points))
	return points, err
}

// expire drops totals and counter states not fed for stale intervals.
func (a *aggregator) expire(lastStart int64) {
	old := lastStart - stale*int64(a.spec.interval)
	for k, t := range a.totals {
		if t.seen < old {
			delete(a.totals, k)
		}
	}
	for k, s := range a.series {
		if s.lastT < old {
			delete(a.series, k)
		}
	}
}

func (a *aggregator) emitGroup(w *outWriter, g *aggGroup, end, iv int64) {
	if g.t.hist {
		a.emitHistogram(w, g, end)
		return
	}
	if a.spec.downsample && len(a.outputs) == 1 {
		// The series itself, at the interval's end.
		a.point(w, g.t.desc, g.t.labels, "", "", end, a.value(a.outputs[0].kind, g, iv))
		return
	}
	gauge := outDesc{typ: signal.MetricGauge}
	for _, o := range a.outputs {
		gauge.name = g.t.prefix + "_" + o.name
		switch o.kind {
		case outHistogram:
			continue // histogram groups only (emitHistogram)
		case outQuantiles:
			vs := slices.Clone(g.values)
			slices.Sort(vs)
			for _, q := range o.quantiles {
				a.point(w, gauge, g.t.labels, "quantile", strconv.FormatFloat(q, 'g', -1, 64), end, quantile(vs, q))
			}
		case outHistogramBucket:
			bs := make([]int32, 0, len(g.hist))
			for b := range g.hist {
				bs = append(bs, b)
			}
			slices.SortFunc(bs, func(x, y int32) int { return cmp.Compare(vmOrder(x), vmOrder(y)) })
			for _, b := range bs {
				a.point(w, gauge, g.t.labels, "vmrange", vmRange(b), end, float64(g.hist[b]))
			}
		default:
			switch o.kind {
			case outTotal, outIncrease, outRateSum, outTotalProm, outIncreaseProm:
				if g.total == nil {
					continue // no counter point
				}
			case outRateAvg:
				if g.rateN == 0 {
					continue // no series with a rate yet (as vmagent)
				}
			}
			a.point(w, gauge, g.t.labels, "", "", end, a.value(o.kind, g, iv))
		}
	}
}

// point writes an output point through the rule's output_relabel_configs.
func (a *aggregator) point(w *outWriter, d outDesc, ls labels.Labels, extraName, extraValue string, t int64, v float64) {
	if a.outRelabel != nil {
		var ok bool
		if d, ls, ok = a.relabelOutput(d, ls, extraName, extraValue); !ok {
			return
		}
		extraName, extraValue = "", ""
	}
	w.point(d, ls, extraName, extraValue, t, v)
}

// relabelOutput applies output_relabel_configs to an output series (d's
// name as __name__, ls and extraName=extraValue); ok is false when they
// drop it. The flush path, once per output series and interval.
func (a *aggregator) relabelOutput(d outDesc, ls labels.Labels, extraName, extraValue string) (outDesc, labels.Labels, bool) {
	lb := labels.NewBuilder(ls)
	lb.Set(labels.MetricName, d.name)
	if extraName != "" {
		lb.Set(extraName, extraValue)
	}
	in := lb.Labels()
	if !relabel.ProcessBuilder(lb, a.outRelabel...) || !finishRelabel(lb, in) {
		return d, ls, false
	}
	d.name = lb.Get(labels.MetricName)
	lb.Del(labels.MetricName)
	return d, lb.Labels(), true
}

func (a *aggregator) value(kind uint8, g *aggGroup, iv int64) float64 {
	switch kind {
	case outSum:
		return g.sum
	case outCount:
		return float64(g.count)
	case outMin:
		return g.min
	case outMax:
		return g.max
	case outAvg:
		return g.sum / float64(g.count)
	case outLast:
		return g.last
	case outTotal:
		// The total before this interval (flushed in order) plus its own.
		return g.total.v + g.total.first + g.inc + g.first
	case outTotalProm:
		return g.total.v + g.inc
	case outIncrease:
		return g.inc + g.first
	case outIncreaseProm:
		return g.inc
	case outRateSum:
		return g.rate
	case outRateAvg:
		return g.rate / float64(g.rateN)
	case outCountSeries:
		return float64(len(g.extra.series))
	case outUniqueSamples:
		return float64(len(g.extra.uniq))
	case outStdvar:
		return g.extra.m2 / float64(g.count)
	case outStddev:
		return math.Sqrt(g.extra.m2 / float64(g.count))
	}
	return math.NaN()
}

// quantile is the q-quantile of sorted vs with linear interpolation
// between closest ranks (rank q*(n-1)), as DuckDB's quantile_cont and
// numpy's default.
func quantile(vs []float64, q float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	r := q * float64(len(vs)-1)
	lo := int(math.Floor(r))
	hi := int(math.Ceil(r))
	if lo == hi {
		return vs[lo]
	}
	return vs[lo] + (vs[hi]-vs[lo])*(r-float64(lo))
}

// outWriter appends output points to a batch: one empty resource and
// scope, a descriptor per metric name, labels as string attributes.
type outWriter struct {
	b     *signal.Metrics
	descs map[string]uint32
}

func newOutWriter(b *signal.Metrics) *outWriter {
	b.Resources = append(b.Resources, signal.Resource{})
	b.Scopes = append(b.Scopes, signal.Scope{})
	return &outWriter{b: b, descs: map[string]uint32{}}
}

func (w *outWriter) point(d outDesc, ls labels.Labels, extraName, extraValue string, t int64, v float64) {
	i := w.pointAt(d, ls, extraName, extraValue, t)
	w.b.NumberType[i] = signal.ValueDouble
	w.b.Number[i] = math.Float64bits(v)
}

// histogram appends an explicit-bucket histogram point.
func (w *outWriter) histogram(d outDesc, ls labels.Labels, t int64, bounds []float64, counts []uint64, count uint64, sum float64) {
	b := w.b
	i := w.pointAt(d, ls, "", "", t)
	b.Count[i], b.Sum[i], b.Has[i] = count, sum, signal.HasSum
	f := uint32(len(b.F64))
	b.F64 = append(b.F64, bounds...)
	b.Bounds[i] = signal.Range{Start: f, End: uint32(len(b.F64))}
	u := uint32(len(b.U64))
	b.U64 = append(b.U64, counts...)
	b.BucketCounts[i] = signal.Range{Start: u, End: uint32(len(b.U64))}
}

// pointAt appends a point of d with labels ls (and extraName=extraValue)
// at t, its value left to the caller.
func (w *outWriter) pointAt(d outDesc, ls labels.Labels, extraName, extraValue string, t int64) int {
	b := w.b
	c := &b.Common
	di, ok := w.descs[d.name]
	if !ok {
		b.Descs = append(b.Descs, signal.MetricDesc{Name: c.AppendString(d.name), Unit: c.AppendString(d.unit),
			Description: c.AppendString(d.description), Type: d.typ, Temporality: d.temporality, Monotonic: d.monotonic})
		di = uint32(len(b.Descs) - 1)
		w.descs[d.name] = di
	}
	i := b.AppendPoint(di, 0, 0)
	b.Time[i] = t
	start := uint32(c.Attrs.Len())
	ls.Range(func(l labels.Label) {
		c.Attrs.Append(c.Keys.IDString(l.Name), signal.ValueString, uint64(c.AppendString(l.Value)))
	})
	if extraName != "" {
		c.Attrs.Append(c.Keys.IDString(extraName), signal.ValueString, uint64(c.AppendString(extraValue)))
	}
	b.Attr[i] = signal.Range{Start: start, End: uint32(c.Attrs.Len())}
	return i
}

// aggregators keeps aggregator state by rule name across reloads.
type aggregators struct {
	mu  sync.Mutex
	m   map[string]*aggregator
	fmu sync.Mutex     // serialises flush
	out signal.Metrics // flush's output batch
}

// retiredFlushes is how many flushes a retired aggregator stays empty
// before it is forgotten.
const retiredFlushes = 120

// flush flushes every aggregator (see aggregator.flush) and forgets the
// retired ones (a changed rule's old state) once they stayed empty.
func (as *aggregators) flush(now int64, emitSet EmitSet) (int, error) {
	as.fmu.Lock()
	defer as.fmu.Unlock()
	as.mu.Lock()
	names := make([]string, 0, len(as.m))
	for n := range as.m {
		names = append(names, n)
	}
	as.mu.Unlock()
	slices.Sort(names)
	var points int
	var err error
	for _, n := range names {
		as.mu.Lock()
		a := as.m[n]
		as.mu.Unlock()
		a.mu.Lock()
		set := a.set
		a.mu.Unlock()
		p, e := a.flush(now, &as.out, func(tenant string, b *signal.Metrics) error { return emitSet(set, tenant, b) })
		points += p
		if e != nil && err == nil {
			err = e
		}
		if strings.Contains(n, "\x00") {
			// A request still in flight with the old rules may add to a
			// retired aggregator: forget it only after it stayed empty
			// for retiredFlushes flushes (two minutes at one a second).
			a.mu.Lock()
			if len(a.buckets) == 0 {
				a.emptyFlushes++
			} else {
				a.emptyFlushes = 0
			}
			forget := a.emptyFlushes >= retiredFlushes
			a.mu.Unlock()
			if forget {
				as.mu.Lock()
				delete(as.m, n)
				as.mu.Unlock()
			}
		}
	}
	return points, err
}

func (as *aggregators) get(name string, spec aggSpec, outs []aggOutput, outRelabel []*relabel.Config, c *aggCounters) *aggregator {
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.m == nil {
		as.m = map[string]*aggregator{}
	}
	a := as.m[name]
	if a == nil || a.spec != spec {
		// A changed rule starts over; its old open intervals are still
		// flushed (they stay in the map under a key of their own).
		if a != nil {
			as.m[name+"\x00"+strconv.FormatInt(time.Now().UnixNano(), 10)] = a
		}
		a = newAggregator(spec, outs)
		a.c, a.outRelabel = c, outRelabel
		as.m[name] = a
	}
	return a
}

// addHist folds explicit-bucket histogram point i of b (of input series id
// at t) into group g of target at (output histogram). It reports false
// when the point was not taken (late, beyond max_groups or the series
// bound, bucket bounds other than the group's first point's, or bucket
// counts that do not fit the bounds): the caller keeps it as it was.
func (a *aggregator) addHist(g uint64, tenant string, at *aggTarget, id uint64, t int64, b *signal.Metrics, i int) bool {
	bounds := b.F64[b.Bounds[i].Start:b.Bounds[i].End]
	counts := b.U64[b.BucketCounts[i].Start:b.BucketCounts[i].End]
	if len(counts) != len(bounds)+1 {
		a.c.overflow.Add(1)
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	bk := a.bucketLocked(t)
	if bk == nil {
		return false
	}
	gr := bk.groups[g]
	if gr == nil {
		if a.groups >= a.spec.maxGroups {
			a.c.overflow.Add(1)
			return false
		}
		a.groups++
		gr = &aggGroup{tenant: strings.Clone(tenant), t: at, hbounds: slices.Clone(bounds)}
		bk.groups[g] = gr
	} else if !slices.Equal(gr.hbounds, bounds) {
		a.c.overflow.Add(1)
		return false
	}
	if !at.cumulative {
		if gr.hcounts == nil {
			gr.hcounts = make([]uint64, len(counts))
		}
		for k, c := range counts {
			gr.hcounts[k] += c
		}
		gr.hcount += b.Count[i]
		gr.hsum += b.Sum[i]
		gr.count++
		return true
	}
	l := gr.hlast[id]
	if l == nil {
		if a.hseries >= maxCounterSeries {
			a.c.overflow.Add(1)
			return false
		}
		if gr.hlast == nil {
			gr.hlast = map[uint64]*histLast{}
		}
		a.hseries++
		l = &histLast{t: math.MinInt64}
		gr.hlast[id] = l
	}
	if t >= l.t {
		l.t, l.counts, l.count, l.sum = t, append(l.counts[:0], counts...), b.Count[i], b.Sum[i]
	}
	gr.count++
	return true
}

// emitHistogram writes a histogram group's output: the sum of its delta
// points, or of its cumulative series' last points of the interval.
func (a *aggregator) emitHistogram(w *outWriter, g *aggGroup, end int64) {
	d := outDesc{name: g.t.prefix + "_histogram", typ: signal.MetricHistogram, temporality: signal.TemporalityDelta}
	counts, count, sum := g.hcounts, g.hcount, g.hsum
	if g.t.cumulative {
		d.temporality = signal.TemporalityCumulative
		counts = make([]uint64, len(g.hbounds)+1)
		ids := slices.Sorted(maps.Keys(g.hlast)) // a stable order for the float sum
		for _, id := range ids {
			l := g.hlast[id]
			for k, c := range l.counts {
				counts[k] += c
			}
			count += l.count
			sum += l.sum
		}
	}
	if counts == nil {
		return
	}
	ls := g.t.labels
	if a.outRelabel != nil {
		var ok bool
		if d, ls, ok = a.relabelOutput(d, ls, "", ""); !ok {
			return
		}
	}
	w.histogram(d, ls, end, g.hbounds, counts, count, sum)
}
