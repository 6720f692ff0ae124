package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/signal"
)

const runShutdownTimeout = 15 * time.Second

// runConfig writes a config for a `sluice run` on free loopback ports with
// a short checkpoint interval and small files, so that a kill lands between
// checkpoints with files written but not committed.
func runConfig(t *testing.T, lakeDir string) string {
	t.Helper()
	cfg := fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
    tenant_header: X-Scope-OrgID
admin:
  addr: 127.0.0.1:0
query:
  addr: ""
queue:
  segment_bytes: 32MiB
  max_bytes: 256MiB
lake:
  root: %s
  flush_interval: 400ms
  target_file_bytes: 64KiB
log:
  level: info
shutdown_timeout: %s
`, lakeDir, runShutdownTimeout)
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "validate", "--config", p); r.code != 0 || !strings.Contains(r.stdout, "config OK") {
		t.Fatalf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return p
}

// server is one running `sluice run` process.
type server struct {
	cmd               *exec.Cmd
	grpc, http, admin string
	prw               string // remote write's own listener, "off" when none
	stderr            *lockedBuffer
	exited            chan struct{}
	exitCode          int
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

var (
	listenLine = regexp.MustCompile(`otlp-grpc=(\S+) otlp-http=(\S+) admin=(\S+)`)
	prwLine    = regexp.MustCompile(` prw=(\S+)`)
)

// startServer runs `sluice run --config cfg` and waits until it listens
// and is ready. Tests pick fixed addresses with freePort, which closes its
// listener: before sluice binds such an address, one of its own :0
// listeners (or another process's) may have taken the port. Such a start
// ("address already in use") is tried again, up to five times.
//
// A config without a query section gets query.addr 127.0.0.1:0: the default
// (localhost:9090, also remote write's address in a forward-only relay)
// would be one fixed port for every test and test process at once.
func startServer(t *testing.T, cfg string) *server {
	t.Helper()
	ownQueryAddr(t, cfg)
	for attempt := 1; ; attempt++ {
		s, busy := tryStartServer(t, cfg, attempt == 5)
		if !busy {
			return s
		}
		t.Logf("sluice run found an address in use (attempt %d); starting it again:\n%s", attempt, s.stderr)
		time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
	}
}

// ownQueryAddr appends query.addr 127.0.0.1:0 to the config file cfg when
// it has no top-level query section.
func ownQueryAddr(t *testing.T, cfg string) {
	t.Helper()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if topQuery.Match(b) {
		return
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	if err := os.WriteFile(cfg, append(b, "query: {addr: 127.0.0.1:0}\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
}

var topQuery = regexp.MustCompile(`(?m)^query:`)

// tryStartServer is one start of startServer; busy reports a start that
// failed only because an address was in use (unless last, which fails).
func tryStartServer(t *testing.T, cfg string, last bool) (_ *server, busy bool) {
	t.Helper()
	s := &server{cmd: exec.Command(sluiceBin, "run", "--config", cfg), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	s.cmd.Stderr = s.stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
				lines <- sc.Text()
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() {
		err := s.cmd.Wait()
		s.exitCode = s.cmd.ProcessState.ExitCode()
		_ = err
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			s.cmd.Process.Kill()
			<-s.exited
		}
	})
	select {
	case l := <-lines:
		m := listenLine.FindStringSubmatch(l)
		s.grpc, s.http, s.admin = m[1], m[2], m[3]
		if m := prwLine.FindStringSubmatch(l); m != nil {
			s.prw = m[1]
		}
	case <-s.exited:
		if !last && strings.Contains(s.stderr.String(), "address already in use") {
			return s, true
		}
		t.Fatalf("sluice run exited %d before listening:\n%s", s.exitCode, s.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("sluice run did not print its addresses:\n%s", s.stderr)
	}
	if resp, err := http.Get("http://" + s.admin + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	return s, false
}

// wait waits for the process to exit and returns its code and how long it
// took.
func (s *server) wait(t *testing.T, limit time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	select {
	case <-s.exited:
		return s.exitCode, time.Since(start)
	case <-time.After(limit):
		t.Fatalf("sluice run did not exit within %v:\n%s", limit, s.stderr)
	}
	return 0, 0
}

// loadGen sends OTLP/HTTP logs requests whose records carry a unique "seq"
// attribute, and remembers which requests were acknowledged (200).
type loadGen struct {
	next    atomic.Int64
	perReq  int
	mu      sync.Mutex
	acked   map[int64]bool // seq -> acknowledged
	sent    atomic.Int64
	refused atomic.Int64 // non-200 answers (429, 503, ...)
	failed  atomic.Int64 // no answer at all
}

func newLoadGen(perReq int) *loadGen { return &loadGen{perReq: perReq, acked: map[int64]bool{}} }

func (g *loadGen) body(t testing.TB, first int64) []byte {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "loadgen")
	sl := rl.ScopeLogs().AppendEmpty()
	now := pcommon.NewTimestampFromTime(time.Now())
	for i := range int64(g.perReq) {
		r := sl.LogRecords().AppendEmpty()
		r.SetTimestamp(now)
		r.Body().SetStr(fmt.Sprintf("load record %d with some text to make it a little larger", first+i))
		r.Attributes().PutInt("seq", first+i)
	}
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// send sends one request and reports whether it was acknowledged.
func (g *loadGen) send(t testing.TB, ctx context.Context, client *http.Client, addr string) bool {
	first := g.next.Add(int64(g.perReq)) - int64(g.perReq)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/logs", bytes.NewReader(g.body(t, first)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Scope-OrgID", "load")
	g.sent.Add(1)
	resp, err := client.Do(req)
	if err != nil {
		g.failed.Add(1)
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		g.refused.Add(1)
		return false
	}
	g.mu.Lock()
	for i := range int64(g.perReq) {
		g.acked[first+i] = true
	}
	g.mu.Unlock()
	return true
}

// run sends from several goroutines until ctx is done.
func (g *loadGen) run(t testing.TB, ctx context.Context, addr string, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second}
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if !g.send(t, ctx, client, addr) {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	return &wg
}

func (g *loadGen) ackedCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.acked)
}

// lakeCounts reads every logs file the catalog lists with the repo's own
// reader and counts records per seq. It also returns the catalog's row
// total.
func lakeCounts(t *testing.T, lakeDir string) map[int64]int {
	t.Helper()
	return lakeCountsIn(t, lakeDir, "sqlite:"+filepath.Join(lakeDir, "catalog.db"))
}

// lakeCountsIn is lakeCounts with the catalog at dsn.
func lakeCountsIn(t *testing.T, lakeDir, dsn string) map[int64]int {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	segs, err := cat.List(ctx, catalog.Filter{Table: "logs"})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int64]int{}
	for _, s := range segs {
		f, err := lake.OpenFile(filepath.Join(lakeDir, s.Path))
		if err != nil {
			t.Fatalf("catalogued file: %v", err)
		}
		var l signal.Logs
		if err := f.ReadLogs(&l); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for i := range l.Len() {
			a := l.FindAttr(l.Attr[i], "seq")
			if a < 0 {
				t.Fatalf("%s: record without seq", s.Path)
			}
			counts[l.AttrInt(a)]++
		}
	}
	return counts
}

// duckdbCounts counts records per seq over every Parquet file in the lake
// directory (not the catalog), with DuckDB: an independent reader that
// also sees any file the catalog does not know.
func duckdbCounts(t *testing.T, lakeDir string) (map[int64]int, bool) {
	t.Helper()
	py := os.Getenv("SLUICE_PYTHON")
	if py == "" {
		if os.Getenv("SLUICE_REQUIRE_ALL") != "" {
			t.Fatal("SLUICE_PYTHON is not set (SLUICE_REQUIRE_ALL is set, so this is a failure)")
		}
		t.Log("SLUICE_PYTHON not set: the DuckDB cross-check is skipped (run `make test`)")
		return nil, false
	}
	script := `import duckdb, sys
con = duckdb.connect()
rows = con.execute("""SELECT "attr.seq#int", count(*) FROM read_parquet(?, hive_partitioning=true) GROUP BY 1""",
                   [sys.argv[1] + "/logs/**/*.parquet"]).fetchall()
for seq, n in rows:
    print(seq, n)
`
	out, err := exec.Command(py, "-c", script, lakeDir).CombinedOutput()
	if err != nil {
		t.Fatalf("duckdb: %v\n%s", err, out)
	}
	counts := map[int64]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		seq, err1 := strconv.ParseInt(f[0], 10, 64)
		n, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			t.Fatalf("duckdb output line %q", line)
		}
		counts[seq] = n
	}
	return counts, true
}

// checkLake asserts that every acknowledged seq is in the lake exactly once
// and nothing is there twice, by both readers, and returns the numbers.
func checkLake(t *testing.T, lakeDir string, g *loadGen) (acked, found, dups int) {
	t.Helper()
	return checkLakeIn(t, lakeDir, "sqlite:"+filepath.Join(lakeDir, "catalog.db"), g)
}

// checkLakeIn is checkLake with the catalog at dsn.
func checkLakeIn(t *testing.T, lakeDir, dsn string, g *loadGen) (acked, found, dups int) {
	t.Helper()
	g.mu.Lock()
	ackedSet := make(map[int64]bool, len(g.acked))
	for k := range g.acked {
		ackedSet[k] = true
	}
	g.mu.Unlock()
	check := func(name string, counts map[int64]int) (int, int) {
		var missing []int64
		var dupSeqs []int64
		for seq := range ackedSet {
			if counts[seq] == 0 {
				missing = append(missing, seq)
			}
		}
		for seq, n := range counts {
			if n > 1 {
				dupSeqs = append(dupSeqs, seq)
			}
		}
		sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
		sort.Slice(dupSeqs, func(i, j int) bool { return dupSeqs[i] < dupSeqs[j] })
		if len(missing) > 0 {
			t.Errorf("%s: %d acknowledged records missing, e.g. %v", name, len(missing), missing[:min(10, len(missing))])
		}
		if len(dupSeqs) > 0 {
			t.Errorf("%s: %d records present more than once, e.g. %v", name, len(dupSeqs), dupSeqs[:min(10, len(dupSeqs))])
		}
		return len(counts), len(dupSeqs)
	}
	goCounts := lakeCountsIn(t, lakeDir, dsn)
	found, dups = check("catalog+lake reader", goCounts)
	if dd, ok := duckdbCounts(t, lakeDir); ok {
		f2, d2 := check("duckdb over the directory", dd)
		if f2 != found {
			t.Errorf("duckdb sees %d distinct records in the directory, the catalog lists %d: files outside the catalog", f2, found)
		}
		dups = max(dups, d2)
	}
	// No file outside the catalog: lake ls totals equal what was read.
	total := 0
	for _, n := range goCounts {
		total += n
	}
	ls := run(t, "lake", "ls", "--lake", lakeDir, "--catalog", dsn, "--table", "logs")
	assertTotalRows(t, ls.stdout, total)
	return len(ackedSet), found, dups
}

// TestRunKill9 kills `sluice run` with SIGKILL in the middle of a load,
// restarts it, sends more, stops it with SIGTERM and checks that every
// acknowledged record is in the lake exactly once.
func TestRunKill9(t *testing.T) {
	lakeDir := t.TempDir()
	cfg := runConfig(t, lakeDir)
	g := newLoadGen(50)

	s1 := startServer(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	wg := g.run(t, ctx, s1.http, 8)
	time.Sleep(3 * time.Second)
	before := g.ackedCount()
	if err := s1.cmd.Process.Kill(); err != nil { // SIGKILL, mid-load
		t.Fatal(err)
	}
	<-s1.exited
	cancel()
	wg.Wait()
	if before == 0 {
		t.Fatalf("nothing acknowledged before the kill:\n%s", s1.stderr)
	}
	t.Logf("first run: %d requests sent, %d records acknowledged, %d refused, %d unanswered (kill)",
		g.sent.Load(), g.ackedCount(), g.refused.Load(), g.failed.Load())

	s2 := startServer(t, cfg)
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	g.run(t, ctx2, s2.http, 4).Wait()
	cancel2()
	if err := s2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, took := s2.wait(t, runShutdownTimeout+10*time.Second)
	if code != 0 {
		t.Fatalf("graceful stop after restart: exit %d\n%s", code, s2.stderr)
	}
	swept := strings.Count(s2.stderr.String(), "removed uncommitted lake file")
	acked, found, dups := checkLake(t, lakeDir, g)
	t.Logf("kill -9: acknowledged %d, found %d distinct, duplicates %d; orphan files removed at restart %d; SIGTERM exit took %v",
		acked, found, dups, swept, took.Round(time.Millisecond))
	if found < acked {
		t.Errorf("found %d < acknowledged %d", found, acked)
	}
}

// TestRunGracefulShutdown sends SIGTERM while load is running: the process
// answers what it has in flight, commits everything acknowledged and exits
// 0 within shutdown_timeout.
func TestRunGracefulShutdown(t *testing.T) {
	lakeDir := t.TempDir()
	cfg := runConfig(t, lakeDir)
	g := newLoadGen(50)
	s := startServer(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg := g.run(t, ctx, s.http, 8)
	time.Sleep(2 * time.Second)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, took := s.wait(t, runShutdownTimeout+5*time.Second)
	cancel()
	wg.Wait()
	if code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, s.stderr)
	}
	if took > runShutdownTimeout {
		t.Errorf("shutdown took %v, more than shutdown_timeout %v", took, runShutdownTimeout)
	}
	if !strings.Contains(s.stderr.String(), "sluice run stopped") {
		t.Errorf("no stop log line:\n%s", s.stderr)
	}
	acked, found, dups := checkLake(t, lakeDir, g)
	t.Logf("graceful: acknowledged %d, found %d distinct, duplicates %d, exit 0 after %v",
		acked, found, dups, took.Round(time.Millisecond))
	// A clean stop commits everything: a restart has nothing to replay and
	// no orphan to remove.
	s2 := startServer(t, cfg)
	s2.cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := s2.wait(t, runShutdownTimeout+5*time.Second); code != 0 {
		t.Fatalf("second stop: exit %d\n%s", code, s2.stderr)
	}
	if strings.Contains(s2.stderr.String(), "removed uncommitted lake file") || !strings.Contains(s2.stderr.String(), "replay_bytes=0") {
		t.Errorf("restart after a clean stop replayed or swept:\n%s", s2.stderr)
	}
}

// TestRunValidate covers `sluice validate` exit codes and messages.
func TestRunValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("receivers:\n  otlp:\n    grcp_addr: x\nqueue:\n  full_policy: maybe\n"), 0o644)
	r := run(t, "validate", "--config", bad)
	if r.code != 2 || !strings.Contains(r.stderr, bad+":3: unknown key receivers.otlp.grcp_addr") {
		t.Errorf("unknown key: exit %d\n%s", r.code, r.stderr)
	}
	os.WriteFile(bad, []byte("queue:\n  full_policy: maybe\nlog:\n  format: xml\n"), 0o644)
	r = run(t, "validate", "--config", bad)
	if r.code != 2 || !strings.Contains(r.stderr, bad+":2: queue.full_policy") || !strings.Contains(r.stderr, bad+":4: log.format") {
		t.Errorf("invalid values: exit %d\n%s", r.code, r.stderr)
	}
	// The tracer's filters are checked as sluice run checks them at start.
	os.WriteFile(bad, []byte("receivers:\n  iotrace:\n    enabled: true\n    syscalls: read,bogus\n"), 0o644)
	r = run(t, "validate", "--config", bad)
	if r.code != 2 || !strings.Contains(r.stderr, `receivers.iotrace.syscalls: unknown syscall "bogus"`) {
		t.Errorf("unknown syscall: exit %d\n%s", r.code, r.stderr)
	}
	if r := run(t, "run", "--config", bad); r.code != 2 || !strings.Contains(r.stderr, `receivers.iotrace.syscalls: unknown syscall "bogus"`) {
		t.Errorf("run with an unknown syscall: exit %d\n%s", r.code, r.stderr)
	}
	os.WriteFile(bad, []byte("queue:\n  full_policy: maybe\n"), 0o644)
	if r := run(t, "validate"); r.code != 2 {
		t.Errorf("validate without --config: exit %d, want 2", r.code)
	}
	if r := run(t, "run", "--no-such-flag"); r.code != 2 {
		t.Errorf("run with a bad flag: exit %d, want 2", r.code)
	}
	r = run(t, "run", "--config", bad)
	if r.code != 2 || !strings.Contains(r.stderr, "queue.full_policy") {
		t.Errorf("run with a bad config: exit %d\n%s", r.code, r.stderr)
	}
}

// TestIngestRefusedWhileRunOwnsLake: sluice ingest into a lake that sluice
// run is serving must be refused, since run's start-up sweep removes files
// the catalog does not know yet.
func TestIngestRefusedWhileRunOwnsLake(t *testing.T) {
	lakeDir := t.TempDir()
	startServer(t, runConfig(t, lakeDir))
	logs := filepath.Join(corpustest.Dir(t), "otlp", "logs", "logs_160396104.binpb")
	r := run(t, "ingest", "--lake", lakeDir, "--progress", "never", logs)
	if r.code == 0 || !strings.Contains(r.stderr, "another sluice process (run or ingest) is using this lake") {
		t.Fatalf("ingest into a served lake: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
