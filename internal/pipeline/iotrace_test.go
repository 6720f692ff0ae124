package pipeline

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/tracer"
	"github.com/sluice-dev/sluice/internal/tracer/tracertest"
)

func TestMain(m *testing.M) {
	tracertest.MaybeRunChild()
	os.Exit(m.Run())
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
		"receivers.iotrace.syscalls":   func(c *config.IOTrace) { c.Syscalls = "read,nosuch" },
		"receivers.iotrace.ring_bytes": func(c *config.IOTrace) { c.RingBytes = 5000 },
		"receivers.iotrace.comm":       func(c *config.IOTrace) { c.Comm = "a-very-long-command" },
		"receivers.iotrace.attach":     func(c *config.IOTrace) { c.Attach = "kprobe" },
		"receivers.iotrace.tenant":     func(c *config.IOTrace) { c.Tenant = "a/b" },
	} {
		cfg := testConfig(t)
		cfg.Receivers.IOTrace.Enabled = true
		mod(&cfg.Receivers.IOTrace)
		if _, err := New(cfg, Settings{Logger: testLogger(t)}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: New error %v, want one naming the key", key, err)
		}
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
