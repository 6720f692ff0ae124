package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/tracer"
	"github.com/sluice-dev/sluice/internal/tracer/tracertest"
)

// traceNamesWorkload is a Python process that, once sent SIGUSR1, writes
// files with hostile names (a space, ';', '%', a newline, bytes that are
// not UTF-8, a name ending in a number) under a command name that is not
// UTF-8 either: file i gets (i+1)*100 bytes.
const traceNamesWorkload = `import ctypes, os, signal, sys
d = os.fsencode(sys.argv[1])
libc = ctypes.CDLL(None)
libc.prctl(15, b"w\xffrk;er x", 0, 0, 0)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print(os.getpid(), flush=True)
signal.sigwait({signal.SIGUSR1})
for i, n in enumerate([b"plain.dat", b"sp ace;semi%.dat", b"new\nline.dat", b"bad\xff\xfe.dat", b"run 2"]):
    fd = os.open(d + b"/" + n, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    os.write(fd, b"x" * ((i + 1) * 100))
    os.close(fd)
os._exit(0)
`

// traceNames are the workload's file names as io_events records them.
var traceNames = []string{"plain.dat", "sp ace;semi%.dat", "new\nline.dat", `bad\xff\xfe.dat`, "run 2"}

// TestTraceOutFile records the hostile-names workload with --out and
// --folded, stopped by SIGINT, SIGTERM, SIGHUP and --duration, and reads
// the file back with pyarrow and DuckDB: complete (footer written), the
// column types and time units of docs/schema.md, nulls where there is no
// value, and every name as valid UTF-8. The folded stacks must parse as
// flamegraph.pl and inferno parse them.
func TestTraceOutFile(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	py := python(t)
	for _, stop := range []string{"SIGINT", "SIGTERM", "SIGHUP", "duration"} {
		t.Run(stop, func(t *testing.T) {
			dir := t.TempDir()
			work := filepath.Join(dir, "work")
			if err := os.Mkdir(work, 0o755); err != nil {
				t.Fatal(err)
			}
			wl := exec.Command(py, "-c", traceNamesWorkload, work)
			wout, err := wl.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			wl.Stderr = os.Stderr
			if err := wl.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = wl.Process.Kill(); _ = wl.Wait() })
			line, err := bufio.NewReader(wout).ReadString('\n')
			if err != nil {
				t.Fatalf("workload: %v", err)
			}
			pid := strings.TrimSpace(line)

			out, folded := filepath.Join(dir, "io.parquet"), filepath.Join(dir, "io.folded")
			args := []string{"trace", "--headless", "--pid", pid, "--interval", "1h", "--out", out, "--folded", folded, "--weight", "bytes"}
			if stop == "duration" {
				args = append(args, "--duration", "3s")
			}
			start := time.Now()
			tr := exec.Command(sluiceBin, args...)
			stderr, err := tr.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stdout strings.Builder
			tr.Stdout = &stdout
			if err := tr.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tr.Process.Kill(); _ = tr.Wait() })
			var errText strings.Builder
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				errText.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), "tracing (") {
					break
				}
			}
			go func() {
				for sc.Scan() {
					errText.WriteString(sc.Text() + "\n")
				}
			}()
			if err := wl.Process.Signal(syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			if err := wl.Wait(); err != nil {
				t.Fatalf("workload: %v", err)
			}
			switch stop {
			case "SIGINT":
				_ = tr.Process.Signal(syscall.SIGINT)
			case "SIGTERM":
				_ = tr.Process.Signal(syscall.SIGTERM)
			case "SIGHUP":
				_ = tr.Process.Signal(syscall.SIGHUP)
			}
			if err := tr.Wait(); err != nil {
				t.Fatalf("sluice trace: %v\n%s", err, errText.String())
			}
			end := time.Now()
			if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
			checkTraceOut(t, py, out, work, start, end)
			checkFolded(t, folded, work)
		})
	}
}

// checkTraceOut reads out with pyarrow and DuckDB.
func checkTraceOut(t *testing.T, py, out, work string, start, end time.Time) {
	t.Helper()
	script := `import json, sys, duckdb, pyarrow.parquet as pq
out, work = sys.argv[1], sys.argv[2]
t = pq.read_table(out)
ns = t.set_column(t.schema.get_field_index("time"), "time", t.column("time").cast("int64"))
rows = [r for r in ns.to_pylist() if (r["path"] or "").startswith(work + "/")]
res = {
  "types": {f.name: str(f.type) for f in t.schema},
  "nullable": {f.name: f.nullable for f in t.schema},
  "rows": [[r["syscall"], r["path"], r["old_path"], r["bytes"], r["comm"], r["time"], r["duration_ns"], r["errno"]] for r in rows],
  "duck": duckdb.sql(f"SELECT path, sum(bytes)::BIGINT, count(*), epoch_us(min(time)::TIMESTAMPTZ), typeof(min(time)) FROM read_parquet('{out}') WHERE starts_with(path, '{work}/') GROUP BY path ORDER BY path").fetchall(),
}
print(json.dumps(res))
`
	cmd := exec.Command(py, "-c", script, out, work)
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pyarrow/duckdb: %v\n%s", err, res)
	}
	var got struct {
		Types    map[string]string
		Nullable map[string]bool
		Rows     [][]any
		Duck     [][]any
	}
	if err := json.Unmarshal(res, &got); err != nil {
		t.Fatalf("%v: %s", err, res)
	}
	wantTypes := map[string]string{
		"time": "timestamp[ns, tz=UTC]", "duration_ns": "int64", "gap_ns": "int64", "pid": "uint32", "tid": "uint32",
		"comm": "string", "syscall": "string", "fd": "int32", "ret": "int64", "errno": "int32", "bytes": "int64",
		"path": "string", "old_path": "string", "flags": "uint64", "cgroup_id": "uint64", "host_name": "string",
	}
	for col, typ := range wantTypes {
		if got.Types[col] != typ {
			t.Errorf("column %s: type %q, want %q", col, got.Types[col], typ)
		}
	}
	if !got.Nullable["path"] || !got.Nullable["old_path"] || got.Nullable["time"] {
		t.Errorf("nullability: %v", got.Nullable)
	}
	// openat, write, close per name, in order.
	if len(got.Rows) != 3*len(traceNames) {
		t.Fatalf("%d rows under %s, want %d: %v", len(got.Rows), work, 3*len(traceNames), got.Rows)
	}
	for i, r := range got.Rows {
		n := i / 3
		sc := []string{"openat", "write", "close"}[i%3]
		path := work + "/" + traceNames[n]
		bytes := 0.0
		if sc == "write" {
			bytes = float64((n + 1) * 100)
		}
		if r[0] != sc || r[1] != path || r[2] != nil || r[3] != bytes || r[4] != `w\xffrk;er x` || r[7] != 0.0 {
			t.Errorf("row %d: %q, want %s %q old_path null, %v bytes, comm %q, errno 0", i, r, sc, path, bytes, `w\xffrk;er x`)
		}
		ts, dur := int64(r[5].(float64)), r[6].(float64)
		if ts < start.UnixNano() || ts > end.UnixNano() || dur <= 0 || dur > 1e9 {
			t.Errorf("row %d: time %d (want within %d..%d ns), duration %v ns", i, ts, start.UnixNano(), end.UnixNano(), dur)
		}
	}
	if len(got.Duck) != len(traceNames) {
		t.Fatalf("DuckDB: %v", got.Duck)
	}
	for _, r := range got.Duck {
		name := strings.TrimPrefix(r[0].(string), work+"/")
		n := -1
		for i, w := range traceNames {
			if w == name {
				n = i
			}
		}
		us := int64(r[3].(float64))
		if n < 0 || r[1] != float64((n+1)*100) || r[2] != 3.0 || us < start.UnixMicro() || us > end.UnixMicro() || !strings.HasPrefix(r[4].(string), "TIMESTAMP") {
			t.Errorf("DuckDB row %q: want a workload file with %d bytes in 3 calls, a TIMESTAMP within the run", r, (n+1)*100)
		}
	}
}

// flamegraphLine is how flamegraph.pl (and inferno) split a folded line
// into its stack and weight; a stack that still ends in a number after a
// space is read as a differential line.
var flamegraphLine = regexp.MustCompile(`^(.*)\s+?(\d+(?:\.\d*)?)$`)

func checkFolded(t *testing.T, path, work string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(b) {
		t.Errorf("folded stacks are not UTF-8:\n%q", b)
	}
	prefix := strings.ReplaceAll(strings.TrimPrefix(work, "/"), "/", ";")
	weights := map[string]int{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		m := flamegraphLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("folded line %q has no weight", line)
			continue
		}
		if flamegraphLine.MatchString(m[1]) || strings.ContainsAny(m[1], " \t\r") {
			t.Errorf("folded stack %q would be misread (a space, or a differential second weight)", m[1])
		}
		if i := strings.Index(m[1], ";"+prefix+";"); i >= 0 {
			w, _ := strconv.Atoi(m[2])
			weights[m[1]] += w
		}
	}
	for n, name := range []string{"plain.dat", "sp%20ace%3Bsemi%25.dat", "new%0Aline.dat", `bad\xff\xfe.dat`, "run%202"} {
		stack := fmt.Sprintf(`w\xffrk%%3Ber%%20x;write;%s;%s`, prefix, name)
		if weights[stack] != (n+1)*100 {
			t.Errorf("folded stack %q weighs %d bytes, want %d; stacks %v", stack, weights[stack], (n+1)*100, weights)
		}
	}
}

// TestTraceStdoutClosed pipes headless summaries into a reader that goes
// away after the first line (as `| head` does): sluice trace must stop by
// itself, exit 0 and complete its --out file, instead of dying of
// SIGPIPE with the recording lost.
func TestTraceStdoutClosed(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	py := python(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "io.parquet")
	tr := exec.Command(sluiceBin, "trace", "--headless", "--pid", strconv.Itoa(os.Getpid()), "--interval", "300ms", "--out", out)
	stdout, err := tr.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	tr.Stderr = &stderr
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Process.Kill(); _ = tr.Wait() })
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	stdout.Close()
	done := make(chan error, 1)
	go func() { done <- tr.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sluice trace: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("sluice trace still runs 20 s after its stdout closed\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "stdout closed") {
		t.Errorf("stderr does not say why it stopped:\n%s", stderr.String())
	}
	if res, err := exec.Command(py, "-c", "import sys, pyarrow.parquet as pq; print(pq.read_table(sys.argv[1]).num_rows)", out).CombinedOutput(); err != nil {
		t.Errorf("--out after stdout closed: %v\n%s", err, res)
	}
}
