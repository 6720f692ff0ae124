package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// otlpSpecRun starts `sluice run` with OTLP/HTTP, the query API and the
// tenant header.
func otlpSpecRun(t *testing.T) *queryRun {
	t.Helper()
	return startQueryRun(t, writeConfig(t, fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: ""
    http_addr: 127.0.0.1:0
    tenant_header: X-Scope-OrgID
admin:
  addr: 127.0.0.1:0
query:
  addr: 127.0.0.1:0
upkeep:
  enabled: false
lake:
  root: %s
  flush_interval: 300ms
log:
  level: warn
`, t.TempDir())))
}

// otlpPost sends one OTLP/HTTP request and returns the status and body.
func otlpPost(t *testing.T, addr, tenant, path, ct string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("X-Scope-OrgID", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// searchLogs returns the records of the logs search of tenant, parsed.
func searchLogs(t *testing.T, query, tenant string) []map[string]any {
	t.Helper()
	code, body := searchGet(t, query, tenant, "/api/v1/logs/search", url.Values{"limit": {"100"}, "start": {"2020-01-01T00:00:00Z"}})
	if code != http.StatusOK {
		t.Fatalf("search %s: %d %s", tenant, code, body)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber() // int64 attributes past 2^53 stay exact
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("search line %q: %v", sc.Text(), err)
		}
		if _, done := rec["done"]; !done {
			out = append(out, rec)
		}
	}
	return out
}

// TestOTLPSpecJSONSpellings: OTLP/JSON as different clients write it
// (lowerCamelCase with enum numbers and int64 strings; the snake_case
// names protojson also accepts, enum names, int64 as numbers, upper-case
// hex ids; nulls and unknown fields) reads back from the logs search API
// as exactly one and the same record: every AnyValue kind, both
// timestamps to the nanosecond, severity, ids and flags.
func TestOTLPSpecJSONSpellings(t *testing.T) {
	s := otlpSpecRun(t)
	ts := time.Now().Add(-time.Minute).Truncate(time.Second).Add(123456789) // nanoseconds must survive
	tsn := ts.UnixNano()
	camel := fmt.Sprintf(`{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"spelling"}}]},
	 "scopeLogs":[{"scope":{"name":"sc","version":"1.0"},"logRecords":[{"timeUnixNano":"%d","observedTimeUnixNano":"%d",
	 "severityNumber":13,"severityText":"Warn","traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","flags":1,
	 "body":{"kvlistValue":{"values":[{"key":"k","value":{"arrayValue":{"values":[{"boolValue":true},{"intValue":"-7"},{"doubleValue":0.5},{}]}}}]}},
	 "attributes":[{"key":"str","value":{"stringValue":"é\u0000\"x"}},{"key":"int","value":{"intValue":"-9007199254740993"}},
	 {"key":"dbl","value":{"doubleValue":-1.5e-7}},{"key":"inf","value":{"doubleValue":"Infinity"}},{"key":"bool","value":{"boolValue":false}},
	 {"key":"bytes","value":{"bytesValue":"AP8Q"}},{"key":"arr","value":{"arrayValue":{"values":[{"stringValue":"a"},{"intValue":"1"}]}}},
	 {"key":"map","value":{"kvlistValue":{"values":[{"key":"x","value":{"doubleValue":2}}]}}},{"key":"empty","value":{}}]}]}]}]}`, tsn, tsn+1)
	snake := fmt.Sprintf(`{"resource_logs":[{"resource":{"attributes":[{"key":"service.name","value":{"string_value":"spelling"}}]},
	 "scope_logs":[{"scope":{"name":"sc","version":"1.0"},"log_records":[{"time_unix_nano":%d,"observed_time_unix_nano":%d,
	 "severity_number":"SEVERITY_NUMBER_WARN","severity_text":"Warn","trace_id":"5B8EFFF798038103D269B633813FC60C","span_id":"EEE19B7EC3C1B174","flags":1,
	 "body":{"kvlist_value":{"values":[{"key":"k","value":{"array_value":{"values":[{"bool_value":true},{"int_value":-7},{"double_value":0.5},{}]}}}]}},
	 "attributes":[{"key":"str","value":{"string_value":"é\u0000\"x"}},{"key":"int","value":{"int_value":-9007199254740993}},
	 {"key":"dbl","value":{"double_value":"-1.5e-7"}},{"key":"inf","value":{"double_value":"Infinity"}},{"key":"bool","value":{"bool_value":false}},
	 {"key":"bytes","value":{"bytes_value":"AP8Q"}},{"key":"arr","value":{"array_value":{"values":[{"string_value":"a"},{"int_value":1}]}}},
	 {"key":"map","value":{"kvlist_value":{"values":[{"key":"x","value":{"double_value":2}}]}}},{"key":"empty","value":{}}]}]}]}]}`, tsn, tsn+1)
	// nulls are defaults; unknown fields (a newer producer's) are ignored.
	nulls := strings.Replace(camel, `"severityText":"Warn",`, `"severityText":"Warn","droppedAttributesCount":null,"eventName":null,"futureField":{"a":[1,null]},`, 1)
	nulls = strings.Replace(nulls, `"scope":{"name":"sc","version":"1.0"}`, `"scope":{"name":"sc","version":"1.0","attributes":null},"schemaUrl":null`, 1)
	for i, body := range []string{camel, snake, nulls} {
		tenant := fmt.Sprintf("spell%d", i)
		if code, msg := otlpPost(t, s.http, tenant, "/v1/logs", "application/json", []byte(body)); code != 200 || msg != "{}" {
			t.Fatalf("spelling %d: %d %s", i, code, msg)
		}
	}
	var want map[string]any
	for i := range 3 {
		tenant := fmt.Sprintf("spell%d", i)
		var got []map[string]any
		if !waitFor(30*time.Second, func() bool { got = searchLogs(t, s.query, tenant); return len(got) > 0 }) {
			t.Fatalf("%s: nothing readable after 30s", tenant)
		}
		if len(got) != 1 {
			t.Fatalf("%s: %d records, want 1", tenant, len(got))
		}
		if i == 0 {
			want = got[0]
			continue
		}
		if !reflect.DeepEqual(got[0], want) {
			g, _ := json.Marshal(got[0])
			w, _ := json.Marshal(want)
			t.Errorf("spelling %d reads back as\n%s\nwant (lowerCamelCase)\n%s", i, g, w)
		}
	}
	// The canonical one is what was sent.
	checks := map[string]any{
		"timestamp":          ts.UTC().Format(time.RFC3339Nano),
		"observed_timestamp": ts.Add(1).UTC().Format(time.RFC3339Nano),
		"severity_number":    json.Number("13"), "severity_text": "Warn", "flags": json.Number("1"),
		"trace_id": "5b8efff798038103d269b633813fc60c", "span_id": "eee19b7ec3c1b174", "service": "spelling",
	}
	for k, v := range checks {
		if !reflect.DeepEqual(want[k], v) {
			t.Errorf("%s = %#v, want %#v", k, want[k], v)
		}
	}
	attrs, _ := json.Marshal(want["attributes"])
	if a, _ := want["attributes"].(map[string]any); a == nil {
		t.Errorf("no attributes: %v", want)
	} else if d, _ := a["dbl"].(json.Number); d == "" {
		t.Errorf("dbl = %#v", a["dbl"])
	} else if f, _ := d.Float64(); f != -1.5e-7 {
		t.Errorf("dbl = %v, want -1.5e-7", f)
	}
	for _, frag := range []string{`"str":"é\u0000\"x"`, `"bool":false`, `"inf":"Infinity"`, `"bytes":"AP8Q"`, `"int":-9007199254740993`} {
		if !strings.Contains(string(attrs), frag) {
			t.Errorf("attributes %s lack %s", attrs, frag)
		}
	}
}

// TestOTLPSpecHostile: input a client should never send is answered with
// 4xx naming the problem and counted; data accepted before stays readable;
// 16 MiB bodies of empty records (each decoded into hundreds of bytes)
// leave the memory bounded.
func TestOTLPSpecHostile(t *testing.T) {
	s := otlpSpecRun(t)
	now := time.Now()
	good := `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"kept"}}]},"scopeLogs":[{"logRecords":[{"timeUnixNano":"` +
		fmt.Sprint(now.UnixNano()) + `","body":{"stringValue":"accepted before"}}]}]}]}`
	if code, msg := otlpPost(t, s.http, "hostile", "/v1/logs", "application/json", []byte(good)); code != 200 {
		t.Fatalf("good logs: %d %s", code, msg)
	}
	metric := func(name string, f func(pmetric.Metric)) []byte {
		md := pmetric.NewMetrics()
		m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(name)
		f(m)
		b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	gauge := func(at time.Time) func(pmetric.Metric) {
		return func(m pmetric.Metric) {
			dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
			dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
			dp.SetDoubleValue(42)
		}
	}
	hist := func(counts []uint64, bounds []float64) func(pmetric.Metric) {
		return func(m pmetric.Metric) {
			h := m.SetEmptyHistogram()
			h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			dp := h.DataPoints().AppendEmpty()
			dp.SetTimestamp(pcommon.NewTimestampFromTime(now))
			dp.BucketCounts().FromRaw(counts)
			dp.ExplicitBounds().FromRaw(bounds)
			dp.SetCount(6)
		}
	}
	if code, msg := otlpPost(t, s.http, "hostile", "/v1/metrics", "application/x-protobuf", metric("kept_gauge", gauge(now))); code != 200 {
		t.Fatalf("good metrics: %d %s", code, msg)
	}
	emptyRecords := func(n int) []byte { // one resource, one scope, n empty records
		scope := append([]byte{0x12}, varint(uint64(2*n))...)
		scope = append(scope, bytes.Repeat([]byte{0x12, 0x00}, n)...)
		return append(append([]byte{0x0a}, varint(uint64(len(scope)))...), scope...)
	}
	for _, c := range []struct {
		name, path, ct string
		body           []byte
		status         int
		msg            string
	}{
		{"two requests in one JSON body", "/v1/logs", "application/json", []byte(good + good), 400, "data after the request object"},
		{"base64 trace id", "/v1/traces", "application/json",
			[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"W47/95gDgQPSabYzgT/GDA==","spanId":"eee19b7ec3c1b174","name":"s"}]}]}]}`), 400,
			"is not 32 hex digits (OTLP/JSON ids are hex, not base64)"},
		{"JSON nested past the limit", "/v1/logs", "application/json",
			[]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":` + strings.Repeat(`{"arrayValue":{"values":[`, 100_000) + strings.Repeat(`]}}`, 100_000) + `}]}]}]}`),
			400, "nested deeper than"},
		{"bucket counts not matching bounds", "/v1/metrics", "application/x-protobuf", metric("bad_h", hist([]uint64{1, 2}, []float64{1, 2})), 400,
			`metric "bad_h": 2 bucket_counts for 2 explicit_bounds (want none or 3)`},
		{"unsorted bounds", "/v1/metrics", "application/x-protobuf", metric("bad_h2", hist([]uint64{1, 2, 3}, []float64{2, 1})), 400,
			"explicit_bounds not strictly increasing"},
		{"data point two days ahead", "/v1/metrics", "application/x-protobuf", metric("future_g", gauge(now.Add(48*time.Hour))), 400,
			"the latest time accepted now (lake.max_future_skew ahead of sluice's clock)"},
		{"200001 empty log records", "/v1/logs", "application/x-protobuf", emptyRecords(200_001), 400,
			"request has 200001 log records, past the limit max_records_per_request of 200000"},
		{"invalid UTF-8", "/v1/logs", "application/json",
			[]byte("{\"resourceLogs\":[{\"scopeLogs\":[{\"logRecords\":[{\"body\":{\"stringValue\":\"a\xffb\"}}]}]}]}"), 400, "not valid UTF-8"},
	} {
		code, msg := otlpPost(t, s.http, "hostile", c.path, c.ct, c.body)
		if code != c.status || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %.300q, want %d with %q", c.name, code, msg, c.status, c.msg)
		}
	}
	for series, want := range map[string]float64{
		`sluice_pipeline_limited_requests_total{limit="histogram",signal="metrics"}`:                                    2,
		`sluice_pipeline_limited_requests_total{limit="timestamp",signal="metrics"}`:                                    1,
		`sluice_receiver_limited_requests_total{limit="max_records_per_request",signal="logs",transport="http"}`:        1,
		`sluice_receiver_requests_total{outcome="rejected_invalid",signal="logs",tenant="hostile",transport="http"}`:    4,
		`sluice_receiver_requests_total{outcome="rejected_invalid",signal="metrics",tenant="hostile",transport="http"}`: 3,
	} {
		if got := metricValue(t, s.admin, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}

	// 16 MiB of empty records or resources, 8M each, from 4 clients at
	// once: refused before decoding. Decoded, one such request took 2 GB
	// or more (700 MB of resources).
	pid := s.cmd.Process.Pid
	before := procStatus(t, pid, "VmHWM")
	var wg sync.WaitGroup
	for i := range 4 {
		flood := emptyRecords(8_000_000)
		if i%2 == 1 {
			flood = bytes.Repeat([]byte{0x0a, 0x00}, 8_000_000) // empty resources
		}
		wg.Go(func() {
			if code, msg := otlpPost(t, s.http, "hostile", "/v1/logs", "application/x-protobuf", flood); code != 400 {
				t.Errorf("16 MiB of empty records: %d %.200s", code, msg)
			}
		})
	}
	wg.Wait()
	if grew := procStatus(t, pid, "VmHWM") - before; grew > 400<<20 {
		t.Errorf("peak RSS grew by %d MiB for 4 refused 16 MiB requests", grew>>20)
	}

	// What was accepted before is all there, and only that.
	var logs []map[string]any
	if !waitFor(30*time.Second, func() bool { logs = searchLogs(t, s.query, "hostile"); return len(logs) > 0 }) {
		t.Fatal("the good record is not readable")
	}
	if len(logs) != 1 || logs[0]["body"] != "accepted before" {
		t.Errorf("logs of the tenant: %v", logs)
	}
	var res struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if !waitFor(30*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+s.query+"/api/v1/query?query="+url.QueryEscape(`{__name__=~"kept_gauge|bad_h.*|future_g"}`), nil)
		req.Header.Set("X-Scope-OrgID", "hostile")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&res)
		return len(res.Data.Result) > 0
	}) {
		t.Fatal("kept_gauge not queryable")
	}
	if len(res.Data.Result) != 1 || res.Data.Result[0].Metric["__name__"] != "kept_gauge" {
		t.Errorf("PromQL finds %v, want only kept_gauge", res.Data.Result)
	}
}

func varint(v uint64) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// TestOTLPSpecTraceReadBack: a span sent as OTLP/JSON in snake_case with
// enum names and upper-case ids (events, links, trace state, flags,
// status) comes back from /api/v1/traces/<id> as the same OTLP (pdata
// reads both; attributes compared as the maps they are).
func TestOTLPSpecTraceReadBack(t *testing.T) {
	s := otlpSpecRun(t)
	start := time.Now().Add(-time.Minute).Truncate(time.Second).UnixNano() + 123456789
	sent := fmt.Sprintf(`{"resource_spans":[{"resource":{"attributes":[{"key":"service.name","value":{"string_value":"trsvc"}}]},
	 "scope_spans":[{"scope":{"name":"s","version":"2"},"spans":[{"trace_id":"5B8EFFF798038103D269B633813FC60C","span_id":"EEE19B7EC3C1B174",
	 "parent_span_id":"eee19b7ec3c1b175","trace_state":"a=b","name":"op","kind":"SPAN_KIND_SERVER","start_time_unix_nano":%d,
	 "end_time_unix_nano":"%d","attributes":[{"key":"i","value":{"int_value":7}},{"key":"d","value":{"double_value":"NaN"}}],
	 "events":[{"time_unix_nano":"%[2]d","name":"ev","attributes":[{"key":"b","value":{"bool_value":true}}]}],
	 "links":[{"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","trace_state":"x=y","flags":256}],
	 "status":{"code":"STATUS_CODE_ERROR","message":"boom"},"flags":257}]}]}]}`, start, start+1500)
	if code, msg := otlpPost(t, s.http, "tr", "/v1/traces", "application/json", []byte(sent)); code != 200 {
		t.Fatalf("send: %d %s", code, msg)
	}
	var got []byte
	if !waitFor(30*time.Second, func() bool {
		code, body := searchGet(t, s.query, "tr", "/api/v1/traces/5b8efff798038103d269b633813fc60c", nil)
		got = body
		return code == http.StatusOK
	}) {
		t.Fatalf("trace not found: %s", got)
	}
	want, back := ptraceotlp.NewExportRequest(), ptraceotlp.NewExportRequest()
	if err := want.UnmarshalJSON([]byte(sent)); err != nil {
		t.Fatal(err)
	}
	if err := back.UnmarshalJSON(got); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	wj, _ := want.MarshalJSON()
	bj, _ := back.MarshalJSON()
	if w, b := attrsAsMaps(t, wj), attrsAsMaps(t, bj); !reflect.DeepEqual(w, b) {
		t.Errorf("read back\n%s\nsent\n%s", bj, wj)
	}
}

// attrsAsMaps parses OTLP JSON (as pdata writes it) with every
// "attributes" list turned into a map by key: attributes are a map in
// OTLP, and the lake keeps them sorted by key, not in the order sent.
func attrsAsMaps(t *testing.T, js []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if l, ok := x.([]any); ok && k == "attributes" {
					m := map[string]any{}
					for _, kv := range l {
						kv := kv.(map[string]any)
						m[kv["key"].(string)] = walk(kv["value"])
					}
					v[k] = m
				} else {
					v[k] = walk(x)
				}
			}
		case []any:
			for i := range v {
				v[i] = walk(v[i])
			}
		}
		return v
	}
	return walk(v)
}
