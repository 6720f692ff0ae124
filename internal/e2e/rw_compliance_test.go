package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// sortedMeta sorts metadata entries by help.
func sortedMeta(es []metaEntry) []metaEntry {
	es = slices.Clone(es)
	slices.SortFunc(es, func(a, b metaEntry) int { return strings.Compare(a.Help, b.Help) })
	return es
}

// rwcRequest builds a 2.0 request series by series, labels in the order
// given (the compliance suite sends them in a map's order, unsorted).
type rwcRequest struct {
	st  writev2.SymbolsTable
	req writev2.Request
}

func newRWC() *rwcRequest { return &rwcRequest{st: writev2.NewSymbolTable()} }

func (r *rwcRequest) refs(kv ...string) []uint32 {
	var out []uint32
	for _, s := range kv {
		out = append(out, r.st.Symbolize(s))
	}
	return out
}

func (r *rwcRequest) add(ts writev2.TimeSeries) *rwcRequest {
	r.req.Timeseries = append(r.req.Timeseries, ts)
	return r
}

func (r *rwcRequest) meta(typ writev2.Metadata_MetricType, help, unit string) writev2.Metadata {
	return writev2.Metadata{Type: typ, HelpRef: r.st.Symbolize(help), UnitRef: r.st.Symbolize(unit)}
}

func (r *rwcRequest) body() []byte {
	r.req.Symbols = r.st.Symbols()
	b, err := r.req.Marshal()
	if err != nil {
		panic(err)
	}
	return snappy.Encode(nil, b)
}

type rwcWritten struct{ code, samples, histograms, exemplars int }

// rwcPost sends a 2.0 body as Prometheus's sender does and returns the
// status and the Written counts (0 for a header not sent).
func rwcPost(t *testing.T, url string, body []byte) (rwcWritten, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	n := func(what string) int {
		v := resp.Header.Get("X-Prometheus-Remote-Write-" + what + "-Written")
		if v == "" {
			return 0
		}
		i, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s written: %q", what, v)
		}
		return i
	}
	return rwcWritten{resp.StatusCode, n("Samples"), n("Histograms"), n("Exemplars")}, string(msg)
}

// TestRemoteWrite2ComplianceReadBack sends a real `sluice run` the
// requests of a receiver compliance suite (prometheus/compliance's
// remotewrite/receiver cases, written here from the 2.0 specification):
// every answer's status and X-Prometheus-Remote-Write-*-Written counts,
// then that what was written reads back exactly through the PromQL API,
// /api/v1/metadata and /api/v1/query_exemplars, as Prometheus's
// remote-write handler stores it: special values kept (a stale marker
// ends the series), a start timestamp adds no zero sample (Prometheus
// injects one only with the created-timestamp-zero-ingestion flag),
// native and custom-bucket histograms as native histograms, every
// metadata type, exemplars with and without labels, and nothing of a
// refused series.
func TestRemoteWrite2ComplianceReadBack(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr))
	base := "http://" + qaddr
	write := base + "/api/v1/write"
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Second).UnixMilli()
	stale := math.Float64frombits(value.StaleNaN)
	s := func(v float64, ts int64) []writev2.Sample { return []writev2.Sample{{Value: v, Timestamp: ts}} }
	hist := func(ts, st int64) writev2.Histogram {
		return writev2.Histogram{Sum: 1.5, Timestamp: ts, StartTimestamp: st, ZeroThreshold: 1e-128,
			PositiveSpans: []writev2.BucketSpan{{Offset: 0, Length: 2}}, PositiveDeltas: []int64{2, 1},
			NegativeSpans: []writev2.BucketSpan{{Offset: -1, Length: 1}}, NegativeDeltas: []int64{4},
			ZeroCount: &writev2.Histogram_ZeroCountInt{ZeroCountInt: 1}, Count: &writev2.Histogram_CountInt{CountInt: 2 + 3 + 4 + 1}}
	}
	nhcb := writev2.Histogram{Schema: -53, Sum: 12, Timestamp: t0, CustomValues: []float64{0.1, 1, 10},
		PositiveSpans: []writev2.BucketSpan{{Offset: 0, Length: 4}}, PositiveDeltas: []int64{1, 2, -1, -1},
		Count: &writev2.Histogram_CountInt{CountInt: 7}}
	badHist := hist(t0, 0)
	badHist.Count = &writev2.Histogram_CountInt{CountInt: 99}

	type send struct {
		name string
		body []byte
		want rwcWritten
	}
	var sends []send
	r := newRWC()
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("job", "j", "__name__", "rwc_value", "k", "one"), Samples: s(1, t0)})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_value", "k", "nan"), Samples: s(math.NaN(), t0)})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_value", "k", "inf"), Samples: s(math.Inf(1), t0)})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_value", "k", "-inf"), Samples: s(math.Inf(-1), t0)})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_value", "k", "stale"), Samples: []writev2.Sample{{Value: 5, Timestamp: t0 - 30000}, {Value: stale, Timestamp: t0}}})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc.dots", "job name", "a\nb"), Samples: s(2, t0)})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_created_total", "job", "api"),
		Samples: []writev2.Sample{{Value: 100, Timestamp: t0, StartTimestamp: t0 - 3600_000}}, Metadata: r.meta(writev2.Metadata_METRIC_TYPE_COUNTER, "Requests.", "requests")})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_ooo"), Samples: []writev2.Sample{{Value: 2, Timestamp: t0 - 1000}, {Value: 1, Timestamp: t0 - 2000}, {Value: 3, Timestamp: t0}}})
	sends = append(sends, send{"samples", r.body(), rwcWritten{204, 11, 0, 0}})

	r = newRWC()
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_hist", "job", "api"), Histograms: []writev2.Histogram{hist(t0, t0-1800_000)},
		Metadata:  r.meta(writev2.Metadata_METRIC_TYPE_HISTOGRAM, "Duration.", "seconds"),
		Exemplars: []writev2.Exemplar{{LabelsRefs: r.refs("trace_id", "h1"), Value: 0.7, Timestamp: t0}}})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_nhcb"), Histograms: []writev2.Histogram{nhcb}})
	sends = append(sends, send{"histograms", r.body(), rwcWritten{204, 0, 2, 1}})

	r = newRWC()
	for i, m := range []struct {
		typ  writev2.Metadata_MetricType
		name string
	}{{writev2.Metadata_METRIC_TYPE_GAUGE, "rwc_m_gauge"}, {writev2.Metadata_METRIC_TYPE_UNSPECIFIED, "rwc_m_unspecified"},
		{writev2.Metadata_METRIC_TYPE_INFO, "rwc_m_info"}, {writev2.Metadata_METRIC_TYPE_STATESET, "rwc_m_stateset"},
		{writev2.Metadata_METRIC_TYPE_SUMMARY, "rwc_m_summary"}, {writev2.Metadata_METRIC_TYPE_GAUGEHISTOGRAM, "rwc_m_gaugehistogram"}, {99, "rwc_m_future"}} {
		r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", m.name), Samples: s(float64(i), t0), Metadata: r.meta(m.typ, "Help of "+m.name+"\n\"quoted\".", "u"+strconv.Itoa(i))})
	}
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_m_twice", "v", "1"), Samples: s(1, t0), Metadata: r.meta(writev2.Metadata_METRIC_TYPE_GAUGE, "First.", "")})
	sends = append(sends, send{"metadata", r.body(), rwcWritten{204, 8, 0, 0}})
	r = newRWC()
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_m_twice", "v", "2"), Samples: s(2, t0), Metadata: r.meta(writev2.Metadata_METRIC_TYPE_GAUGE, "Second.", "")})
	sends = append(sends, send{"metadata described again", r.body(), rwcWritten{204, 1, 0, 0}})

	r = newRWC()
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_ex_total", "job", "api"), Samples: []writev2.Sample{{Value: 1, Timestamp: t0 - 60000}, {Value: 2, Timestamp: t0}},
		Exemplars: []writev2.Exemplar{{LabelsRefs: r.refs("trace_id", "t1", "span_id", "s1"), Value: 1, Timestamp: t0 - 60000}, {Value: 2, Timestamp: t0}}})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_ex_total", "job", "unicode"), Samples: s(3, t0),
		Exemplars: []writev2.Exemplar{{LabelsRefs: r.refs("trace_id", "测试🌍"), Value: math.Inf(1), Timestamp: t0}}})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_ex_only"),
		Exemplars: []writev2.Exemplar{{LabelsRefs: r.refs("trace_id", "alone"), Value: 42, Timestamp: t0}}})
	sends = append(sends, send{"exemplars", r.body(), rwcWritten{204, 3, 0, 4}})

	r = newRWC()
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("job", "no_name"), Samples: s(1, t0)})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", ""), Samples: s(1, t0), Metadata: r.meta(writev2.Metadata_METRIC_TYPE_GAUGE, "empty name", "")})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_refused", "a", "1", "a", "2"), Samples: s(1, t0)})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_refused", "k", "hist"), Histograms: []writev2.Histogram{badHist}})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_refused", "k", "mixed"), Samples: s(1, t0), Histograms: []writev2.Histogram{hist(t0+1, 0)}})
	r.add(writev2.TimeSeries{LabelsRefs: r.refs("__name__", "rwc_partial", "k", "kept"), Samples: s(7, t0),
		Exemplars: []writev2.Exemplar{{LabelsRefs: r.refs("trace_id", "kept"), Value: 7, Timestamp: t0}}})
	sends = append(sends, send{"partial", r.body(), rwcWritten{400, 1, 0, 1}})

	for _, sd := range sends {
		got, msg := rwcPost(t, write, sd.body)
		if got != sd.want {
			t.Fatalf("%s: answered %+v (%s), want %+v", sd.name, got, msg, sd.want)
		}
	}

	at := time.UnixMilli(t0)
	instant := func(q string) map[string]string {
		out := map[string]string{}
		for _, s := range promMatrix(t, base, q, at) {
			out[fmt.Sprint(s.Metric)] = fmt.Sprint(s.Values[0][1])
		}
		return out
	}
	for q, want := range map[string]map[string]string{
		`rwc_value`: {
			"map[__name__:rwc_value job:j k:one]": "1", "map[__name__:rwc_value k:nan]": "NaN",
			"map[__name__:rwc_value k:inf]": "+Inf", "map[__name__:rwc_value k:-inf]": "-Inf"},
		`{"rwc.dots", "job name"="a\nb"}`:           {"map[__name__:rwc.dots job name:a\nb]": "2"},
		`count_over_time(rwc_created_total[2h])`:    {"map[job:api]": "1"},
		`rwc_created_total`:                         {"map[__name__:rwc_created_total job:api]": "100"},
		`count_over_time(rwc_value{k="stale"}[1m])`: {"map[k:stale]": "1"},
		`histogram_count(rwc_hist)`:                 {"map[job:api]": "10"},
		`histogram_sum(rwc_hist)`:                   {"map[job:api]": "1.5"},
		`histogram_count(rwc_nhcb)`:                 {"map[]": "7"},
		`histogram_quantile(0.5, rwc_nhcb)`:         {"map[]": "0.85"},
		`rwc_ex_only`:                               {},
		`count_over_time(rwc_ooo[1m])`:              {"map[]": "3"},
		`rwc_ooo offset 1s`:                         {"map[__name__:rwc_ooo]": "2"},
		`rwc_ooo offset 2s`:                         {"map[__name__:rwc_ooo]": "1"},
		`{__name__=~"rwc_refused|rwc_partial"}`:     {"map[__name__:rwc_partial k:kept]": "7"},
		`count({__name__=~"rwc_.*",__name__!~"rwc_(value|created_total|hist|nhcb|ex_total|m_.*|partial|ooo)"})`: {},
	} {
		if got := instant(q); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", q, got, want)
		}
	}
	// The stale marker ends the series: no value at t0.
	if got := instant(`rwc_value{k="stale"}`); len(got) != 0 {
		t.Errorf("a series ended by a stale marker still has a value: %v", got)
	}

	md := getMetadata(t, base, "")
	for name, want := range map[string]metaEntry{
		"rwc_created_total": {"counter", "Requests.", "requests"}, "rwc_hist": {"histogram", "Duration.", "seconds"},
		"rwc_m_gauge": {"gauge", "Help of rwc_m_gauge\n\"quoted\".", "u0"}, "rwc_m_unspecified": {"unknown", "Help of rwc_m_unspecified\n\"quoted\".", "u1"},
		"rwc_m_info": {"info", "Help of rwc_m_info\n\"quoted\".", "u2"}, "rwc_m_stateset": {"stateset", "Help of rwc_m_stateset\n\"quoted\".", "u3"},
		"rwc_m_summary": {"summary", "Help of rwc_m_summary\n\"quoted\".", "u4"}, "rwc_m_gaugehistogram": {"gaugehistogram", "Help of rwc_m_gaugehistogram\n\"quoted\".", "u5"},
		"rwc_m_future": {"unknown", "Help of rwc_m_future\n\"quoted\".", "u6"},
	} {
		if got := md[name]; len(got) != 1 || got[0] != want {
			t.Errorf("metadata of %s: %v, want [%v]", name, got, want)
		}
	}
	if got := md[""]; got != nil {
		t.Errorf("metadata of a refused series kept: %v", got)
	}
	// Prometheus's parameters: limit counts metrics (0: none),
	// limit_per_metric the entries of each.
	twice := []metaEntry{{"gauge", "First.", ""}, {"gauge", "Second.", ""}}
	if got := getMetadata(t, base, "?metric=rwc_m_twice"); len(got) != 1 || !slices.Equal(sortedMeta(got["rwc_m_twice"]), twice) {
		t.Errorf("metadata of a metric described twice: %v, want %v", got, twice)
	}
	if got := getMetadata(t, base, "?metric=rwc_m_twice&limit_per_metric=1"); len(got["rwc_m_twice"]) != 1 {
		t.Errorf("limit_per_metric=1: %v", got)
	}
	if got := getMetadata(t, base, "?limit=0"); len(got) != 0 {
		t.Errorf("limit=0: %v, want none, as Prometheus", got)
	}
	if got := getMetadata(t, base, "?limit=3"); len(got) != 3 {
		t.Errorf("limit=3: %d metrics", len(got))
	} else if es, ok := got["rwc_m_twice"]; ok && len(es) != 2 {
		t.Errorf("limit=3 cut the entries of a metric: %v", got)
	}
	if got := getMetadata(t, base, "?limit=-1"); len(got) != len(md) {
		t.Errorf("limit=-1: %d metrics, want all %d, as Prometheus", len(got), len(md))
	}
	if got := promGet(t, base, "/api/v1/metadata", url.Values{"limit_per_metric": {"x"}}); !strings.Contains(got, `"errorType":"bad_data"`) {
		t.Errorf("limit_per_metric=x: %s", got)
	}

	ex := func(q string) []string {
		var out []string
		form := url.Values{"query": {q}, "start": {strconv.FormatInt(t0/1000-120, 10)}, "end": {strconv.FormatInt(t0/1000+1, 10)}}
		for _, s := range queryExemplars(t, base, http.MethodGet, form) {
			for _, e := range s.Exemplars {
				out = append(out, fmt.Sprint(s.SeriesLabels, e.Labels, e.Value, e.Timestamp))
			}
		}
		return out
	}
	sec := func(ms int64) float64 { return float64(ms) / 1000 }
	for q, want := range map[string][]string{
		`rwc_ex_total{job="api"}`: {
			fmt.Sprint(map[string]string{"__name__": "rwc_ex_total", "job": "api"}, map[string]string{"span_id": "s1", "trace_id": "t1"}, "1", sec(t0-60000)),
			fmt.Sprint(map[string]string{"__name__": "rwc_ex_total", "job": "api"}, map[string]string{}, "2", sec(t0))},
		`rwc_ex_total{job="unicode"}`: {fmt.Sprint(map[string]string{"__name__": "rwc_ex_total", "job": "unicode"}, map[string]string{"trace_id": "测试🌍"}, "+Inf", sec(t0))},
		`rwc_ex_only`:                 {fmt.Sprint(map[string]string{"__name__": "rwc_ex_only"}, map[string]string{"trace_id": "alone"}, "42", sec(t0))},
		`rwc_hist`:                    {fmt.Sprint(map[string]string{"__name__": "rwc_hist", "job": "api"}, map[string]string{"trace_id": "h1"}, "0.7", sec(t0))},
		`rwc_partial`:                 {fmt.Sprint(map[string]string{"__name__": "rwc_partial", "k": "kept"}, map[string]string{"trace_id": "kept"}, "7", sec(t0))},
	} {
		if got := ex(q); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("exemplars of %s:\n got %v\nwant %v", q, got, want)
		}
	}
}

// rw1Post sends a 1.0 request as Prometheus's sender does and returns the
// status and whether any Written header came back (1.0 answers carry none).
func rw1Post(t *testing.T, url string, req *prompb.WriteRequest) (int, bool, string) {
	t.Helper()
	b, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	hr, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(snappy.Encode(nil, b)))
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("Content-Encoding", "snappy")
	hr.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	written := false
	for k := range resp.Header {
		if strings.HasPrefix(k, "X-Prometheus-Remote-Write-") {
			written = true
		}
	}
	return resp.StatusCode, written, string(msg)
}

// TestRemoteWrite1ExemplarsAgreeWithPrometheus sends the exemplar cases of
// a receiver compliance suite over remote write 1.0 to Debian's Prometheus
// 2.42 (exemplar storage on) and to `sluice run`: both answer 204 without
// Written headers, and /api/v1/query_exemplars and the samples read back
// agree exactly: values NaN, ±Inf, 0, negative and tiny, an exemplar
// without labels, unicode labels, exemplars sent in series of their own
// (as Prometheus sends them) and beside their samples. One difference by
// choice: an exemplar of a series never sent a sample is kept.
func TestRemoteWrite1ExemplarsAgreeWithPrometheus(t *testing.T) {
	pbase, stderr := startPrometheus(t, freePort(t), "global: {}\n", "--web.enable-remote-write-receiver", "--enable-feature=exemplar-storage")
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr))
	sbase := "http://" + qaddr
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Second).UnixMilli()
	lbl := func(kv ...string) []prompb.Label {
		var ls []prompb.Label
		for i := 0; i+1 < len(kv); i += 2 {
			ls = append(ls, prompb.Label{Name: kv[i], Value: kv[i+1]})
		}
		return ls
	}
	var series []prompb.TimeSeries
	for i, v := range []float64{0, -123.456, 1e10, 1e-10, math.NaN(), math.Inf(1), math.Inf(-1)} {
		ls := lbl("__name__", "rwx_special", "k", strconv.Itoa(i))
		ts := t0 + int64(i)*1000
		series = append(series,
			prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: v, Timestamp: ts}}},
			prompb.TimeSeries{Labels: ls, Exemplars: []prompb.Exemplar{{Labels: lbl("trace_id", "special"), Value: v, Timestamp: ts}}})
	}
	series = append(series,
		prompb.TimeSeries{Labels: lbl("__name__", "rwx_total", "job", "api"), Samples: []prompb.Sample{{Value: 1, Timestamp: t0}, {Value: 2, Timestamp: t0 + 15000}},
			Exemplars: []prompb.Exemplar{{Labels: lbl("span_id", "s1", "trace_id", "t1"), Value: 1, Timestamp: t0}, {Value: 2, Timestamp: t0 + 15000}}},
		prompb.TimeSeries{Labels: lbl("__name__", "rwx_unicode", "region", "🌍"), Samples: []prompb.Sample{{Value: 100, Timestamp: t0}},
			Exemplars: []prompb.Exemplar{{Labels: lbl("trace_id", "unicode_trace_测试"), Value: 100, Timestamp: t0}}},
		prompb.TimeSeries{Labels: lbl("__name__", "rwx_alone", "job", "x"),
			Exemplars: []prompb.Exemplar{{Labels: lbl("trace_id", "trace-with-dashes_and_underscores.123"), Value: 42, Timestamp: t0 + 2000}}},
	)
	req := &prompb.WriteRequest{Timeseries: series}
	for _, base := range []string{pbase, sbase} {
		if code, written, msg := rw1Post(t, base+"/api/v1/write", req); code != 204 || written {
			t.Fatalf("%s: %d (%s), Written headers %v; want 204 without them\n%s", base, code, msg, written, stderr)
		}
	}
	q := url.Values{"query": {`{__name__=~"rwx_.*"}`}, "start": {strconv.FormatInt(t0/1000-60, 10)}, "end": {strconv.FormatInt(t0/1000+60, 10)}}
	want := exemplarSet(queryExemplars(t, pbase, http.MethodGet, q))
	got := exemplarSet(queryExemplars(t, sbase, http.MethodGet, q))
	// An exemplar of a series that has no sample at all: Prometheus's
	// TSDB has no series to put it on and drops it (logged, answered
	// 204); sluice keeps it, as a compliance suite asks (docs/schema.md).
	alone := "map[__name__:rwx_alone job:x] map[trace_id:trace-with-dashes_and_underscores.123] 42 " + strconv.FormatInt(t0+2000, 10)
	if len(got) == 0 || got[0] != alone {
		t.Errorf("sluice dropped the exemplar of a series without samples: %v", got)
	} else {
		got = got[1:]
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sluice's exemplars\n%s\nprometheus's\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(want) < 10 {
		t.Errorf("prometheus keeps only %d exemplars:\n%s", len(want), strings.Join(want, "\n"))
	}
	// The parameters of query_exemplars as Prometheus reads them: the
	// same status and errorType, and the same exemplars on success.
	sec := func(ms int64) string { return strconv.FormatInt(ms/1000, 10) }
	for _, qv := range []url.Values{
		{"query": {`rwx_total`}},
		{"query": {`rwx_total`}, "start": {sec(t0 - 60000)}},
		{"query": {`rwx_total`}, "end": {sec(t0 + 60000)}},
		{"query": {`rwx_total`}, "start": {sec(t0 + 60000)}, "end": {sec(t0 - 60000)}},
		{"query": {`rate(rwx_total[5m]) + on() group_left rwx_unicode`}, "start": {sec(t0 - 60000)}, "end": {sec(t0 + 60000)}},
		{"query": {`rwx_total{job="none"}`}, "start": {sec(t0 - 60000)}, "end": {sec(t0 + 60000)}},
		{"query": {`rwx_total{`}},
		{"start": {sec(t0)}},
		{"query": {`rwx_total`}, "start": {"yesterday"}},
	} {
		p, s := promGet(t, pbase, "/api/v1/query_exemplars", qv), promGet(t, sbase, "/api/v1/query_exemplars", qv)
		var pa, sa struct {
			Status, ErrorType string
			Data              exemplarAnswer
		}
		if err := json.Unmarshal([]byte(p), &pa); err != nil {
			t.Fatalf("%v: prometheus %s", qv, p)
		}
		if err := json.Unmarshal([]byte(s), &sa); err != nil {
			t.Fatalf("%v: sluice %s", qv, s)
		}
		if pa.Status != sa.Status || pa.ErrorType != sa.ErrorType || strings.Join(exemplarSet(pa.Data), "\n") != strings.Join(exemplarSet(sa.Data), "\n") {
			t.Errorf("query_exemplars %v:\nsluice     %s\nprometheus %s", qv, s, p)
		}
	}
	for _, qv := range []url.Values{
		{"query": {`{__name__=~"rwx_.*"}[2m]`}, "time": {strconv.FormatInt(t0/1000+30, 10)}},
		{"query": {`count_over_time({__name__=~"rwx_.*"}[2m])`}, "time": {strconv.FormatInt(t0/1000+30, 10)}},
	} {
		p, s := canonJSON(t, promGet(t, pbase, "/api/v1/query", qv)), canonJSON(t, promGet(t, sbase, "/api/v1/query", qv))
		if p != s {
			t.Errorf("%s:\nsluice     %s\nprometheus %s", qv.Get("query"), s, p)
		}
	}
}
