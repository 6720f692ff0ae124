package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
)

// The differential test of the Prometheus HTTP API: the same generated
// data (a few hundred series over 150 minutes, sent with explicit
// timestamps by remote write 1.0) goes to Debian's Prometheus 2.42 and to
// `sluice run`, and the same API calls, as Grafana's data source and
// Explore make them, must answer the same. Only what legitimately differs
// is normalised (diffNormalise; docs/query.md, "Differences from
// Prometheus" lists the deliberate ones).

// diffStep is the scrape interval of the generated data.
const diffStep = 15 * time.Second

// diffData is the generated data: every series with its samples (stale
// markers included), in label order.
type diffData struct {
	t0     time.Time // first scrape slot
	n      int       // scrape slots
	series []diffSeries
}

type diffSeries struct {
	labels  []prompb.Label // sorted by name
	samples []prompb.Sample
}

func (s diffSeries) key() string {
	m := map[string]string{}
	for _, l := range s.labels {
		m[l.Name] = l.Value
	}
	return seriesKey(m)
}

// genDiffData builds the series. Each series is scraped at its own offset
// within the 15 s interval (never on a whole second, so no sample sits on
// the boundary of a range evaluated at whole seconds: Prometheus 2.42's
// windows are closed there, the engine's are left-open) with a few ms of
// jitter; some start late, some end with a stale marker, some end
// without one, some miss 7 minutes of scrapes, counters reset.
func genDiffData(t0 time.Time, n int) *diffData {
	rng := rand.New(rand.NewPCG(21, 26))
	d := &diffData{t0: t0, n: n}
	type life struct {
		offset     int64
		start, end int  // scrape slots [start, end)
		stale      bool // a stale marker at slot end
		gapAt      int  // 28 slots missing from gapAt (-1: none)
	}
	newLife := func() life {
		l := life{offset: rng.Int64N(14)*1000 + 20 + rng.Int64N(900), end: n, gapAt: -1}
		switch r := rng.IntN(100); {
		case r < 8:
			l.start = 10 + rng.IntN(n/2)
		case r < 16:
			l.end, l.stale = n/3+rng.IntN(n/2), true
		case r < 20:
			l.end = n/3 + rng.IntN(n/2)
		case r < 25:
			l.gapAt = 20 + rng.IntN(n-80)
		}
		return l
	}
	add := func(l life, lbls []prompb.Label, val func(i int) float64) {
		sort.Slice(lbls, func(i, j int) bool { return lbls[i].Name < lbls[j].Name })
		s := diffSeries{labels: lbls}
		for i := l.start; i < l.end; i++ {
			if l.gapAt >= 0 && i >= l.gapAt && i < l.gapAt+28 {
				continue
			}
			ts := t0.UnixMilli() + int64(i)*diffStep.Milliseconds() + l.offset + rng.Int64N(40)
			s.samples = append(s.samples, prompb.Sample{Timestamp: ts, Value: val(i)})
		}
		if l.stale {
			ts := t0.UnixMilli() + int64(l.end)*diffStep.Milliseconds() + l.offset
			s.samples = append(s.samples, prompb.Sample{Timestamp: ts, Value: math.Float64frombits(value.StaleNaN)})
		}
		d.series = append(d.series, s)
	}
	lbl := func(kv ...string) []prompb.Label {
		var out []prompb.Label
		for i := 0; i < len(kv); i += 2 {
			out = append(out, prompb.Label{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	counter := func(frac bool) func(int) float64 {
		// Well above zero when first seen: near zero, rate's extrapolation
		// towards the counter's zero point differs from Prometheus 2.42
		// (docs/query.md, "Differences from Prometheus").
		v := float64(1000 + rng.IntN(1000))
		return func(int) float64 {
			if rng.IntN(300) == 0 {
				v = float64(rng.IntN(3)) // a counter reset (process restart)
			} else if frac {
				v += math.Round(rng.Float64()*500) / 100
			} else {
				v += float64(rng.IntN(12))
			}
			return v
		}
	}
	// 144 request counters.
	for inst := range 4 {
		for _, method := range []string{"GET", "POST", "PUT", "DELETE"} {
			for _, code := range []string{"200", "404", "500"} {
				for _, path := range []string{"/api/v1/users", "/api/v1/users/{id}", "/healthz"} {
					add(newLife(), lbl("__name__", "diffapi_http_requests_total", "job", "api", "instance", fmt.Sprintf("host-%d:9100", inst),
						"method", method, "code", code, "path", path), counter(method == "PUT"))
				}
			}
		}
	}
	// 30 temperature gauges (negative, fractional; one with NaNs, one
	// with infinities), 20 queue depths.
	for inst := range 3 {
		for room := range 10 {
			v := float64(rng.IntN(40) - 10)
			special := inst*10 + room
			add(newLife(), lbl("__name__", "diffapi_temperature_celsius", "job", "sensors", "instance", fmt.Sprintf("sensor-%d", inst),
				"room", fmt.Sprintf("r%02d", room)), func(i int) float64 {
				v = math.Round((v+rng.Float64()*2-1)*100) / 100
				switch {
				case special == 7 && i%50 == 3:
					return math.NaN()
				case special == 13 && i%40 == 5:
					return math.Inf(1 - 2*(i/40%2))
				}
				return v
			})
		}
	}
	for inst := range 4 {
		for _, q := range []string{"ingest", "export", "retry", "dead", "slow"} {
			// Distinct values: topk and sort order ties as they come.
			tie := float64(len(d.series)) / 1000
			add(newLife(), lbl("__name__", "diffapi_queue_depth", "job", "api", "instance", fmt.Sprintf("host-%d:9100", inst), "queue", q),
				func(int) float64 { return float64(rng.IntN(50)) + tie })
		}
	}
	// 6 classic histograms (14 series each); one resets.
	bounds := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	for inst := range 3 {
		for _, handler := range []string{"/cart", "/pay"} {
			l := newLife()
			// Running for a while already (see counter above).
			counts := make([]float64, len(bounds)+1)
			for k := range counts {
				counts[k] = float64(100 + rng.IntN(400))
			}
			sum := 300.0
			resetAt := -1
			if inst == 1 && handler == "/pay" {
				resetAt = n / 2
			}
			vals := make([][]float64, n)
			sums, cnts := make([]float64, n), make([]float64, n)
			for i := range n {
				if i == resetAt {
					clear(counts)
					sum = 0
				}
				for range rng.IntN(20) {
					o := rng.ExpFloat64() * 0.2
					sum += math.Round(o*1e4) / 1e4
					k, _ := slices.BinarySearch(bounds, o)
					counts[k]++
				}
				cum := 0.0
				vals[i] = make([]float64, len(counts))
				for k, c := range counts {
					cum += c
					vals[i][k] = cum
				}
				sums[i], cnts[i] = sum, cum
			}
			base := []string{"job", "api", "instance", fmt.Sprintf("host-%d:9100", inst), "handler", handler}
			for k := range len(bounds) + 1 {
				le := "+Inf"
				if k < len(bounds) {
					le = strconv.FormatFloat(bounds[k], 'f', -1, 64)
				}
				add(l, lbl(append([]string{"__name__", "diffapi_request_duration_seconds_bucket", "le", le}, base...)...),
					func(i int) float64 { return vals[i][k] })
			}
			add(l, lbl(append([]string{"__name__", "diffapi_request_duration_seconds_sum"}, base...)...), func(i int) float64 { return sums[i] })
			add(l, lbl(append([]string{"__name__", "diffapi_request_duration_seconds_count"}, base...)...), func(i int) float64 { return cnts[i] })
		}
	}
	// Info metrics, a recording-rule name with colons, label values
	// that regular expressions and JSON must take literally.
	for inst := range 4 {
		add(life{offset: 3333, end: n, gapAt: -1}, lbl("__name__", "diffapi_build_info", "job", "api", "instance", fmt.Sprintf("host-%d:9100", inst),
			"version", fmt.Sprintf("1.%d.0", inst%2), "goversion", "go1.26"), func(int) float64 { return 1 })
		add(life{offset: 4321, end: n, gapAt: -1}, lbl("__name__", "instance:diffapi_cpu:rate5m", "instance", fmt.Sprintf("host-%d:9100", inst)),
			func(i int) float64 { return math.Round(rng.Float64()*1e6) / 1e6 })
	}
	for i, v := range []string{"a.b", "a+b", "(x)", "ü∑ \"q\" \\", "[brackets]", "^caret$", "*star*"} {
		add(life{offset: 5555 + int64(i)*10, end: n, gapAt: -1}, lbl("__name__", "diffapi_odd", "v", v), func(int) float64 { return float64(i) })
	}
	sort.Slice(d.series, func(i, j int) bool { return d.series[i].key() < d.series[j].key() })
	return d
}

// requests splits the data by time into remote write requests of ten
// minutes each, oldest first (Prometheus's head takes samples in order).
func (d *diffData) requests() []*prompb.WriteRequest {
	var out []*prompb.WriteRequest
	win := 40 * diffStep.Milliseconds()
	for from := d.t0.UnixMilli(); from < d.t0.UnixMilli()+int64(d.n+2)*diffStep.Milliseconds(); from += win {
		req := &prompb.WriteRequest{}
		for _, s := range d.series {
			var ss []prompb.Sample
			for _, x := range s.samples {
				if x.Timestamp >= from && x.Timestamp < from+win {
					ss = append(ss, x)
				}
			}
			if len(ss) > 0 {
				req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: s.labels, Samples: ss})
			}
		}
		if len(req.Timeseries) > 0 {
			out = append(out, req)
		}
	}
	return out
}

// diffCall is one API call: path and form, sent as GET or as a POST
// form body (Grafana's data source posts its queries).
type diffCall struct {
	path string
	form url.Values
	post bool
}

func (c diffCall) String() string {
	m := "GET"
	if c.post {
		m = "POST"
	}
	return m + " " + c.path + "?" + c.form.Encode()
}

// diffAnswer is an API answer as both are compared.
type diffAnswer struct {
	code int
	body []byte
}

// diffClient bounds every call: a server that stops answering (a lost
// query slot) fails the call rather than the whole test run.
var diffClient = &http.Client{Timeout: 20 * time.Second}

func diffDo(t *testing.T, base string, c diffCall) diffAnswer {
	t.Helper()
	var resp *http.Response
	var err error
	if c.post {
		resp, err = diffClient.PostForm(base+c.path, c.form)
	} else {
		u := base + c.path
		if len(c.form) > 0 {
			u += "?" + c.form.Encode()
		}
		resp, err = diffClient.Get(u)
	}
	if err != nil {
		// A broken connection (a handler's panic) is an answer too.
		return diffAnswer{0, []byte(err.Error())}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return diffAnswer{0, []byte(err.Error())}
	}
	return diffAnswer{resp.StatusCode, b}
}

// diffEnvelope is the API's JSON envelope.
type diffEnvelope struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
	Warnings  []string        `json:"warnings"`
	Infos     []string        `json:"infos"`
}

type diffQueryData struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

type diffSample struct {
	Metric     map[string]string `json:"metric"`
	Value      []any             `json:"value,omitempty"`
	Values     [][]any           `json:"values,omitempty"`
	Histogram  []any             `json:"histogram,omitempty"`
	Histograms [][]any           `json:"histograms,omitempty"`
}

// diffNormalise turns an answer into what must be equal: the status code,
// status and errorType (not the error text, which differs between engine
// versions), and the data, with the engine's annotations (warnings and
// infos, which Prometheus 2.42 does not have) left out and vector results
// in label order unless the query orders them (sort, sort_desc). Values
// are compared apart (diffSameValues): equal as numbers, up to the
// summation order of aggregations.
func diffNormalise(t *testing.T, c diffCall, a diffAnswer) (head string, data any) {
	t.Helper()
	var env diffEnvelope
	if err := json.Unmarshal(a.body, &env); err != nil {
		return fmt.Sprintf("%d not JSON: %.200q", a.code, a.body), nil
	}
	head = fmt.Sprintf("%d %s %s", a.code, env.Status, env.ErrorType)
	if a.code == http.StatusUnprocessableEntity && (env.ErrorType == "execution" && strings.Contains(env.Error, "too many samples") ||
		env.ErrorType == "cost_limit" && strings.Contains(env.Error, "query.max_samples")) {
		// The engine's sample limit (--query.max-samples, query.max_samples)
		// is sluice's cost_limit: the type of every limit it names.
		head = "422 error sample limit"
	}
	if env.Status != "success" {
		return head, nil
	}
	switch c.path {
	case "/api/v1/query", "/api/v1/query_range":
		var qd diffQueryData
		if err := json.Unmarshal(env.Data, &qd); err != nil {
			t.Fatalf("%s: %v\n%s", c, err, a.body)
		}
		head += " " + qd.ResultType
		switch qd.ResultType {
		case "vector", "matrix":
			var ss []diffSample
			if err := json.Unmarshal(qd.Result, &ss); err != nil {
				t.Fatalf("%s: %v\n%s", c, err, a.body)
			}
			q := strings.TrimSpace(c.form.Get("query"))
			ordered := qd.ResultType == "vector" && (strings.HasPrefix(q, "sort(") || strings.HasPrefix(q, "sort_desc("))
			if !ordered {
				sort.SliceStable(ss, func(i, j int) bool { return seriesKey(ss[i].Metric) < seriesKey(ss[j].Metric) })
			}
			return head, ss
		default:
			var v []any
			if err := json.Unmarshal(qd.Result, &v); err != nil {
				t.Fatalf("%s: %v\n%s", c, err, a.body)
			}
			return head, v
		}
	}
	var v any
	if err := json.Unmarshal(env.Data, &v); err != nil {
		t.Fatalf("%s: %v\n%s", c, err, a.body)
	}
	return head, v
}

// diffStats compares the "stats" of two query answers: every timing and
// sample count Prometheus gives is there (Prometheus 3's engine adds
// some), timings are seconds (non-negative numbers), and a range query's
// samples per step are at the same steps. The counts themselves may
// differ where the engines' windows do (docs/query.md).
func diffStats(prom, sluice []byte) string {
	type st struct {
		Timings map[string]float64 `json:"timings"`
		Samples map[string]any     `json:"samples"`
	}
	var p, s struct {
		Data struct {
			Stats *st `json:"stats"`
		} `json:"data"`
	}
	if err := json.Unmarshal(prom, &p); err != nil {
		return err.Error()
	}
	if err := json.Unmarshal(sluice, &s); err != nil {
		return err.Error()
	}
	if p.Data.Stats == nil || s.Data.Stats == nil {
		return fmt.Sprintf("present in prometheus: %t, in sluice: %t", p.Data.Stats != nil, s.Data.Stats != nil)
	}
	for k := range p.Data.Stats.Timings {
		if v, ok := s.Data.Stats.Timings[k]; !ok || v < 0 {
			return fmt.Sprintf("timings.%s is %v", k, v)
		}
	}
	for k, pv := range p.Data.Stats.Samples {
		sv, ok := s.Data.Stats.Samples[k]
		if !ok {
			return "no samples." + k
		}
		if ps, ok := pv.([]any); ok {
			ss, _ := sv.([]any)
			if len(ps) != len(ss) {
				return fmt.Sprintf("samples.%s has %d steps, prometheus %d", k, len(ss), len(ps))
			}
			for i := range ps {
				if ps[i].([]any)[0] != ss[i].([]any)[0] {
					return fmt.Sprintf("samples.%s step %d at %v, prometheus %v", k, i, ss[i].([]any)[0], ps[i].([]any)[0])
				}
			}
		}
	}
	return ""
}

// diffSameValues compares normalised data: sample values as numbers
// (relative 1e-9: Prometheus 3's engine sums with Kahan compensation,
// 2.42's did not), everything else exactly.
func diffSameValues(a, b any) bool {
	switch x := a.(type) {
	case []diffSample:
		y, ok := b.([]diffSample)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if seriesKey(x[i].Metric) != seriesKey(y[i].Metric) || !diffSameValues(x[i].Value, y[i].Value) ||
				len(x[i].Values) != len(y[i].Values) || !diffSameValues(x[i].Histogram, y[i].Histogram) ||
				len(x[i].Histograms) != len(y[i].Histograms) {
				return false
			}
			for k := range x[i].Values {
				if !diffSameValues(x[i].Values[k], y[i].Values[k]) {
					return false
				}
			}
			for k := range x[i].Histograms {
				if !diffSameValues(x[i].Histograms[k], y[i].Histograms[k]) {
					return false
				}
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !diffSameValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !diffSameValues(v, w) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		f, err1 := strconv.ParseFloat(x, 64)
		g, err2 := strconv.ParseFloat(y, 64)
		return err1 == nil && err2 == nil && math.Abs(f-g) <= 1e-9*math.Max(math.Abs(f), math.Abs(g))
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// diffFirst says where two normalised answers first differ.
func diffFirst(a, b any) string {
	if x, ok := a.([]any); ok {
		if y, ok := b.([]any); ok {
			return diffFirstOf(x, y, diffSameValues)
		}
	}
	x, ok1 := a.([]diffSample)
	y, ok2 := b.([]diffSample)
	if !ok1 || !ok2 {
		pa, _ := json.Marshal(a)
		pb, _ := json.Marshal(b)
		return fmt.Sprintf("prometheus %.1500s\nsluice     %.1500s", pa, pb)
	}
	return diffFirstOf(x, y, func(p, q diffSample) bool { return diffSameValues([]diffSample{p}, []diffSample{q}) })
}

func diffFirstOf[T any](x, y []T, same func(a, b T) bool) string {
	for i := range max(len(x), len(y)) {
		if i < len(x) && i < len(y) && same(x[i], y[i]) {
			continue
		}
		var pa, pb []byte
		if i < len(x) {
			pa, _ = json.Marshal(x[i])
		}
		if i < len(y) {
			pb, _ = json.Marshal(y[i])
		}
		return fmt.Sprintf("%d items from prometheus, %d from sluice; first difference at %d:\nprometheus %.1500s\nsluice     %.1500s", len(x), len(y), i, pa, pb)
	}
	return ""
}

// TestDiffAPIAgainstPrometheus is the differential test (see the top of
// this file).
func TestDiffAPIAgainstPrometheus(t *testing.T) {
	const maxSamples = 400000
	pbase, stderr := startPrometheus(t, freePort(t), "global: {}\n", "--web.enable-remote-write-receiver",
		"--enable-feature=promql-negative-offset", fmt.Sprintf("--query.max-samples=%d", maxSamples))
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr, fmt.Sprintf("max_samples: %d", maxSamples)))
	sbase := "http://" + qaddr

	// 150 minutes of scrapes ending about ten minutes ago; every time
	// below is relative to t0.
	t0 := time.Now().Add(-160 * time.Minute).Truncate(time.Minute)
	d := genDiffData(t0, 600)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	samples := 0
	for _, base := range []string{pbase, sbase} {
		api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range d.requests() {
			if base == pbase {
				for _, ts := range req.Timeseries {
					samples += len(ts.Samples)
				}
			}
			if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, req); err != nil {
				t.Fatalf("write to %s: %v\n%s", base, err, stderr)
			}
		}
	}
	t.Logf("%d series, %d samples sent to each", len(d.series), samples)

	// Evaluation times are whole seconds off the minute and the 30 s
	// grid: no subquery step lands on the start of its range, where
	// Prometheus 2.42's closed windows and the engine's left-open ones
	// differ (docs/query.md).
	at := func(m float64) string { // unix seconds, t0 + m minutes
		return strconv.FormatFloat(float64(t0.UnixMilli())/1000+m*60, 'f', -1, 64)
	}
	rfc := func(m float64) string { // RFC 3339, t0 + m minutes
		return t0.Add(time.Duration(m * float64(time.Minute))).UTC().Format(time.RFC3339Nano)
	}
	sec := func(s float64) float64 { return s / 60 }
	var calls []diffCall
	instant := func(q string, times ...string) {
		for i, ts := range times {
			calls = append(calls, diffCall{"/api/v1/query", url.Values{"query": {q}, "time": {ts}}, i%2 == 0})
		}
	}
	rangeQuery := func(q, start, end, step string) {
		calls = append(calls, diffCall{"/api/v1/query_range", url.Values{"query": {q}, "start": {start}, "end": {end}, "step": {step}}, true})
	}
	// Evaluation times: in the middle, near the end, just after the
	// first scrape, 4 and 6 minutes after the last one (lookback), before
	// any data.
	mid, late, early := at(77+sec(31)), at(149+sec(7)), at(sec(43))
	after4, after6, before := at(154+sec(11)), at(156+sec(53)), at(-3+sec(17))
	all := []string{mid, late, early, after4, after6, before, rfc(101.25)}
	for _, q := range []string{
		`diffapi_http_requests_total`,
		`diffapi_http_requests_total{code="500"}`,
		`diffapi_http_requests_total{path=~"/api/v1/users"}`,
		`diffapi_http_requests_total{path=~"/api.*",code!="200"}`,
		`diffapi_http_requests_total{path!~"/api.*"}`,
		`diffapi_http_requests_total{path=~"(?i)/API/V1/USERS|/healthz"}`,
		`diffapi_http_requests_total{path=~"users"}`,
		`diffapi_http_requests_total{path!~".*users.*", method=~"GET|POST"}`,
		`{__name__=~".+"}`,
		`count({__name__=~".+"})`,
		`count by (__name__) ({__name__=~"diffapi_.+"})`,
		`{__name__=~"diffapi_.*", instance="host-1:9100"}`,
		`{__name__=~"diffapi_(temperature|queue).*", __name__!~".*depth"}`,
		`diffapi_temperature_celsius{code=""}`,
		`diffapi_odd{v=~"a.b"}`, `diffapi_odd{v=~"a\\.b"}`, `diffapi_odd{v=~"a+b"}`, `diffapi_odd{v=~"\\(x\\)|\\[brackets\\]"}`,
		`diffapi_odd{v=~"\\^caret\\$"}`, `diffapi_odd{v=~".*\"q\".*"}`, `diffapi_odd{v!~".*[a-z].*"}`, `diffapi_odd{v=~""}`,
		`rate(diffapi_http_requests_total[5m])`,
		`increase(diffapi_http_requests_total{method="PUT"}[1h])`,
		`sum by (code) (rate(diffapi_http_requests_total[5m]))`,
		`sum without (instance, method) (irate(diffapi_http_requests_total[2m]))`,
		`resets(diffapi_http_requests_total[1h])`,
		`changes(diffapi_queue_depth[30m])`,
		`diffapi_http_requests_total offset 30m`,
		`diffapi_http_requests_total offset -10m`,
		`rate(diffapi_http_requests_total[10m] offset 1h)`,
		fmt.Sprintf(`diffapi_temperature_celsius @ %s`, at(60.25)),
		fmt.Sprintf(`rate(diffapi_http_requests_total[5m] @ %s)`, at(120)),
		`max_over_time(rate(diffapi_http_requests_total{code="500"}[5m])[30m:1m])`,
		`avg_over_time(diffapi_temperature_celsius[10m:30s])`,
		`max_over_time(deriv(diffapi_temperature_celsius[5m])[20m:])`,
		`absent(diffapi_nonexistent)`,
		`absent(diffapi_nonexistent{job="x", instance=~"y.*"})`,
		`absent(diffapi_http_requests_total{code="500"})`,
		`absent_over_time(diffapi_temperature_celsius{room="r03"}[5m])`,
		`label_replace(diffapi_http_requests_total{code="404"}, "host", "$1", "instance", "(.*):\\d+")`,
		`label_replace(diffapi_queue_depth, "q", "x-$1", "queue", "(re).*")`,
		`label_join(diffapi_build_info, "iv", "/", "instance", "version")`,
		`topk(3, diffapi_queue_depth)`,
		`bottomk(2, sum by (instance) (diffapi_queue_depth))`,
		`sort(sum by (instance, code) (diffapi_http_requests_total))`,
		`sort_desc(sum by (room) (diffapi_temperature_celsius))`,
		`count_values("depth", diffapi_queue_depth)`,
		`quantile(0.9, diffapi_temperature_celsius)`,
		`stddev by (instance) (diffapi_temperature_celsius)`,
		`group by (version) (diffapi_build_info)`,
		`histogram_quantile(0.9, sum by (le) (rate(diffapi_request_duration_seconds_bucket[5m])))`,
		`histogram_quantile(0.5, rate(diffapi_request_duration_seconds_bucket[10m]))`,
		`rate(diffapi_request_duration_seconds_sum[5m]) / rate(diffapi_request_duration_seconds_count[5m])`,
		`diffapi_request_duration_seconds_bucket{le="0.1"}`,
		`scalar(sum(diffapi_queue_depth))`, `vector(1)`, `time()`, `1 + 1`, `"a string"`, `-Inf`, `NaN`,
		`diffapi_temperature_celsius > 20`, `diffapi_temperature_celsius > bool 20`,
		`diffapi_queue_depth * on (instance) group_left (version) diffapi_build_info`,
		`diffapi_queue_depth and on (instance) diffapi_build_info{version="1.0.0"}`,
		`diffapi_queue_depth unless diffapi_queue_depth{queue="dead"}`,
		`diffapi_queue_depth{queue="dead"} or diffapi_queue_depth{queue="slow"}`,
		`clamp_min(diffapi_temperature_celsius, 0)`, `round(diffapi_temperature_celsius, 0.5)`, `abs(diffapi_temperature_celsius)`,
		`timestamp(diffapi_temperature_celsius)`,
		`predict_linear(diffapi_temperature_celsius[30m], 3600)`,
		`delta(diffapi_temperature_celsius[10m])`, `idelta(diffapi_queue_depth[5m])`,
		`quantile_over_time(0.5, diffapi_temperature_celsius[30m])`,
		`stddev_over_time(diffapi_queue_depth[30m])`,
		`last_over_time(diffapi_http_requests_total{code="200",method="GET"}[10m])`,
		`present_over_time(diffapi_http_requests_total{code="500",method="GET"}[10m])`,
		`count_over_time(diffapi_http_requests_total[10m])`,
		`diffapi_temperature_celsius[2m]`,
		`diffapi_http_requests_total{method="GET",code="200"}[1m] offset 1h`,
		`instance:diffapi_cpu:rate5m`,
	} {
		instant(q, all...)
	}
	start, end := at(sec(37)), at(158+sec(1))
	for _, c := range []struct{ q, start, end, step string }{
		{`diffapi_http_requests_total{code="500",method="GET"}`, start, end, "60"},
		{`rate(diffapi_http_requests_total{method="POST"}[5m])`, at(3.7), end, "15s"},
		{`sum by (code) (increase(diffapi_http_requests_total[10m]))`, rfc(0), rfc(150), "5m"},
		{`diffapi_temperature_celsius`, at(1.123), at(157.456), "37"},
		{`diffapi_queue_depth offset 20m`, start, end, "1m"},
		{fmt.Sprintf(`diffapi_queue_depth @ %s`, at(90)), start, end, "10m"},
		{`diffapi_queue_depth @ start()`, at(30), end, "10m"},
		{`rate(diffapi_http_requests_total{code="404"}[5m] @ end())`, at(30), at(60), "10m"},
		{`max_over_time(rate(diffapi_http_requests_total{code="200"}[2m])[10m:30s])`, start, end, "2m"},
		{`absent(diffapi_http_requests_total{instance="host-2:9100",code="500",method="GET",path="/healthz"})`, start, end, "1m"},
		{`absent(diffapi_nonexistent)`, start, end, "30m"},
		{`histogram_quantile(0.99, sum by (le, handler) (rate(diffapi_request_duration_seconds_bucket[5m])))`, start, end, "2m"},
		{`topk(2, diffapi_queue_depth)`, start, end, "20m"},
		{`sort_desc(diffapi_queue_depth)`, start, end, "20m"},
		{`label_replace(diffapi_temperature_celsius{room="r07"}, "r", "$1", "room", "r0*(.*)")`, start, end, "1m"},
		{`diffapi_temperature_celsius{room=~"r0[37]"}`, start, end, "15s"},
		{`count({__name__=~".+"})`, start, end, "5m"},
		{`time()`, start, end, "1h"},
		{`vector(3)`, at(0), at(0), "1"},
		{`diffapi_queue_depth{queue="dead"}`, at(10), at(10.5), "0.001"},
	} {
		rangeQuery(c.q, c.start, c.end, c.step)
	}

	// Errors.
	for _, q := range []string{`sum(`, `rate(diffapi_queue_depth)`, `foo{`, `nosuchfunc(x)`, `{job=~".*"}`, `x[5m] + 1`, `1 +`, `diffapi_queue_depth[5m:1m:2m]`} {
		instant(q, mid)
	}
	rangeQuery(`diffapi_queue_depth[5m]`, start, end, "60")
	calls = append(calls,
		diffCall{"/api/v1/query", url.Values{"time": {mid}}, false},
		diffCall{"/api/v1/query", url.Values{"query": {"1"}, "time": {"yesterday"}}, false},
		diffCall{"/api/v1/query", url.Values{"query": {"1"}, "time": {mid}, "timeout": {"soon"}}, false},
		diffCall{"/api/v1/query_range", url.Values{"query": {"1"}, "start": {end}, "end": {start}, "step": {"60"}}, true},
		diffCall{"/api/v1/query_range", url.Values{"query": {"1"}, "start": {start}, "end": {end}, "step": {"0"}}, true},
		diffCall{"/api/v1/query_range", url.Values{"query": {"1"}, "start": {start}, "end": {end}, "step": {"-15"}}, true},
		diffCall{"/api/v1/query_range", url.Values{"query": {"1"}, "start": {start}, "end": {end}, "step": {"0.5"}}, true},
		diffCall{"/api/v1/query_range", url.Values{"query": {"1"}, "start": {start}, "end": {end}}, true},
		diffCall{"/api/v1/query_range", url.Values{"query": {"1"}, "end": {end}, "step": {"60"}}, true},
		diffCall{"/api/v1/query_range", url.Values{"query": {"1"}, "start": {start}, "end": {end}, "step": {"1x"}}, true},
		// Past the deadline before evaluation starts.
		diffCall{"/api/v1/query", url.Values{"query": {`count_over_time(diffapi_http_requests_total[3h])`}, "time": {late}, "timeout": {"0.000001"}}, true},
		// More samples in memory at once than --query.max-samples.
		diffCall{"/api/v1/query", url.Values{"query": {`max_over_time(diffapi_http_requests_total[3h:1s])`}, "time": {late}}, true},
		diffCall{"/api/v1/query_range", url.Values{"query": {`diffapi_http_requests_total`}, "start": {start}, "end": {end}, "step": {"1"}}, true},
	)

	// Series, label names and values.
	manySets := []string{`diffapi_http_requests_total{code="500"}`, `diffapi_http_requests_total{code=~"2.."}`, `diffapi_queue_depth`,
		`diffapi_temperature_celsius`, `diffapi_request_duration_seconds_bucket{le=~"0.5|\\+Inf"}`, `{__name__=~"diffapi_odd|diffapi_build_info"}`,
		`diffapi_nonexistent`, `{__name__=~"diffapi_queue_.+", queue!="dead"}`}
	for _, c := range []diffCall{
		{"/api/v1/series", url.Values{"match[]": {`diffapi_http_requests_total{code="500"}`}}, false},
		{"/api/v1/series", url.Values{"match[]": {`diffapi_build_info`, `{__name__=~"diffapi_odd|instance:.*"}`}}, true},
		{"/api/v1/series", url.Values{"match[]": {`{__name__=~".+"}`}, "start": {at(-60)}, "end": {at(200)}}, true},
		{"/api/v1/series", url.Values{"match[]": {`diffapi_queue_depth`, `diffapi_queue_depth{queue="dead"}`}, "start": {rfc(0)}, "end": {rfc(160)}}, false},
		{"/api/v1/series", url.Values{"match[]": {`{path=~"/api/v1/users"}`}}, false},
		{"/api/v1/series", url.Values{}, false},
		{"/api/v1/series", url.Values{"match[]": {`{`}}, false},
		{"/api/v1/series", url.Values{"match[]": {`{job=~".*"}`}}, false},
		{"/api/v1/series", url.Values{"match[]": {`up`}, "start": {"x"}}, false},
		{"/api/v1/labels", nil, false},
		{"/api/v1/labels", url.Values{"match[]": {`diffapi_build_info`}}, true},
		{"/api/v1/labels", url.Values{"match[]": {`diffapi_odd`, `instance:diffapi_cpu:rate5m`}, "start": {at(-1)}, "end": {at(200)}}, true},
		{"/api/v1/labels", url.Values{"start": {rfc(-60)}, "end": {rfc(170)}}, false},
		{"/api/v1/label/__name__/values", nil, false},
		{"/api/v1/label/__name__/values", url.Values{"match[]": {`{job="api"}`}}, false},
		{"/api/v1/label/instance/values", url.Values{"match[]": {`diffapi_temperature_celsius`}}, false},
		{"/api/v1/label/code/values", url.Values{"start": {rfc(-1)}, "end": {at(200)}}, false},
		{"/api/v1/label/v/values", url.Values{"match[]": {`diffapi_odd`}}, false},
		{"/api/v1/label/nosuchlabel/values", nil, false},
		{"/api/v1/label/le/values", url.Values{"match[]": {`diffapi_request_duration_seconds_bucket`, `{le="+Inf"}`}}, false},
		{"/api/v1/labels", url.Values{"match[]": {`{`}}, false},
		// Many match[] sets, as Grafana sends for a dashboard's panels:
		// overlapping, of several metrics, one matching nothing (sluice
		// reads them in one scan).
		{"/api/v1/labels", url.Values{"match[]": manySets, "start": {rfc(-1)}, "end": {at(200)}}, true},
		{"/api/v1/label/job/values", url.Values{"match[]": manySets}, false},
		{"/api/v1/label/__name__/values", url.Values{"match[]": append([]string{`{job="api"}`}, manySets...), "start": {rfc(-1)}, "end": {at(200)}}, false},
		{"/api/v1/label/le/values", url.Values{"match[]": manySets}, false},
		{"/api/v1/label/code/values", url.Values{"match[]": manySets, "start": {rfc(30)}, "end": {rfc(90)}}, false},
		{"/api/v1/series", url.Values{"match[]": manySets, "start": {rfc(30)}, "end": {rfc(90)}}, true},
		{"/api/v1/series", url.Values{"match[]": {`diffapi_odd`, `diffapi_build_info`, `{__name__=~"instance:.+"}`}}, true},
		{"/api/v1/series", url.Values{"match[]": {`diffapi_odd`, `diffapi_build_info`}, "limit": {"9"}}, true},
		{"/api/v1/series", url.Values{"match[]": {`diffapi_odd`}, "limit": {"7"}}, false},
		{"/api/v1/labels", url.Values{"limit": {"3"}}, true},
		{"/api/v1/label/code/values", url.Values{"limit": {"2"}, "start": {rfc(0)}}, false},
		{"/api/v1/label/queue/values", url.Values{"limit": {"5"}}, false},
		{"/api/v1/status/buildinfo", nil, false},
		{"/api/v1/status/runtimeinfo", nil, false},
		// An end before start: an empty list, not bad_data (labels and
		// label values: below).
		{"/api/v1/series", url.Values{"match[]": {`diffapi_odd`}, "start": {at(100)}, "end": {at(50)}}, true},
		{"/api/v1/query_exemplars", url.Values{"query": {`diffapi_odd`}, "start": {at(100)}, "end": {at(50)}}, false},
		{"/api/v1/status/flags", nil, false},
		{"/api/v1/status/config", nil, false},
		// Statistics as Grafana asks for them (stats=all) and other values.
		{"/api/v1/query", url.Values{"query": {`sum(diffapi_queue_depth)`}, "time": {mid}, "stats": {"all"}}, false},
		{"/api/v1/query", url.Values{"query": {`diffapi_queue_depth`}, "time": {mid}, "stats": {"true"}}, true},
		{"/api/v1/query", url.Values{"query": {`1`}, "time": {mid}, "stats": {"x"}}, false},
		{"/api/v1/query_range", url.Values{"query": {`max by (job) (diffapi_temperature_celsius)`}, "start": {start}, "end": {end}, "step": {"10m"}, "stats": {"all"}}, true},
		{"/api/v1/query_range", url.Values{"query": {`diffapi_queue_depth`}, "start": {start}, "end": {end}, "step": {"15m"}, "stats": {"true"}}, false},
		{"/api/v1/query_range", url.Values{"query": {`sum(`}, "start": {start}, "end": {end}, "step": {"15m"}, "stats": {"all"}}, false},
		{"/api/v1/query", url.Values{"query": {`diffapi_queue_depth{queue="dead"}`}, "time": {t0.Add(77*time.Minute + 31123456789).UTC().Format(time.RFC3339Nano)}}, false},
		{"/api/v1/query", url.Values{"query": {`diffapi_queue_depth{queue="dead"}`}, "time": {strconv.FormatFloat(float64(t0.Unix()+4651), 'e', -1, 64)}}, true},
		{"/api/v1/query", url.Values{"query": {`diffapi_queue_depth{queue="dead"}`}, "time": {mid}, "timeout": {"30s"}}, true},
		{"/api/v1/query_range", url.Values{"query": {`diffapi_queue_depth{queue="ingest"}`}, "start": {start}, "end": {end}, "step": {"1m30s"}}, true},
		{"/api/v1/query_range", url.Values{"query": {`diffapi_queue_depth{queue="ingest"}`}, "start": {mid}, "end": {mid}, "step": {"90.5"}}, false},
		{"/api/v1/labels", url.Values{"match[]": {""}}, false},
		{"/api/v1/series", url.Values{"match[]": {`diffapi_odd`}, "start": {rfc(1.5)}, "end": {"2040-01-01T00:00:00.5+02:00"}}, false},
		{"/api/v1/rules", nil, false},
		{"/api/v1/alerts", nil, false},
		{"/api/v1/query", url.Values{"query": {`sort_desc(diffapi_queue_depth)`}, "time": {mid}, "limit": {"4"}}, true},
		{"/api/v1/query", url.Values{"query": {`sort_desc(diffapi_queue_depth)`}, "time": {mid}, "limit": {"400"}}, false},
		{"/api/v1/query_range", url.Values{"query": {`diffapi_temperature_celsius`}, "start": {start}, "end": {end}, "step": {"5m"}, "limit": {"3"}}, true},
		{"/api/v1/query_exemplars", url.Values{"query": {`diffapi_http_requests_total`}, "start": {start}, "end": {end}}, true},
		{"/api/v1/format_query", url.Values{"query": {`sum by(code)(rate(diffapi_http_requests_total{code=~"5.."}[5m]))/ignoring(code) group_left sum(rate(x[5m]))`}}, false},
		{"/api/v1/format_query", url.Values{"query": {`sum(`}}, false},
		{"/api/v1/nosuchendpoint", nil, false},
	} {
		calls = append(calls, c)
	}

	diffs := 0
	for _, c := range calls {
		pa, sa := diffDo(t, pbase, c), diffDo(t, sbase, c)
		ph, pd := diffNormalise(t, c, pa)
		sh, sd := diffNormalise(t, c, sa)
		if ph != sh {
			diffs++
			t.Errorf("%s:\nprometheus %s %.300s\nsluice     %s %.300s", c, ph, pa.body, sh, sa.body)
			continue
		}
		if c.path == "/api/v1/status/flags" {
			// Prometheus has its flags; sluice has the query settings that
			// stand for some, with the same values where both default.
			for _, k := range []string{"query.lookback-delta", "query.max-samples", "query.timeout"} {
				if pv, sv := pd.(map[string]any)[k], sd.(map[string]any)[k]; pv != sv {
					diffs++
					t.Errorf("%s: %s is %v in prometheus, %v in sluice", c, k, pv, sv)
				}
			}
			continue
		}
		if c.form.Has("stats") && strings.Contains(ph, "success") {
			if d := diffStats(pa.body, sa.body); d != "" {
				diffs++
				t.Errorf("%s: stats: %s\nprometheus %.600s\nsluice     %.600s", c, d, pa.body, sa.body)
			}
		}
		if c.path == "/api/v1/status/buildinfo" || c.path == "/api/v1/status/runtimeinfo" {
			// Versions and processes differ by nature; Prometheus's
			// fields are all there.
			for k := range pd.(map[string]any) {
				if _, ok := sd.(map[string]any)[k]; !ok {
					diffs++
					t.Errorf("%s: sluice lacks %q: %s", c, k, sa.body)
				}
			}
			continue
		}
		if lim, _ := strconv.Atoi(c.form.Get("limit")); lim > 0 {
			// Prometheus 2.42 has no limit (it ignores the parameter);
			// Prometheus 3 cuts the list (a vector or matrix: its series)
			// and warns.
			n := 0
			switch full := pd.(type) {
			case []any:
				n, pd = len(full), full[:min(lim, len(full))]
			case []diffSample:
				n, pd = len(full), full[:min(lim, len(full))]
			}
			var env diffEnvelope
			json.Unmarshal(sa.body, &env)
			if warned := slices.Contains(env.Warnings, "results truncated due to limit"); warned != (n > lim) {
				diffs++
				t.Errorf("%s: %d results without the limit, warnings %q", c, n, env.Warnings)
			}
		}
		if !diffSameValues(pd, sd) {
			diffs++
			t.Errorf("%s: %s\n%s", c, ph, diffFirst(pd, sd))
		} else if (strings.HasPrefix(c.path, "/api/v1/label") || c.path == "/api/v1/series") && strings.Contains(ph, "success") && !c.form.Has("limit") &&
			!bytes.Equal(bytes.TrimSpace(pa.body), bytes.TrimSpace(sa.body)) {
			// Byte for byte, as a client comparing bodies sees them.
			diffs++
			t.Errorf("%s: the same answer, other bytes:\nprometheus %.300s\nsluice     %.300s", c, pa.body, sa.body)
		}
	}
	t.Logf("%d calls, %d differ", len(calls), diffs)

	// Labels and label values of an end before start: a success, as in
	// Prometheus, whose head then answers every name it holds (its range
	// check lets a reversed range through); sluice answers an empty list,
	// as series do in both (docs/query.md, "Differences from Prometheus").
	for _, c := range []diffCall{
		{"/api/v1/labels", url.Values{"start": {at(100)}, "end": {at(50)}}, true},
		{"/api/v1/label/__name__/values", url.Values{"start": {rfc(100)}, "end": {rfc(50)}}, false},
		{"/api/v1/label/job/values", url.Values{"match[]": {`diffapi_odd`}, "start": {rfc(100)}, "end": {rfc(50)}}, false},
	} {
		pa, sa := diffDo(t, pbase, c), diffDo(t, sbase, c)
		if ph, _ := diffNormalise(t, c, pa); ph != "200 success " {
			t.Errorf("%s: prometheus %s", c, pa.body)
		}
		if string(bytes.TrimSpace(sa.body)) != `{"status":"success","data":[]}` {
			t.Errorf("%s: sluice %d %s, want an empty list", c, sa.code, sa.body)
		}
	}

	// Series, label names and values over part of the data: Prometheus
	// answers from whole chunks (series) or the whole head block (names
	// and values), so it may list more than has samples in the range;
	// sluice answers exactly what has (docs/query.md).
	for _, c := range []struct {
		path      string
		match     []string
		from, to  float64 // minutes after t0
		matchFunc func(map[string]string) bool
	}{
		{"/api/v1/series", []string{`diffapi_http_requests_total`}, 20, 30, func(m map[string]string) bool { return m["__name__"] == "diffapi_http_requests_total" }},
		{"/api/v1/series", []string{`{job="api",code="500"}`, `diffapi_temperature_celsius`}, 100, 101,
			func(m map[string]string) bool {
				return m["job"] == "api" && m["code"] == "500" || m["__name__"] == "diffapi_temperature_celsius"
			}},
		{"/api/v1/series", []string{`{__name__=~"diffapi_.*"}`}, 148, 200, func(m map[string]string) bool { return strings.HasPrefix(m["__name__"], "diffapi_") }},
		{"/api/v1/series", []string{`{__name__=~".+"}`}, -60, -1, func(map[string]string) bool { return true }},
		{"/api/v1/labels", nil, 120, 125, func(map[string]string) bool { return true }},
		{"/api/v1/labels", []string{`diffapi_temperature_celsius`}, 10, 11, func(m map[string]string) bool { return m["__name__"] == "diffapi_temperature_celsius" }},
		{"/api/v1/label/instance/values", []string{`{job="api"}`}, 140, 150, func(m map[string]string) bool { return m["job"] == "api" }},
		{"/api/v1/label/__name__/values", nil, -30, -10, func(map[string]string) bool { return true }},
		{"/api/v1/label/room/values", []string{`{room=~"r0[0-4]"}`}, 60, 61, func(m map[string]string) bool { return m["room"] >= "r00" && m["room"] <= "r04" }},
	} {
		form := url.Values{"start": {at(c.from)}, "end": {at(c.to)}}
		if c.match != nil {
			form["match[]"] = c.match
		}
		call := diffCall{c.path, form, !strings.HasSuffix(c.path, "/values")}
		want := d.answerIn(c.path, c.matchFunc, t0.Add(time.Duration(c.from*float64(time.Minute))).UnixMilli(), t0.Add(time.Duration(c.to*float64(time.Minute))).UnixMilli())
		_, pd := diffNormalise(t, call, diffDo(t, pbase, call))
		_, sd := diffNormalise(t, call, diffDo(t, sbase, call))
		if !diffSameValues(want, sd) {
			t.Errorf("%s: sluice is not exactly what has samples in the range:\n%s", call, strings.Replace(diffFirst(want, sd), "prometheus", "truth     ", 2))
		}
		got := map[string]bool{}
		for _, x := range pd.([]any) {
			b, _ := json.Marshal(x)
			got[string(b)] = true
		}
		for _, x := range want.([]any) {
			if b, _ := json.Marshal(x); !got[string(b)] {
				t.Errorf("%s: prometheus lacks %s", call, b)
			}
		}
	}
}

// answerIn is what series, labels or label/<name>/values answer for the
// series match selects that have a sample (a stale marker is one) in
// [mint, maxt], in the API's order.
func (d *diffData) answerIn(path string, match func(map[string]string) bool, mint, maxt int64) any {
	var sets []map[string]string
	for _, s := range d.series {
		m := map[string]string{}
		for _, l := range s.labels {
			m[l.Name] = l.Value
		}
		if !match(m) || !slices.ContainsFunc(s.samples, func(x prompb.Sample) bool { return x.Timestamp >= mint && x.Timestamp <= maxt }) {
			continue
		}
		sets = append(sets, m)
	}
	out := []any{}
	var keys []string
	switch {
	case path == "/api/v1/series":
		for _, m := range sets { // d.series is in label order
			o := map[string]any{}
			for k, v := range m {
				o[k] = v
			}
			out = append(out, o)
		}
		return out
	case path == "/api/v1/labels":
		for _, m := range sets {
			for k := range m {
				keys = append(keys, k)
			}
		}
	default:
		name := strings.TrimSuffix(strings.TrimPrefix(path, "/api/v1/label/"), "/values")
		for _, m := range sets {
			if v, ok := m[name]; ok {
				keys = append(keys, v)
			}
		}
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		out = append(out, k)
	}
	return out
}
