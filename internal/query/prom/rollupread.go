package prom

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// errInexact stops a selector's rollup read: the rollup cannot give the
// answer raw points give for what it selects (a histogram, a gauge under
// rate), so the selector reads raw points. Data that only one series'
// rollup cannot stand for marks that series bad instead (seriesRollup.bad),
// and the series alone is read again from raw points.
var errInexact = errors.New("rollup cannot give the exact answer")

type stmtKey struct{}

// WithStatement returns ctx carrying the statement of the PromQL query
// about to run (promql.Query.Statement()); pass the result to Exec.
// Selects use it to see that no subquery or experimental selector
// modifier changes when the engine evaluates them, which the hints alone
// do not say; without it no selector reads rollups.
func WithStatement(ctx context.Context, st parser.Statement) context.Context {
	es, ok := st.(*parser.EvalStmt)
	if !ok || es == nil {
		return ctx
	}
	return context.WithValue(ctx, stmtKey{}, es)
}

// rollupAgg is the rollup aggregate a selector's samples are made of.
// Each window of a tier becomes one sample (two to four for counters) at
// the time of its last raw point, so that at an evaluation time on the
// tier's grid a range (t-range, t] or a lookback holds exactly the
// windows whose raw points it would hold.
type rollupAgg uint8

const (
	aggNone    rollupAgg = iota
	aggLast              // instant selectors, last_over_time, present_over_time, absent_over_time
	aggMax               // max_over_time
	aggMin               // min_over_time
	aggSum               // sum_over_time
	aggAvg               // avg_over_time: sum/count, when every window of a series has the same count
	aggCounter           // rate, increase: first and last value (and a reset pair) per window (counterSamples)
)

// aggFor returns the aggregate that gives a function's exact answer, or
// aggNone: count_over_time counts samples, and irate, resets, changes,
// deriv, quantiles and the rest need the raw points.
func aggFor(fn string, rng int64) rollupAgg {
	if rng == 0 {
		// An instant selector: whatever is applied to it sees the sample
		// the lookback finds at each evaluation time.
		switch fn {
		case "series", "info":
			return aggNone
		}
		return aggLast
	}
	switch fn {
	case "max_over_time":
		return aggMax
	case "min_over_time":
		return aggMin
	case "sum_over_time":
		return aggSum
	case "avg_over_time":
		return aggAvg
	case "last_over_time", "present_over_time", "absent_over_time":
		return aggLast
	case "rate", "increase":
		return aggCounter
	}
	return aggNone
}

// evalGrid is when the engine evaluates one selector, in ms after its
// offset: start, start+step, ... up to end (only start when step is 0),
// each over (t-rng, t] (rng 0: an instant selector).
type evalGrid struct {
	start, step, end, rng int64
}

// fits reports whether windows of tier (ms) tile every evaluation's range:
// every evaluation time and the range are multiples of the tier.
func (g evalGrid) fits(tier int64) bool {
	m := g.start % tier
	return m == 0 && g.step%tier == 0 && g.rng%tier == 0
}

// rollupUse is how one selector reads rollups: the aggregate, the
// evaluation grid, and (filled by plan) the hours served from rollups.
type rollupUse struct {
	agg   rollupAgg
	grid  evalGrid
	hours map[int64]bool // unix ns hour starts
}

// rollupUse returns how the selector can read rollups, or nil when it
// must read raw points: rollups off, no statement in ctx, a function the
// rollups cannot answer, a subquery (its evaluation times are not in the
// hints) or hints that do not match the statement.
func (q *Querier) rollupUse(ctx context.Context, h *storage.SelectHints, labelsOnly bool) *rollupUse {
	if !q.a.rollups || labelsOnly || h == nil {
		return nil
	}
	agg := aggFor(h.Func, h.Range)
	if agg == aggNone {
		return nil
	}
	st, _ := ctx.Value(stmtKey{}).(*parser.EvalStmt)
	if st == nil || !plainExpr(st.Expr) {
		return nil
	}
	// The engine selects from start-range+1 (start-lookback+1) to end,
	// both shifted by the selector's offset (engine.go,
	// getTimeRangesForSelector).
	back := h.Range
	if back == 0 {
		back = st.LookbackDelta.Milliseconds()
	}
	g := evalGrid{start: h.Start + back - 1, step: h.Step, end: h.End, rng: h.Range}
	span := timestamp.FromTime(st.End) - timestamp.FromTime(st.Start)
	switch {
	case st.Interval == 0:
		if g.start != g.end {
			return nil
		}
		g.step = 0
	case g.step <= 0 || g.step != st.Interval.Milliseconds():
		return nil
	case g.end-g.start != span && g.end != g.start: // g.end == g.start: an @ modifier
		return nil
	}
	return &rollupUse{agg: agg, grid: g, hours: map[int64]bool{}}
}

// plainExpr reports whether every selector of e is evaluated on the
// statement's own grid: no subqueries, no anchored or smoothed selectors,
// no info().
func plainExpr(e parser.Expr) bool {
	ok := true
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.SubqueryExpr:
			ok = false
		case *parser.VectorSelector:
			if n.Anchored || n.Smoothed {
				ok = false
			}
		case *parser.Call:
			if n.Func.Name == "info" {
				ok = false
			}
		}
		return nil
	})
	return ok
}

// serves reports whether the aggregate answers a metric of kind k:
// gauges and cumulative counters (counters only for rate and increase);
// delta sums are summed at read time and distributions have buckets.
func (ru *rollupUse) serves(k metricKind) bool {
	if ru.agg == aggCounter {
		return k == kindCounter
	}
	return k == kindGauge || k == kindCounter
}

// seriesRollup is what a selector reading rollups checks per series.
type seriesRollup struct {
	sids          []uint64 // the lake series feeding it
	raw, win, bad bool
	winCount      uint64
	wins          []ctrWin // aggCounter: windows and raw points, made samples by finish
}

// ctrWin is one window of a counter (a raw point: cnt 1), times in ms.
type ctrWin struct {
	ft, lt           int64
	first, last, inc float64
	cnt              uint64
}

// track records the lake series feeding s; a second one makes s bad:
// raw points would be merged per millisecond, windows cannot be.
func (ru *rollupUse) track(s *series, sid uint64) {
	r := s.ru
	if len(r.sids) == 0 || r.sids[len(r.sids)-1] != sid && !slices.Contains(r.sids, sid) {
		r.sids = append(r.sids, sid)
		r.bad = r.bad || len(r.sids) > 1
	}
}

const hourNs = int64(3_600_000_000_000)

func hourOf(tns int64) int64 {
	m := tns % hourNs
	if m < 0 {
		m += hourNs
	}
	return tns - m
}

// addRaw adds a raw point (of an hour read raw) to s.
func (ru *rollupUse) addRaw(s *series, sid uint64, tns int64, v float64) error {
	ru.track(s, sid)
	if ru.hours[hourOf(tns)] {
		s.ru.bad = true // a stray point in an hour its rollup leaves out
		return nil
	}
	s.ru.raw = true
	if ru.agg == aggCounter {
		t := tns / 1_000_000
		s.ru.wins = append(s.ru.wins, ctrWin{ft: t, lt: t, first: v, last: v, cnt: 1})
		return nil
	}
	s.add(tns/1_000_000, v)
	return nil
}

// readRollupRun reads the windows of run r of row group g of a
// metrics_rollup file and adds their samples (emitWindow).
func (sc *scan) readRollupRun(pf *parquet.File, idx *fileIndex, g int, r run) error {
	ru := sc.ru
	if ru == nil {
		return errors.New("a rollup file read without a rollup plan")
	}
	n := r.end - r.start
	c := &idx.cols
	a, b := r.start, r.end
	sc.ids = grow(sc.ids, n)
	if err := sc.readCol(pf, g, c.seriesID, n, format.ColSeriesID, func(cc parquet.ColumnChunk) error { return format.ReadUint64s(cc, a, b, sc.ids) }); err != nil {
		return err
	}
	sc.wStart, sc.wFirstT, sc.ts = grow(sc.wStart, n), grow(sc.wFirstT, n), grow(sc.ts, n)
	sc.tsOK, sc.wPoints, sc.cnt, sc.cntOK = grow(sc.tsOK, n), grow(sc.wPoints, n), grow(sc.cnt, n), grow(sc.cntOK, n)
	sc.vals, sc.valOK = grow(sc.vals, n), grow(sc.valOK, n)
	sc.wReqOK = grow(sc.wReqOK, n) // required columns: every row valid
	reqOK := sc.wReqOK
	valueCol := map[rollupAgg]int{aggLast: c.value, aggMax: c.max, aggMin: c.min, aggSum: c.sum, aggAvg: c.sum, aggCounter: c.value}[ru.agg]
	cols := []struct {
		col  int
		what string
		f    func(cc parquet.ColumnChunk) error
	}{
		{c.winStart, format.ColWindowStart, func(cc parquet.ColumnChunk) error { return format.ReadOptInt64s(cc, a, b, sc.wStart, reqOK) }},
		{c.firstTS, format.ColFirstTimestamp, func(cc parquet.ColumnChunk) error { return format.ReadOptInt64s(cc, a, b, sc.wFirstT, reqOK) }},
		{c.points, format.ColPoints, func(cc parquet.ColumnChunk) error { return format.ReadOptUint64s(cc, a, b, sc.wPoints, reqOK) }},
		{c.ts, format.ColLastTimestamp, func(cc parquet.ColumnChunk) error { return format.ReadOptInt64s(cc, a, b, sc.ts, sc.tsOK) }},
		{c.count, format.ColCount, func(cc parquet.ColumnChunk) error { return format.ReadOptUint64s(cc, a, b, sc.cnt, sc.cntOK) }},
		{valueCol, format.ColValue, func(cc parquet.ColumnChunk) error { return format.ReadOptFloat64s(cc, a, b, sc.vals, sc.valOK) }},
	}
	if ru.agg == aggCounter {
		sc.wFirst, sc.wFirstOK = grow(sc.wFirst, n), grow(sc.wFirstOK, n)
		sc.wInc, sc.wIncOK = grow(sc.wInc, n), grow(sc.wIncOK, n)
		cols = append(cols, []struct {
			col  int
			what string
			f    func(cc parquet.ColumnChunk) error
		}{
			{c.first, format.ColFirst, func(cc parquet.ColumnChunk) error { return format.ReadOptFloat64s(cc, a, b, sc.wFirst, sc.wFirstOK) }},
			{c.increase, format.ColIncrease, func(cc parquet.ColumnChunk) error { return format.ReadOptFloat64s(cc, a, b, sc.wInc, sc.wIncOK) }},
		}...)
	}
	for _, col := range cols {
		if err := sc.readCol(pf, g, col.col, n, col.what, col.f); err != nil {
			return err
		}
	}
	sc.q.a.Stats.Rows.Add(n)
	sc.q.a.rowsTotal.Add(float64(n))
	if err := sc.runLabels(pf, idx, g, r); err != nil {
		return err
	}
	var added int64
	for k, i := 0, int64(0); i < n; k++ {
		j := i + 1
		for j < n && sc.ids[j] == sc.ids[i] {
			j++
		}
		for _, o := range sc.outs {
			if o.part != partValue {
				return errInexact
			}
			s, err := sc.cachedSeries(sc.ids[i], sc.groupLbls[k], o.name, "", 0)
			if err != nil {
				return err
			}
			if s == nil {
				continue
			}
			ru.track(s, sc.ids[i])
			for w := i; w < j; w++ {
				m, err := sc.emitWindow(s, w)
				if err != nil {
					return err
				}
				added += m
			}
		}
		i = j
	}
	return sc.addSamples(added)
}

// emitWindow adds the samples of window w to s, or marks s bad when the
// window cannot stand for its raw points: a point in its first
// millisecond (it would belong to the range ending at the window's
// start), a null or NaN value, two points in one millisecond, or a
// counter whose resets cannot be written as one drop.
func (sc *scan) emitWindow(s *series, w int64) (int64, error) {
	if s.ru.bad {
		return 0, nil // read again from raw points
	}
	n, ok := sc.windowSamples(s, w)
	if !ok {
		s.ru.bad = true
	}
	return n, nil
}

func (sc *scan) windowSamples(s *series, w int64) (int64, bool) {
	ru := sc.ru
	ft, lt, st := sc.wFirstT[w], sc.ts[w], sc.wStart[w]
	if !sc.tsOK[w] || lt < sc.mint || ft > sc.maxt {
		return 0, true // none of its points is selected
	}
	cnt := sc.cnt[w]
	if !sc.cntOK[w] || cnt != sc.wPoints[w] || cnt == 0 || !sc.valOK[w] {
		return 0, false
	}
	if ft < st+1_000_000 || lt < ft {
		return 0, false
	}
	if lt > sc.maxt {
		// Its points after the window start are after every evaluation
		// time (the grid is aligned): no evaluation needs it.
		return 0, true
	}
	if ft < sc.mint && ru.agg != aggLast {
		return 0, false
	}
	r := s.ru
	r.win = true
	ftm, ltm := ft/1_000_000, lt/1_000_000
	v := sc.vals[w]
	switch ru.agg {
	case aggAvg:
		if r.winCount == 0 {
			r.winCount = cnt
		} else if r.winCount != cnt {
			return 0, false
		}
		s.add(ltm, v/float64(cnt))
		return 1, true
	case aggCounter:
		if cnt == 1 {
			r.wins = append(r.wins, ctrWin{ft: ltm, lt: ltm, first: v, last: v, cnt: 1})
			return 1, true
		}
		if !sc.wFirstOK[w] || !sc.wIncOK[w] || ltm <= ftm {
			return 0, false
		}
		r.wins = append(r.wins, ctrWin{ft: ftm, lt: ltm, first: sc.wFirst[w], last: v, inc: sc.wInc[w], cnt: cnt})
		return 2, true
	}
	s.add(ltm, v)
	return 1, true
}

// finish sorts the series' samples and checks what only the whole series
// shows: samples in one millisecond, windows and raw points mixed under
// avg_over_time, and rate extrapolation (see sameRates). It reports false
// when s must be read from raw points.
func (ru *rollupUse) finish(s *series) bool {
	r := s.ru
	if r.bad {
		return false
	}
	if s.unsorted {
		slices.SortStableFunc(s.pts, func(a, b promql.FPoint) int { return cmp.Compare(a.T, b.T) })
		for i := 1; i < len(s.pts); i++ {
			if s.pts[i].T == s.pts[i-1].T {
				return false
			}
		}
		s.unsorted = false
	}
	if ru.agg == aggAvg && r.raw && r.win {
		return false
	}
	if ru.agg == aggCounter {
		return ru.counterSeries(s)
	}
	return true
}

// counterSeries makes the samples of a counter series from its windows
// and raw points: two (or four) per window when the engine's
// extrapolation comes out as over the raw points at every evaluation
// (sameRates), else as many as the window's raw points (flat fillers
// between first and last carry no increase), which makes it so.
func (ru *rollupUse) counterSeries(s *series) bool {
	r := s.ru
	wins := r.wins
	r.wins = nil
	slices.SortStableFunc(wins, func(a, b ctrWin) int { return cmp.Compare(a.ft, b.ft) })
	for i := 1; i < len(wins); i++ {
		if wins[i].ft <= wins[i-1].lt {
			return false // points in one millisecond
		}
	}
	for _, fill := range []bool{false, true} {
		pts, ws, ok := counterSamples(wins, fill)
		if ok && ru.grid.sameRates(pts, ws) {
			s.pts, s.unsorted = pts, false
			return true
		}
	}
	return false
}

// counterSamples writes windows as samples: per window its first point,
// a drop from a to 0 when its resets are not one drop from first to last,
// with fill flat samples up to its raw point count, and its last point.
// ws[i] is how many raw points sample i stands for (all of a window's on
// its first sample).
func counterSamples(wins []ctrWin, fill bool) ([]promql.FPoint, []uint64, bool) {
	var pts []promql.FPoint
	var ws []uint64
	add := func(t int64, v float64, w uint64) {
		pts = append(pts, promql.FPoint{T: t, F: v})
		ws = append(ws, w)
	}
	for _, w := range wins {
		if w.cnt == 1 {
			add(w.lt, w.last, 1)
			continue
		}
		add(w.ft, w.first, w.cnt)
		used, v := int64(1), w.first
		// The engine adds the value before each drop: first..last alone
		// gives last-first, or last after one drop.
		two := w.last - w.first
		if w.last < w.first {
			two = w.last
		}
		if math.Abs(w.inc-two) > 1e-12*math.Max(1, math.Abs(w.inc)) {
			a := w.first + w.inc - w.last
			if w.lt-w.ft < 3 || !(a >= w.first) || !(a > 0) {
				return nil, nil, false
			}
			add(w.ft+1, a, 0)
			add(w.ft+2, 0, 0)
			used, v = 3, 0
		}
		if fill {
			need := int64(w.cnt) - used - 1
			if need < 0 || w.ft+used+need > w.lt {
				return nil, nil, false
			}
			for k := int64(0); k < need; k++ {
				add(w.ft+used+k, v, 0)
			}
		}
		add(w.lt, w.last, 0)
	}
	return pts, ws, true
}

// readOnly reads the rows of run r whose series are in sc.only, one
// stretch of wanted series at a time (rows are sorted by series).
func (sc *scan) readOnly(pf *parquet.File, idx *fileIndex, g int, r run) error {
	n := r.end - r.start
	ids := make([]uint64, n) // sc.ids is the nested reads' buffer
	if err := sc.readCol(pf, g, idx.cols.seriesID, n, format.ColSeriesID, func(cc parquet.ColumnChunk) error {
		return format.ReadUint64s(cc, r.start, r.end, ids)
	}); err != nil {
		return err
	}
	only := sc.only
	sc.only = nil
	defer func() { sc.only = only }()
	for i := int64(0); i < n; {
		if !only[ids[i]] {
			i++
			continue
		}
		j := i + 1
		for j < n && only[ids[j]] {
			j++
		}
		if err := sc.readRun(pf, idx, g, run{start: r.start + i, end: r.start + j, desc: r.desc}); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// sameRates reports whether rate and increase over pts give at every
// evaluation time what they give over the raw points, ws[i] of which each
// sample stands for. The first and last sample of every range, its
// counter increase and its first value are the raw ones; only the number
// of samples differs, which the engine uses for the average spacing that
// decides how far to extrapolate (extrapolatedRate in promql/functions.go).
func (g evalGrid) sameRates(pts []promql.FPoint, ws []uint64) bool {
	n := len(pts)
	if n < 2 || len(ws) != n {
		return len(ws) == n
	}
	pre := make([]uint64, n+1) // pre[i]: weights of pts[:i]
	dc := make([]float64, n)   // dc[i]: values before the drops among pts[:i+1]
	for i := range pts {
		pre[i+1] = pre[i] + ws[i]
		if i > 0 {
			dc[i] = dc[i-1]
			if pts[i].F < pts[i-1].F {
				dc[i] += pts[i-1].F
			}
		}
	}
	lo, hi := 0, 0
	for t := g.start; t <= g.end; t += g.step {
		for lo < n && pts[lo].T <= t-g.rng {
			lo++
		}
		for hi < n && pts[hi].T <= t {
			hi++
		}
		if m := hi - lo; m >= 2 {
			first, last := pts[lo], pts[hi-1]
			result := last.F - first.F + dc[hi-1] - dc[lo]
			ds := float64(first.T-(t-g.rng)) / 1000
			de := float64(t-last.T) / 1000
			sampled := float64(last.T-first.T) / 1000
			raw := pre[hi] - pre[lo]
			if raw < 2 {
				return false
			}
			f1 := rateFactor(ds, de, sampled, sampled/float64(m-1), first.F, result)
			f2 := rateFactor(ds, de, sampled, sampled/float64(raw-1), first.F, result)
			if math.Abs(f1-f2) > 1e-9*math.Abs(f2) || math.IsNaN(f1) != math.IsNaN(f2) {
				return false
			}
		}
		if g.step <= 0 {
			break
		}
	}
	return true
}

// rateFactor is the extrapolation factor of extrapolatedRate for a counter
// with at least two samples (Prometheus v3).
func rateFactor(ds, de, sampled, avg, first, result float64) float64 {
	thr := avg * 1.1
	if ds >= thr {
		ds = avg / 2
	}
	if result > 0 && first >= 0 {
		if dz := sampled * (first / result); dz < ds {
			ds = dz
		}
	}
	if de >= thr {
		de = avg / 2
	}
	if sampled == 0 {
		return 1
	}
	return (sampled + ds + de) / sampled
}
