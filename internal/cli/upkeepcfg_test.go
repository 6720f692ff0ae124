package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConfig writes a 'sluice run' config for the lake at root.
func writeConfig(t *testing.T, root, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte("lake:\n  root: "+root+"\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runMain(args ...string) (int, string) {
	var out, errOut bytes.Buffer
	code := Main(args, nil, &out, &errOut)
	return code, out.String() + errOut.String()
}

// TestCompactConfig: `sluice compact --config` takes the lake root,
// catalog and lake.max_attribute_columns of a run config (the merged file
// has at most 2 attribute columns and an overflow column, every record
// kept), and upkeep.compaction.min_age: with the config's 10m hours that
// ended minutes ago are left alone, with min_age 0 they are compacted.
func TestCompactConfig(t *testing.T) {
	root := capLake(t)
	want, _, _, _ := liveLogs(t, root)

	// The test hour ended long ago: a 100000h min_age leaves it.
	old := writeConfig(t, root, "  max_attribute_columns: 2\nupkeep:\n  sweep_grace: 0s\n  compaction:\n    min_age: 100000h\n")
	if code, msg := runMain("compact", "--config", old); code != 0 {
		t.Fatalf("compact --config: exit %d: %s", code, msg)
	}
	if _, files, _, _ := liveLogs(t, root); files != 2 {
		t.Fatalf("upkeep.compaction.min_age 100000h: %d files, want the 2 inputs untouched", files)
	}
	// A flag given wins over the config.
	if code, msg := runMain("compact", "--config", old, "--min-age", "0"); code != 0 {
		t.Fatalf("compact --config --min-age 0: exit %d: %s", code, msg)
	}
	got, files, cols, ovf := liveLogs(t, root)
	if files != 1 || cols > 2 || !ovf {
		t.Fatalf("compacted with the config's lake.max_attribute_columns 2: %d files, %d attribute columns, overflow %v", files, cols, ovf)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows changed by compaction: %d rows, want %d", len(got), len(want))
	}

	bad := writeConfig(t, root, "upkeep:\n  compaction:\n    min_age: -1s\n")
	code, msg := runMain("compact", "--config", bad)
	if code == 0 || !strings.Contains(msg, bad) || !strings.Contains(msg, "min_age") {
		t.Fatalf("invalid config: exit %d: %s", code, msg)
	}
}

// TestRollupConfig: `sluice rollup --config` rolls up into the config's
// upkeep.rollup.tiers only (5m: 12 windows per series) unless --tiers is
// given.
func TestRollupConfig(t *testing.T) {
	root := rollupLake(t)
	cfg := writeConfig(t, root, "upkeep:\n  rollup:\n    tiers: [5m]\n    min_age: 0s\n")
	if code, msg := runMain("rollup", "--config", cfg); code != 0 {
		t.Fatalf("rollup --config: exit %d: %s", code, msg)
	}
	windows, _ := rollupWindows(t, root)
	if len(windows) != 4*12 {
		t.Fatalf("tiers [5m] from the config: %d windows, want %d", len(windows), 4*12)
	}
	for _, w := range windows {
		if !strings.HasPrefix(w, "5m ") {
			t.Fatalf("window of a tier the config does not name: %s", w)
		}
	}
}
