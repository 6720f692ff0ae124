package e2e

import (
	"context"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestLakeAuditPostgresRestart: `sluice run` writes the lake with its
// catalog in PostgreSQL while a second process compacts the same lake
// through the same catalog, and PostgreSQL is restarted in the middle.
// While it is down the lake loop's checkpoints fail (counted, /readyz
// 503 saying why) and ingestion goes on into the queue; once it is back
// both processes carry on, and every acknowledged record is in the lake
// exactly once, read through the catalog and by DuckDB over the files.
func TestLakeAuditPostgresRestart(t *testing.T) {
	srv, err := pgtest.Launch()
	if err != nil {
		pgtest.Start(t) // skips, or fails under SLUICE_REQUIRE_ALL, as other tests do
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	dsn := pgtest.Schema(t, srv.DSN())
	lakeDir := t.TempDir()
	cfg := postgresRunConfig(t, lakeDir, dsn)
	g := newLoadGen(50)
	s := startServer(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg := g.run(t, ctx, s.http, 4)

	// The second process: compaction of the same lake, in a loop.
	var compacts sync.WaitGroup
	compactCtx, stopCompacts := context.WithCancel(context.Background())
	var compactFails []string
	compacts.Add(1)
	go func() {
		defer compacts.Done()
		for compactCtx.Err() == nil {
			r := run(t, "compact", "--lake", lakeDir, "--catalog", dsn, "--grace", "0", "--lease-ttl", "20s")
			if r.code != 0 {
				compactFails = append(compactFails, r.stderr)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()

	time.Sleep(3 * time.Second)
	if err := srv.Restart(0); err != nil {
		t.Fatal(err)
	}
	// Down again, for 10s: long enough for several checkpoints to fail.
	downAt := ackedNow(g)
	restartDone := make(chan error, 1)
	go func() { restartDone <- srv.Restart(10 * time.Second) }()
	sawDown := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if code, body := readyz(t, s.admin); code == http.StatusServiceUnavailable {
			sawDown = true
			t.Logf("readyz while PostgreSQL is down: %d %s", code, body)
			break
		}
	}
	if err := <-restartDone; err != nil {
		t.Fatal(err)
	}
	if !sawDown {
		t.Errorf("/readyz never answered 503 while the catalog was down for 10s\n%s", grepLines(s.stderr.String(), "catalog"))
	}
	// Back: acknowledgements go on and /readyz recovers.
	time.Sleep(4 * time.Second)
	if ackedNow(g) <= downAt {
		t.Errorf("no acknowledgements during and after the catalog restart")
	}
	recovered := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if code, _ := readyz(t, s.admin); code == http.StatusOK {
			recovered = true
			break
		}
	}
	if !recovered {
		code, body := readyz(t, s.admin)
		t.Errorf("/readyz did not recover within 30s of PostgreSQL's return: %d %s", code, body)
	}
	if n := metricValue(t, s.admin, "sluice_lake_checkpoint_failures_total"); n < 1 {
		t.Errorf("sluice_lake_checkpoint_failures_total = %v after the catalog was down", n)
	}

	cancel()
	wg.Wait()
	stopCompacts()
	compacts.Wait()
	// Let the lake loop work off what queued up while the catalog was
	// away, so that the stop below is not cut by shutdown_timeout.
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if metricValue(t, s.admin, "sluice_lake_uncommitted_queue_bytes") == 0 {
			break
		}
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := s.wait(t, runShutdownTimeout+10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, s.stderr)
	}
	// A last compaction after everything settled, then the count.
	if r := run(t, "compact", "--lake", lakeDir, "--catalog", dsn, "--grace", "0"); r.code != 0 {
		t.Fatalf("final compact: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	acked, found, dups := checkLakeIn(t, lakeDir, dsn, g)
	t.Logf("postgres restart: acknowledged %d, found %d, duplicates %d; %d compactions failed (first: %.300s)",
		acked, found, dups, len(compactFails), first(compactFails))
	if found < acked || dups != 0 {
		t.Errorf("acknowledged %d, found %d distinct, %d duplicates", acked, found, dups)
	}
}

func ackedNow(g *loadGen) int { return g.ackedCount() }

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
