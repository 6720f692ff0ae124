package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/tracer"
	"github.com/sluice-dev/sluice/internal/tracer/tracertest"
)

func TestMain(m *testing.M) {
	tracertest.MaybeRunChild()
	if dir := os.Getenv(envNotRootDir); dir != "" {
		startNotRoot(dir)
	}
	os.Exit(m.Run())
}

const envNotRootDir = "SLUICE_TEST_IOTRACE_NOT_ROOT_DIR"

// startNotRoot is the child of TestIOTraceNotRoot: it starts a pipeline
// with the tracer on, prints Start's error and exits.
func startNotRoot(dir string) {
	c := config.Default()
	c.Lake.Root = filepath.Join(dir, "lake")
	c.Receivers.OTLP.GRPCAddr, c.Receivers.OTLP.HTTPAddr, c.Admin.Addr, c.Query.Addr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", ""
	c.Receivers.IOTrace.Enabled = true
	p, err := New(c, Settings{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		err = p.Start(context.Background())
	}
	fmt.Printf("uid %d: start error: %v\n", os.Geteuid(), err)
	os.Exit(0)
}

// TestIOTraceNotRoot starts sluice run's pipeline with the tracer on as an
// unprivileged user: Start must fail naming the key and what is missing.
func TestIOTraceNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		// Not root: the pipeline itself must fail the same way.
		cfg := testConfig(t)
		cfg.Receivers.IOTrace.Enabled = true
		p, err := New(cfg, Settings{Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		err = p.Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), "receivers.iotrace") || !strings.Contains(err.Error(), "privileges") {
			t.Fatalf("start as uid %d: %v", os.Geteuid(), err)
		}
		return
	}
	// Root: run a copy of this test binary as nobody (a directory and
	// binary nobody can reach; t.TempDir is private to root).
	dir, err := os.MkdirTemp("", "sluice-notroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "pipeline.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^$")
	cmd.Env = append(os.Environ(), envNotRootDir+"="+dir)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	s := string(out)
	t.Log(strings.TrimSpace(s))
	for _, want := range []string{"uid 65534", "receivers.iotrace", "privileges", "not root", "CAP_BPF"} {
		if !strings.Contains(s, want) {
			t.Errorf("child's start error lacks %q:\n%s", want, s)
		}
	}
}

// TestIOTraceSource runs the pipeline with the tracer as a source filtered
// to a child doing a known workload: its calls must reach the lake's
// io_events table through the queue and the checkpoint (the catalog lists
// the files and the queue position covers them), exactly, as DuckDB reads
// them.
func TestIOTraceSource(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	py := os.Getenv("SLUICE_PYTHON")
	if py == "" {
		corpustest.Missing(t, "SLUICE_PYTHON (a Python with duckdb)")
	}
	work := t.TempDir()
	child := tracertest.Start(t, work, "")
	cfg := testConfig(t)
	cfg.Receivers.IOTrace.Enabled = true
	cfg.Receivers.IOTrace.Tenant = "hostio"
	cfg.Receivers.IOTrace.PID = uint32(child.PID)
	p := start(t, cfg)
	child.Go(t)

	want := tracertest.Expected(work)
	// The tracer hands over a batch at least every 200ms; poll until the
	// workload's rows are in the queue, then checkpoint.
	deadline := time.Now().Add(60 * time.Second)
	for counterValue(p.iom.queued) < float64(len(want)) {
		if time.Now().After(deadline) {
			t.Fatalf("%v rows queued after 60s, want %d", counterValue(p.iom.queued), len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	segs, err := p.cat.List(ctx, catalog.Filter{Table: "io_events", Tenant: "hostio"})
	if err != nil {
		t.Fatal(err)
	}
	pos, err := p.cat.QueuePosition(ctx, QueueName)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) == 0 || pos <= 0 {
		t.Fatalf("%d io_events segments in the catalog, queue position %d", len(segs), pos)
	}
	var files []string
	var rows int64
	for _, s := range segs {
		files = append(files, filepath.Join(cfg.Lake.Root, s.Path))
		rows += s.Rows
	}
	script := `import duckdb, sys
con = duckdb.connect()
q = "SELECT syscall, coalesce(path, ''), coalesce(old_path, ''), bytes, pid, tid FROM read_parquet(" + repr(sys.argv[1:]) + ") ORDER BY time"
for r in con.execute(q).fetchall():
    print(*r, sep="|")
`
	out, err := exec.Command(py, append([]string{"-c", script}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("duckdb: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(want) || rows != int64(len(want)) {
		t.Fatalf("%d rows (catalog says %d), want %d:\n%s", len(lines), rows, len(want), out)
	}
	for i, w := range want {
		wl := fmt.Sprintf("%s|%s|%s|%d|%d|%d", w.Syscall, w.Path, w.OldPath, w.Bytes, child.PID, child.TID)
		if lines[i] != wl {
			t.Errorf("row %d: %q, want %q", i, lines[i], wl)
		}
	}
	if lost := float64(p.io.tr.Lost()); lost != 0 {
		t.Errorf("lost %v", lost)
	}
	// The live metrics on /metrics count the same calls.
	res, err := http.Get("http://" + p.Addrs().Admin.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	calls, bytes := map[string]int{}, map[string]int64{}
	for _, w := range want {
		calls[w.Syscall]++
		bytes[w.Syscall] += w.Bytes
	}
	for sc, n := range calls {
		for _, line := range []string{
			fmt.Sprintf("sluice_iotrace_calls_total{syscall=%q} %d\n", sc, n),
			fmt.Sprintf("sluice_iotrace_bytes_total{syscall=%q} %d\n", sc, bytes[sc]),
			fmt.Sprintf("sluice_iotrace_call_duration_seconds_count{syscall=%q} %d\n", sc, n),
			fmt.Sprintf("sluice_iotrace_call_duration_seconds_bucket{syscall=%q,le=\"+Inf\"} %d\n", sc, n),
		} {
			if !strings.Contains(string(body), line) {
				t.Errorf("/metrics lacks %q", line)
			}
		}
	}
	for _, line := range []string{"sluice_iotrace_errors_total{syscall=\"openat\"} 1\n", "sluice_iotrace_lost_total 0\n",
		fmt.Sprintf("sluice_iotrace_queued_rows_total %d\n", len(want))} {
		if !strings.Contains(string(body), line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if d := counterValue(p.iom.dropped); d != 0 {
		t.Errorf("sluice_iotrace_dropped_rows_total %v", d)
	}
}

// TestIOTraceConfigErrors: a bad receivers.iotrace key fails New naming it.
func TestIOTraceConfigErrors(t *testing.T) {
	for key, mod := range map[string]func(*config.IOTrace){
		"receivers.iotrace.syscalls":           func(c *config.IOTrace) { c.Syscalls = "read,nosuch" },
		"receivers.iotrace.ring_bytes":         func(c *config.IOTrace) { c.RingBytes = 5000 },
		"receivers.iotrace.comm":               func(c *config.IOTrace) { c.Comm = "a-very-long-command" },
		"receivers.iotrace.attach":             func(c *config.IOTrace) { c.Attach = "kprobe" },
		"receivers.iotrace.tenant":             func(c *config.IOTrace) { c.Tenant = "a/b" },
		"receivers.iotrace.path_prefix":        func(c *config.IOTrace) { c.PathPrefix = "var/log" },
		"receivers.iotrace.path_glob":          func(c *config.IOTrace) { c.PathGlob = "/var/[a-" },
		"receivers.iotrace.metrics.interval":   func(c *config.IOTrace) { c.Metrics.Enabled, c.Metrics.Interval = true, 0 },
		"receivers.iotrace.metrics.path_depth": func(c *config.IOTrace) { c.Metrics.Enabled, c.Metrics.PathDepth = true, 0 },
		"receivers.iotrace.metrics.max_series": func(c *config.IOTrace) { c.Metrics.Enabled, c.Metrics.MaxSeries = true, 0 },
	} {
		cfg := testConfig(t)
		cfg.Receivers.IOTrace.Enabled = true
		mod(&cfg.Receivers.IOTrace)
		if _, err := New(cfg, Settings{Logger: testLogger(t)}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: New error %v, want one naming the key", key, err)
		}
	}
}

// TestIOTraceConfigFilters: the config's tid and path_glob reach the
// tracer as sluice trace's --tid and --path-glob do.
func TestIOTraceConfigFilters(t *testing.T) {
	cfg, err := config.Parse([]byte("receivers:\n  iotrace:\n    tid: 42\n    path_glob: /var/**/*.log\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := ioOptions(cfg.Receivers.IOTrace)
	if err != nil {
		t.Fatal(err)
	}
	if o.TID != 42 || o.PathGlob != "/var/**/*.log" {
		t.Errorf("tracer options TID %d, PathGlob %q; want 42 and /var/**/*.log", o.TID, o.PathGlob)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// TestIOTraceSplitsLargeBatches: a batch whose record would not fit in a
// queue segment (long distinct paths) is queued in halves, every row once,
// none dropped.
func TestIOTraceSplitsLargeBatches(t *testing.T) {
	q, err := queue.Open(queue.Options{Dir: t.TempDir(), SegmentBytes: 64 << 10, MaxBytes: 16 << 20, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	s := &ioSource{q: q, tenant: "t", log: testLogger(t), retry: time.Millisecond, m: newIOMetrics()}
	b := new(signal.IOEvents)
	const rows = 300
	for i := range rows {
		b.Append(&signal.IOEvent{Time: int64(i), Syscall: uint16(tracer.SysRead), Path: b.AppendString(fmt.Sprintf("/%04d/%s", i, strings.Repeat("p", 1000)))})
	}
	if err := s.queueBatch(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	r := q.NewReader(0)
	defer r.Close()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	var got []int64
	records := 0
	for {
		rec, _, err := r.Next(done)
		if err != nil {
			break
		}
		r, err := parseRecord(rec)
		if err != nil || r.Kind != signal.KindIOEvents || r.Enc != encIOWire || string(r.Tenant) != "t" {
			t.Fatalf("record: %+v err %v", r, err)
		}
		body := r.Body
		var io signal.IOEvents
		if err := tracer.DecodeWire(&io, body); err != nil {
			t.Fatal(err)
		}
		for i := range io.Len() {
			if want := fmt.Sprintf("/%04d/", io.Time[i]); !strings.HasPrefix(io.String(io.Path[i]), want) {
				t.Fatalf("row %d: path %.10q, want prefix %q", io.Time[i], io.String(io.Path[i]), want)
			}
			got = append(got, io.Time[i])
		}
		records++
	}
	if len(got) != rows || records < 2 || counterValue(s.m.dropped) != 0 || counterValue(s.m.queued) != rows {
		t.Fatalf("%d rows in %d records, dropped %v, queued %v; want %d rows in several records", len(got), records, counterValue(s.m.dropped), counterValue(s.m.queued), rows)
	}
	for i, v := range got {
		if v != int64(i) {
			t.Fatalf("row %d is %d: order lost", i, v)
		}
	}
}

// TestIOTraceQueueFull: while the queue refuses appends the source waits
// (counted) and, once told to give up, counts the batch as dropped: never
// a silent loss.
func TestIOTraceQueueFull(t *testing.T) {
	q, err := queue.Open(queue.Options{Dir: t.TempDir(), SegmentBytes: 256 << 10, MaxBytes: 1 << 20, Full: queue.Backpressure, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for {
		if _, err := q.Append(make([]byte, 100<<10)); err != nil {
			if !errors.Is(err, queue.ErrFull) {
				t.Fatal(err)
			}
			break
		}
	}
	s := &ioSource{q: q, tenant: "t", log: testLogger(t), retry: time.Millisecond, m: newIOMetrics()}
	b := new(signal.IOEvents)
	for i := range 10 {
		b.Append(&signal.IOEvent{Time: int64(i), Syscall: uint16(tracer.SysWrite), Path: b.AppendString(strings.Repeat("x", 20000))})
	}
	abort, cancel := context.WithCancel(context.Background())
	go func() {
		// Give up once the source has waited a few times.
		for counterValue(s.m.queueWaits) < 3 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if err := s.queueBatch(abort, b); err != nil {
		t.Fatal(err)
	}
	if d, w, qd := counterValue(s.m.dropped), counterValue(s.m.queueWaits), counterValue(s.m.queued); d != 10 || w < 3 || qd != 0 {
		t.Fatalf("dropped %v, waits %v, queued %v: want 10 dropped after at least 3 waits", d, w, qd)
	}
}
