package otlp

import (
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Limits bound what one export request may hold, checked on the decoded
// batch by Check*. A zero field is no limit.
type Limits struct {
	// MaxAttrsPerRecord bounds the attributes of one attribute set: a
	// record's (log record, data point, span), a resource's or a scope's.
	MaxAttrsPerRecord int
	// MaxAttrsPerRequest bounds the attributes of the whole request, all
	// sets together (nested values count as one).
	MaxAttrsPerRequest int
	// MetricsFutureSkew, when set, is how far past the clock a data point's
	// time may be (lake.max_future_skew): the lake files a later point by
	// its arrival time, where the PromQL API never finds it, so it must not
	// be acknowledged. CheckMetrics does not look at it: the caller drops
	// such points (DropFuture) and answers a partial success, as remote
	// write refuses the series of such a sample and writes the others.
	MetricsFutureSkew time.Duration
}

// Names of the limits, as errors and counters name them.
const (
	LimitAttrsPerRecord  = "max_attributes_per_record"
	LimitAttrsPerRequest = "max_attributes_per_request"
	LimitTimestamp       = "timestamp"
	LimitHistogram       = "histogram"
)

// LimitError is a request past one of Limits, with a timestamp past
// 2^63-1 ns or with a histogram of a shape OTLP forbids; it wraps
// ErrLimit, ErrTimestamp or ErrHistogram.
type LimitError struct {
	Limit string // one of the Limit* names
	msg   string
	err   error
}

func (e *LimitError) Error() string { return e.msg }
func (e *LimitError) Unwrap() error { return e.err }

// CheckLogs checks the records of l from record from on against lim and
// the timestamp rule (see checkTimes).
func CheckLogs(l *signal.Logs, from int, lim Limits) error {
	if err := checkTimes("log record", "time_unix_nano", l.Time[from:], "observed_time_unix_nano", l.ObservedTime[from:]); err != nil {
		return err
	}
	return lim.checkAttrs(&l.Common, "log record", l.Attr[from:])
}

// CheckMetrics is CheckLogs for data points.
func CheckMetrics(m *signal.Metrics, from int, lim Limits) error {
	if err := checkTimes("data point", "time_unix_nano", m.Time[from:], "start_time_unix_nano", m.StartTime[from:]); err != nil {
		return err
	}
	if err := checkHistograms(m, from); err != nil {
		return err
	}
	return lim.checkAttrs(&m.Common, "data point", m.Attr[from:])
}

// CheckSpans is CheckLogs for spans.
func CheckSpans(s *signal.Spans, from int, lim Limits) error {
	if err := checkTimes("span", "start_time_unix_nano", s.StartTime[from:], "end_time_unix_nano", s.EndTime[from:]); err != nil {
		return err
	}
	return lim.checkAttrs(&s.Common, "span", s.Attr[from:])
}

// checkTimes refuses timestamps of 2^63 ns (2262-04-11) or more: OTLP
// carries them as fixed64, batches and the lake as int64, where they
// would wrap to before 1970. A request carrying one is refused whole
// rather than clamped, so no stored time differs from the sent one.
func checkTimes(what, name1 string, t1 []int64, name2 string, t2 []int64) error {
	for _, c := range [2]struct {
		name string
		t    []int64
	}{{name1, t1}, {name2, t2}} {
		for i, t := range c.t {
			if t < 0 {
				return &LimitError{Limit: LimitTimestamp, err: ErrTimestamp,
					msg: fmt.Sprintf("%s %d: %s %d is past the largest time sluice stores (2^63-1 ns, 2262-04-11)", what, i, c.name, uint64(t))}
			}
		}
	}
	return nil
}

// checkAttrs checks every attribute set of c (all of its resources and
// scopes, and the records' sets recs) and their total.
func (lim Limits) checkAttrs(c *signal.Common, what string, recs []signal.Range) error {
	if lim.MaxAttrsPerRequest > 0 && c.Attrs.Len() > lim.MaxAttrsPerRequest {
		return &LimitError{Limit: LimitAttrsPerRequest, err: ErrLimit,
			msg: fmt.Sprintf("request has %d attributes, past the limit %s of %d", c.Attrs.Len(), LimitAttrsPerRequest, lim.MaxAttrsPerRequest)}
	}
	limit := lim.MaxAttrsPerRecord
	if limit <= 0 {
		return nil
	}
	tooMany := func(set string, i int, r signal.Range) error {
		if n := int(r.End) - int(r.Start); n > limit {
			return &LimitError{Limit: LimitAttrsPerRecord, err: ErrLimit,
				msg: fmt.Sprintf("%s %d has %d attributes, past the limit %s of %d", set, i, n, LimitAttrsPerRecord, limit)}
		}
		return nil
	}
	for i, r := range c.Resources {
		if err := tooMany("resource", i, r.Attrs); err != nil {
			return err
		}
	}
	for i, s := range c.Scopes {
		if err := tooMany("scope", i, s.Attrs); err != nil {
			return err
		}
	}
	for i, r := range recs {
		if err := tooMany(what, i, r); err != nil {
			return err
		}
	}
	return nil
}

// Scales of exponential histograms sluice takes: the OpenTelemetry SDKs'
// range (their aggregator stays within it); Prometheus native histograms
// (-4..8) fit inside.
const (
	MinExpScale = -10
	MaxExpScale = 20
)

// checkHistograms refuses histogram points that OTLP's data model forbids
// and that no reader could make sense of, so that they are never
// acknowledged and then lost on the way to a query: explicit bounds that
// are NaN or not strictly increasing, bucket counts that are neither
// absent nor one more than the bounds, exponential scales outside
// [MinExpScale, MaxExpScale] and bucket indexes past int32.
func checkHistograms(m *signal.Metrics, from int) error {
	for p := from; p < m.Len(); p++ {
		if problem := histogramProblem(m, p); problem != "" {
			return &LimitError{Limit: LimitHistogram, err: ErrHistogram,
				msg: fmt.Sprintf("data point %d of metric %q: %s", p-from, m.String(m.Descs[m.Desc[p]].Name), problem)}
		}
	}
	return nil
}

// histogramProblem is what is wrong with point p of m (checkHistograms),
// "" for a good one or a point of another type.
func histogramProblem(m *signal.Metrics, p int) string {
	switch m.Descs[m.Desc[p]].Type {
	case signal.MetricHistogram:
		return explicitProblem(m.F64[m.Bounds[p].Start:m.Bounds[p].End], m.BucketCounts[p].Len())
	case signal.MetricExponentialHistogram:
		return exponentialProblem(m.Scale[p], m.PosOffset[p], m.PosCounts[p].Len(), m.NegOffset[p], m.NegCounts[p].Len())
	}
	return ""
}

// DropInvalidHistograms removes the histogram points of m from index from
// on whose shape OTLP forbids (checkHistograms), moving the others down in
// place, and returns how many it removed and a sentence naming the first
// (for the sender: an OTLP partial success). Such a point can go alone: the
// rest of the request is stored, as the OTLP specification's partial
// success and the Collector's receivers do for records they cannot take.
func DropInvalidHistograms(m *signal.Metrics, from int) (dropped int, why string) {
	kept := from
	for p := from; p < m.Len(); p++ {
		problem := histogramProblem(m, p)
		if problem == "" {
			if kept != p {
				m.MovePoint(kept, p)
			}
			kept++
			continue
		}
		if dropped == 0 {
			why = fmt.Sprintf("data point %d of metric %q: %s", p-from, m.String(m.Descs[m.Desc[p]].Name), problem)
		}
		dropped++
	}
	if dropped == 0 {
		return 0, ""
	}
	m.Truncate(kept)
	if dropped > 1 {
		why = fmt.Sprintf("%d histogram data points are invalid; the first, %s", dropped, why)
	}
	return dropped, why
}

// HistogramCountMismatches counts the histogram points of m from index
// from on whose count disagrees with their buckets, and names the first.
// The OTLP data model says an explicit histogram's count equals the sum of
// its bucket_counts, and an exponential one's the sum of its buckets and
// zero_count; such points are kept (a warning, not a refusal): Prometheus
// stores a classic histogram whose _count and +Inf bucket disagree (an
// exporter writing them from two snapshots), and counts a native
// histogram's NaN observations in its count only, so an exponential
// histogram whose count exceeds its buckets is no mismatch. Float-count
// histograms (their counts rounded) and points without buckets are not
// checked.
func HistogramCountMismatches(m *signal.Metrics, from int) (n int, why string) {
	for p := from; p < m.Len(); p++ {
		if m.FloatCounts[p].Len() > 0 {
			continue
		}
		var buckets uint64
		var ok bool
		switch m.Descs[m.Desc[p]].Type {
		case signal.MetricHistogram:
			if m.BucketCounts[p].Len() == 0 {
				continue
			}
			buckets, ok = sumCounts(0, m.U64[m.BucketCounts[p].Start:m.BucketCounts[p].End])
			ok = ok && buckets == m.Count[p]
		case signal.MetricExponentialHistogram:
			pos, ok1 := sumCounts(m.ZeroCount[p], m.U64[m.PosCounts[p].Start:m.PosCounts[p].End])
			buckets, ok = sumCounts(pos, m.U64[m.NegCounts[p].Start:m.NegCounts[p].End])
			ok = ok1 && ok && buckets <= m.Count[p]
		default:
			continue
		}
		if ok {
			continue
		}
		if n == 0 {
			why = fmt.Sprintf("data point %d of metric %q: count %d disagrees with its buckets (sum %d)", p-from,
				m.String(m.Descs[m.Desc[p]].Name), m.Count[p], buckets)
		}
		n++
	}
	if n > 1 {
		why = fmt.Sprintf("%d histogram data points have a count other than their buckets' sum; the first, %s", n, why)
	}
	return n, why
}

// sumCounts is start plus the sum of cs; ok is false when it overflows.
func sumCounts(start uint64, cs []uint64) (sum uint64, ok bool) {
	sum = start
	for _, c := range cs {
		if sum+c < sum {
			return sum, false
		}
		sum += c
	}
	return sum, true
}

func explicitProblem(bounds []float64, counts int) string {
	if counts != 0 && counts != len(bounds)+1 {
		return fmt.Sprintf("%d bucket_counts for %d explicit_bounds (want none or %d)", counts, len(bounds), len(bounds)+1)
	}
	for i, b := range bounds {
		if math.IsNaN(b) {
			return fmt.Sprintf("explicit_bounds[%d] is NaN", i)
		}
		if i > 0 && !(b > bounds[i-1]) {
			return fmt.Sprintf("explicit_bounds not strictly increasing (explicit_bounds[%d] = %v after %v)", i, b, bounds[i-1])
		}
	}
	return ""
}

func exponentialProblem(scale, posOff int32, npos int, negOff int32, nneg int) string {
	if scale < MinExpScale || scale > MaxExpScale {
		return fmt.Sprintf("scale %d outside [%d, %d]", scale, MinExpScale, MaxExpScale)
	}
	for _, side := range [2]struct {
		name string
		off  int32
		n    int
	}{{"positive", posOff, npos}, {"negative", negOff, nneg}} {
		if side.n > 0 && int64(side.off)+int64(side.n)-1 > math.MaxInt32 {
			return fmt.Sprintf("%s buckets: offset %d with %d bucket_counts runs past bucket index 2^31-1", side.name, side.off, side.n)
		}
	}
	return ""
}

// DropFuture removes the data points of m from index from on whose time is
// more than skew past the clock, moving the others down in place, and
// returns how many it removed and a sentence naming the first of them and
// the latest time accepted (for the sender: an OTLP partial success).
func DropFuture(m *signal.Metrics, from int, skew time.Duration) (dropped int, why string) {
	latest := time.Now().Add(skew).UnixNano()
	kept := from
	for p := from; p < m.Len(); p++ {
		t := m.Time[p]
		if t <= latest {
			if kept != p {
				m.MovePoint(kept, p)
			}
			kept++
			continue
		}
		if dropped == 0 {
			why = fmt.Sprintf("data point %d of metric %q: time_unix_nano %d (%s) is past %s, the latest time accepted now (lake.max_future_skew ahead of sluice's clock)",
				p-from, m.String(m.Descs[m.Desc[p]].Name), t, time.Unix(0, t).UTC().Format(time.RFC3339Nano),
				time.Unix(0, latest).UTC().Format(time.RFC3339Nano))
		}
		dropped++
	}
	if dropped == 0 {
		return 0, ""
	}
	m.Truncate(kept)
	if dropped > 1 {
		why = fmt.Sprintf("%d data points are too far in the future; the first, %s", dropped, why)
	}
	return dropped, why
}
