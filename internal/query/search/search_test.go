package search

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

const (
	wideStart = "2025-01-01T00:00:00Z"
	wideEnd   = "2027-01-01T00:00:00Z"
)

func wide(kv ...string) url.Values {
	q := url.Values{"start": {wideStart}, "end": {wideEnd}}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return q
}

// Two copies at the same times (so every timestamp is shared by records
// of different files) and one 90 minutes earlier (other hours).
var threeCopies = []copySpec{{"default", 0}, {"default", 0}, {"default", -90 * time.Minute}}

func expectedLogs(tb testing.TB, copies []copySpec, tenant string) []expLog {
	var out []expLog
	for _, c := range copies {
		if c.tenant == tenant {
			out = append(out, corpusLogs(tb, c.shift)...)
		}
	}
	return out
}

func gotKey(tb testing.TB, m map[string]any) (string, int64) {
	tb.Helper()
	ts, _ := m["timestamp"].(string)
	if ts == "" {
		ts, _ = m["observed_timestamp"].(string)
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		tb.Fatalf("record %v: bad time: %v", m, err)
	}
	body, ok := m["body"].(string)
	if !ok {
		body = "<nonstring>"
	}
	svc, _ := m["service"].(string)
	return fmt.Sprintf("%d|%s|%s", t.UnixNano(), svc, body), t.UnixNano()
}

func expKey(e *expLog) string {
	if e.body == "" {
		return fmt.Sprintf("%d|%s|%s", e.t, e.service, e.body)
	}
	return e.key()
}

// checkSame compares a search result with the expected records, as
// multisets, and checks the newest-first order.
func checkSame(t *testing.T, what string, got []map[string]any, want []expLog) {
	t.Helper()
	var gk, wk []string
	prev := int64(1<<63 - 1)
	for _, m := range got {
		k, ts := gotKey(t, m)
		if ts > prev {
			t.Fatalf("%s: not newest first: %d after %d", what, ts, prev)
		}
		prev = ts
		gk = append(gk, k)
	}
	for i := range want {
		wk = append(wk, expKey(&want[i]))
	}
	sort.Strings(gk)
	sort.Strings(wk)
	if len(want) == 0 {
		t.Fatalf("%s: test case selects nothing; pick another value", what)
	}
	if !slices.Equal(gk, wk) {
		t.Fatalf("%s: got %d records, want %d (first difference: %s)", what, len(gk), len(wk), firstDiff(gk, wk))
	}
}

func firstDiff(a, b []string) string {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("got %q, want %q", a[i], b[i])
		}
	}
	return "lengths differ"
}

func filter(in []expLog, f func(*expLog) bool) []expLog {
	var out []expLog
	for i := range in {
		if f(&in[i]) {
			out = append(out, in[i])
		}
	}
	return out
}

// pick returns the most frequent value of f over the records.
func pick(in []expLog, f func(*expLog) (string, bool)) string {
	n := map[string]int{}
	best := ""
	for i := range in {
		if v, ok := f(&in[i]); ok {
			n[v]++
			if n[v] > n[best] || (n[v] == n[best] && v < best) {
				best = v
			}
		}
	}
	return best
}

func TestLogsFilters(t *testing.T) {
	// Two copies in different hours, several files per hour.
	copies := []copySpec{{"default", 0}, {"default", -90 * time.Minute}}
	tl := buildLake(t, 300, copies, nil)
	c := serve(t, tl, Options{})
	all := expectedLogs(t, copies, "default")
	search := func(q url.Values) []map[string]any { return c.all("/api/v1/logs/search", q, 5000) }

	checkSame(t, "no filter", search(wide()), all)

	svc := pick(all, func(e *expLog) (string, bool) { return e.service, e.service != "" })
	checkSame(t, "service", search(wide("service", svc)),
		filter(all, func(e *expLog) bool { return e.service == svc }))

	checkSame(t, "severity_min=warn", search(wide("severity_min", "warn")),
		filter(all, func(e *expLog) bool { return e.sevNum >= 13 }))
	checkSame(t, "severity_min=9", search(wide("severity_min", "9")),
		filter(all, func(e *expLog) bool { return e.sevNum >= 9 }))
	txt := pick(all, func(e *expLog) (string, bool) { return e.sevText, e.sevText != "" })
	checkSame(t, "severity_text", search(wide("severity_text", txt)),
		filter(all, func(e *expLog) bool { return e.sevText == txt }))

	// Attribute equality on the most common string attribute value.
	type kv struct{ k, v string }
	var key, val string
	{
		n := map[kv]int{}
		for i := range all {
			all[i].attrs.Range(func(k string, v pcommon.Value) bool {
				if v.Type() == pcommon.ValueTypeStr && v.Str() != "" {
					n[kv{k, v.Str()}]++
				}
				return true
			})
		}
		best := kv{}
		for x, m := range n {
			if m > n[best] || (m == n[best] && x.k+x.v < best.k+best.v) {
				best = x
			}
		}
		key, val = best.k, best.v
	}
	attrStr := func(m pcommon.Map, k string) (string, bool) {
		v, ok := m.Get(k)
		if !ok || v.Type() != pcommon.ValueTypeStr {
			return "", false
		}
		return v.Str(), true
	}
	checkSame(t, "attr eq "+key, search(wide("attr."+key, val)),
		filter(all, func(e *expLog) bool { s, ok := attrStr(e.attrs, key); return ok && s == val }))
	re := regexp.QuoteMeta(val[:1]) + ".*"
	rx := regexp.MustCompile("^(?:" + re + ")$")
	checkSame(t, "attr_re "+key, search(wide("attr_re."+key, re)),
		filter(all, func(e *expLog) bool { s, ok := attrStr(e.attrs, key); return ok && rx.MatchString(s) }))

	// An int attribute, if the corpus has one.
	intKey, intVal := "", int64(0)
	for i := range all {
		all[i].attrs.Range(func(k string, v pcommon.Value) bool {
			if v.Type() == pcommon.ValueTypeInt && intKey == "" {
				intKey, intVal = k, v.Int()
			}
			return true
		})
	}
	if intKey != "" {
		checkSame(t, "attr int "+intKey, search(wide("attr."+intKey, fmt.Sprint(intVal))),
			filter(all, func(e *expLog) bool {
				v, ok := e.attrs.Get(intKey)
				return ok && v.Type() == pcommon.ValueTypeInt && v.Int() == intVal
			}))
	}

	// Resource attribute.
	rkey, rval := "", ""
	for i := range all {
		all[i].res.Range(func(k string, v pcommon.Value) bool {
			if k != "service.name" && v.Type() == pcommon.ValueTypeStr && rkey == "" {
				rkey, rval = k, v.Str()
			}
			return true
		})
	}
	if rkey != "" {
		checkSame(t, "resource "+rkey, search(wide("resource."+rkey, rval)),
			filter(all, func(e *expLog) bool { s, ok := attrStr(e.res, rkey); return ok && s == rval }))
	}
	checkSame(t, "resource service.name", search(wide("resource.service.name", svc)),
		filter(all, func(e *expLog) bool { return e.service == svc }))

	// Body substring: a word from the most common body.
	body := pick(all, func(e *expLog) (string, bool) { return e.body, len(e.body) > 6 })
	word := body[1:5]
	checkSame(t, "q", search(wide("q", word)),
		filter(all, func(e *expLog) bool { return strings.Contains(e.body, word) }))

	// Combined filters.
	checkSame(t, "service+severity", search(wide("service", svc, "severity_min", "info")),
		filter(all, func(e *expLog) bool { return e.service == svc && e.sevNum >= 9 }))

	// Time range edges: start inclusive, end exclusive, ns precision.
	mid := all[len(all)/2].t
	ns := fmt.Sprint(mid)
	checkSame(t, "start inclusive", search(url.Values{"start": {ns}, "end": {wideEnd}}),
		filter(all, func(e *expLog) bool { return e.t >= mid }))
	checkSame(t, "end exclusive", search(url.Values{"start": {wideStart}, "end": {ns}}),
		filter(all, func(e *expLog) bool { return e.t < mid }))
	rfc := time.Unix(0, mid).UTC().Format(time.RFC3339Nano)
	checkSame(t, "rfc3339 range", search(url.Values{"start": {rfc}, "end": {time.Unix(0, mid+1).UTC().Format(time.RFC3339Nano)}}),
		filter(all, func(e *expLog) bool { return e.t == mid }))

	// Nothing matches: an empty page with done.
	recs, last := c.lines("/api/v1/logs/search", wide("service", "no-such-service"))
	if len(recs) != 0 || last["done"] != true {
		t.Fatalf("no-such-service: %d records, final %v", len(recs), last)
	}
}

// The flat JSON of a record keeps attribute keys and types.
func TestLogsRecordShape(t *testing.T) {
	tl := buildLake(t, 0, nil, func(w *lake.Writer) {
		var l signal.Logs
		js := `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"shape"}},{"key":"host","value":{"stringValue":"h1"}}]},
		"scopeLogs":[{"scope":{"name":"sc","version":"1"},"logRecords":[{"timeUnixNano":"1767225600000000001","severityNumber":17,"severityText":"ERROR",
		"body":{"stringValue":"boom"},"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708",
		"attributes":[{"key":"n","value":{"intValue":"42"}},{"key":"f","value":{"doubleValue":1.5}},{"key":"b","value":{"boolValue":true}},
		{"key":"a#int","value":{"stringValue":"x"}},{"key":"arr","value":{"arrayValue":{"values":[{"stringValue":"p"}]}}}]}]}]}]}`
		if err := otlp.DecodeLogsJSON(&l, []byte(js)); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteLogs("default", &l); err != nil {
			t.Fatal(err)
		}
	})
	c := serve(t, tl, Options{})
	recs, _ := c.lines("/api/v1/logs/search", wide())
	if len(recs) != 1 {
		t.Fatalf("got %d records", len(recs))
	}
	r := recs[0]
	want := map[string]any{"timestamp": "2026-01-01T00:00:00.000000001Z", "severity_number": 17.0, "severity_text": "ERROR",
		"body": "boom", "service": "shape", "trace_id": "0102030405060708090a0b0c0d0e0f10", "span_id": "0102030405060708"}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("%s = %v, want %v", k, r[k], v)
		}
	}
	attrs := r["attributes"].(map[string]any)
	if attrs["n"] != 42.0 || attrs["f"] != 1.5 || attrs["b"] != true || attrs["a#int"] != "x" {
		t.Errorf("attributes %v", attrs)
	}
	if arr, ok := attrs["arr"].(map[string]any); !ok || arr["arrayValue"] == nil {
		t.Errorf("array attribute %v", attrs["arr"])
	}
	res := r["resource"].(map[string]any)
	if res["service.name"] != "shape" || res["host"] != "h1" {
		t.Errorf("resource %v", res)
	}
	// Typed equality: the int attribute matches 42 but not "x".
	if recs, _ := c.lines("/api/v1/logs/search", wide("attr.n", "42")); len(recs) != 1 {
		t.Errorf("attr.n=42: %d records", len(recs))
	}
	if recs, _ := c.lines("/api/v1/logs/search", wide("attr.a#int", "x")); len(recs) != 1 {
		t.Errorf("attr.a#int=x: %d records", len(recs))
	}
	if recs, _ := c.lines("/api/v1/logs/search", wide("attr.n", "43")); len(recs) != 0 {
		t.Errorf("attr.n=43: %d records", len(recs))
	}
}

func TestLogsPaging(t *testing.T) {
	tl := buildLake(t, 300, threeCopies, nil)
	c := serve(t, tl, Options{})
	all := expectedLogs(t, threeCopies, "default")
	svc := pick(all, func(e *expLog) (string, bool) { return e.service, e.service != "" })
	q := wide("service", svc)
	one, last := c.lines("/api/v1/logs/search", func() url.Values { q2 := wide("service", svc, "limit", "10000"); return q2 }())
	if last["done"] != true {
		t.Fatalf("one big query did not finish: %v", last)
	}
	paged := c.all("/api/v1/logs/search", q, 7)
	if len(paged) != len(one) {
		t.Fatalf("paged %d records, one query %d", len(paged), len(one))
	}
	for i := range one {
		a, _ := gotKey(t, one[i])
		b, _ := gotKey(t, paged[i])
		if a != b {
			t.Fatalf("record %d: paged %s, one query %s", i, b, a)
		}
	}
	checkSame(t, "paged", paged, filter(all, func(e *expLog) bool { return e.service == svc }))
	// Ties exist, so the cursor's tie-breaking was exercised.
	ties := 0
	for i := 1; i < len(one); i++ {
		_, a := gotKey(t, one[i-1])
		_, b := gotKey(t, one[i])
		if a == b {
			ties++
		}
	}
	if ties == 0 {
		t.Fatal("no records share a timestamp; the test does not exercise tie-breaking")
	}
}

const markerJSON = `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"marker"}}]},
"scopeLogs":[{"logRecords":[{"timeUnixNano":"1766578000000000000","body":{"stringValue":"marker-%s"}}]}]}]}`

const markerTraceJSON = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"marker"}}]},
"scopeSpans":[{"spans":[{"traceId":"%s","spanId":"0102030405060708","name":"marker-%s","kind":2,
"startTimeUnixNano":"1766578000000000000","endTimeUnixNano":"1766578001000000000"}]}]}]}`

func TestTenancy(t *testing.T) {
	tenants := map[string]string{"alpha": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "beta": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}
	copies := []copySpec{{"alpha", 0}, {"beta", 0}}
	tl := buildLake(t, 0, copies, func(w *lake.Writer) {
		for tn, tid := range tenants {
			var l signal.Logs
			if err := otlp.DecodeLogsJSON(&l, fmt.Appendf(nil, markerJSON, tn)); err != nil {
				t.Fatal(err)
			}
			if err := w.WriteLogs(tn, &l); err != nil {
				t.Fatal(err)
			}
			var s signal.Spans
			if err := otlp.DecodeTracesJSON(&s, fmt.Appendf(nil, markerTraceJSON, tid, tn)); err != nil {
				t.Fatal(err)
			}
			if err := w.WriteSpans(tn, &s); err != nil {
				t.Fatal(err)
			}
		}
	})
	c := serve(t, tl, Options{})
	nLogs := len(corpusLogs(t, 0)) + 1
	for tn, tid := range tenants {
		c.tenant = tn
		got := c.all("/api/v1/logs/search", wide(), 5000)
		if len(got) != nLogs {
			t.Errorf("%s: %d records, want %d", tn, len(got), nLogs)
		}
		recs, _ := c.lines("/api/v1/logs/search", wide("q", "marker-"))
		if len(recs) != 1 || recs[0]["body"] != "marker-"+tn {
			t.Errorf("%s: marker search %v", tn, recs)
		}
		spans, _ := c.lines("/api/v1/traces/search", wide("service", "marker"))
		if len(spans) != 1 || spans[0]["name"] != "marker-"+tn || spans[0]["trace_id"] != tid {
			t.Errorf("%s: span search %v", tn, spans)
		}
		for other, otid := range tenants {
			code, body := c.get("/api/v1/traces/"+otid, nil)
			want := http.StatusOK
			if other != tn {
				want = http.StatusNotFound
			}
			if code != want {
				t.Errorf("%s fetching %s's trace: %d %s, want %d", tn, other, code, body, want)
			}
		}
	}
	// No header: the default tenant, which has nothing.
	c.tenant = ""
	if recs, last := c.lines("/api/v1/logs/search", wide()); len(recs) != 0 || last["done"] != true {
		t.Errorf("default tenant sees %d records", len(recs))
	}
	c.tenant = "bad/tenant"
	if code, _ := c.get("/api/v1/logs/search", wide()); code != http.StatusBadRequest {
		t.Errorf("invalid tenant: %d", code)
	}
}

func TestTraceFetch(t *testing.T) {
	t.Run("columns", func(t *testing.T) { testTraceFetch(t, 0) })
	// At max_attribute_columns 1 most span attributes are in the
	// attr_overflow column; the fetched spans carry them all the same.
	t.Run("overflow", func(t *testing.T) { testTraceFetch(t, 1) })
}

func testTraceFetch(t *testing.T, maxAttrCols int) {
	tl := buildLakeCapped(t, 100, maxAttrCols, []copySpec{{"default", 0}}, nil)
	c := serve(t, tl, Options{})
	want := corpusTraces(t)
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	checked := 0
	for _, id := range ids {
		if id == "00000000000000000000000000000000" {
			continue
		}
		code, body := c.get("/api/v1/traces/"+strings.ToUpper(id), nil)
		if code != http.StatusOK {
			t.Fatalf("trace %s: %d %s", id, code, body)
		}
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
		if err != nil {
			t.Fatalf("trace %s: not OTLP JSON: %v\n%s", id, err, body)
		}
		got := map[string]ptrace.Span{}
		svcOf := map[string]string{}
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			svc, _ := rss.At(i).Resource().Attributes().Get("service.name")
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				sp := sss.At(j).Spans()
				for k := 0; k < sp.Len(); k++ {
					got[sp.At(k).SpanID().String()] = sp.At(k)
					svcOf[sp.At(k).SpanID().String()] = svc.AsString()
				}
			}
		}
		if len(got) != len(want[id]) || td.SpanCount() != len(want[id]) {
			t.Fatalf("trace %s: %d spans, want %d", id, td.SpanCount(), len(want[id]))
		}
		for _, w := range want[id] {
			g, ok := got[w.SpanID().String()]
			if !ok {
				t.Fatalf("trace %s: span %s missing", id, w.SpanID())
			}
			if g.Name() != w.Name() || g.ParentSpanID() != w.ParentSpanID() || g.StartTimestamp() != w.StartTimestamp() ||
				g.EndTimestamp() != w.EndTimestamp() || g.Kind() != w.Kind() || g.Status().Code() != w.Status().Code() ||
				g.Events().Len() != w.Events().Len() || g.Links().Len() != w.Links().Len() || g.TraceState().AsRaw() != w.TraceState().AsRaw() {
				t.Fatalf("trace %s span %s differs", id, w.SpanID())
			}
			if !attrsEqual(g.Attributes(), w.Attributes()) {
				t.Fatalf("trace %s span %s attributes %v, want %v", id, w.SpanID(), g.Attributes().AsRaw(), w.Attributes().AsRaw())
			}
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d traces checked", checked)
	}
	if code, _ := c.get("/api/v1/traces/0123456789abcdef0123456789abcdef", nil); code != http.StatusNotFound {
		t.Errorf("unknown trace: %d, want 404", code)
	}
	for _, bad := range []string{"xyz", "0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcdefg", "00000000000000000000000000000000"} {
		if code, _ := c.get("/api/v1/traces/"+bad, nil); code != http.StatusBadRequest {
			t.Errorf("trace id %q: %d, want 400", bad, code)
		}
	}
	// A time hint that excludes the trace finds nothing.
	id := ids[len(ids)-1]
	if code, _ := c.get("/api/v1/traces/"+id, url.Values{"end": {"2000-01-01T00:00:00Z"}}); code != http.StatusNotFound {
		t.Errorf("trace outside the hint: %d, want 404", code)
	}
}

func attrsEqual(a, b pcommon.Map) bool {
	if a.Len() != b.Len() {
		return false
	}
	eq := true
	b.Range(func(k string, v pcommon.Value) bool {
		w, ok := a.Get(k)
		if !ok || !w.Equal(v) {
			eq = false
		}
		return eq
	})
	return eq
}

type expSpan struct {
	t, dur       int64
	svc, name    string
	code         int
	trace, sspan string
}

func TestSpanSearch(t *testing.T) {
	copies := []copySpec{{"default", 0}, {"default", -3 * time.Hour}}
	tl := buildLake(t, 100, copies, nil)
	c := serve(t, tl, Options{})
	var all []expSpan
	for _, cp := range copies {
		for _, f := range corpusTraceSpans(t) {
			all = append(all, expSpan{t: f.t + int64(cp.shift), dur: f.dur, svc: f.svc, name: f.name, code: f.code, trace: f.trace, sspan: f.sspan})
		}
	}
	key := func(t int64, tr, sp string) string { return fmt.Sprintf("%d|%s|%s", t, tr, sp) }
	check := func(what string, q url.Values, f func(*expSpan) bool) {
		t.Helper()
		got := c.all("/api/v1/traces/search", q, 500)
		var gk, wk []string
		prev := time.Unix(1<<40, 0)
		for _, m := range got {
			st, err := time.Parse(time.RFC3339Nano, m["start"].(string))
			if err != nil {
				t.Fatal(err)
			}
			if st.After(prev) {
				t.Fatalf("%s: not newest first", what)
			}
			prev = st
			gk = append(gk, key(st.UnixNano(), m["trace_id"].(string), m["span_id"].(string)))
		}
		for i := range all {
			if f(&all[i]) {
				wk = append(wk, key(all[i].t, all[i].trace, all[i].sspan))
			}
		}
		if len(wk) == 0 {
			t.Fatalf("%s selects nothing", what)
		}
		sort.Strings(gk)
		sort.Strings(wk)
		if !slices.Equal(gk, wk) {
			t.Fatalf("%s: got %d spans, want %d (%s)", what, len(gk), len(wk), firstDiff(gk, wk))
		}
	}
	check("all", wide(), func(*expSpan) bool { return true })
	svc := ""
	{
		n := map[string]int{}
		for _, s := range all {
			n[s.svc]++
			if n[s.svc] > n[svc] {
				svc = s.svc
			}
		}
	}
	check("service", wide("service", svc), func(s *expSpan) bool { return s.svc == svc })
	name := all[len(all)/3].name
	check("name", wide("name", name), func(s *expSpan) bool { return s.name == name })
	check("min_duration", wide("min_duration", "10ms"), func(s *expSpan) bool { return s.dur >= 10e6 })
	check("max_duration", wide("max_duration", "1000000"), func(s *expSpan) bool { return s.dur <= 1e6 })
	check("status error", wide("status", "error"), func(s *expSpan) bool { return s.code == 2 })
	mid := all[len(all)/2].t
	check("time range", url.Values{"start": {fmt.Sprint(mid)}, "end": {wideEnd}}, func(s *expSpan) bool { return s.t >= mid })
}

func corpusTraceSpans(tb testing.TB) []expSpan {
	var out []expSpan
	for _, spans := range corpusTraces(tb) {
		for _, sp := range spans {
			out = append(out, expSpan{t: int64(sp.StartTimestamp()), dur: int64(sp.EndTimestamp()) - int64(sp.StartTimestamp()),
				name: sp.Name(), code: int(sp.Status().Code()), trace: sp.TraceID().String(), sspan: sp.SpanID().String()})
		}
	}
	// Service names need the resource; fill them in a second pass.
	svcOf := corpusSpanServices(tb)
	for i := range out {
		out[i].svc = svcOf[out[i].trace+out[i].sspan]
	}
	return out
}

func corpusSpanServices(tb testing.TB) map[string]string {
	m := map[string]string{}
	for _, f := range corpusFiles(tb, "traces") {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(f)
		if err != nil {
			tb.Fatal(err)
		}
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			svc, _ := rss.At(i).Resource().Attributes().Get("service.name")
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				sp := sss.At(j).Spans()
				for k := 0; k < sp.Len(); k++ {
					m[sp.At(k).TraceID().String()+sp.At(k).SpanID().String()] = svc.AsString()
				}
			}
		}
	}
	return m
}

var _ = plog.NewLogs
