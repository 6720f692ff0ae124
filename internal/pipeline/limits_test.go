package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// attrsRequest is a logs request of records with perRecord attributes each
// and the given timestamp (0: now).
func attrsRequest(records, perRecord int, ts uint64) plogotlp.ExportRequest {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "svc")
	sl := rl.ScopeLogs().AppendEmpty()
	if ts == 0 {
		ts = uint64(time.Now().UnixNano())
	}
	for i := range records {
		r := sl.LogRecords().AppendEmpty()
		r.SetTimestamp(pcommon.Timestamp(ts))
		r.Body().SetStr("x")
		for k := range perRecord {
			r.Attributes().PutInt(fmt.Sprintf("k%d.%d", i, k), int64(k))
		}
	}
	return plogotlp.NewExportRequestFromLogs(ld)
}

func postBody(t *testing.T, p *Pipeline, tenant string, req plogotlp.ExportRequest) (int, string) {
	t.Helper()
	body, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	hr, err := http.NewRequest(http.MethodPost, "http://"+p.Addrs().HTTP.String()+"/v1/logs", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("X-Scope-OrgID", tenant)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPipelineAttributeLimits: requests past
// receivers.otlp.max_attributes_per_record / _per_request, or with a
// timestamp of 2^63 ns (issue 11 item 9: it used to wrap to 1677), get
// 400 / InvalidArgument naming the limit or field, are counted, and leave
// nothing in the queue; other requests keep getting 200.
func TestPipelineAttributeLimits(t *testing.T) {
	cfg := testConfig(t)
	cfg.Receivers.OTLP.MaxAttrsPerRecord = 10
	cfg.Receivers.OTLP.MaxAttrsPerRequest = 50
	p := start(t, cfg)

	cases := []struct {
		name string
		req  plogotlp.ExportRequest
		want string
	}{
		{"per record", attrsRequest(1, 11, 0), "log record 0 has 11 attributes, past the limit max_attributes_per_record of 10"},
		{"per request", attrsRequest(6, 9, 0), "request has 55 attributes, past the limit max_attributes_per_request of 50"},
		{"timestamp 2^63", attrsRequest(2, 1, 1<<63), "time_unix_nano 9223372036854775808 is past the largest time"},
		{"timestamp max", attrsRequest(1, 1, math.MaxUint64), "time_unix_nano 18446744073709551615"},
	}
	for _, tc := range cases {
		code, body := postBody(t, p, "acme", tc.req)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("HTTP %s: %d %q, want 400 naming %q", tc.name, code, body, tc.want)
		}
	}

	cc, err := grpc.NewClient(p.Addrs().GRPC.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "acme")
	for _, tc := range cases {
		_, err := plogotlp.NewGRPCClient(cc).Export(ctx, tc.req)
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
			t.Errorf("gRPC %s: %v, want InvalidArgument naming %q", tc.name, err, tc.want)
		}
	}
	if st := p.q.Load().Stats(); st.AppendedRecords != 0 {
		t.Errorf("the queue took refused requests: %+v", st)
	}

	// At the limits, and from another tenant, requests pass.
	if code, body := postBody(t, p, "acme", attrsRequest(4, 10, 0)); code != 200 {
		t.Errorf("request at the limits: %d %s", code, body)
	}
	if _, err := plogotlp.NewGRPCClient(cc).Export(metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "other"), attrsRequest(1, 3, 0)); err != nil {
		t.Errorf("other client: %v", err)
	}
	_, m := get(t, p, "/metrics")
	for _, want := range []string{
		`sluice_pipeline_limited_requests_total{limit="max_attributes_per_record",signal="logs"} 2`,
		`sluice_pipeline_limited_requests_total{limit="max_attributes_per_request",signal="logs"} 2`,
		`sluice_pipeline_limited_requests_total{limit="timestamp",signal="logs"} 4`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grep(m, "limited"))
		}
	}
}
