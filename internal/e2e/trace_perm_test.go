package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/tracer"
	"github.com/sluice-dev/sluice/internal/tracer/tracertest"
)

// TestTracePermissions runs sluice trace and sluice trace --check without
// the privileges eBPF needs, as an unprivileged user and as root with its
// capabilities dropped (as in a container): a clear error naming what is
// missing, exit 1, never a panic or a bare EPERM.
func TestTracePermissions(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		corpustest.Missing(t, "setpriv (util-linux)")
	}
	if os.Geteuid() != 0 {
		corpustest.Missing(t, "root (to drop to an unprivileged user)")
	}
	// The unprivileged user must be able to run the binary.
	dir, err := os.MkdirTemp("", "sluice-trace-perm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "sluice")
	copyFile(t, sluiceBin, bin)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"nobody", []string{"--reuid=65534", "--regid=65534", "--clear-groups"}, "not root and missing CAP_BPF and CAP_PERFMON"},
		{"root-without-caps", []string{"--bounding-set=-bpf,-perfmon,-sys_admin", "--inh-caps=-all"}, "root without CAP_SYS_ADMIN and missing CAP_BPF and CAP_PERFMON"},
	} {
		for _, trace := range [][]string{{"trace", "--headless", "--duration", "1s"}, {"trace", "--check"}} {
			cmd := exec.Command(setpriv, append(append(c.args, bin), trace...)...)
			cmd.Dir = dir
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			var ee *exec.ExitError
			code := 0
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			all := out.String() + errb.String()
			if code != 1 || !strings.Contains(all, c.want) || strings.Contains(all, "panic") || strings.Contains(all, "goroutine ") {
				t.Errorf("%s: sluice %v: exit %d, want 1 and %q:\n%s", c.name, trace, code, c.want, all)
			}
			if trace[1] == "--check" && !strings.Contains(out.String(), "FAIL privileges") {
				t.Errorf("%s: --check does not mark privileges FAIL:\n%s", c.name, out.String())
			}
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTraceOutDiskFull records a busy workload with --out into a small
// tmpfs: sluice trace stops with one error naming the full disk, exit 1,
// and leaves no partial file behind to fill the disk further.
func TestTraceOutDiskFull(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	full := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", full).CombinedOutput(); err != nil {
		corpustest.Missing(t, "mounting a tmpfs ("+strings.TrimSpace(string(out))+")")
	}
	defer func() { _ = exec.Command("umount", full).Run() }()
	work := t.TempDir()
	wl := exec.Command("sh", "-c", `while :; do : > f; done`)
	wl.Dir = work
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = wl.Process.Kill(); _ = wl.Wait() }()
	res := run(t, "trace", "--headless", "--pid", strconv.Itoa(wl.Process.Pid), "--duration", "5s", "--interval", "1h",
		"--out", filepath.Join(full, "io.parquet"))
	if res.code != 1 || strings.Count(res.stderr, "no space left on device") != 1 || strings.Contains(res.stderr, "panic") {
		t.Errorf("exit %d, want 1 and one error naming the full disk:\n%s", res.code, res.stderr)
	}
	if left, _ := os.ReadDir(full); len(left) != 0 {
		t.Errorf("files left on the full disk: %v", left)
	}
}
