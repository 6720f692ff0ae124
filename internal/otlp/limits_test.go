package otlp

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestCheckTimestamps: every time field of 2^63 ns or more is refused,
// naming the field (issue 11 item 9: 2^63 read back as 1677).
func TestCheckTimestamps(t *testing.T) {
	md := pmetric.NewMetrics()
	dp := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(1)
	dp.SetStartTimestamp(pcommon.Timestamp(1 << 63))
	b, _ := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	var m signal.Metrics
	if err := DecodeMetrics(&m, b); err != nil {
		t.Fatal(err)
	}
	err := CheckMetrics(&m, 0, Limits{})
	if !errors.Is(err, ErrTimestamp) || !strings.Contains(err.Error(), "start_time_unix_nano 9223372036854775808") {
		t.Errorf("metrics: %v", err)
	}

	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetStartTimestamp(1)
	sp.SetEndTimestamp(pcommon.Timestamp(1<<63 + 5))
	b, _ = ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	var s signal.Spans
	if err := DecodeTraces(&s, b); err != nil {
		t.Fatal(err)
	}
	err = CheckSpans(&s, 0, Limits{})
	if !errors.Is(err, ErrTimestamp) || !strings.Contains(err.Error(), "span 0: end_time_unix_nano 9223372036854775813") {
		t.Errorf("spans: %v", err)
	}
	sp.SetEndTimestamp(1<<63 - 1) // the largest time that fits is fine
	b, _ = ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	s.Reset()
	if err := DecodeTraces(&s, b); err != nil {
		t.Fatal(err)
	}
	if err := CheckSpans(&s, 0, Limits{}); err != nil {
		t.Errorf("2^63-1: %v", err)
	}
}

// TestCheckAttrLimits covers resource and scope sets, which the pipeline
// test does not.
func TestCheckAttrLimits(t *testing.T) {
	var l signal.Logs
	c := &l.Common
	start := uint32(c.Attrs.Len())
	for i := range 3 {
		c.Attrs.Append(c.Keys.IDString(string(rune('a'+i))), signal.ValueInt, 1)
	}
	c.Scopes = append(c.Scopes, signal.Scope{Attrs: signal.Range{Start: start, End: uint32(c.Attrs.Len())}})
	var le *LimitError
	err := CheckLogs(&l, 0, Limits{MaxAttrsPerRecord: 2})
	if !errors.As(err, &le) || le.Limit != LimitAttrsPerRecord || !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "scope 0 has 3 attributes") {
		t.Errorf("scope: %v", err)
	}
	if err := CheckLogs(&l, 0, Limits{MaxAttrsPerRecord: 3, MaxAttrsPerRequest: 3}); err != nil {
		t.Errorf("at the limits: %v", err)
	}
	if err := CheckLogs(&l, 0, Limits{}); err != nil {
		t.Errorf("no limits: %v", err)
	}
}

// TestCheckHistograms: histogram points OTLP's data model forbids are
// refused naming the metric and the problem (they were acknowledged, then
// dropped between the lake and PromQL); valid shapes, including points
// without buckets and the widest scales, pass.
func TestCheckHistograms(t *testing.T) {
	explicit := func(counts []uint64, bounds []float64) pmetric.Metrics {
		md := pmetric.NewMetrics()
		m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("h")
		dp := m.SetEmptyHistogram().DataPoints().AppendEmpty()
		dp.SetTimestamp(1)
		dp.BucketCounts().FromRaw(counts)
		dp.ExplicitBounds().FromRaw(bounds)
		return md
	}
	exponential := func(scale, off int32, n int) pmetric.Metrics {
		md := pmetric.NewMetrics()
		m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("e")
		dp := m.SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
		dp.SetTimestamp(1)
		dp.SetScale(scale)
		dp.Negative().SetOffset(off)
		dp.Negative().BucketCounts().FromRaw(make([]uint64, n))
		return md
	}
	nan := math.NaN()
	for _, c := range []struct {
		name string
		md   pmetric.Metrics
		want string // "" is valid
	}{
		{"explicit", explicit([]uint64{1, 2, 3}, []float64{1, 2}), ""},
		{"count only", explicit(nil, nil), ""},
		{"bounds without counts", explicit(nil, []float64{1, 2}), ""},
		{"one bucket", explicit([]uint64{4}, nil), ""},
		{"fewer counts", explicit([]uint64{1, 2}, []float64{1, 2}), `metric "h": 2 bucket_counts for 2 explicit_bounds (want none or 3)`},
		{"more counts", explicit([]uint64{1, 2, 3, 4}, []float64{1, 2}), "4 bucket_counts for 2 explicit_bounds"},
		{"unsorted", explicit([]uint64{1, 2, 3}, []float64{2, 1}), "explicit_bounds not strictly increasing (explicit_bounds[1] = 1 after 2)"},
		{"repeated", explicit([]uint64{1, 2, 3}, []float64{1, 1}), "not strictly increasing"},
		{"NaN", explicit([]uint64{1, 2, 3}, []float64{nan, 1}), "explicit_bounds[0] is NaN"},
		{"scale 20", exponential(20, -5, 3), ""},
		{"scale -10", exponential(-10, 0, 3), ""},
		{"scale 21", exponential(21, 0, 1), "scale 21 outside [-10, 20]"},
		{"scale -11", exponential(-11, 0, 1), "scale -11 outside"},
		{"last index", exponential(0, math.MaxInt32-2, 3), ""},
		{"past int32", exponential(0, math.MaxInt32-2, 4), "negative buckets: offset 2147483645 with 4 bucket_counts runs past bucket index 2^31-1"},
		{"offset without buckets", exponential(0, math.MaxInt32, 0), ""},
	} {
		b, _ := pmetricotlp.NewExportRequestFromMetrics(c.md).MarshalProto()
		var m signal.Metrics
		if err := DecodeMetrics(&m, b); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err := CheckMetrics(&m, 0, Limits{})
		var le *LimitError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.Is(err, ErrHistogram) || !errors.As(err, &le) || le.Limit != LimitHistogram || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestDropFuture: with a skew, the data points past the clock by more are
// removed, the others kept in order, and the answer names the first one
// removed and the latest time accepted; CheckMetrics leaves times to it.
func TestDropFuture(t *testing.T) {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("g")
	g := m.SetEmptyGauge()
	for i, ahead := range []time.Duration{-time.Minute, 2 * time.Hour, 50 * time.Minute, 3 * time.Hour} {
		p := g.DataPoints().AppendEmpty()
		p.SetTimestamp(pcommon.NewTimestampFromTime(time.Now().Add(ahead)))
		p.SetDoubleValue(float64(i))
	}
	b, _ := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	decode := func() *signal.Metrics {
		var ms signal.Metrics
		if err := DecodeMetrics(&ms, b); err != nil {
			t.Fatal(err)
		}
		return &ms
	}
	ms := decode()
	if err := CheckMetrics(ms, 0, Limits{MetricsFutureSkew: time.Hour}); err != nil {
		t.Errorf("CheckMetrics: %v", err)
	}
	n, why := DropFuture(ms, 0, time.Hour)
	if n != 2 || ms.Len() != 2 || ms.Value(0) != 0 || ms.Value(1) != 2 {
		t.Errorf("dropped %d, kept %d points; want 2 dropped and values 0, 2 kept", n, ms.Len())
	}
	if !strings.Contains(why, `2 data points are too far in the future; the first, data point 1 of metric "g": time_unix_nano `) ||
		!strings.Contains(why, "the latest time accepted now (lake.max_future_skew") {
		t.Errorf("why: %q", why)
	}
	if n, why := DropFuture(decode(), 0, 4*time.Hour); n != 0 || why != "" {
		t.Errorf("4h skew: dropped %d (%q)", n, why)
	}
}

// TestDropInvalidHistograms: the histogram points CheckMetrics refuses are
// removed alone, the others kept in order, and the answer names the first
// removed; HistogramCountMismatches names points whose count disagrees
// with their buckets (an exponential count may exceed them: NaN
// observations) without removing anything.
func TestDropInvalidHistograms(t *testing.T) {
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	hist := func(name string, count uint64, counts []uint64, bounds []float64) {
		m := sm.Metrics().AppendEmpty()
		m.SetName(name)
		dp := m.SetEmptyHistogram().DataPoints().AppendEmpty()
		dp.SetTimestamp(1)
		dp.SetCount(count)
		dp.BucketCounts().FromRaw(counts)
		dp.ExplicitBounds().FromRaw(bounds)
	}
	exp := func(name string, count, zero uint64, pos, neg []uint64) {
		m := sm.Metrics().AppendEmpty()
		m.SetName(name)
		dp := m.SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
		dp.SetTimestamp(1)
		dp.SetCount(count)
		dp.SetZeroCount(zero)
		dp.Positive().BucketCounts().FromRaw(pos)
		dp.Negative().BucketCounts().FromRaw(neg)
	}
	hist("ok", 6, []uint64{1, 2, 3}, []float64{1, 2})
	hist("short", 3, []uint64{1, 2}, []float64{1, 2})
	hist("count-only", 9, nil, nil)
	hist("nan", 6, []uint64{1, 2, 3}, []float64{math.NaN(), 2})
	hist("mismatch", 7, []uint64{1, 2, 3}, []float64{1, 2})
	hist("overflow", 1, []uint64{math.MaxUint64, 2}, []float64{1})
	exp("exp-ok", 10, 1, []uint64{2, 3}, []uint64{4})
	exp("exp-nan-observed", 11, 1, []uint64{2, 3}, []uint64{4})
	exp("exp-below", 9, 1, []uint64{2, 3}, []uint64{4})
	b, _ := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	var m signal.Metrics
	if err := DecodeMetrics(&m, b); err != nil {
		t.Fatal(err)
	}
	n, why := DropInvalidHistograms(&m, 0)
	if n != 2 || !strings.Contains(why, `2 histogram data points are invalid; the first, data point 1 of metric "short": 2 bucket_counts for 2 explicit_bounds`) {
		t.Fatalf("dropped %d: %q", n, why)
	}
	var kept []string
	for p := range m.Len() {
		kept = append(kept, m.String(m.Descs[m.Desc[p]].Name))
	}
	if got := strings.Join(kept, " "); got != "ok count-only mismatch overflow exp-ok exp-nan-observed exp-below" {
		t.Fatalf("kept %s", got)
	}
	if err := CheckMetrics(&m, 0, Limits{}); err != nil {
		t.Fatalf("CheckMetrics after the drop: %v", err)
	}
	n, why = HistogramCountMismatches(&m, 0)
	if n != 3 || !strings.Contains(why, `3 histogram data points have a count other than their buckets' sum; the first, data point 2 of metric "mismatch": count 7 disagrees with its buckets (sum 6)`) {
		t.Fatalf("mismatches %d: %q (want mismatch, overflow, exp-below)", n, why)
	}
	if m.Len() != 7 {
		t.Fatalf("HistogramCountMismatches removed points: %d left", m.Len())
	}
}
