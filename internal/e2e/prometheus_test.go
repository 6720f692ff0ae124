package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
)

// startPrometheus runs Debian's real Prometheus ($SLUICE_PROMETHEUS, else
// prometheus on PATH; make test installs it) listening on addr with the
// configuration cfg and the extra flags, and waits until it is ready. It
// returns its base URL and its stderr.
func startPrometheus(t *testing.T, addr, cfg string, flags ...string) (string, *lockedBuffer) {
	t.Helper()
	bin := os.Getenv("SLUICE_PROMETHEUS")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("prometheus"); err != nil {
			corpustest.Missing(t, "prometheus (Debian package prometheus; make test installs it)")
		}
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--config.file=" + cfgPath, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--log.level=warn"}, flags...)
	cmd := exec.Command(bin, args...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	base := "http://" + addr
	for start := time.Now(); time.Since(start) < 60*time.Second; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base, stderr
			}
		}
	}
	t.Fatalf("prometheus did not become ready:\n%s", stderr)
	return "", nil
}
