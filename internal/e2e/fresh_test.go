package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// freshConfig is a `sluice run` config with the default lake and
// checkpoint settings (flush_interval 60s), on free loopback ports, and
// the query settings in query ("key: value" lines).
func freshConfig(t *testing.T, lakeDir, qaddr string, query ...string) string {
	t.Helper()
	cfg := fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
admin:
  addr: 127.0.0.1:0
query:
  addr: %s
%slake:
  root: %s
shutdown_timeout: %s
`, qaddr, indentLines(query), lakeDir, runShutdownTimeout)
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// indentLines is each line indented by two spaces, each ending in a newline.
func indentLines(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

const freshService = "fresh-svc"

// freshBatch sends n logs, n gauge series (label room=<batch>-<i>) and one
// trace of n spans, all stamped now, and returns the trace id.
func freshBatch(t *testing.T, httpAddr string, batch, n int) string {
	t.Helper()
	now := pcommon.NewTimestampFromTime(time.Now())

	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", freshService)
	sl := rl.ScopeLogs().AppendEmpty()
	for i := range n {
		r := sl.LogRecords().AppendEmpty()
		r.SetTimestamp(now)
		r.Body().SetStr(fmt.Sprintf("fresh record %d-%d", batch, i))
	}
	lb, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}

	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", freshService)
	g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("fresh_temp")
	pts := g.SetEmptyGauge().DataPoints()
	for i := range n {
		dp := pts.AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetDoubleValue(float64(i))
		dp.Attributes().PutStr("room", fmt.Sprintf("%d-%d", batch, i))
	}
	mb, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}

	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", freshService)
	ss := rs.ScopeSpans().AppendEmpty()
	var tid pcommon.TraceID
	copy(tid[:], fmt.Sprintf("fresh-trace-%04d", batch))
	for i := range n {
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(tid)
		s.SetSpanID(pcommon.SpanID{1, byte(batch), byte(i), 4, 5, 6, 7, 8})
		s.SetName(fmt.Sprintf("op-%d", i))
		s.SetStartTimestamp(now)
		s.SetEndTimestamp(now + 1000)
	}
	tb, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}

	for path, body := range map[string][]byte{"/v1/logs": lb, "/v1/metrics": mb, "/v1/traces": tb} {
		resp, err := http.Post("http://"+httpAddr+path, "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
	}
	return fmt.Sprintf("%x", tid[:])
}

// freshCounts is what the query API shows of the fresh-svc data: logs
// found by the logs search, series of fresh_temp by PromQL, spans of each
// trace by the trace lookup and the traces search.
type freshCounts struct {
	logs, series, spans int
	trace               []int
}

func queryFresh(t *testing.T, qaddr string, traces []string) freshCounts {
	t.Helper()
	since := url.Values{"service": {freshService}, "start": {time.Now().Add(-time.Hour).Format(time.RFC3339)}}
	c := freshCounts{
		logs:  searchCount(t, qaddr, "", "/api/v1/logs/search", url.Values{"service": since["service"], "start": since["start"]}),
		spans: searchCount(t, qaddr, "", "/api/v1/traces/search", url.Values{"service": since["service"], "start": since["start"]}),
		// queryCount sends whole seconds: one second ahead covers now.
		series: int(queryCount(t, "http://"+qaddr, "", "count(fresh_temp)", time.Now().Add(time.Second))),
	}
	for _, id := range traces {
		code, body := searchGet(t, qaddr, "", "/api/v1/traces/"+id, nil)
		switch code {
		case http.StatusOK:
			c.trace = append(c.trace, strings.Count(string(body), `"spanId"`))
		case http.StatusNotFound:
			c.trace = append(c.trace, 0)
		default:
			t.Fatalf("trace %s: %d %s", id, code, body)
		}
	}
	return c
}

func (c freshCounts) exact(n int) bool {
	ok := c.logs == n && c.spans == n && c.series == n
	for _, s := range c.trace {
		ok = ok && s > 0
	}
	return ok
}

// waitFresh polls the query API until it shows exactly n records of each
// signal and every trace, and returns how long that took and after how
// many rounds of queries; it fails the test past limit.
func waitFresh(t *testing.T, qaddr string, traces []string, n int, limit time.Duration) (time.Duration, int) {
	t.Helper()
	start := time.Now()
	for polls := 1; ; polls++ {
		c := queryFresh(t, qaddr, traces)
		if c.exact(n) {
			return time.Since(start), polls
		}
		if c.logs > n || c.spans > n || c.series > n {
			t.Fatalf("more than the %d records sent: %+v", n, c)
		}
		if time.Since(start) > limit {
			t.Fatalf("after %v the query API shows %+v, want %d of each", limit, c, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var checkpointsLine = regexp.MustCompile(`(?m)^sluice_lake_checkpoints_total\{reason="interval"\} (\d+)`)

func intervalCheckpoints(t *testing.T, admin string) int {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := checkpointsLine.FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestFreshWithinSeconds: with the default checkpoint settings (60 s), an
// acknowledged log, data point and span are visible through the logs
// search, PromQL and the trace lookup within 5 s; the counts stay exact
// across the checkpoint that writes them to the lake, and across a kill -9
// before the next one.
func TestFreshWithinSeconds(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	cfg := freshConfig(t, lakeDir, qaddr)
	s := startServer(t, cfg)

	const n = 25
	traces := []string{freshBatch(t, s.http, 1, n)}
	took, polls := waitFresh(t, qaddr, traces, n, 5*time.Second)
	t.Logf("batch 1 visible %v after its acknowledgement (round %d of queries)", took.Round(time.Millisecond), polls)
	if files := parquetFiles(t, lakeDir); len(files) != 0 {
		t.Fatalf("files in the lake before the first checkpoint (want the tail to serve them): %v", files)
	}

	// The default interval checkpoint writes them to the lake: still exact.
	deadline := time.Now().Add(90 * time.Second)
	for intervalCheckpoints(t, s.admin) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no interval checkpoint within 90 s:\n%s", s.stderr)
		}
		c := queryFresh(t, qaddr, traces)
		if !c.exact(n) {
			t.Fatalf("while waiting for the checkpoint the query API shows %+v, want %d of each", c, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if files := parquetFiles(t, lakeDir); len(files) == 0 {
		t.Fatal("no lake files after the checkpoint")
	}
	if c := queryFresh(t, qaddr, traces); !c.exact(n) {
		t.Fatalf("after the checkpoint the query API shows %+v, want %d of each", c, n)
	}

	// A second batch, then kill -9 long before the next checkpoint.
	traces = append(traces, freshBatch(t, s.http, 2, n))
	took, polls = waitFresh(t, qaddr, traces, 2*n, 5*time.Second)
	t.Logf("batch 2 visible %v after its acknowledgement (round %d of queries)", took.Round(time.Millisecond), polls)
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.exited

	s = startServer(t, cfg)
	took, polls = waitFresh(t, qaddr, traces, 2*n, 5*time.Second)
	t.Logf("after kill -9 and restart, both batches visible in %v (round %d of queries)", took.Round(time.Millisecond), polls)
	// Exact, and it stays so (nothing counted twice once the replay is in).
	time.Sleep(time.Second)
	if c := queryFresh(t, qaddr, traces); !c.exact(2 * n) {
		t.Fatalf("after restart the query API shows %+v, want %d of each", c, 2*n)
	}
}
