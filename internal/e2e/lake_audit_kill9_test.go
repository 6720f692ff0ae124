package e2e

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake/s3store/s3test"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestLakeAuditCompactKill9S3Postgres kills `sluice compact` with SIGKILL
// on a lake as production runs it, files in a real S3 server and the
// catalog in a real PostgreSQL: paused before its catalog swap, paused
// after it (before its file moves), and at random points of a run that
// swaps several times. After every kill the catalog's live segments hold
// exactly the ingested rows, each is in the bucket (in place, staged or
// in the trash), and a glob over the bucket's Hive tree never counts
// fewer. A run to completion then leaves the Hive tree holding exactly
// the live files, nothing in _staging/, and every row once.
func TestLakeAuditCompactKill9S3Postgres(t *testing.T) {
	srv := s3test.Start(t)
	l := &s3Lake{srv: srv, proxy: s3test.NewFaultProxy(t, srv.Endpoint), bucket: srv.Bucket(t),
		state: t.TempDir(), catalog: pgtest.Schema(t, pgtest.Start(t))}
	hour := time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour)

	// Ingests of two hours each: one segment in each of two partitions
	// an ingest, so that --max-inputs 3 takes several swaps a partition.
	var want int64
	ingest := func(n int) {
		for range n {
			f := writeLogsFile(t, hour.Add(time.Duration(want)*time.Millisecond), 2, 40)
			if out, err := l.sluice(t, "ingest", "--progress", "never", f); err != nil {
				t.Fatalf("ingest: %v\n%s", err, out)
			}
			want += 80
		}
	}
	ingest(8)
	l.check(t, "after ingest", want, true)

	// pause: "before" or "after" the swap, or "" to kill after a delay.
	kill := func(trial int, pause string, after time.Duration) {
		args := []string{"compact", "--grace", "0", "--lease-ttl", "1s", "--max-inputs", "3"}
		if pause != "" {
			args = append(args, "--debug-pause-"+pause+"-replace", "1m")
		}
		killCompact(t, l.command(args...), trial, pause != "", after)
		l.check(t, "after kill -9 in trial "+strconv.Itoa(trial), want, false)
		time.Sleep(1100 * time.Millisecond) // the killed run's leases expire
	}
	kill(1, "before", 0)
	kill(2, "after", 0)
	// Anywhere in a run, with new segments to compact each time.
	for trial := 3; trial <= 7; trial++ {
		ingest(6)
		kill(trial, "", time.Duration(100+rand.IntN(900))*time.Millisecond)
	}

	out, err := l.sluice(t, "compact", "--grace", "0", "--lease-ttl", "1s")
	if err != nil {
		t.Fatalf("compact after the kills: %v\n%s", err, out)
	}
	t.Logf("compact after the kills:\n%s", out)
	if strings.Contains(out, "neither staged nor in place") {
		t.Errorf("compact after the kills warned of a missing file; every live file is in the bucket")
	}
	l.check(t, "compact after the kills", want, true)
	filepath.WalkDir(filepath.Join(srv.Dir, l.bucket, "lake", "_staging"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("left in _staging/ after compacting to completion: %s", p)
		}
		return nil
	})
	if out, err := l.sluice(t, "compact", "--dry-run"); err != nil || !strings.Contains(out, "plan: 0 partitions") {
		t.Errorf("nothing should be left to compact: %v\n%s", err, out)
	}
}
