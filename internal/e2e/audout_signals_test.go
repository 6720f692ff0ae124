package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// tableRows sums the catalog's rows of a lake per table (current segments).
func tableRows(t *testing.T, lakeDir string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(lakeDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	out := map[string]int64{}
	for _, table := range []string{"logs", "metrics", "traces"} {
		segs, err := cat.List(ctx, catalog.Filter{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range segs {
			out[table] += s.Rows
		}
	}
	return out
}

// TestAudoutEverySignalForwarded: the real OTLP corpus (logs, metrics and
// traces) into one sluice run, which stores it and forwards it to two
// more, over OTLP/HTTP with zstd and over OTLP/gRPC with gzip. Every
// signal arrives: each downstream lake holds the rows of the upstream's,
// table by table.
func TestAudoutEverySignalForwarded(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	downCfg := func(lake string) string {
		return writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}
lake: {root: %s, flush_interval: 1s}
admin: {addr: 127.0.0.1:0}
query: {addr: 127.0.0.1:0}
shutdown_timeout: %s
`, lake, runShutdownTimeout))
	}
	upLake, httpLake, grpcLake := t.TempDir(), t.TempDir(), t.TempDir()
	downHTTP, downGRPC := startServer(t, downCfg(httpLake)), startServer(t, downCfg(grpcLake))
	up := startServer(t, writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}
lake: {root: %s, flush_interval: 1s}
admin: {addr: 127.0.0.1:0}
query: {addr: 127.0.0.1:0}
shutdown_timeout: %s
exporters:
  otlp/h: {endpoints: [http://%s], compression: zstd, batch_delay: 20ms}
  otlp/g: {endpoints: [%s], protocol: grpc, compression: gzip, batch_delay: 20ms}
pipelines:
  logs:    {receivers: [otlp], exporters: [lake, otlp/h, otlp/g]}
  metrics: {receivers: [otlp], exporters: [lake, otlp/h, otlp/g]}
  traces:  {receivers: [otlp], exporters: [lake, otlp/h, otlp/g]}
`, upLake, runShutdownTimeout, downHTTP.http, downGRPC.grpc)))

	sent := 0
	for _, sig := range []string{"logs", "metrics", "traces"} {
		files, _ := filepath.Glob(filepath.Join("/work/shared/corpus/otlp", sig, "*.binpb*"))
		if len(files) == 0 {
			t.Fatalf("no %s in the corpus", sig)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+up.http+"/v1/"+sig, bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/x-protobuf")
			if strings.HasSuffix(f, ".gz") {
				req.Header.Set("Content-Encoding", "gzip")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: status %d", f, resp.StatusCode)
			}
			sent++
		}
	}
	for _, exp := range []string{"otlp/h", "otlp/g"} {
		series := fmt.Sprintf(`sluice_exporter_queue_lag_bytes{exporter=%q}`, exp)
		if !waitFor(60*time.Second, func() bool {
			return metricValue(t, up.admin, series) == 0 && metricValue(t, up.admin, fmt.Sprintf(`sluice_exporter_sent_records_total{exporter=%q}`, exp)) == float64(sent)
		}) {
			t.Fatalf("%s did not deliver the %d requests:\n%s", exp, sent, scrapeMetrics(t, up.admin))
		}
	}
	for _, s := range []*server{up, downHTTP, downGRPC} {
		s.cmd.Process.Signal(os.Interrupt)
		if code, _ := s.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("exit %d\n%s", code, s.stderr)
		}
	}
	want := tableRows(t, upLake)
	for _, table := range []string{"logs", "metrics", "traces"} {
		if want[table] == 0 {
			t.Fatalf("the upstream lake has no %s rows: %v", table, want)
		}
	}
	for name, dir := range map[string]string{"otlp/http+zstd": httpLake, "otlp/grpc+gzip": grpcLake} {
		if got := tableRows(t, dir); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: the downstream lake holds %v rows, the upstream %v", name, got, want)
		}
	}
	t.Logf("%d corpus requests, rows per table %v, in all three lakes", sent, want)
}
