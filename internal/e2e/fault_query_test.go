package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// queryRun is a `sluice run` with its query API.
type queryRun struct {
	cmd                *exec.Cmd
	http, admin, query string // OTLP/HTTP, admin and query API addresses
	stderr             *lockedBuffer
	exited             chan struct{}
}

var runQueryLine = regexp.MustCompile(`otlp-http=(\S+) admin=(\S+) .*query=(\S+)`)

// startQueryRun starts `sluice run --config cfg` with extra environment
// variables and waits for its listening line.
func startQueryRun(t *testing.T, cfg string, env ...string) *queryRun {
	t.Helper()
	s := &queryRun{cmd: exec.Command(sluiceBin, "run", "--config", cfg), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stderr = s.stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(runShutdownTimeout + 5*time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
	})
	lines := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := runQueryLine.FindStringSubmatch(sc.Text()); m != nil {
				lines <- m
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case m := <-lines:
		s.http, s.admin, s.query = m[1], m[2], m[3]
	case <-s.exited:
		t.Fatalf("sluice run exited before listening:\n%s", s.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("sluice run did not print its addresses:\n%s", s.stderr)
	}
	return s
}

func (s *queryRun) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// procStatus reads a field of /proc/<pid>/status in bytes (VmHWM, VmRSS).
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// lakeQueryConfig writes the config of a `sluice run` with its lake in a
// new temporary directory, the query API, and every listener on a free
// loopback port, followed by extra (exporters, pipelines).
func lakeQueryConfig(t *testing.T, extra string) string {
	return writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: "", http_addr: 127.0.0.1:0}
lake: {root: %q, flush_interval: 1s}
admin: {addr: 127.0.0.1:0}
query: {addr: 127.0.0.1:0}
shutdown_timeout: 10s
`, t.TempDir())+extra)
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "validate", "--config", p); r.code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return p
}

// manySeries sends n gauge series of one point a minute over an hour
// starting at t0, in requests of 1,000 series.
func manySeries(t *testing.T, addr string, n int, t0 time.Time) {
	t.Helper()
	for first := 0; first < n; first += 1000 {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "fault")
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("fault.gauge")
		g := m.SetEmptyGauge()
		for i := first; i < min(first+1000, n); i++ {
			for k := range 60 {
				dp := g.DataPoints().AppendEmpty()
				dp.Attributes().PutStr("series", strconv.Itoa(i))
				dp.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(k) * time.Minute)))
				dp.SetDoubleValue(float64(k))
			}
		}
		body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post("http://"+addr+"/v1/metrics", "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("export: %d", resp.StatusCode)
		}
	}
}

type promAnswer struct {
	code      int
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
	took      time.Duration
}

func promPost(t *testing.T, c *http.Client, base, path string, form url.Values) promAnswer {
	t.Helper()
	st := time.Now()
	resp, err := c.PostForm(base+path, form)
	if err != nil {
		return promAnswer{code: -1, Error: err.Error(), took: time.Since(st)}
	}
	defer resp.Body.Close()
	var a promAnswer
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return promAnswer{code: -2, Error: err.Error(), took: time.Since(st)}
	}
	if err := json.Unmarshal(b, &a); err != nil {
		t.Errorf("%s: answer %.200q is not JSON", path, b)
	}
	a.code, a.took = resp.StatusCode, time.Since(st)
	return a
}

// TestFaultQueryAbuse fires abusive queries at a real `sluice run` holding
// 10,000 series: a 200 KB expression of nested parentheses, a 1 h range at
// a 1 s step over every series (36 M samples: 3.3 GB of RSS before the
// limits), and a crowd of them at once. Each is refused with the setting
// named, the process stays alive and within its memory ceiling, and a
// normal query answers afterwards.
func TestFaultQueryAbuse(t *testing.T) {
	lakeDir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: ""
    http_addr: 127.0.0.1:0
admin:
  addr: 127.0.0.1:0
query:
  addr: 127.0.0.1:0
  max_concurrency: 2
  max_queued: 4
  max_query_bytes: 128MiB
  max_total_bytes: 256MiB
upkeep:
  enabled: false
lake:
  root: %s
  flush_interval: 300ms
log:
  level: warn
`, lakeDir))
	s := startQueryRun(t, cfg)
	t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Hour)
	const n = 10_000
	manySeries(t, s.http, n, t0)
	base := "http://" + s.query
	c := &http.Client{Timeout: 2 * time.Minute}
	at := t0.Add(59 * time.Minute)
	count := func() promAnswer {
		return promPost(t, c, base, "/api/v1/query", url.Values{"query": {"count(fault_gauge)"}, "time": {at.Format(time.RFC3339)}})
	}
	deadline := time.Now().Add(60 * time.Second)
	for a := count(); !strings.Contains(string(a.Data), fmt.Sprintf(`"%d"`, n)); a = count() {
		if time.Now().After(deadline) {
			t.Fatalf("the %d series never became queryable: %+v\n%s", n, a, s.stderr)
		}
		time.Sleep(300 * time.Millisecond)
	}
	pid := s.cmd.Process.Pid
	before := procStatus(t, pid, "VmHWM")
	t.Logf("after ingesting %d series: VmHWM %d MiB", n, before>>20)

	// 1. A 200 KB expression of nested parentheses: refused at once.
	nested := strings.Repeat("(", 100_000) + "fault_gauge" + strings.Repeat(")", 100_000)
	a := promPost(t, c, base, "/api/v1/query", url.Values{"query": {nested}})
	if a.code != 422 || a.ErrorType != "cost_limit" || !strings.Contains(a.Error, "query.max_query_length") || a.took > 2*time.Second {
		t.Errorf("nested parentheses: %d %s %q after %v, want a fast 422 cost_limit naming query.max_query_length", a.code, a.ErrorType, a.Error, a.took)
	}
	deep := strings.Repeat("(", 1000) + "fault_gauge" + strings.Repeat(")", 1000)
	if a := promPost(t, c, base, "/api/v1/query", url.Values{"query": {deep}}); a.code != 422 || !strings.Contains(a.Error, "query.max_query_depth") {
		t.Errorf("1000 nested parentheses: %d %q", a.code, a.Error)
	}

	// 2. Every series over an hour at a 1 s step.
	huge := url.Values{"query": {"fault_gauge"}, "start": {strconv.FormatInt(t0.Unix(), 10)},
		"end": {strconv.FormatInt(t0.Add(time.Hour).Unix(), 10)}, "step": {"1"}}
	a = promPost(t, c, base, "/api/v1/query_range", huge)
	if a.code != 422 || a.ErrorType != "cost_limit" || !strings.Contains(a.Error, "query.max_query_bytes") {
		t.Errorf("huge range query: %d %s %q, want 422 cost_limit naming query.max_query_bytes", a.code, a.ErrorType, a.Error)
	}
	t.Logf("huge range query refused after %v: %s", a.took, a.Error)

	// 3. Sixteen at once, twice: each is refused (cost_limit or, with the
	// slots and the queue full, too_many_requests), none fails otherwise.
	codes := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				form := huge
				if i%2 == 1 {
					form = url.Values{"query": {"sum by (series) (rate(fault_gauge[5m]))"}, "start": huge["start"], "end": huge["end"], "step": {"1"}}
				}
				a := promPost(t, c, base, "/api/v1/query_range", form)
				mu.Lock()
				defer mu.Unlock()
				codes[fmt.Sprintf("%d %s", a.code, a.ErrorType)]++
				if !(a.code == 422 && a.ErrorType == "cost_limit" && strings.Contains(a.Error, "query.max_")) &&
					!(a.code == 429 && a.ErrorType == "too_many_requests" && strings.Contains(a.Error, "query.max_queued")) {
					t.Errorf("concurrent abusive query: %d %s %q", a.code, a.ErrorType, a.Error)
				}
			}()
		}
		wg.Wait()
	}
	t.Logf("32 concurrent abusive queries: %v", codes)
	if !s.alive() {
		t.Fatalf("sluice run died:\n%s", s.stderr)
	}
	after := procStatus(t, pid, "VmHWM")
	t.Logf("VmHWM %d MiB before the abuse, %d MiB after (max_total_bytes 256 MiB)", before>>20, after>>20)
	// Budgets count what queries hold, not the collector's slack or the
	// decoded lake pages in flight: allow 3 × max_total_bytes over the
	// peak of ingestion (measured: +231 MiB). Without the limits one such
	// query took 3.3 GB.
	if limit := before + 3*256<<20; after > limit {
		t.Errorf("VmHWM %d MiB after the abuse, more than %d MiB", after>>20, limit>>20)
	}

	// 4. A normal query still answers, right.
	if a := count(); a.code != 200 || !strings.Contains(string(a.Data), fmt.Sprintf(`"%d"`, n)) {
		t.Errorf("count after the abuse: %d %s %s", a.code, a.Data, a.Error)
	}
	a = promPost(t, c, base, "/api/v1/query_range", url.Values{"query": {`fault_gauge{series="42"}`}, "start": huge["start"], "end": huge["end"], "step": {"60"}})
	if a.code != 200 || !strings.Contains(string(a.Data), `"series":"42"`) {
		t.Errorf("one series' range after the abuse: %d %.200s %s", a.code, a.Data, a.Error)
	}
	// The refusals are counted by the setting that refused them.
	resp, err := http.Get("http://" + s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, l := range []string{"max_query_length", "max_query_depth", "max_query_bytes"} {
		if !regexp.MustCompile(`sluice_query_refused_total\{limit="` + l + `"\} [1-9]`).Match(metrics) {
			t.Errorf("/metrics has no refusal counted for %s", l)
		}
	}
}
