package pipeline

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/processor"
)

// TestRulesReloadTakesOnlySettledFiles: a rules file being written in
// place is not taken half written, even when the half parses (it would
// put a part of the rules in force); it is taken once it stays the same.
// A file replaced by a symlink swap (as Kubernetes updates a ConfigMap) is
// taken at the first check, and a removed file keeps the old rules and is
// logged once, not every interval.
func TestRulesReloadTakesOnlySettledFiles(t *testing.T) {
	defer func(f func(time.Duration)) { reloadSettle = f }(reloadSettle)
	var whileSettling func() // what the writer does while the reload waits
	reloadSettle = func(time.Duration) {
		if whileSettling != nil {
			whileSettling()
			whileSettling = nil
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	rule := func(name string) string {
		return "  - {name: " + name + ", action: drop, match: '{x=\"" + name + "\"}'}\n"
	}
	full := "metrics:\n" + rule("a") + rule("b") + rule("c")
	if err := os.WriteFile(path, []byte("metrics:\n"+rule("old")+rule("older")), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	pm, _ := processor.NewMetrics(nil)
	var dst atomic.Pointer[processor.Rules]
	l := &rulesLoader{path: path, dst: &dst, pm: pm, p: &Pipeline{log: slog.New(slog.NewTextHandler(&logs, nil))},
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "f"}), reloads: prometheus.NewCounter(prometheus.CounterOpts{Name: "r"})}
	l.reload(true)
	if n := dst.Load().MetricRules(); n != 2 {
		t.Fatalf("%d rules in force, want 2", n)
	}

	// Half written: the first rule only (valid YAML), the rest 50 ms later.
	if err := os.WriteFile(path, []byte("metrics:\n"+rule("a")), 0o644); err != nil {
		t.Fatal(err)
	}
	whileSettling = func() { os.WriteFile(path, []byte(full), 0o644) }
	l.reload(false)
	if n := dst.Load().MetricRules(); n == 1 {
		t.Fatal("a half-written file was taken: 1 rule in force")
	}
	l.reload(false)
	if n := dst.Load().MetricRules(); n != 3 {
		t.Fatalf("the settled file was not taken: %d rules in force, want 3", n)
	}

	// A ConfigMap-style update: ..data -> ..v2 swapped by rename.
	v1, v2 := filepath.Join(dir, "v1"), filepath.Join(dir, "v2")
	os.Mkdir(v1, 0o755)
	os.Mkdir(v2, 0o755)
	os.WriteFile(filepath.Join(v1, "rules.yaml"), []byte(full), 0o644)
	os.WriteFile(filepath.Join(v2, "rules.yaml"), []byte("metrics:\n"+rule("swapped")), 0o644)
	data := filepath.Join(dir, "..data")
	if err := os.Symlink("v1", data); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	os.Symlink(filepath.Join("..data", "rules.yaml"), link)
	l.path = link
	l.reload(false) // same content as in force: nothing to do
	tmp := filepath.Join(dir, "..data_tmp")
	os.Symlink("v2", tmp)
	if err := os.Rename(tmp, data); err != nil {
		t.Fatal(err)
	}
	l.reload(false)
	if n := dst.Load().MetricRules(); n != 1 {
		t.Fatalf("after the symlink swap %d rules in force, want 1", n)
	}

	// Removed: the old rules stay, logged once.
	os.Remove(filepath.Join(v2, "rules.yaml"))
	logs.Reset()
	for range 3 {
		l.reload(false)
	}
	if n := dst.Load().MetricRules(); n != 1 {
		t.Fatalf("after removal %d rules in force, want the old 1", n)
	}
	if c := bytes.Count(logs.Bytes(), []byte("rules reload failed")); c != 1 {
		t.Fatalf("a removed file logged %d times in 3 checks, want once:\n%s", c, logs.String())
	}
}
