package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"

	"github.com/sluice-dev/sluice/internal/tracer"
	"github.com/sluice-dev/sluice/internal/tracer/tracertest"
	"github.com/sluice-dev/sluice/internal/waittest"
)

func TestMain(m *testing.M) {
	tracertest.MaybeRunChild()
	os.Exit(m.Run())
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"4096": 4096, "64k": 64 << 10, "4KiB": 4 << 10, "16MiB": 16 << 20, "1G": 1 << 30, "2m": 2 << 20} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-4k", "16Q"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}

func TestTraceBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"trace", "--ring-size", "5000"},
		{"trace", "--syscalls", "read,nosuch"},
		{"trace", "--comm", "a-very-long-command-name"},
		{"trace", "--sort", "size"},
		{"trace", "--attach", "kprobe"},
		{"trace", "--headless", "--folded", "x", "--weight", "size"},
		{"trace", "--headless", "--duration", "1ms", "--path-prefix", "var/log"},
		{"trace", "--headless", "--duration", "1ms", "--path-glob", "*.log"},
		{"trace", "--headless", "--duration", "1ms", "--path-glob", "/var/[a-"},
		{"trace", "--headless", "--duration", "1ms", "--cgroup", "0"},
		{"trace", "--headless", "--duration", "1ms", "--cgroup", "999999999"},
		{"trace", "--headless", "--duration", "1ms", "--cgroup", os.TempDir()},
		{"trace", "--headless", "--duration", "1ms", "--cgroup", "no-such-cgroup"},
	} {
		var out, errb bytes.Buffer
		if code := Main(args, nil, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

// TestTraceMissingTask checks that a pid or tid filter naming no task is
// refused, instead of a trace that shows nothing.
func TestTraceMissingTask(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	for flag, want := range map[string]string{"--pid": "no such process", "--tid": "no such thread"} {
		var out, errb bytes.Buffer
		if code := Main([]string{"trace", "--headless", flag, "1073741824"}, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), want) {
			t.Errorf("%s of no task: exit %d, stderr %q; want 1 and %q", flag, code, errb.String(), want)
		}
	}
}

func TestTraceCheck(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main([]string{"trace", "--check"}, nil, &out, &errb)
	want := 0
	if tracer.Check().Err() != nil {
		want = 1
	}
	if code != want || !strings.Contains(out.String(), "privileges") || !strings.Contains(out.String(), "BTF") ||
		(want == 0 && !strings.Contains(out.String(), "attach")) {
		t.Fatalf("exit %d (want %d), output:\n%s%s", code, want, out.String(), errb.String())
	}
}

// startTrace runs `sluice trace args...` until it says it is tracing, and
// returns a function that waits for it and returns its stdout.
func startTrace(t *testing.T, args ...string) func() string {
	t.Helper()
	wait := startTraceErr(t, args...)
	return func() string { out, _ := wait(); return out }
}

// startTraceErr is startTrace whose wait returns stderr too.
func startTraceErr(t *testing.T, args ...string) func() (string, string) {
	t.Helper()
	pr, pw := io.Pipe()
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(append([]string{"trace"}, args...), nil, &out, pw)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var stderr strings.Builder
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "tracing (") {
			break
		}
	}
	drained := make(chan struct{})
	go func() { _, _ = io.Copy(&stderr, pr); close(drained) }()
	return func() (string, string) {
		code := waittest.Recv(t, done, "sluice trace to exit")
		waittest.Recv(t, drained, "sluice trace's stderr to close")
		if code != 0 {
			t.Fatalf("sluice trace exited %d: %s", code, stderr.String())
		}
		return out.String(), stderr.String()
	}
}

// TestTraceHeadlessStops: --count N stops the trace after exactly N calls
// (the summary and the recording hold those), and a headless --pid trace
// with neither --count nor --duration stops when its process exits, as
// strace -p does, saying so; a --tid trace when its thread does.
func TestTraceHeadlessStops(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	t.Run("count", func(t *testing.T) {
		dir := t.TempDir()
		child := tracertest.Start(t, dir, "")
		rec := filepath.Join(dir, "rec.parquet")
		wait := startTraceErr(t, "--headless", "--pid", strconv.Itoa(child.PID), "--count", "10", "--interval", "1h", "--out", rec)
		child.Go(t)
		out, _ := wait()
		if !strings.Contains(out, ": 10 calls") {
			t.Errorf("summary of --count 10:\n%s", out)
		}
		if py := os.Getenv("SLUICE_PYTHON"); py != "" {
			res, err := exec.Command(py, "-c", "import sys, pyarrow.parquet as pq; print(pq.read_metadata(sys.argv[1]).num_rows)", rec).CombinedOutput()
			if err != nil || strings.TrimSpace(string(res)) != "10" {
				t.Errorf("--out holds %s rows (%v), want 10", res, err)
			}
		}
	})
	// --pid ends with the process, --tid with the thread (the workload's
	// main thread, which ends with it).
	for _, target := range []string{"process", "thread"} {
		t.Run(target+" exit", func(t *testing.T) {
			dir := t.TempDir()
			child := tracertest.Start(t, dir, "")
			flag, id := "--pid", child.PID
			if target == "thread" {
				flag, id = "--tid", child.TID
			}
			wait := startTraceErr(t, "--headless", flag, strconv.Itoa(id), "--interval", "1h")
			child.Go(t)
			stopped := make(chan struct{})
			var out, errText string
			go func() { out, errText = wait(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(20 * time.Second):
				t.Fatalf("the trace did not stop when its %s exited", target)
			}
			if !strings.Contains(out, ": 28 calls") || !strings.Contains(errText, fmt.Sprintf("%s %d exited", target, id)) {
				t.Errorf("stdout:\n%s\nstderr:\n%s", out, errText)
			}
		})
	}
}

// TestTraceHeadless traces the known workload headless and finds its
// files, syscalls and bytes in the final summary.
func TestTraceHeadless(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	dir := t.TempDir()
	child := tracertest.Start(t, dir, "")
	folded := filepath.Join(dir, "io.folded")
	wait := startTrace(t, "--headless", "--pid", strconv.Itoa(child.PID), "--duration", "4s", "--interval", "1h", "--top", "50",
		"--folded", folded, "--weight", "bytes", "--metrics-addr", "127.0.0.1:0")
	child.Go(t)
	out := wait()
	// Folded stacks weighted by bytes: a.dat got 3 writes of 4096 bytes.
	fb, err := os.ReadFile(folded)
	if err != nil {
		t.Fatal(err)
	}
	comm := filepath.Base(os.Args[0])[:min(15, len(filepath.Base(os.Args[0])))]
	stack := comm + ";write;" + strings.ReplaceAll(strings.TrimPrefix(filepath.Join(dir, "a.dat"), "/"), "/", ";") + " 12288\n"
	if !strings.Contains(string(fb), stack) {
		t.Errorf("folded stacks lack %q:\n%s", stack, fb)
	}
	for _, want := range []string{"total", "lost 0", "pread64", "a.dat", "c.dat", "d.dat", "pre.dat", "12.0KiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, ": 28 calls") {
		t.Errorf("summary does not count the workload's 28 calls:\n%s", out)
	}
	// The final summary ends with each syscall's latency histogram: the
	// workload's 7 writes are all in the write line's buckets.
	writes := -1
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "write" || !strings.Contains(f[1], ":") {
			continue
		}
		writes = 0
		for _, cell := range f[1:] {
			n, err := strconv.Atoi(cell[strings.LastIndex(cell, ":")+1:])
			if err != nil {
				t.Fatalf("histogram cell %q: %v", cell, err)
			}
			writes += n
		}
	}
	if writes != 7 || !strings.Contains(out, "-- latency by syscall") {
		t.Errorf("write latency histogram counts %d calls, want 7:\n%s", writes, out)
	}
}

// TestTraceRecord traces the known workload into a standalone Parquet
// file and into the lake, and checks with DuckDB (Python, independent of
// sluice) and with sluice sql that both hold exactly the workload's calls,
// paths and bytes.
func TestTraceRecord(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	py := os.Getenv("SLUICE_PYTHON")
	if py == "" {
		corpustest.Missing(t, "SLUICE_PYTHON (a Python with duckdb)")
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "rec.parquet")
	lakeDir := filepath.Join(dir, "lake")
	child := tracertest.Start(t, work, "")
	wait := startTrace(t, "--headless", "--pid", strconv.Itoa(child.PID), "--duration", "4s", "--interval", "1h",
		"--out", out, "--record", "--lake", lakeDir, "--tenant", "acme")
	child.Go(t)
	wait()

	want := tracertest.Expected(work)
	var wantLines []string
	for _, w := range want {
		ret := strconv.FormatInt(w.Ret, 10)
		if w.Ret == -1 {
			ret = "fd"
		}
		wantLines = append(wantLines, strings.Join([]string{w.Syscall, w.Path, w.OldPath, strconv.FormatInt(w.Bytes, 10), ret}, "|"))
	}
	const row = `coalesce(path, '') || '|' || coalesce(old_path, '') || '|' || bytes || '|' || (CASE WHEN syscall LIKE 'open%' AND ret >= 0 THEN 'fd' ELSE ret::VARCHAR END)`
	script := `import duckdb, sys
con = duckdb.connect()
for src in sys.argv[1:]:
    print("==")
    q = "SELECT syscall || '|' || ` + strings.ReplaceAll(row, `'`, `\'`) + ` , pid, tid, errno FROM read_parquet('" + src + "', hive_partitioning=true) ORDER BY time"
    for r in con.execute(q).fetchall():
        print(r[0], r[1], r[2], r[3], sep="\t")
`
	cmd := exec.Command(py, "-c", script, out, filepath.Join(lakeDir, "io_events", "**", "*.parquet"))
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("duckdb: %v\n%s", err, res)
	}
	parts := strings.Split(strings.TrimSpace(string(res)), "==\n")
	if len(parts) != 3 {
		t.Fatalf("duckdb output:\n%s", res)
	}
	for i, name := range []string{"--out file", "lake io_events"} {
		lines := strings.Split(strings.TrimSpace(parts[i+1]), "\n")
		if len(lines) != len(want) {
			t.Fatalf("%s: %d rows, want %d:\n%s", name, len(lines), len(want), parts[i+1])
		}
		for j, l := range lines {
			f := strings.Split(l, "\t")
			if f[0] != wantLines[j] {
				t.Errorf("%s row %d: %q, want %q", name, j, f[0], wantLines[j])
			}
			if f[1] != strconv.Itoa(child.PID) || f[2] != strconv.Itoa(child.TID) {
				t.Errorf("%s row %d: pid/tid %s/%s, want %d/%d", name, j, f[1], f[2], child.PID, child.TID)
			}
		}
	}

	// sluice sql reads the table through the catalog.
	var sqlOut, sqlErr bytes.Buffer
	q := "SELECT count(*), sum(bytes), count(DISTINCT path), max(errno) FROM io_events WHERE syscall IN ('write', 'pread64', 'read')"
	if code := Main([]string{"sql", "--lake", lakeDir, "--tenant", "acme", "--format", "csv", q}, nil, &sqlOut, &sqlErr); code != 0 {
		t.Fatalf("sluice sql exit %d: %s", code, sqlErr.String())
	}
	var calls, bytesSum int64
	paths := map[string]bool{}
	for _, w := range want {
		if w.Syscall == "write" || w.Syscall == "pread64" || w.Syscall == "read" {
			calls++
			bytesSum += w.Bytes
			paths[w.Path] = true
		}
	}
	wantCSV := fmt.Sprintf("%d,%d,%d,0", calls, bytesSum, len(paths))
	if !strings.Contains(sqlOut.String(), wantCSV) {
		t.Errorf("sluice sql:\n%s\nwant a row %s", sqlOut.String(), wantCSV)
	}
}

// TestTraceHeadlessShowsLost floods a one-page ring buffer: the headless
// summary must count the lost records and warn about them.
func TestTraceHeadlessShowsLost(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	dir := t.TempDir()
	child := tracertest.Start(t, dir, "flood")
	// The trace ends when the flood's process does (no --duration): a
	// fixed duration ended it before the flood on a loaded machine, and
	// the stats made after it were neither shown nor lost.
	wait := startTrace(t, "--headless", "--pid", strconv.Itoa(child.PID), "--ring-size", "4KiB", "--interval", "1h")
	child.Go(t)
	out := wait()
	m := regexp.MustCompile(`total [^:]*: (\d+) calls .*, lost (\d+),`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no final summary line:\n%s", out)
	}
	calls, _ := strconv.Atoi(m[1])
	lost, _ := strconv.Atoi(m[2])
	if lost == 0 || !strings.Contains(out, "!! "+m[2]+" records lost in the kernel") {
		t.Fatalf("a flood of %d stats into a 4 KiB ring: lost %d, and the warning:\n%s", tracertest.FloodCalls, lost, out)
	}
	if calls+lost < tracertest.FloodCalls {
		t.Errorf("%d calls shown + %d lost < the %d stats made", calls, lost, tracertest.FloodCalls)
	}
}
