package prwreceiver

import (
	"io"
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/value"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
)

// rw2Series is one 2.0 series of a test request: labels as name, value
// pairs in the order they are sent (not necessarily sorted).
type rw2Series struct {
	labels    []string
	samples   []writev2.Sample
	hists     []writev2.Histogram
	exemplars []rw2Exemplar
	meta      *rw2Meta
}

type rw2Exemplar struct {
	labels []string
	value  float64
	ts     int64
}

type rw2Meta struct {
	typ        writev2.Metadata_MetricType
	help, unit string
}

// rw2Request encodes series as a snappy 2.0 request, with a symbol table
// built as Prometheus's sender builds it ("" first).
func rw2Request(series ...rw2Series) []byte {
	st := writev2.NewSymbolTable()
	refs := func(kv []string) []uint32 {
		var r []uint32
		for _, s := range kv {
			r = append(r, st.Symbolize(s))
		}
		return r
	}
	req := &writev2.Request{}
	for _, s := range series {
		ts := writev2.TimeSeries{LabelsRefs: refs(s.labels), Samples: s.samples, Histograms: s.hists}
		for _, e := range s.exemplars {
			ts.Exemplars = append(ts.Exemplars, writev2.Exemplar{LabelsRefs: refs(e.labels), Value: e.value, Timestamp: e.ts})
		}
		if s.meta != nil {
			ts.Metadata = writev2.Metadata{Type: s.meta.typ, HelpRef: st.Symbolize(s.meta.help), UnitRef: st.Symbolize(s.meta.unit)}
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	req.Symbols = st.Symbols()
	b, err := req.Marshal()
	if err != nil {
		panic(err)
	}
	return snappy.Encode(nil, b)
}

// rw2Raw encodes a request with the symbols and references as given, for
// requests no well-behaved sender writes.
func rw2Raw(symbols []string, series ...writev2.TimeSeries) []byte {
	b, err := (&writev2.Request{Symbols: symbols, Timeseries: series}).Marshal()
	if err != nil {
		panic(err)
	}
	return snappy.Encode(nil, b)
}

// rw2Hist is a native histogram (schema 0) with positive, negative and
// zero buckets as asked; count is their sum unless badCount.
func rw2Hist(ts int64, pos, neg, zero, badCount bool) writev2.Histogram {
	h := writev2.Histogram{Sum: 1.5, Timestamp: ts, ZeroThreshold: 1e-128}
	var n uint64
	if pos {
		h.PositiveSpans = []writev2.BucketSpan{{Offset: 0, Length: 2}, {Offset: 3, Length: 2}}
		h.PositiveDeltas = []int64{2, 1, -2, 4} // 2, 3, 1, 5
		n += 11
	}
	if neg {
		h.NegativeSpans = []writev2.BucketSpan{{Offset: -1, Length: 2}}
		h.NegativeDeltas = []int64{3, -1} // 3, 2
		n += 5
	}
	if zero {
		h.ZeroCount = &writev2.Histogram_ZeroCountInt{ZeroCountInt: 2}
		n += 2
	}
	if badCount {
		n += 40
	}
	h.Count = &writev2.Histogram_CountInt{CountInt: n}
	return h
}

// rw2NHCB is a custom-bucket histogram (schema -53) over bounds 0.1, 1,
// 10 (four buckets, the last +Inf).
func rw2NHCB(ts int64) writev2.Histogram {
	return writev2.Histogram{Schema: -53, Sum: 12, Timestamp: ts, CustomValues: []float64{0.1, 1, 10},
		PositiveSpans: []writev2.BucketSpan{{Offset: 0, Length: 4}}, PositiveDeltas: []int64{1, 2, -1, -1},
		Count: &writev2.Histogram_CountInt{CountInt: 1 + 3 + 2 + 1}}
}

func withSchema(h writev2.Histogram, schema int32) writev2.Histogram {
	h.Schema = schema
	return h
}

func sample(v float64, ts int64) []writev2.Sample { return []writev2.Sample{{Value: v, Timestamp: ts}} }

// TestRemoteWrite2Compliance sends the requests a receiver compliance
// suite sends (the cases of prometheus/compliance's remotewrite/receiver,
// written here from the 2.0 specification) and checks the status and the
// X-Prometheus-Remote-Write-*-Written headers: 2xx counts exactly what was
// sent, a 4xx counts at most what was written (a partial write's good
// series), and 1.0 answers carry none. Each request is sent with and
// without the scan, which must answer alike.
func TestRemoteWrite2Compliance(t *testing.T) {
	const t0 = 1_700_000_000_000
	name := func(n string, kv ...string) []string { return append([]string{"__name__", n}, kv...) }
	stale := math.Float64frombits(value.StaleNaN)
	type want struct{ code, samples, hists, exemplars int }
	cases := []struct {
		name string
		ct   string // ctV2 when empty
		enc  string // snappy when empty; "-" for none
		body []byte
		want want
	}{
		// Samples and label shapes.
		{name: "one sample", body: rw2Request(rw2Series{labels: name("up"), samples: sample(1, t0)}), want: want{204, 1, 0, 0}},
		{name: "labels unsorted", body: rw2Request(rw2Series{labels: []string{"job", "j", "__name__", "up", "instance", "i:1"}, samples: sample(1, t0)}), want: want{204, 1, 0, 0}},
		{name: "newlines, dots, spaces", body: rw2Request(
			rw2Series{labels: name("up", "job", "a\nb\n"), samples: sample(1, t0)},
			rw2Series{labels: name("resource.cpu.usage", "job.name", "x"), samples: sample(1, t0)},
			rw2Series{labels: name("resource cpu usage", "job name", "x"), samples: sample(1, t0)},
		), want: want{204, 3, 0, 0}},
		{name: "NaN, stale, ±Inf", body: rw2Request(
			rw2Series{labels: name("v", "k", "nan"), samples: sample(math.NaN(), t0)},
			rw2Series{labels: name("v", "k", "stale"), samples: sample(stale, t0)},
			rw2Series{labels: name("v", "k", "inf"), samples: sample(math.Inf(1), t0)},
			rw2Series{labels: name("v", "k", "-inf"), samples: sample(math.Inf(-1), t0)},
		), want: want{204, 4, 0, 0}},
		{name: "several samples per series", body: rw2Request(rw2Series{labels: name("up"),
			samples: []writev2.Sample{{Value: 1, Timestamp: t0}, {Value: 2, Timestamp: t0 + 1000}, {Value: 3, Timestamp: t0 + 2000}}}), want: want{204, 3, 0, 0}},
		{name: "start timestamp", body: rw2Request(rw2Series{labels: name("c_total"),
			samples: []writev2.Sample{{Value: 100, Timestamp: t0, StartTimestamp: t0 - 3600_000}}}), want: want{204, 1, 0, 0}},
		{name: "no __name__", body: rw2Request(rw2Series{labels: []string{"job", "j"}, samples: sample(1, t0)}), want: want{400, 0, 0, 0}},
		{name: "no labels", body: rw2Request(rw2Series{samples: sample(1, t0)}), want: want{400, 0, 0, 0}},
		{name: "empty __name__", body: rw2Request(rw2Series{labels: name(""), samples: sample(1, t0)}), want: want{400, 0, 0, 0}},
		{name: "one of four without __name__", body: rw2Request(
			rw2Series{labels: []string{"job", "j"}, samples: sample(1, t0)},
			rw2Series{labels: name("up", "i", "1"), samples: sample(1, t0)},
			rw2Series{labels: name("up", "i", "2"), samples: sample(1, t0)},
			rw2Series{labels: name("up", "i", "3"), samples: sample(1, t0)},
		), want: want{400, 3, 0, 0}},
		{name: "duplicate label name", body: rw2Request(rw2Series{labels: name("up", "a", "1", "a", "2"), samples: sample(1, t0)}), want: want{400, 0, 0, 0}},
		{name: "empty label name", body: rw2Request(rw2Series{labels: name("up", "", "x"), samples: sample(1, t0)}), want: want{400, 0, 0, 0}},
		{name: "invalid UTF-8 value", body: rw2Request(rw2Series{labels: name("up", "a", "\xff"), samples: sample(1, t0)},
			rw2Series{labels: name("ok"), samples: sample(1, t0)}), want: want{400, 1, 0, 0}},
		{name: "invalid UTF-8 name", body: rw2Request(rw2Series{labels: name("up", "\xfe", "x"), samples: sample(1, t0)}), want: want{400, 0, 0, 0}},
		{name: "samples and histograms in one series", body: rw2Request(rw2Series{labels: name("mixed"), samples: sample(1, t0), hists: []writev2.Histogram{rw2Hist(t0+1, true, false, false, false)}},
			rw2Series{labels: name("ok"), samples: sample(1, t0)}), want: want{400, 1, 0, 0}},

		// Histograms.
		{name: "histogram", body: rw2Request(rw2Series{labels: name("h"), hists: []writev2.Histogram{rw2Hist(t0, true, true, true, false)}}), want: want{204, 0, 1, 0}},
		{name: "histogram positive only", body: rw2Request(rw2Series{labels: name("h", "k", "p"), hists: []writev2.Histogram{rw2Hist(t0, true, false, true, false)}}), want: want{204, 0, 1, 0}},
		{name: "histogram negative only", body: rw2Request(rw2Series{labels: name("h", "k", "n"), hists: []writev2.Histogram{rw2Hist(t0, false, true, false, false)}}), want: want{204, 0, 1, 0}},
		{name: "histogram zero bucket only", body: rw2Request(rw2Series{labels: name("h", "k", "z"), hists: []writev2.Histogram{rw2Hist(t0, false, false, true, false)}}), want: want{204, 0, 1, 0}},
		{name: "histogram empty", body: rw2Request(rw2Series{labels: name("h", "k", "e"), hists: []writev2.Histogram{rw2Hist(t0, false, false, false, false)}}), want: want{204, 0, 1, 0}},
		{name: "custom-bucket histogram", body: rw2Request(rw2Series{labels: name("nhcb"), hists: []writev2.Histogram{rw2NHCB(t0)}}), want: want{204, 0, 1, 0}},
		{name: "histogram with start timestamp", body: rw2Request(rw2Series{labels: name("h", "k", "st"), hists: []writev2.Histogram{func() writev2.Histogram {
			h := rw2Hist(t0, true, true, true, false)
			h.StartTimestamp = t0 - 1800_000
			return h
		}()}}), want: want{204, 0, 1, 0}},
		{name: "histogram count mismatch", body: rw2Request(rw2Series{labels: name("h", "k", "bad"), hists: []writev2.Histogram{rw2Hist(t0, true, false, false, true)}}), want: want{400, 0, 0, 0}},
		{name: "histogram count mismatch beside a good one", body: rw2Request(
			rw2Series{labels: name("h", "k", "bad"), hists: []writev2.Histogram{rw2Hist(t0, true, false, false, true)}},
			rw2Series{labels: name("h", "k", "good"), hists: []writev2.Histogram{rw2Hist(t0, true, false, false, false)}}), want: want{400, 0, 1, 0}},

		{name: "histogram schema 12, reduced to 8", body: rw2Request(rw2Series{labels: name("h", "k", "s12"), hists: []writev2.Histogram{withSchema(rw2Hist(t0, true, true, true, false), 12)}}), want: want{204, 0, 1, 0}},
		{name: "histogram schema -5", body: rw2Request(rw2Series{labels: name("h", "k", "s-5"), hists: []writev2.Histogram{withSchema(rw2Hist(t0, true, false, false, false), -5)}},
			rw2Series{labels: name("ok"), samples: sample(1, t0)}), want: want{400, 1, 0, 0}},
		{name: "histogram schema 53", body: rw2Request(rw2Series{labels: name("h", "k", "s53"), hists: []writev2.Histogram{withSchema(rw2Hist(t0, true, false, false, false), 53)}}), want: want{400, 0, 0, 0}},
		{name: "histogram negative bucket count", body: rw2Request(rw2Series{labels: name("h", "k", "neg"), hists: []writev2.Histogram{func() writev2.Histogram {
			h := rw2Hist(t0, true, false, false, false)
			h.PositiveDeltas = []int64{2, -3, 2, 4} // 2, -1, 1, 5
			h.Count = &writev2.Histogram_CountInt{CountInt: 7}
			return h
		}()}}), want: want{400, 0, 0, 0}},
		{name: "histogram spans and deltas of different lengths", body: rw2Request(rw2Series{labels: name("h", "k", "spans"), hists: []writev2.Histogram{func() writev2.Histogram {
			h := rw2Hist(t0, true, false, false, false)
			h.PositiveDeltas = h.PositiveDeltas[:3]
			return h
		}()}}), want: want{400, 0, 0, 0}},
		{name: "float histogram", body: rw2Request(rw2Series{labels: name("h", "k", "float"), hists: []writev2.Histogram{{Sum: 2, Timestamp: t0, Count: &writev2.Histogram_CountFloat{CountFloat: 3.5},
			ZeroCount: &writev2.Histogram_ZeroCountFloat{ZeroCountFloat: 0.5}, PositiveSpans: []writev2.BucketSpan{{Offset: 1, Length: 2}}, PositiveCounts: []float64{1, 2}}}}), want: want{204, 0, 1, 0}},
		{name: "custom bounds not increasing", body: rw2Request(rw2Series{labels: name("nhcb", "k", "bad"), hists: []writev2.Histogram{func() writev2.Histogram {
			h := rw2NHCB(t0)
			h.CustomValues = []float64{1, 0.1, 10}
			return h
		}()}}), want: want{400, 0, 0, 0}},
		{name: "two histograms in time order", body: rw2Request(rw2Series{labels: name("h", "k", "two"), hists: []writev2.Histogram{rw2Hist(t0, true, false, false, false), rw2Hist(t0+1000, true, false, true, false)}}), want: want{204, 0, 2, 0}},

		// Exemplars.
		{name: "exemplar", body: rw2Request(rw2Series{labels: name("e_total", "job", "api"), samples: sample(1, t0),
			exemplars: []rw2Exemplar{{labels: []string{"trace_id", "abc"}, value: 1, ts: t0}}}), want: want{204, 1, 0, 1}},
		{name: "exemplar without labels", body: rw2Request(rw2Series{labels: name("e_total", "job", "nolabels"), samples: sample(1, t0),
			exemplars: []rw2Exemplar{{value: 1, ts: t0}}}), want: want{204, 1, 0, 1}},
		{name: "exemplar with unicode", body: rw2Request(rw2Series{labels: name("e_total", "region", "🌍"), samples: sample(1, t0),
			exemplars: []rw2Exemplar{{labels: []string{"trace_id", "测试", "span_id", "s"}, value: 1, ts: t0}}}), want: want{204, 1, 0, 1}},
		{name: "exemplars of special values", body: rw2Request(rw2Series{labels: name("e_total", "k", "special"), samples: []writev2.Sample{{Value: 1, Timestamp: t0}, {Value: 2, Timestamp: t0 + 1}, {Value: 3, Timestamp: t0 + 2}},
			exemplars: []rw2Exemplar{{labels: []string{"trace_id", "a"}, value: math.NaN(), ts: t0}, {labels: []string{"trace_id", "b"}, value: math.Inf(1), ts: t0 + 1}, {labels: []string{"trace_id", "c"}, value: -1e-10, ts: t0 + 2}}}), want: want{204, 3, 0, 3}},
		{name: "histogram with exemplar", body: rw2Request(rw2Series{labels: name("h", "k", "ex"), hists: []writev2.Histogram{rw2Hist(t0, true, false, true, false)},
			exemplars: []rw2Exemplar{{labels: []string{"trace_id", "t"}, value: 1.25, ts: t0}}}), want: want{204, 0, 1, 1}},
		{name: "exemplar of a series without __name__", body: rw2Request(rw2Series{labels: []string{"job", "j"}, samples: sample(1, t0),
			exemplars: []rw2Exemplar{{labels: []string{"trace_id", "t"}, value: 1, ts: t0}}}), want: want{400, 0, 0, 0}},

		// Metadata.
		{name: "metadata of every type", body: rw2Request(
			rw2Series{labels: name("m_counter_total"), samples: sample(1, t0), meta: &rw2Meta{writev2.Metadata_METRIC_TYPE_COUNTER, "Requests.", "requests"}},
			rw2Series{labels: name("m_gauge"), samples: sample(1, t0), meta: &rw2Meta{writev2.Metadata_METRIC_TYPE_GAUGE, "With\nnewlines and \"quotes\".", "bytes/sec"}},
			rw2Series{labels: name("m_unspecified"), samples: sample(1, t0), meta: &rw2Meta{writev2.Metadata_METRIC_TYPE_UNSPECIFIED, "Unknown.", ""}},
			rw2Series{labels: name("m_info"), samples: sample(1, t0), meta: &rw2Meta{writev2.Metadata_METRIC_TYPE_INFO, "Build.", ""}},
			rw2Series{labels: name("m_stateset"), samples: sample(1, t0), meta: &rw2Meta{writev2.Metadata_METRIC_TYPE_STATESET, "State.", ""}},
			rw2Series{labels: name("m_summary"), samples: sample(1, t0), meta: &rw2Meta{writev2.Metadata_METRIC_TYPE_SUMMARY, "Latency.", "seconds"}},
			rw2Series{labels: name("m_gaugehistogram"), samples: sample(1, t0), meta: &rw2Meta{writev2.Metadata_METRIC_TYPE_GAUGEHISTOGRAM, "Temperature.", "celsius"}},
			rw2Series{labels: name("m_histogram"), hists: []writev2.Histogram{rw2Hist(t0, true, true, true, false)}, meta: &rw2Meta{writev2.Metadata_METRIC_TYPE_HISTOGRAM, "Duration.", "seconds"}},
		), want: want{204, 7, 1, 0}},
		// An enum value past the known ones is "unknown", as Prometheus's
		// ToMetadata reads it: protobuf enums are open, and a sender of a
		// later minor version must not lose its series.
		{name: "metadata type out of range", body: rw2Request(rw2Series{labels: name("m_bad_type"), samples: sample(1, t0), meta: &rw2Meta{typ: 99, help: "x"}},
			rw2Series{labels: name("ok"), samples: sample(1, t0)}), want: want{204, 2, 0, 0}},
		{name: "metadata without samples", body: rw2Request(rw2Series{labels: name("orphan_total"), meta: &rw2Meta{writev2.Metadata_METRIC_TYPE_COUNTER, "Orphan.", "count"}}), want: want{204, 0, 0, 0}},
		{name: "exemplar without samples", body: rw2Request(rw2Series{labels: name("orphan_total"), exemplars: []rw2Exemplar{{labels: []string{"trace_id", "t"}, value: 1, ts: t0}}}), want: want{204, 0, 0, 1}},
		{name: "samples out of order", body: rw2Request(rw2Series{labels: name("ooo"), samples: []writev2.Sample{{Value: 2, Timestamp: t0 + 1000}, {Value: 1, Timestamp: t0}}}), want: want{204, 2, 0, 0}},
		{name: "sample before 1970", body: rw2Request(rw2Series{labels: name("old"), samples: sample(1, -1000)}, rw2Series{labels: name("ok"), samples: sample(1, t0)}), want: want{400, 1, 0, 0}},
		{name: "metadata with an empty __name__", body: rw2Request(rw2Series{labels: name(""), samples: sample(1, t0), meta: &rw2Meta{writev2.Metadata_METRIC_TYPE_GAUGE, "h", "u"}}), want: want{400, 0, 0, 0}},

		// The request's wire form.
		{name: "empty request", body: rw2Raw(nil), want: want{204, 0, 0, 0}},
		{name: "only symbols", body: rw2Raw([]string{"", "a", "b"}), want: want{204, 0, 0, 0}},
		{name: "first symbol not empty", body: rw2Raw([]string{"__name__", "up"}, writev2.TimeSeries{LabelsRefs: []uint32{0, 1}, Samples: sample(1, t0)}), want: want{400, 0, 0, 0}},
		{name: "reference out of range", body: rw2Raw([]string{"", "__name__", "up"},
			writev2.TimeSeries{LabelsRefs: []uint32{1, 7}, Samples: sample(1, t0)},
			writev2.TimeSeries{LabelsRefs: []uint32{1, 2}, Samples: sample(1, t0)}), want: want{400, 1, 0, 0}},
		{name: "odd label references", body: rw2Raw([]string{"", "__name__", "up", "job"},
			writev2.TimeSeries{LabelsRefs: []uint32{1, 2, 3}, Samples: sample(1, t0)},
			writev2.TimeSeries{LabelsRefs: []uint32{1, 2}, Samples: sample(1, t0)}), want: want{400, 1, 0, 0}},
		{name: "help reference out of range", body: rw2Raw([]string{"", "__name__", "up"},
			writev2.TimeSeries{LabelsRefs: []uint32{1, 2}, Samples: sample(1, t0), Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: 9}}), want: want{400, 0, 0, 0}},
		{name: "exemplar reference out of range", body: rw2Raw([]string{"", "__name__", "up"},
			writev2.TimeSeries{LabelsRefs: []uint32{1, 2}, Samples: sample(1, t0), Exemplars: []writev2.Exemplar{{LabelsRefs: []uint32{1, 9}, Timestamp: t0}}}), want: want{400, 0, 0, 0}},
		{name: "a bad exemplar after good ones drops its series, counted out", body: rw2Raw([]string{"", "__name__", "up", "ok", "trace_id", "t"},
			writev2.TimeSeries{LabelsRefs: []uint32{1, 2}, Samples: []writev2.Sample{{Value: 1, Timestamp: t0}, {Value: 2, Timestamp: t0 + 1}},
				Exemplars: []writev2.Exemplar{{LabelsRefs: []uint32{4, 5}, Timestamp: t0}, {LabelsRefs: []uint32{4, 99}, Timestamp: t0 + 1}}},
			writev2.TimeSeries{LabelsRefs: []uint32{1, 3}, Samples: sample(1, t0), Exemplars: []writev2.Exemplar{{LabelsRefs: []uint32{4, 5}, Timestamp: t0}}}), want: want{400, 1, 0, 1}},
		{name: "a bad histogram after good samples and histograms drops its series", body: rw2Raw([]string{"", "__name__", "h", "ok"},
			writev2.TimeSeries{LabelsRefs: []uint32{1, 2}, Histograms: []writev2.Histogram{rw2Hist(t0, true, false, false, false), rw2Hist(t0+1, true, false, false, true)}},
			writev2.TimeSeries{LabelsRefs: []uint32{1, 3}, Samples: sample(1, t0)}), want: want{400, 1, 0, 0}},
		{name: "corrupt snappy", body: []byte("0garbage that is not snappy"), want: want{400, 0, 0, 0}},
		{name: "corrupt protobuf", body: snappy.Encode(nil, []byte{0x22, 0x09, 'a'}), want: want{400, 0, 0, 0}},

		// Negotiation.
		{name: "application/json", ct: "application/json", body: rw2Request(rw2Series{labels: name("up"), samples: sample(1, t0)}), want: want{415, 0, 0, 0}},
		{name: "image/png", ct: "image/png", body: rw2Request(rw2Series{labels: name("up"), samples: sample(1, t0)}), want: want{415, 0, 0, 0}},
		{name: "unknown proto", ct: "application/x-protobuf;proto=io.prometheus.write.v3.Request", body: rw2Request(rw2Series{labels: name("up"), samples: sample(1, t0)}), want: want{415, 0, 0, 0}},
		{name: "gzip", enc: "gzip", body: rw2Request(rw2Series{labels: name("up"), samples: sample(1, t0)}), want: want{415, 0, 0, 0}},
		{name: "deflate", enc: "deflate", body: rw2Request(rw2Series{labels: name("up"), samples: sample(1, t0)}), want: want{415, 0, 0, 0}},
		{name: "zstd", enc: "zstd", body: rw2Request(rw2Series{labels: name("up"), samples: sample(1, t0)}), want: want{415, 0, 0, 0}},
		{name: "1.0 Content-Type with a 2.0 version header", ct: ctV1, body: v1Body(good("a")), want: want{204, 0, 0, 0}},
		{name: "no Content-Encoding", enc: "-", body: rw2Request(rw2Series{labels: name("up"), samples: sample(1, t0)}), want: want{204, 1, 0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct, enc := c.ct, c.enc
			if ct == "" {
				ct = ctV2
			}
			if enc == "" {
				enc = "snappy"
			} else if enc == "-" {
				enc = ""
			}
			var first string
			for _, scan := range []bool{false, true} {
				rec := &recorder{scan: scan}
				srv := newServer(t, rec)
				resp := post(t, srv.URL, ct, enc, c.body, "X-Prometheus-Remote-Write-Version", "2.0.0")
				msg, _ := io.ReadAll(resp.Body)
				count := func(h string) int {
					v := resp.Header.Get(h)
					if v == "" {
						return 0
					}
					n, err := strconv.Atoi(v)
					if err != nil {
						t.Fatalf("%s: %q", h, v)
					}
					return n
				}
				// Every answer to a 2.0 request past content negotiation
				// counts what it wrote, 0 included ("with success or
				// failure", the specification); a 1.0 answer never does.
				present := 0
				for _, h := range []string{HeaderSamples, HeaderHistograms, HeaderExemplars} {
					if resp.Header.Get(h) != "" {
						present++
					}
				}
				if wantPresent := ct != ctV1 && c.want.code != 415; present != 3 && wantPresent || present != 0 && !wantPresent {
					t.Fatalf("scan %v: %d of the 3 Written headers in a %d answer (%v), want them all: %v", scan, present, resp.StatusCode, wantPresent, resp.Header)
				}
				got := want{resp.StatusCode, count(HeaderSamples), count(HeaderHistograms), count(HeaderExemplars)}
				if got != c.want {
					t.Fatalf("scan %v: got %+v (%s), want %+v", scan, got, msg, c.want)
				}
				if c.want.code == 400 && len(msg) < 10 {
					t.Fatalf("400 without a message naming the problem: %q", msg)
				}
				if ans := string(msg); first == "" {
					first = ans
				} else if ans != first {
					t.Fatalf("the scan answers %q, the decoder %q", ans, first)
				}
			}
		})
	}
}

// A 2.0 request refused whole after content negotiation (too large,
// backpressure, a failing consumer) is answered with Written counts of 0:
// nothing of it was written, and the specification asks for the counts
// "with success or failure". A 1.0 answer carries none.
func TestRemoteWrite2RefusedAnswersCountZero(t *testing.T) {
	body := rw2Request(rw2Series{labels: []string{"__name__", "up"}, samples: sample(1, 1000)})
	// Small on the wire, 64 KiB once snappy-decoded: refused before
	// decoding it.
	bomb := rw2Request(rw2Series{labels: []string{"__name__", "up", "big", strings.Repeat("a", 64<<10)}, samples: sample(1, 1000)})
	for _, c := range []struct {
		name string
		err  error
		max  int64
		code int
		body []byte
	}{
		{"too large", nil, 10, 413, nil},
		{"decoded too large", nil, 8 << 10, 413, bomb},
		{"backpressure", otlpreceiver.Backpressure(2*time.Second, nil), 0, 503, nil},
		{"consumer failed", io.ErrUnexpectedEOF, 0, 503, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, scan := range []bool{false, true} {
				h, err := New(Config{MaxRequestBytes: c.max}, &recorder{err: c.err, scan: scan})
				if err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(h)
				defer srv.Close()
				for _, ct := range []string{ctV2, ctV1} {
					b := body
					if c.body != nil {
						if ct == ctV1 {
							continue
						}
						if len(c.body) > int(c.max) {
							t.Fatalf("the bomb is %d bytes on the wire", len(c.body))
						}
						b = c.body
					} else if ct == ctV1 {
						b = v1Body(good("up"))
					}
					resp := post(t, srv.URL, ct, "snappy", b)
					want := "0"
					if ct == ctV1 {
						want = ""
					}
					if resp.StatusCode != c.code || resp.Header.Get(HeaderSamples) != want || resp.Header.Get(HeaderHistograms) != want || resp.Header.Get(HeaderExemplars) != want {
						t.Fatalf("%s scan %v: %d %v, want %d with Written %q", ct, scan, resp.StatusCode, resp.Header, c.code, want)
					}
				}
			}
		})
	}
}
