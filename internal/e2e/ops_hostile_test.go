package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// TestOpsHugeHeaders: a real `sluice run` refuses 1 MB of headers on every
// listener (OTLP gRPC metadata took 8 MB and more; the query API and remote
// write's own listener took 1 MB), while a well-behaved client on the same
// connection or beside it is served.
func TestOpsHugeHeaders(t *testing.T) {
	lakeDir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	qaddr := l.Addr().String() // startServer starts again should another take it
	l.Close()
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
    tenant_header: X-Scope-OrgID
  prometheus_remote_write:
    listen: 127.0.0.1:0
admin:
  addr: 127.0.0.1:0
query:
  addr: %s
lake:
  root: %s
`, qaddr, lakeDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg)

	cc, err := grpc.NewClient(s.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithMaxHeaderListSize(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("x")
	req := plogotlp.NewExportRequestFromLogs(ld)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := metadata.AppendToOutgoingContext(ctx, "x-scope-orgid", "hostile", "x-junk", strings.Repeat("a", 1<<20))
	if _, err := plogotlp.NewGRPCClient(cc).Export(big, req); err == nil {
		t.Errorf("gRPC with 1 MB of metadata accepted")
	}
	if _, err := plogotlp.NewGRPCClient(cc).Export(metadata.AppendToOutgoingContext(ctx, "x-scope-orgid", "polite"), req); err != nil {
		t.Errorf("a well-behaved gRPC request after the huge one: %v", err)
	}

	for _, url := range []string{
		"http://" + qaddr + "/api/v1/labels",
		"http://" + s.prw + "/api/v1/write",
		"http://" + s.admin + "/metrics",
	} {
		r, _ := http.NewRequest(http.MethodGet, url, nil)
		r.Header.Set("X-Big", strings.Repeat("a", 1<<20))
		resp, err := http.DefaultClient.Do(r)
		if err == nil {
			resp.Body.Close()
		}
		if err == nil && resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s with a 1 MB header: %d, want 431", url, resp.StatusCode)
		}
	}
	if resp, err := http.Get("http://" + qaddr + "/api/v1/labels"); err != nil || resp.StatusCode != 200 {
		t.Errorf("a well-behaved query after the huge headers: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}
