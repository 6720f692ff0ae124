package otlpreceiver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/signal"
)

// telemetrygen finds the OpenTelemetry telemetrygen binary: $SLUICE_TELEMETRYGEN,
// .tools/bin in the module, or PATH.
func telemetrygen(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLUICE_TELEMETRYGEN"); p != "" {
		return p
	}
	if root, err := corpustest.ModuleRoot(); err == nil {
		p := filepath.Join(root, ".tools", "bin", "telemetrygen")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("telemetrygen"); err == nil {
		return p
	}
	corpustest.Missing(t, "the telemetrygen binary ($SLUICE_TELEMETRYGEN, .tools/bin or PATH; "+
		"go install github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@v0.161.0)")
	return ""
}

// TestTelemetrygen sends real OpenTelemetry SDK exports (gRPC and HTTP) and
// checks that every record reached the consumer exactly once.
func TestTelemetrygen(t *testing.T) {
	bin := telemetrygen(t)
	const n, childSpans = 250, 2
	cases := []struct {
		kind  signal.Kind
		cmd   string
		flags []string
		want  int // records: log records, data points, spans
	}{
		{signal.KindLogs, "logs", []string{"--logs", strconv.Itoa(n)}, n},
		{signal.KindMetrics, "metrics", []string{"--metrics", strconv.Itoa(n)}, n},
		// Each trace is a root span plus its children.
		{signal.KindTraces, "traces", []string{"--traces", strconv.Itoa(n), "--child-spans", strconv.Itoa(childSpans)}, n * (1 + childSpans)},
	}
	for _, transport := range []string{TransportGRPC, TransportHTTP} {
		for _, tc := range cases {
			t.Run(transport+"/"+tc.cmd, func(t *testing.T) {
				t.Parallel()
				cfg := testConfig()
				cfg.TenantHeader = "X-Scope-OrgID"
				rec := &recorder{}
				r, _ := startReceiver(t, cfg, rec)
				addr := r.GRPCAddr().String()
				args := []string{tc.cmd, "--otlp-insecure", "--workers", "1", "--rate", "0",
					"--otlp-header", `X-Scope-OrgID="telemetrygen"`}
				if transport == TransportHTTP {
					addr = r.HTTPAddr().String()
					args = append(args, "--otlp-http")
				}
				args = append(args, "--otlp-endpoint", addr)
				args = append(args, tc.flags...)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
				if err != nil {
					t.Fatalf("telemetrygen %v: %v\n%s", args, err, out)
				}
				got := 0
				for _, req := range rec.requests() {
					if req.Kind != tc.kind || req.Transport != transport || req.Tenant != "telemetrygen" {
						t.Fatalf("request kind %v transport %q tenant %q", req.Kind, req.Transport, req.Tenant)
					}
					got += countRecords(t, tc.kind, req.Body)
				}
				if got != tc.want {
					t.Fatalf("consumer received %d records in %d requests, want %d\ntelemetrygen output:\n%s",
						got, len(rec.requests()), tc.want, tail(out, 2000))
				}
			})
		}
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		return fmt.Sprintf("...%s", b[len(b)-n:])
	}
	return string(b)
}
