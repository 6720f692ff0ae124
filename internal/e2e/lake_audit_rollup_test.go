package e2e

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// TestLakeAuditRollupKill9 kills `sluice rollup` with SIGKILL at several
// points of its run, then runs it to completion: the lake's rollups, as
// the catalog lists them (`sluice sql`) and as DuckDB reads them with a
// plain glob over the Hive tree, are exactly those of a lake rolled up in
// one clean run. A run killed between its swap and its moves left its
// outputs staged, and a later `sluice rollup` used to leave them there:
// the glob missed those hours.
func TestLakeAuditRollupKill9(t *testing.T) {
	metrics := filepath.Join(corpustest.Dir(t), "otlp", "metrics")
	clean, killed := t.TempDir(), t.TempDir()
	for _, dir := range []string{clean, killed} {
		if r := run(t, "ingest", "--lake", dir, "--progress", "never", metrics); r.code != 0 {
			t.Fatalf("ingest: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	if r := run(t, "rollup", "--lake", clean); r.code != 0 {
		t.Fatalf("clean rollup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	const ttl = "1s"
	for _, after := range []time.Duration{300 * time.Millisecond, 800 * time.Millisecond, 1500 * time.Millisecond, 2500 * time.Millisecond, 4 * time.Second} {
		cmd := exec.Command(sluiceBin, "rollup", "--lake", killed, "--lease-ttl", ttl)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(after)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		time.Sleep(1200 * time.Millisecond) // the killed run's leases expire
	}
	// The window between a swap and its moves is too short to hit by
	// timing: leave what a kill there leaves, as the catalog journals it.
	// Finish the rollups, then put one hour's outputs back in _staging/
	// with their pending moves.
	if r := run(t, "rollup", "--lake", killed, "--lease-ttl", ttl); r.code != 0 {
		t.Fatalf("rollup after the kills: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	unmoveOneHour(t, killed)
	r := run(t, "rollup", "--lake", killed, "--lease-ttl", ttl)
	if r.code != 0 {
		t.Fatalf("rollup after the kills: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("rollup after the kills:\n%s", r.stdout)

	const q = `SELECT tier, count(*), sum(count), round(sum(sum), 3) FROM metrics_rollup GROUP BY 1 ORDER BY 1`
	sqlOf := func(dir string) string {
		t.Helper()
		r := run(t, "sql", "--lake", dir, "--format", "csv", q)
		if r.code != 0 {
			t.Fatalf("sql: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	globOf := func(dir string) string {
		t.Helper()
		script := `import duckdb, sys
con = duckdb.connect()
q = sys.argv[2].replace("FROM metrics_rollup", "FROM read_parquet('" + sys.argv[1] + "/metrics_rollup/**/*.parquet', hive_partitioning=true)")
for row in con.execute(q).fetchall():
    print(",".join(str(v) for v in row))
`
		out, err := exec.Command(python(t), "-c", script, dir, q).CombinedOutput()
		if err != nil {
			t.Fatalf("duckdb: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	want := globOf(clean)
	if want == "" {
		t.Fatal("the clean rollup wrote nothing")
	}
	if got := globOf(killed); got != want {
		t.Errorf("a glob over the Hive tree after kill -9 and a rerun reads\n%s\nwant (a clean run)\n%s", got, want)
	}
	if got, w := sqlOf(killed), sqlOf(clean); got != w {
		t.Errorf("sluice sql after kill -9 and a rerun reads\n%s\nwant (a clean run)\n%s", got, w)
	}
}

// unmoveOneHour leaves the lake at dir as a rollup killed between its swap
// and its moves would: one hour's live rollup files back in _staging/,
// with the moves into place pending in the catalog, in one transaction's
// time as a swap records them.
func unmoveOneHour(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	segs, err := cat.List(ctx, catalog.Filter{Table: "metrics_rollup"})
	cat.Close()
	if err != nil || len(segs) == 0 {
		t.Fatalf("rollup segments: %d, %v", len(segs), err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UnixNano()
	for _, s := range segs {
		if s.Day != segs[0].Day || s.Hour != segs[0].Hour || s.Tenant != segs[0].Tenant {
			continue
		}
		staged := catalog.StagingPath(s.Path)
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(staged)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, s.Path), filepath.Join(dir, staged)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO moves (src, dst, created_ns) VALUES (?, ?, ?)`, staged, s.Path, now); err != nil {
			t.Fatal(err)
		}
	}
}
