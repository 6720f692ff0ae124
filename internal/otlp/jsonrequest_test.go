package otlp

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

func TestPrepareJSONRequest(t *testing.T) {
	deep := strings.Repeat(`{"a":[`, 210) + `1` + strings.Repeat(`]}`, 210)
	for _, c := range []struct{ in, want, err string }{
		{in: `{}`, want: `{}`},
		{in: " \r\n\t{\"a\":1}\n", want: `{"a":1}`},
		{in: "\ufeff{}", want: `{}`},
		{in: `{"a":null}`, want: `{}`},
		{in: `{"a":null,"b":1}`, want: `{"b":1}`},
		{in: `{"a":1,"b":null}`, want: `{"a":1}`},
		{in: `{"a":null,"b":null,"c":2,"d":null,"e":3}`, want: `{"c":2,"e":3}`},
		{in: `{ "a" : null , "b" : [ { "x" : null } , null ] }`, want: `{ "b" : [ { } , null ] }`},
		{in: `{"a":"null","null":1,"b":"\"null"}`, want: `{"a":"null","null":1,"b":"\"null"}`},
		{in: `{"resourceLogs":[{"resource":null,"scopeLogs":[{"logRecords":[{"timeUnixNano":null,"body":{"stringValue":"x"}}]}]}]}`,
			want: `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"}}]}]}]}`},
		{in: deep, want: deep},
		{in: `{"traceId":"0102030405060708090A0B0C0D0E0F10","span_id":"a1a2a3a4a5a6a7a8","parentSpanId":"","links":[{"trace_id":"","spanId":null}]}`,
			want: `{"traceId":"0102030405060708090A0B0C0D0E0F10","span_id":"a1a2a3a4a5a6a7a8","parentSpanId":"","links":[{"trace_id":""}]}`},
		{in: `{"key":"traceId","value":{"stringValue":"traceId"}}`, want: `{"key":"traceId","value":{"stringValue":"traceId"}}`},
		{in: `{"spans":[{"traceId":"AQIDBAUGBwgJCgsMDQ4PEA=="}]}`, err: `offset 21: id "AQIDBAUGBwgJCgsMDQ4PEA==" is not 32 hex digits (OTLP/JSON ids are hex, not base64)`},
		{in: `{"spanId":"a1a2a3a4a5a6a7"}`, err: `id "a1a2a3a4a5a6a7" is not 16 hex digits`},
		{in: `{"parent_span_id":"a1a2a3a4a5a6a7zz"}`, err: `is not 16 hex digits`},
		{in: ``, err: "empty body"},
		{in: "  \n", err: "empty body"},
		{in: `[]`, err: "want an object"},
		{in: `null`, err: "want an object"},
		{in: `{}{}`, err: "offset 2: data after the request object"},
		{in: `{"resourceLogs":[]} {"resourceLogs":[]}`, err: "data after the request object"},
		{in: `{} x`, err: "data after the request object"},
		{in: `{"a":1`, err: "want ',' or '}'"},
		{in: `{"a":nul}`, err: "bad literal"},
		{in: `{"a":`, err: "unexpected end of input"},
		{in: strings.Repeat(`{"a":`, maxRequestJSONDepth+2) + `1` + strings.Repeat(`}`, maxRequestJSONDepth+2), err: "nested deeper than 432 levels"},
		{in: `{"a":` + strings.Repeat(`[`, 1<<20), err: "nested deeper"},
	} {
		got, _, err := PrepareJSONRequest([]byte(c.in))
		switch {
		case c.err != "":
			if !errors.Is(err, ErrJSON) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%.40q: got %v, want an error with %q", c.in, err, c.err)
			}
		case err != nil:
			t.Errorf("%.40q: %v", c.in, err)
		case string(got) != c.want:
			t.Errorf("%.40q: got %q, want %q", c.in, got, c.want)
		}
	}
}

// TestPrepareJSONRequestRandom: on random documents the result is valid
// JSON that means the input without its null members.
func TestPrepareJSONRequestRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var gen func(depth int) any
	gen = func(depth int) any {
		switch k := rng.IntN(7); {
		case k == 0 || depth > 4:
			return nil
		case k == 1:
			return rng.IntN(100)
		case k == 2:
			return fmt.Sprintf("s%d, null", rng.IntN(9))
		case k == 3:
			a := make([]any, rng.IntN(4))
			for i := range a {
				a[i] = gen(depth + 1)
			}
			return a
		default:
			m := map[string]any{}
			for range rng.IntN(5) {
				m[fmt.Sprintf("k%d", rng.IntN(6))] = gen(depth + 1)
			}
			return m
		}
	}
	var drop func(v any) any
	drop = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if x == nil {
					delete(v, k)
				} else {
					v[k] = drop(x)
				}
			}
		case []any:
			for i := range v {
				v[i] = drop(v[i])
			}
		}
		return v
	}
	for i := range 2000 {
		doc := map[string]any{"r": gen(0), "n": nil}
		in, _ := json.MarshalIndent(doc, "", strings.Repeat(" ", i%3))
		out, _, err := PrepareJSONRequest(in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		var got, want any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s -> %s: %v", in, out, err)
		}
		_ = json.Unmarshal(in, &want)
		if want = drop(want); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s -> %s, want %v", in, out, want)
		}
	}
}

func TestPrepareJSONRequestCountsRecords(t *testing.T) {
	js := `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{},{"body":{"arrayValue":{"values":[{},{}]}}},null]},{"log_records":[{}]}]}],` +
		`"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{},{}]}},{"sum":{"data_points":[{"attributes":[{"key":"spans","value":{}}]}]}}]}]}],` +
		`"resourceSpans":[{"scopeSpans":[{"spans":[{"events":[{}],"links":[{}]}]}]}]}`
	all := uint8(1<<signal.KindLogs | 1<<signal.KindMetrics | 1<<signal.KindTraces)
	if _, n, err := PrepareJSONRequest([]byte(js)); err != nil || n != (JSONCounts{Records: 8, Holders: 3 + 4 + 2, Kinds: all}) {
		t.Fatalf("%+v, %v; want 8 records, 9 holders", n, err)
	}
}

func TestPrepareJSONRequestKinds(t *testing.T) {
	for js, want := range map[string]uint8{
		`{}`:                                     0,
		`{"resourceLogs":[]}`:                    1 << signal.KindLogs,
		`{"resource_spans":null}`:                0, // null is no list
		`{"x":{"resourceSpans":[]}}`:             0, // only the request's own members
		`{"resourceMetrics":[],"other":1}`:       1 << signal.KindMetrics,
		`{"resource_logs":[],"resourceSpans":1}`: 1<<signal.KindLogs | 1<<signal.KindTraces,
	} {
		if _, n, err := PrepareJSONRequest([]byte(js)); err != nil || n.Kinds != want {
			t.Errorf("%s: kinds %b, %v; want %b", js, n.Kinds, err, want)
		}
	}
}
