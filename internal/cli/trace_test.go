package cli

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/tracer"
	"github.com/sluice-dev/sluice/internal/tracer/tracertest"
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
	} {
		var out, errb bytes.Buffer
		if code := Main(args, nil, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errb.String())
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
	if code != want || !strings.Contains(out.String(), "privileges") || !strings.Contains(out.String(), "BTF") {
		t.Fatalf("exit %d (want %d), output:\n%s%s", code, want, out.String(), errb.String())
	}
}

// startTrace runs `sluice trace args...` until it says it is tracing, and
// returns a function that waits for it and returns its stdout.
func startTrace(t *testing.T, args ...string) func() string {
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
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return func() string {
		if code := <-done; code != 0 {
			t.Fatalf("sluice trace exited %d: %s", code, stderr.String())
		}
		return out.String()
	}
}

// TestTraceHeadless traces the known workload headless and finds its
// files, syscalls and bytes in the final summary.
func TestTraceHeadless(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	dir := t.TempDir()
	child := tracertest.Start(t, dir, "")
	wait := startTrace(t, "--headless", "--pid", strconv.Itoa(child.PID), "--duration", "1500ms", "--interval", "1h", "--top", "50")
	child.Go(t)
	out := wait()
	for _, want := range []string{"total", "lost 0", "pread64", "a.dat", "c.dat", "d.dat", "pre.dat", "12.0KiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, ": 28 calls") {
		t.Errorf("summary does not count the workload's 28 calls:\n%s", out)
	}
}
