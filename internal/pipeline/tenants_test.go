package pipeline

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestMaxTenants: past receivers.otlp.max_tenants a request for a new
// tenant is refused over HTTP and gRPC (400 / InvalidArgument naming the
// key) and counted, known tenants go on being accepted, and the refused
// names (with records or without) make no series on /metrics: a
// client naming its own tenants cannot grow the scrape or the lake.
func TestMaxTenants(t *testing.T) {
	cfg := testConfig(t)
	cfg.Receivers.OTLP.MaxTenants = 3
	p := start(t, cfg)

	for i := range 3 {
		if code, body := postBody(t, p, fmt.Sprintf("t%d", i), attrsRequest(1, 1, 0)); code != http.StatusOK {
			t.Fatalf("tenant t%d within the limit: %d %s", i, code, body)
		}
	}
	for i := 3; i < 50; i++ {
		code, body := postBody(t, p, fmt.Sprintf("zzflood%d", i), attrsRequest(1, 1, 0))
		if code != http.StatusBadRequest || !strings.Contains(body, "receivers.otlp.max_tenants") {
			t.Fatalf("new tenant past the limit: %d %q, want 400 naming receivers.otlp.max_tenants", code, body)
		}
		if code, _ := postBody(t, p, fmt.Sprintf("zzempty%d", i), plogotlp.NewExportRequest()); code == 0 {
			t.Fatal("no answer")
		}
	}
	cc, err := grpc.NewClient(p.Addrs().GRPC.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = plogotlp.NewGRPCClient(cc).Export(metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "grpc-new"), attrsRequest(1, 1, 0))
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "max_tenants") {
		t.Errorf("gRPC new tenant past the limit: %v, want InvalidArgument naming max_tenants", err)
	}
	if _, err := plogotlp.NewGRPCClient(cc).Export(metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "t1"), attrsRequest(1, 1, 0)); err != nil {
		t.Errorf("gRPC known tenant: %v", err)
	}
	if code, body := postBody(t, p, "t0", attrsRequest(1, 1, 0)); code != http.StatusOK {
		t.Errorf("known tenant after the flood: %d %s", code, body)
	}

	_, m := get(t, p, "/metrics")
	if strings.Contains(m, "zzflood") || strings.Contains(m, "zzempty") || strings.Contains(m, "grpc-new") {
		t.Errorf("refused tenants have series:\n%s\n%s\n%s", grep(m, "zzflood"), grep(m, "zzempty"), grep(m, "grpc-new"))
	}
	for _, want := range []string{
		`sluice_pipeline_limited_requests_total{limit="max_tenants",signal="logs"} 95`,
		`sluice_pipeline_accepted_records_total{signal="logs",tenant="t0"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s\n%s", want, grep(m, "limited"), grep(m, "accepted"))
		}
	}
}

// TestEmptyTenantHeader: an empty tenant header is refused (400 /
// InvalidArgument), not taken for "no header": a client whose tenant
// variable is unset must not write into the default tenant.
func TestEmptyTenantHeader(t *testing.T) {
	p := start(t, testConfig(t))
	if code, body := postBody(t, p, "", attrsRequest(1, 1, 0)); code != http.StatusBadRequest || !strings.Contains(body, "invalid tenant") {
		t.Errorf("HTTP empty tenant header: %d %q, want 400", code, body)
	}
	cc, err := grpc.NewClient(p.Addrs().GRPC.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = plogotlp.NewGRPCClient(cc).Export(metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", ""), attrsRequest(1, 1, 0))
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument {
		t.Errorf("gRPC empty tenant: %v, want InvalidArgument", err)
	}
	if st := p.q.Load().Stats(); st.AppendedRecords != 0 {
		t.Errorf("the queue took a request with an empty tenant: %+v", st)
	}
}
