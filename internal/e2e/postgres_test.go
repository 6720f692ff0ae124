package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestPostgresCatalog ingests the corpus logs with the catalog in
// PostgreSQL, lists them through it, rebuilds it from the files, and runs
// `sluice run` against it: no SQLite file may appear in the lake.
func TestPostgresCatalog(t *testing.T) {
	server := pgtest.Start(t)
	logs := filepath.Join(corpustest.Dir(t), "otlp", "logs")

	t.Run("ingest", func(t *testing.T) {
		dsn := pgtest.Schema(t, server)
		lake := t.TempDir()
		r := run(t, "ingest", "--lake", lake, "--catalog", dsn, "--progress", "never", logs)
		if r.code != 0 {
			t.Fatalf("ingest exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, " 6901 logs,") {
			t.Errorf("summary does not report the corpus logs:\n%s", r.stdout)
		}
		noSQLite(t, lake)
		before := run(t, "lake", "ls", "--lake", lake, "--catalog", dsn)
		if before.code != 0 {
			t.Fatalf("lake ls: exit %d\n%s%s", before.code, before.stdout, before.stderr)
		}
		assertTotalRows(t, before.stdout, 6901)
		files := parquetFiles(t, lake)
		if len(files) == 0 {
			t.Fatal("no Parquet files in the lake")
		}
		for _, f := range files {
			if !strings.Contains(before.stdout, f) {
				t.Errorf("lake ls through PostgreSQL does not list %s", f)
			}
		}
		// An unreachable catalog fails the command, without showing the
		// password.
		if r := run(t, "lake", "ls", "--lake", lake, "--catalog", "postgres://sluice:pw@127.0.0.1:1/none?sslmode=disable"); r.code == 0 ||
			strings.Contains(r.stderr, ":pw@") {
			t.Errorf("unreachable catalog: exit %d\n%s", r.code, r.stderr)
		}

		rb := run(t, "lake", "rebuild-catalog", "--lake", lake, "--catalog", dsn)
		if rb.code != 0 {
			t.Fatalf("rebuild-catalog exit %d\n%s%s", rb.code, rb.stdout, rb.stderr)
		}
		after := run(t, "lake", "ls", "--lake", lake, "--catalog", dsn)
		if after.stdout != before.stdout {
			t.Errorf("catalog after rebuild differs:\nbefore:\n%s\nafter:\n%s", before.stdout, after.stdout)
		}
		noSQLite(t, lake)
	})

	t.Run("run", func(t *testing.T) {
		dsn := pgtest.Schema(t, server)
		lake := t.TempDir()
		cfg := postgresRunConfig(t, lake, dsn)
		g := newLoadGen(50)
		s := startServer(t, cfg)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		wg := g.run(t, ctx, s.http, 4)
		time.Sleep(2 * time.Second)
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code, _ := s.wait(t, runShutdownTimeout+5*time.Second)
		cancel()
		wg.Wait()
		if code != 0 {
			t.Fatalf("exit %d after SIGTERM\n%s", code, s.stderr)
		}
		acked := g.ackedCount()
		if acked == 0 {
			t.Fatalf("nothing acknowledged:\n%s", s.stderr)
		}
		noSQLite(t, lake)
		ls := run(t, "lake", "ls", "--lake", lake, "--catalog", dsn, "--table", "logs")
		if ls.code != 0 {
			t.Fatalf("lake ls: exit %d\n%s%s", ls.code, ls.stdout, ls.stderr)
		}
		// Every file written is committed, with every acknowledged record.
		for _, f := range parquetFiles(t, lake) {
			if !strings.Contains(ls.stdout, f) {
				t.Errorf("file %s is not in the PostgreSQL catalog", f)
			}
		}
		if rows := totalRows(t, ls.stdout); rows < acked {
			t.Errorf("catalog lists %d rows, %d records were acknowledged", rows, acked)
		}
		// The queue position went to PostgreSQL with the segments: a
		// restart has nothing to replay.
		s2 := startServer(t, cfg)
		s2.cmd.Process.Signal(syscall.SIGTERM)
		if code, _ := s2.wait(t, runShutdownTimeout+5*time.Second); code != 0 {
			t.Fatalf("second stop: exit %d\n%s", code, s2.stderr)
		}
		if !strings.Contains(s2.stderr.String(), "replay_bytes=0") {
			t.Errorf("restart replayed data the PostgreSQL catalog had committed:\n%s", s2.stderr)
		}
	})
}

// postgresRunConfig is runConfig with the catalog in PostgreSQL, checked
// by `sluice validate`.
func postgresRunConfig(t *testing.T, lakeDir, dsn string) string {
	t.Helper()
	cfg := fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
admin:
  addr: 127.0.0.1:0
query:
  addr: ""
queue:
  segment_bytes: 32MiB
  max_bytes: 256MiB
lake:
  root: %s
  flush_interval: 400ms
  target_file_bytes: 64KiB
catalog:
  dsn: ${SLUICE_TEST_CATALOG_DSN}
shutdown_timeout: %s
`, lakeDir, runShutdownTimeout)
	t.Setenv("SLUICE_TEST_CATALOG_DSN", dsn) // inherited by the sluice processes
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "validate", "--config", p); r.code != 0 || !strings.Contains(r.stdout, "config OK") {
		t.Fatalf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return p
}

func noSQLite(t *testing.T, lake string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(lake, "catalog.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an SQLite catalog appeared in the lake (stat: %v)", err)
	}
}

// parquetFiles lists the lake's visible Parquet files, slash-separated and
// relative to the root, as `lake ls` prints them.
func parquetFiles(t *testing.T, lake string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(lake, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), "_") || strings.HasPrefix(d.Name(), ".")) && p != lake {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".parquet") && !strings.HasPrefix(d.Name(), ".") {
			rel, _ := filepath.Rel(lake, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// totalRows reads the ROWS total from the footer of `lake ls`.
func totalRows(t *testing.T, ls string) int {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(ls), "\n")
	var segs, rows int
	if _, err := fmt.Sscanf(lines[len(lines)-1], "%d segments %d", &segs, &rows); err != nil {
		t.Fatalf("unexpected lake ls footer %q: %v", lines[len(lines)-1], err)
	}
	return rows
}
