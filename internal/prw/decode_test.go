package prw

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/signal"
)

var staleNaN = math.Float64frombits(value.StaleNaN)

// oracleSeries is what a test sends: labels (possibly unsorted on the
// wire), float samples or histograms.
type oracleSeries struct {
	lbls    []prompb.Label // wire order
	samples []prompb.Sample
	hists   []*histogram.Histogram
	fhists  []*histogram.FloatHistogram
	nEx     int
}

func oracleLoad() []oracleSeries {
	return []oracleSeries{
		{lbls: []prompb.Label{{Name: "__name__", Value: "http_requests_total"}, {Name: "job", Value: "api"}, {Name: "instance", Value: "a:9090"}, {Name: "code", Value: "200"}},
			samples: []prompb.Sample{{Value: 1, Timestamp: 1700000000000}, {Value: 2.5, Timestamp: 1700000015000}, {Value: staleNaN, Timestamp: 1700000030000}}, nEx: 2},
		{lbls: []prompb.Label{{Name: "zone", Value: "ü-1"}, {Name: "__name__", Value: "temp:celsius"}},
			samples: []prompb.Sample{{Value: -40, Timestamp: 1}, {Value: math.Inf(1), Timestamp: 2}, {Value: math.NaN(), Timestamp: 3}}},
		{lbls: []prompb.Label{{Name: "__name__", Value: "rpc_latency_seconds"}, {Name: "service_name", Value: "x"}, {Name: "le", Value: "weird"}},
			hists: []*histogram.Histogram{generateTestHistogram(3), generateTestHistogram(7)}},
		{lbls: []prompb.Label{{Name: "__name__", Value: "rpc_size_bytes"}},
			fhists: []*histogram.FloatHistogram{generateTestFloatHistogram(4)}},
		{lbls: []prompb.Label{{Name: "__name__", Value: "req_custom"}, {Name: "a", Value: "b"}},
			hists: []*histogram.Histogram{generateTestCustomBucketsHistogram(2)}},
		// What recording rules over native histograms send: fractional
		// float counts, reset hints.
		{lbls: []prompb.Label{{Name: "__name__", Value: "job:rpc_latency_seconds:rate5m"}, {Name: "job", Value: "x"}},
			fhists: []*histogram.FloatHistogram{fractionalHistogram(1, histogram.UnknownCounterReset), fractionalHistogram(2, histogram.NotCounterReset),
				fractionalHistogram(3, histogram.CounterReset), fractionalHistogram(4, histogram.GaugeType)}},
		{lbls: []prompb.Label{{Name: "__name__", Value: "job:req_custom:rate5m"}},
			fhists: []*histogram.FloatHistogram{fractionalCustomHistogram(1), fractionalCustomHistogram(5)}},
	}
}

// fractionalHistogram is a float histogram with fractional counts (a rate
// over a native histogram), i scaling them.
func fractionalHistogram(i int, hint histogram.CounterResetHint) *histogram.FloatHistogram {
	x := float64(i) / 30
	return &histogram.FloatHistogram{CounterResetHint: hint, Schema: 3, ZeroThreshold: 1e-128, ZeroCount: x / 7,
		Count: x/7 + x + 2*x + x/3 + 0.1, Sum: 12.345 * x,
		PositiveSpans: []histogram.Span{{Offset: -2, Length: 2}, {Offset: 3, Length: 1}}, PositiveBuckets: []float64{x, 2 * x, x / 3},
		NegativeSpans: []histogram.Span{{Offset: 5, Length: 1}}, NegativeBuckets: []float64{0.1}}
}

// fractionalCustomHistogram is a custom-bucket float histogram with
// fractional counts.
func fractionalCustomHistogram(i int) *histogram.FloatHistogram {
	x := float64(i) / 9
	return &histogram.FloatHistogram{Schema: histogram.CustomBucketsSchema, Count: 4.5 * x, Sum: 3 * x, CustomValues: []float64{0.5, 1, 2.5},
		PositiveSpans: []histogram.Span{{Offset: 1, Length: 3}}, PositiveBuckets: []float64{x, 1.5 * x, 2 * x}}
}

func sortedLabels(ls []prompb.Label) string {
	var sb labels.ScratchBuilder
	for _, l := range ls {
		sb.Add(l.Name, l.Value)
	}
	sb.Sort()
	return sb.Labels().String()
}

// checkOracle compares what was decoded with what was sent.
func checkOracle(t *testing.T, got map[string][]point, load []oracleSeries, startMs int64) {
	t.Helper()
	if len(got) != len(load) {
		t.Fatalf("got %d series, want %d:\n%s", len(got), len(load), keys(got))
	}
	for _, s := range load {
		key := sortedLabels(s.lbls)
		ps, ok := got[key]
		if !ok {
			t.Fatalf("series %s missing; have:\n%s", key, keys(got))
		}
		want := len(s.samples) + len(s.hists) + len(s.fhists)
		if len(ps) != want {
			t.Fatalf("series %s: %d points, want %d", key, len(ps), want)
		}
		nEx := 0
		for i, p := range ps {
			nEx += p.nEx
			want := startMs
			if want >= p.t {
				want = 0 // not before the point: ignored, as Prometheus does (startOf)
			}
			if p.start != want {
				t.Errorf("series %s point %d: start %d, want %d", key, i, p.start, want)
			}
			switch {
			case len(s.samples) > 0:
				w := s.samples[i]
				if p.t != w.Timestamp || p.v != math.Float64bits(w.Value) {
					t.Errorf("series %s point %d: (%d, %#x), want (%d, %#x)", key, i, p.t, p.v, w.Timestamp, math.Float64bits(w.Value))
				}
			case len(s.hists) > 0:
				w := s.hists[i].Copy().Compact(0)
				if p.h == nil || !p.h.Equals(w) || p.hint != w.CounterResetHint {
					t.Errorf("series %s histogram %d:\n got %s (hint %d)\nwant %s (hint %d)", key, i, histString(p.h), p.hint, histString(w), w.CounterResetHint)
				}
			default:
				// A float histogram stays one, every count exactly (Equals
				// compares float bits), its hint kept.
				w := s.fhists[i].Copy().Compact(0)
				if p.fh == nil || !p.fh.Equals(w) || p.hint != w.CounterResetHint {
					t.Errorf("series %s float histogram %d:\n got %v (hint %d)\nwant %s (hint %d)", key, i, p.fh, p.hint, w.String(), w.CounterResetHint)
				}
			}
		}
		if nEx != s.nEx {
			t.Errorf("series %s: %d exemplars, want %d", key, nEx, s.nEx)
		}
	}
}

func v1Request(load []oracleSeries) *prompb.WriteRequest {
	req := &prompb.WriteRequest{}
	for _, s := range load {
		ts := prompb.TimeSeries{Labels: s.lbls, Samples: s.samples}
		for i, h := range s.hists {
			ts.Histograms = append(ts.Histograms, prompb.FromIntHistogram(int64(1000+i), h))
		}
		for i, h := range s.fhists {
			ts.Histograms = append(ts.Histograms, prompb.FromFloatHistogram(int64(2000+i), h))
		}
		for i := range s.nEx {
			ts.Exemplars = append(ts.Exemplars, prompb.Exemplar{Labels: []prompb.Label{{Name: "trace_id", Value: "abc"}}, Value: float64(i), Timestamp: 5})
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	req.Metadata = []prompb.MetricMetadata{{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "http_requests_total", Help: "Requests.", Unit: "requests"}}
	return req
}

func TestDecodeV1MatchesPrompb(t *testing.T) {
	load := oracleLoad()
	req := v1Request(load)
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var m signal.Metrics
	var d Decoder
	st, err := d.DecodeV1(&m, body)
	if err != nil {
		t.Fatal(err)
	}
	if st.Samples != 6 || st.Histograms != 10 || st.Exemplars != 2 || st.Series != 7 {
		t.Fatalf("stats %+v", st)
	}
	got := readBack(t, &m)
	// Histogram timestamps are 1000+i and 2000+i: check them, then compare
	// the rest against the samples' layout.
	for _, s := range load {
		for i, p := range got[sortedLabels(s.lbls)] {
			want := int64(1000 + i)
			if len(s.fhists) > 0 {
				want = int64(2000 + i)
			}
			if len(s.samples) == 0 && p.t != want {
				t.Errorf("%v histogram %d at %d, want %d", s.lbls, i, p.t, want)
			}
		}
	}
	checkOracle(t, got, load, 0)
	// Metadata lands on the counter's descriptor: help as description,
	// type and unit as metadata attributes.
	for _, md := range m.Descs {
		if m.String(md.Name) != "http_requests_total" {
			if md.Metadata.Len() != 0 {
				t.Errorf("%s got metadata", m.String(md.Name))
			}
			continue
		}
		if m.String(md.Description) != "Requests." {
			t.Errorf("help %q", m.String(md.Description))
		}
		if i := m.FindAttr(md.Metadata, AttrType); i < 0 || m.AttrString(i) != "counter" {
			t.Errorf("type attribute missing")
		}
		if i := m.FindAttr(md.Metadata, AttrUnit); i < 0 || m.AttrString(i) != "requests" {
			t.Errorf("unit attribute missing")
		}
	}
	// The caller may reuse its buffer: nothing points into it.
	for i := range body {
		body[i] = 0xff
	}
	checkOracle(t, readBack(t, &m), load, 0)
}

func v2Request(load []oracleSeries, created int64, inSample bool) *writev2.Request {
	st := writev2.NewSymbolTable()
	req := &writev2.Request{}
	for _, s := range load {
		var sb labels.ScratchBuilder
		for _, l := range s.lbls {
			sb.Add(l.Name, l.Value)
		}
		// Unsorted on the wire: symbolize in the given order.
		var refs []uint32
		for _, l := range s.lbls {
			refs = append(refs, st.Symbolize(l.Name), st.Symbolize(l.Value))
		}
		ts := writev2.TimeSeries{LabelsRefs: refs}
		for _, smp := range s.samples {
			ws := writev2.Sample{Value: smp.Value, Timestamp: smp.Timestamp}
			if inSample {
				ws.StartTimestamp = created
			}
			ts.Samples = append(ts.Samples, ws)
		}
		stc := int64(0)
		if inSample {
			stc = created
		}
		for i, h := range s.hists {
			ts.Histograms = append(ts.Histograms, writev2.FromIntHistogram(stc, int64(1000+i), h))
		}
		for i, h := range s.fhists {
			ts.Histograms = append(ts.Histograms, writev2.FromFloatHistogram(stc, int64(2000+i), h))
		}
		for i := range s.nEx {
			ts.Exemplars = append(ts.Exemplars, writev2.Exemplar{LabelsRefs: []uint32{st.Symbolize("trace_id"), st.Symbolize("abc")}, Value: float64(i), Timestamp: 5})
		}
		if s.lbls[0].Value == "http_requests_total" {
			ts.Metadata = writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: st.Symbolize("Requests."), UnitRef: st.Symbolize("requests")}
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	req.Symbols = st.Symbols()
	return req
}

func TestDecodeV2MatchesWritev2(t *testing.T) {
	for _, inSample := range []bool{true, false} {
		load := oracleLoad()
		req := v2Request(load, 1600000000000, inSample)
		body, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !inSample {
			// The series-level created_timestamp (field 6) of earlier 2.0 drafts.
			body = appendCreatedToSeries(t, body, 1600000000000)
		}
		var m signal.Metrics
		var d Decoder
		st, err := d.DecodeV2(&m, body)
		if err != nil {
			t.Fatal(err)
		}
		if st.Samples != 6 || st.Histograms != 10 || st.Exemplars != 2 {
			t.Fatalf("stats %+v", st)
		}
		checkOracle(t, readBack(t, &m), load, 1600000000000)
		found := false
		for _, md := range m.Descs {
			if m.String(md.Name) == "http_requests_total" {
				found = m.String(md.Description) == "Requests." && m.AttrString(m.FindAttr(md.Metadata, AttrType)) == "counter"
			}
		}
		if !found {
			t.Error("metadata of http_requests_total not kept")
		}
	}
}

// appendCreatedToSeries re-encodes a v2 request adding field 6 to every series.
func appendCreatedToSeries(t *testing.T, body []byte, created int64) []byte {
	var out []byte
	for i := 0; i < len(body); {
		num, wt, j := tag(body, i)
		s, e := lenField(body, j)
		if wt != wtLen || s < 0 {
			t.Fatal("unexpected wire")
		}
		msg := body[s:e]
		if num == 5 {
			msg = appendVarint(appendVarint(append([]byte(nil), msg...), 6<<3|wtVarint), uint64(created))
		}
		out = appendLenPrefix(out, num, msg)
		i = e
	}
	return out
}

func TestInvalidSeriesAreDroppedWithTheirOwnError(t *testing.T) {
	good := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "ok"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1}}}
	badHist := prompb.FromIntHistogram(1, generateTestHistogram(1))
	badHist.Count = &prompb.Histogram_CountInt{CountInt: 999}
	fh := fractionalHistogram(2, histogram.UnknownCounterReset)
	fh.PositiveBuckets[1] = -0.5
	negFloat := prompb.FromFloatHistogram(1, fh)
	negCount := prompb.FromFloatHistogram(1, fractionalHistogram(2, histogram.UnknownCounterReset))
	negCount.Count = &prompb.Histogram_CountFloat{CountFloat: -1}
	badHint := prompb.FromFloatHistogram(1, fractionalHistogram(2, histogram.UnknownCounterReset))
	badHint.ResetHint = 7
	cases := []struct {
		name string
		ts   prompb.TimeSeries
		want string
	}{
		{"no name", prompb.TimeSeries{Labels: []prompb.Label{{Name: "a", Value: "b"}}, Samples: good.Samples}, "no __name__ label"},
		{"empty name value", prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: ""}}, Samples: good.Samples}, "empty __name__"},
		{"empty label name", prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "x"}, {Name: "", Value: "v"}}, Samples: good.Samples}, "empty label name"},
		{"duplicate", prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "x"}, {Name: "a", Value: "1"}, {Name: "a", Value: "2"}}, Samples: good.Samples}, `duplicate label name "a"`},
		{"hist count", prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "h"}}, Histograms: []prompb.Histogram{badHist}}, "histogram count 999 does not match its buckets"},
		{"float negative bucket", prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "h"}}, Histograms: []prompb.Histogram{negFloat}}, "positive bucket 1 has a negative count -0.5"},
		{"float negative count", prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "h"}}, Histograms: []prompb.Histogram{negCount}}, "histogram count -1 is negative"},
		{"reset hint", prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "h"}}, Histograms: []prompb.Histogram{badHint}}, "reset hint 7 is not one of"},
		{"bad utf8", prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "x"}, {Name: "a", Value: "\xff"}}, Samples: good.Samples}, "not valid UTF-8"},
		{"exemplar empty label", prompb.TimeSeries{Labels: good.Labels, Samples: good.Samples, Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "", Value: "x"}}}}}, "exemplar label with an empty name"},
		{"timestamp", prompb.TimeSeries{Labels: good.Labels, Samples: []prompb.Sample{{Value: 1, Timestamp: math.MaxInt64}}}, "out of range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{good, c.ts, good}}
			body, _ := req.Marshal()
			var m signal.Metrics
			var d Decoder
			st, err := d.DecodeV1(&m, body)
			var pe *PartialError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *PartialError", err)
			}
			if !strings.Contains(err.Error(), c.want) || pe.Dropped != 1 || st.Dropped != 1 {
				t.Fatalf("err = %v (dropped %d), want one dropped series naming %q", err, pe.Dropped, c.want)
			}
			if m.Len() != 2 || st.Samples != 2 || st.Series != 2 {
				t.Fatalf("kept %d points (stats %+v), want the 2 good ones", m.Len(), st)
			}
		})
	}
	t.Run("message stays valid UTF-8 and bounded", func(t *testing.T) {
		long := strings.Repeat("v", 100_000)
		badName := []prompb.Label{{Name: "__name__", Value: "x"}, {Name: "\xff", Value: "y"}}
		ls := []prompb.Label{{Name: "__name__", Value: "x"}, {Name: "\xff", Value: "y"}}
		for i := range 200 {
			ls = append(ls, prompb.Label{Name: fmt.Sprintf("l%03d", i), Value: long})
		}
		req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{good, {Labels: badName, Samples: good.Samples}, {Labels: ls, Samples: good.Samples}}}
		body, _ := req.Marshal()
		var m signal.Metrics
		var d Decoder
		_, err := d.DecodeV1(&m, body)
		if err == nil || !utf8.ValidString(err.Error()) || !strings.Contains(err.Error(), `"\xff"="y"`) {
			t.Fatalf("err = %.300q, want the bad name quoted in a valid UTF-8 message", err)
		}
		if n := len(err.Error()); n > 8*maxSeriesString {
			t.Fatalf("message of %d bytes for two series, want at most %d", n, 8*maxSeriesString)
		}
		if !strings.Contains(err.Error(), "more labels") || m.Len() != 1 {
			t.Fatalf("err = %.300q, len %d", err, m.Len())
		}
	})
	t.Run("metadata without name", func(t *testing.T) {
		req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{good}, Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_GAUGE, Help: "h"}}}
		body, _ := req.Marshal()
		var m signal.Metrics
		var d Decoder
		_, err := d.DecodeV1(&m, body)
		if err == nil || !strings.Contains(err.Error(), "no metric_family_name") || m.Len() != 1 {
			t.Fatalf("err = %v, len %d", err, m.Len())
		}
	})
	t.Run("v2 metadata of a series without name", func(t *testing.T) {
		req := &writev2.Request{Symbols: []string{"", "a", "b", "help"}, Timeseries: []writev2.TimeSeries{
			{LabelsRefs: []uint32{1, 2}, Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: 3}}}}
		body, _ := req.Marshal()
		var m signal.Metrics
		var d Decoder
		_, err := d.DecodeV2(&m, body)
		if err == nil || !strings.Contains(err.Error(), "metadata of a series with no __name__ label") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("v2 bad symbol ref", func(t *testing.T) {
		req := &writev2.Request{Symbols: []string{"", "__name__", "x"}, Timeseries: []writev2.TimeSeries{
			{LabelsRefs: []uint32{1, 9}, Samples: []writev2.Sample{{Value: 1, Timestamp: 1}}},
			{LabelsRefs: []uint32{1, 2}, Samples: []writev2.Sample{{Value: 1, Timestamp: 1}}}}}
		body, _ := req.Marshal()
		var m signal.Metrics
		var d Decoder
		_, err := d.DecodeV2(&m, body)
		if err == nil || !strings.Contains(err.Error(), "label reference out of the symbols table") || m.Len() != 1 {
			t.Fatalf("err = %v, len %d", err, m.Len())
		}
	})
}

func TestMalformedLeavesBatchUnchanged(t *testing.T) {
	load := oracleLoad()
	b1, _ := v1Request(load).Marshal()
	b2, _ := v2Request(load, 5, true).Marshal()
	for _, v := range []int{1, 2} {
		body := b1
		if v == 2 {
			body = b2
		}
		var m signal.Metrics
		var d Decoder
		// A first good request stays; each truncation of the second is
		// either decoded or refused whole.
		if _, err := decode(&d, v, &m, body); err != nil {
			t.Fatal(err)
		}
		n, nbuf := m.Len(), len(m.Buf)
		refused := 0
		for cut := 1; cut < len(body); cut += 7 {
			_, err := decode(&d, v, &m, body[:cut])
			if errors.Is(err, ErrMalformed) {
				refused++
				if m.Len() != n || len(m.Buf) != nbuf {
					t.Fatalf("v%d cut %d: malformed request changed the batch (%d -> %d points)", v, cut, n, m.Len())
				}
				continue
			}
			n, nbuf = m.Len(), len(m.Buf)
		}
		if refused == 0 {
			t.Fatalf("v%d: no truncation was refused", v)
		}
	}
}

func decode(d *Decoder, v int, m *signal.Metrics, body []byte) (Stats, error) {
	if v == 1 {
		return d.DecodeV1(m, body)
	}
	return d.DecodeV2(m, body)
}

func TestDecodeAllocatesNothingInSteadyState(t *testing.T) {
	b1, b2 := benchBodies(100, 10)
	var m signal.Metrics
	var d Decoder
	for v, body := range map[int][]byte{1: b1, 2: b2} {
		allocs := testing.AllocsPerRun(20, func() {
			m.Reset()
			if _, err := decode(&d, v, &m, body); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("v%d: %v allocations per decode, want 0", v, allocs)
		}
	}
	// Native histograms, float (fractional, custom buckets, hints) and
	// integer, reuse the decoder's and the batch's buffers too.
	load := oracleLoad()[2:]
	h1, _ := v1Request(load).Marshal()
	h2, _ := v2Request(load, 7, false).Marshal()
	for v, body := range map[int][]byte{1: h1, 2: h2} {
		allocs := testing.AllocsPerRun(20, func() {
			m.Reset()
			if st, err := decode(&d, v, &m, body); err != nil || st.Histograms == 0 {
				t.Fatal(st, err)
			}
		})
		if allocs != 0 {
			t.Errorf("histograms v%d: %v allocations per decode, want 0", v, allocs)
		}
	}
}

// Histograms in the shape of Prometheus's tsdbutil test generators (that
// package pulls dependencies sluice does not have).
func generateTestHistogram(i int64) *histogram.Histogram {
	return &histogram.Histogram{
		Count: 12 + uint64(i*9), ZeroCount: 2 + uint64(i), ZeroThreshold: 0.001, Sum: 18.4 * float64(i+1), Schema: 1,
		PositiveSpans:   []histogram.Span{{Offset: 0, Length: 2}, {Offset: 1, Length: 2}},
		PositiveBuckets: []int64{i + 1, 1, -1, 0},
		NegativeSpans:   []histogram.Span{{Offset: 0, Length: 2}, {Offset: 1, Length: 2}},
		NegativeBuckets: []int64{i + 1, 1, -1, 0},
	}
}

func generateTestCustomBucketsHistogram(i int64) *histogram.Histogram {
	return &histogram.Histogram{
		Count: 5 + uint64(i*4), Sum: 18.4 * float64(i+1), Schema: histogram.CustomBucketsSchema,
		PositiveSpans:   []histogram.Span{{Offset: 0, Length: 2}, {Offset: 1, Length: 2}},
		PositiveBuckets: []int64{i + 1, 1, -1, 0},
		CustomValues:    []float64{0, 1, 2, 3, 4},
	}
}

func generateTestFloatHistogram(i int64) *histogram.FloatHistogram {
	return generateTestHistogram(i).ToFloat(nil)
}

// The one-pass ASCII check of the symbols falls back to checking each
// symbol: valid non-ASCII UTF-8 passes, an invalid symbol is malformed.
// A symbol that is not valid UTF-8 drops the series that use it (as a
// label, an exemplar label or metadata text), naming it, and keeps the
// request's other series, as 1.0 and Prometheus's handler do; an unused
// one is harmless.
func TestDecodeV2SymbolsUTF8(t *testing.T) {
	for _, c := range []struct {
		name  string
		value string
		use   func(ts *writev2.TimeSeries)
		want  string // "" = no error
	}{
		{"plain", "plain", nil, ""},
		{"non-ASCII", "ü-1", nil, ""},
		{"label value", "\xff", nil, `label "zone": not valid UTF-8`},
		{"unused", "\xff", func(ts *writev2.TimeSeries) { ts.LabelsRefs[3] = 2 }, ""},
		{"help", "\xff", func(ts *writev2.TimeSeries) {
			ts.LabelsRefs[3] = 2
			ts.Metadata = writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: 4}
		}, "metadata help or unit: not valid UTF-8"},
		{"exemplar label", "\xff", func(ts *writev2.TimeSeries) {
			ts.LabelsRefs[3] = 2
			ts.Exemplars = []writev2.Exemplar{{LabelsRefs: []uint32{3, 4}, Value: 1, Timestamp: 1}}
		}, `exemplar label "zone": not valid UTF-8`},
	} {
		bad := writev2.TimeSeries{LabelsRefs: []uint32{1, 2, 3, 4}, Samples: []writev2.Sample{{Value: 1, Timestamp: 1}}}
		if c.use != nil {
			c.use(&bad)
		}
		req := &writev2.Request{Symbols: []string{"", "__name__", "m", "zone", c.value, "ok"},
			Timeseries: []writev2.TimeSeries{bad, {LabelsRefs: []uint32{1, 5}, Samples: []writev2.Sample{{Value: 2, Timestamp: 2}}}}}
		body, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var m signal.Metrics
		_, err = new(Decoder).DecodeV2(&m, body)
		var pe *PartialError
		switch {
		case c.want == "" && (err != nil || m.Len() != 2):
			t.Errorf("%s: %v, %d points; want both series", c.name, err, m.Len())
		case c.want != "" && (!errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) || !utf8.ValidString(err.Error()) || m.Len() != 1):
			t.Errorf("%s: %v, %d points; want the good series kept and the other dropped naming %q", c.name, err, m.Len(), c.want)
		}
	}
}

// A series with the label names of the one before it reuses that one's
// checks and key ids: mixed with unsorted, duplicate, empty-name and
// dropped series, every series kept still has exactly its own labels.
func TestDecodeSameNamesAsPreviousSeries(t *testing.T) {
	ls := func(kv ...string) []prompb.Label {
		var out []prompb.Label
		for i := 0; i < len(kv); i += 2 {
			out = append(out, prompb.Label{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	series := [][]prompb.Label{
		ls("__name__", "a", "job", "j1", "zone", "z1"),
		ls("__name__", "a", "job", "j2", "zone", "z2"),
		ls("zone", "z3", "__name__", "a", "job", "j3"), // unsorted
		ls("__name__", "a", "job", "j4", "zone", "z4"),
		ls("__name__", "a", "job", "j5", "job", "x"), // duplicate: dropped
		ls("__name__", "a", "job", "j6", "zone", "z6"),
		ls("__name__", "", "job", "j7", "zone", "z7"), // empty name: dropped
		ls("__name__", "a", "job", "j8", "zone", "z8"),
		ls("__name__", "b", "job", "j9"),
		ls("__name__", "b", "job", "j10"),
		ls("__name__", "a", "job", "j11", "zone", "z11"),
		ls("__name__", "a", "jab", "j12", "zone", "z12"), // same length, other name
	}
	req := &prompb.WriteRequest{}
	want := map[string]bool{}
	for i, s := range series {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: s, Samples: []prompb.Sample{{Value: float64(i), Timestamp: int64(i)}}})
		if i != 4 && i != 6 {
			want[sortedLabels(s)] = true
		}
	}
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, v2 := range []bool{false, true} {
		var m signal.Metrics
		var err error
		if v2 {
			var r2 *writev2.Request
			r2 = &writev2.Request{}
			st := writev2.NewSymbolTable()
			for _, ts := range req.Timeseries {
				var refs []uint32
				for _, l := range ts.Labels {
					refs = append(refs, st.Symbolize(l.Name), st.Symbolize(l.Value))
				}
				r2.Timeseries = append(r2.Timeseries, writev2.TimeSeries{LabelsRefs: refs, Samples: []writev2.Sample{{Value: ts.Samples[0].Value, Timestamp: ts.Samples[0].Timestamp}}})
			}
			r2.Symbols = st.Symbols()
			b2, merr := r2.Marshal()
			if merr != nil {
				t.Fatal(merr)
			}
			_, err = new(Decoder).DecodeV2(&m, b2)
		} else {
			_, err = new(Decoder).DecodeV1(&m, body)
		}
		var pe *PartialError
		if !errors.As(err, &pe) || pe.Dropped != 2 {
			t.Fatalf("v2=%t: %v, want 2 series dropped", v2, err)
		}
		got := readBack(t, &m)
		if len(got) != len(want) {
			t.Fatalf("v2=%t: %d series, want %d:\n%s", v2, len(got), len(want), keys(got))
		}
		for k := range want {
			if _, ok := got[k]; !ok {
				t.Fatalf("v2=%t: series %s missing; have:\n%s", v2, k, keys(got))
			}
		}
	}
}

// TestFloatHistogramNaNCounts: a float histogram may count NaN, as
// Prometheus's FloatHistogram.Validate allows (a recording rule dividing
// by zero writes them); the counts are kept bit for bit.
func TestFloatHistogramNaNCounts(t *testing.T) {
	fh := fractionalHistogram(2, histogram.UnknownCounterReset)
	fh.Count, fh.ZeroCount, fh.PositiveBuckets[1] = math.NaN(), math.NaN(), math.NaN()
	if err := fh.Validate(); err != nil {
		t.Fatalf("Prometheus refuses the histogram: %v", err)
	}
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "h"}},
		Histograms: []prompb.Histogram{prompb.FromFloatHistogram(1, fh)}}}}
	body, _ := req.Marshal()
	var d Decoder
	m := &signal.Metrics{}
	st, err := d.DecodeV1(m, body)
	if err != nil || st.Histograms != 1 || m.Len() != 1 || !m.IsFloatHist(0) {
		t.Fatalf("decode: %v, stats %+v, %d points", err, st, m.Len())
	}
	f := m.F64[m.FloatCounts[0].Start:m.FloatCounts[0].End]
	if !math.IsNaN(f[0]) || !math.IsNaN(f[1]) {
		t.Fatalf("count and zero count %v %v, want NaN", f[0], f[1])
	}
	nan := 0
	for _, c := range f[2:] {
		if math.IsNaN(c) {
			nan++
		}
	}
	if nan != 1 {
		t.Fatalf("buckets %v: want exactly one NaN", f[2:])
	}
}
