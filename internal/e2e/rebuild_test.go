package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/corpustest"
)

// TestRebuildCatalogCountsOnce: `sluice lake rebuild-catalog` over a lake
// whose replaced files were not swept and sit in the Hive tree (as an
// older sluice left them, or a copy of the lake), with the catalog lost,
// counts every ingested row once: the compaction outputs' footer lineage
// (sluice.replaces) names their inputs, which the rebuild catalogues as
// replaced and moves to _trash/, so `lake ls` and a raw DuckDB glob both
// give the ingested count, and so does the sweep after.
func TestRebuildCatalogCountsOnce(t *testing.T) {
	python(t)
	lake := filepath.Join(t.TempDir(), "lake")
	logs := filepath.Join(corpustest.Dir(t), "otlp", "logs")
	for range 3 {
		if r := run(t, "ingest", "--lake", lake, "--progress", "never", "--target-file-size", "65536", logs); r.code != 0 {
			t.Fatalf("ingest: exit %d\n%s", r.code, r.stderr)
		}
	}
	ingested := totalRows(t, run(t, "lake", "ls", "--lake", lake).stdout)
	// Four inputs a job: several passes, so outputs of one pass are
	// inputs of the next and lineage chains form.
	if r := run(t, "compact", "--lake", lake, "--grace", "1h", "--max-inputs", "4"); r.code != 0 || !regexp.MustCompile(`in ([2-9]|\d\d+) passes`).MatchString(r.stdout) {
		t.Fatalf("compact: exit %d; want several passes\n%s%s", r.code, r.stdout, r.stderr)
	}
	trash := filepath.Join(lake, "_trash")
	moved := 0
	err := filepath.WalkDir(trash, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(trash, p)
		moved++
		return os.Rename(p, filepath.Join(lake, rel))
	})
	if err != nil || moved == 0 {
		t.Fatalf("moving %d replaced files back: %v", moved, err)
	}
	if g := globRows(t, lake, "logs")["logs"]; g <= int64(ingested) {
		t.Fatalf("setup: a glob reads %d rows with the replaced files back, want more than %d", g, ingested)
	}
	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		if err := os.Remove(filepath.Join(lake, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}

	r := run(t, "lake", "rebuild-catalog", "--lake", lake)
	if r.code != 0 || !strings.Contains(r.stdout, " live segments, "+strconv.Itoa(ingested)+" rows") ||
		!strings.Contains(r.stdout, strconv.Itoa(moved)+" segments replaced by compaction or rollups") {
		t.Fatalf("rebuild-catalog: exit %d; want %d live rows and %d replaced\n%s%s", r.code, ingested, moved, r.stdout, r.stderr)
	}
	if got := totalRows(t, run(t, "lake", "ls", "--lake", lake).stdout); got != ingested {
		t.Fatalf("lake ls after the rebuild: %d rows, want the %d ingested", got, ingested)
	}
	if g := globRows(t, lake, "logs")["logs"]; g != int64(ingested) {
		t.Fatalf("after the rebuild a glob reads %d rows, want the %d ingested", g, ingested)
	}
	// (It also compacts what the first run's passes left.)
	if r := run(t, "compact", "--lake", lake, "--grace", "0"); r.code != 0 || !strings.Contains(r.stdout, "swept ") {
		t.Fatalf("sweep: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := totalRows(t, run(t, "lake", "ls", "--lake", lake).stdout); got != ingested {
		t.Fatalf("lake ls after the sweep: %d rows, want the %d ingested", got, ingested)
	}
	if g := globRows(t, lake, "logs")["logs"]; g != int64(ingested) {
		t.Fatalf("after the sweep a glob reads %d rows, want the %d ingested", g, ingested)
	}
}
