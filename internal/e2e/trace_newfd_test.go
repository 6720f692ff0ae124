package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-dev/sluice/internal/tracer"
	"github.com/sluice-dev/sluice/internal/tracer/tracertest"
)

// traceNewFDWorkload is a Python process that, once sent SIGUSR1, moves
// bytes through fds that have no path (a pipe, a socketpair, an eventfd, a
// memfd), closes them and exits at once, leaving nothing for a late look
// in /proc. It prints the names /proc/self/fd gave each fd, as JSON.
const traceNewFDWorkload = `import json, os, signal, socket
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print(os.getpid(), flush=True)
signal.sigwait({signal.SIGUSR1})
r, w = os.pipe()
os.write(w, b"p" * 100)
os.read(r, 100)
a, b = socket.socketpair()
os.write(a.fileno(), b"s" * 200)
os.read(b.fileno(), 200)
e = os.eventfd(0)
os.write(e, (1).to_bytes(8, "little"))
m = os.memfd_create("e2e buf")
os.write(m, b"m" * 300)
names = {}
for what, fd in (("pipe_r", r), ("pipe_w", w), ("sock_a", a.fileno()), ("sock_b", b.fileno()), ("eventfd", e), ("memfd", m)):
    names[what] = [fd, os.readlink("/proc/self/fd/%d" % fd)]
for fd in (r, w, e, m):
    os.close(fd)
a.close()
b.close()
print(json.dumps(names), flush=True)
os._exit(0)
`

// TestTraceNewFDNames traces the workload with --out and reads the
// recording back with DuckDB: every read and write through a pipe, a
// socket, an eventfd and a memfd carries the name /proc gave that fd
// (pipe:[ino], socket:[ino], anon_inode:[eventfd], /memfd:NAME (deleted)),
// though the process closed them and exited before sluice could look.
func TestTraceNewFDNames(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	py := python(t)
	dir := t.TempDir()
	wl := exec.Command(py, "-c", traceNewFDWorkload)
	wout, err := wl.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	wl.Stderr = os.Stderr
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wl.Process.Kill(); _ = wl.Wait() })
	rd := bufio.NewReader(wout)
	line, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("workload: %v", err)
	}
	pid := strings.TrimSpace(line)

	out := filepath.Join(dir, "io.parquet")
	tr := exec.Command(sluiceBin, "trace", "--headless", "--pid", pid, "--interval", "1h", "--out", out)
	stderr, err := tr.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
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
	namesLine, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("workload: %v", err)
	}
	if err := wl.Wait(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	// A headless --pid trace ends by itself once the process has exited.
	if err := tr.Wait(); err != nil {
		t.Fatalf("sluice trace: %v\n%s", err, errText.String())
	}
	var names map[string][2]any
	if err := json.Unmarshal([]byte(namesLine), &names); err != nil {
		t.Fatalf("workload names %q: %v", namesLine, err)
	}

	script := `import json, sys, duckdb
rows = duckdb.connect().execute("SELECT syscall, fd, coalesce(path, ''), bytes FROM read_parquet(?) ORDER BY time", [sys.argv[1]]).fetchall()
print(json.dumps(rows))
`
	res, err := exec.Command(py, "-c", script, out).CombinedOutput()
	if err != nil {
		t.Fatalf("duckdb: %v\n%s", err, res)
	}
	var rows [][4]any
	if err := json.Unmarshal(res, &rows); err != nil {
		t.Fatalf("duckdb output %q: %v", res, err)
	}
	type key struct {
		sc string
		fd int
	}
	got := map[key][]string{}
	for _, r := range rows {
		k := key{r[0].(string), int(r[1].(float64))}
		got[k] = append(got[k], r[2].(string)+"|"+jsonNum(r[3]))
	}
	for what, want := range map[string]struct {
		sc    string
		bytes string
	}{
		"pipe_w": {"write", "100"}, "pipe_r": {"read", "100"},
		"sock_a": {"write", "200"}, "sock_b": {"read", "200"},
		"eventfd": {"write", "8"}, "memfd": {"write", "300"},
	} {
		n := names[what]
		fd, name := int(n[0].(float64)), n[1].(string)
		k := key{want.sc, fd}
		if len(got[k]) != 1 || got[k][0] != name+"|"+want.bytes {
			t.Errorf("%s (fd %d, %q in /proc): %s rows %q, want one of %s bytes with that path", what, fd, name, want.sc, got[k], want.bytes)
		}
		if close := got[key{"close", fd}]; len(close) != 1 || !strings.HasPrefix(close[0], name+"|") {
			t.Errorf("%s: close rows %q, want one on %q", what, close, name)
		}
	}
	if !strings.HasPrefix(names["pipe_r"][1].(string), "pipe:[") || names["pipe_r"][1] != names["pipe_w"][1] ||
		names["sock_a"][1] == names["sock_b"][1] || names["memfd"][1] != "/memfd:e2e buf (deleted)" {
		t.Errorf("unexpected names from /proc: %v", names)
	}
	if !strings.Contains(errText.String(), "process "+pid+" exited") {
		t.Errorf("sluice trace did not say why it stopped:\n%s", errText.String())
	}
}

// jsonNum formats a JSON number as an integer.
func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
