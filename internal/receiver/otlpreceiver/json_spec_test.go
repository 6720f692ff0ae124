package otlpreceiver

import (
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc/codes"
)

// TestHTTPJSONBody: OTLP/HTTP carries one export request per body. pdata's
// parser stops after the first JSON object, so a second request in the
// same body (or any trailing bytes) was acknowledged and silently lost;
// now it is refused whole. Proto3 JSON reads null as a field's default,
// which pdata refused for numbers; nesting pdata would build into objects
// many times the body's size is refused before it parses. Another
// signal's list (pdata skipped it as an unknown field) is refused too.
func TestHTTPJSONBody(t *testing.T) {
	rec := &recorder{}
	r, _ := startReceiver(t, testConfig(), rec)
	const one = `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"1700000000000000000","body":{"stringValue":"first"}}]}]}]}`
	const two = `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"1700000000000000001","body":{"stringValue":"second"}}]}]}]}`
	deep := `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":` + strings.Repeat(`{"arrayValue":{"values":[`, 200_000) +
		strings.Repeat(`]}}`, 200_000) + `}]}]}]}`
	for _, c := range []struct {
		name, body, enc string
		status          int
		msg             string
	}{
		{"two requests", one + two, "", 400, "data after the request object (one export request per body)"},
		{"two requests gzip", one + "\n" + two, "gzip", 400, "data after the request object"},
		{"trailing bytes", one + " x", "", 400, "data after the request object"},
		{"empty body", "", "", 400, "empty body"},
		{"deep", deep, "", 400, "nested deeper than 432 levels"},
		{"traces posted as logs", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"s"}]}]}]}`, "", 400,
			"the body holds traces (its resource list), not logs: post it to /v1/traces"},
		{"logs and metrics", `{"resourceLogs":[],"resource_metrics":[{}]}`, "", 400, "the body holds metrics"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := post(t, nil, httpURL(r, "/v1/logs"), "application/json", c.enc, encodeBody(c.enc, []byte(c.body)), nil)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			code, msg := rpcStatus(t, "application/json", body)
			if code != codes.InvalidArgument || !strings.Contains(msg, c.msg) || !strings.HasPrefix(msg, "decode otlp/json logs: ") {
				t.Fatalf("status %v %q, want InvalidArgument with %q", code, msg, c.msg)
			}
		})
	}
	if n := len(rec.requests()); n != 0 {
		t.Fatalf("consumer saw %d requests, want none", n)
	}

	// null is each field's default: no time, no severity, no attribute value.
	nulls := `{"resourceLogs":[{"resource":null,"schemaUrl":null,"scopeLogs":[{"scope":null,"logRecords":[{"timeUnixNano":null,` +
		`"observedTimeUnixNano":"1700000000000000002","severityNumber":null,"flags":null,"droppedAttributesCount":null,` +
		`"traceId":null,"body":{"stringValue":"kept"},"attributes":[{"key":"k","value":null},{"key":"i","value":{"intValue":null}}]}]}]}]}`
	resp, body := post(t, nil, httpURL(r, "/v1/logs"), "application/json", "", []byte(nulls), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("nulls: status %d: %s", resp.StatusCode, body)
	}
	req := plogotlp.NewExportRequest()
	if err := req.UnmarshalProto(rec.last(t).Body); err != nil {
		t.Fatal(err)
	}
	lr := req.Logs().ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	if lr.Timestamp() != 0 || lr.ObservedTimestamp() != 1700000000000000002 || lr.SeverityNumber() != 0 || lr.Body().Str() != "kept" || lr.Attributes().Len() != 2 {
		t.Fatalf("nulls decoded as time %d observed %d severity %d body %q, %d attributes", lr.Timestamp(), lr.ObservedTimestamp(),
			lr.SeverityNumber(), lr.Body().Str(), lr.Attributes().Len())
	}
	if i, ok := lr.Attributes().Get("i"); !ok || i.Int() != 0 {
		t.Fatalf("intValue null: %v", i.AsRaw())
	}
	if n := len(rec.requests()); n != 1 {
		t.Fatalf("consumer saw %d requests, want 1", n)
	}
}
