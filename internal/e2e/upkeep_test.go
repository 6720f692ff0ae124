package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/signal"
)

// upkeepConfig is runConfig with the background upkeep on a short
// schedule: a pass every second, no sweep grace, compaction of any closed
// hour, logs kept 48h except for tenant "keep".
func upkeepConfig(t *testing.T, lakeDir string) string {
	t.Helper()
	cfg := fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
    tenant_header: X-Scope-OrgID
admin:
  addr: 127.0.0.1:0
query:
  addr: ""
queue:
  segment_bytes: 32MiB
  max_bytes: 256MiB
lake:
  root: %s
  flush_interval: 300ms
  target_file_bytes: 64KiB
upkeep:
  interval: 1s
  sweep_grace: 0s
  compaction:
    min_age: 0s
  retention:
    logs: 48h
    tenants:
      keep: {logs: 0}
shutdown_timeout: %s
`, lakeDir, runShutdownTimeout)
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "validate", "--config", p); r.code != 0 || !strings.Contains(r.stdout, "config OK") {
		t.Fatalf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return p
}

// oldLogs is one OTLP request with n records in each of hours, bodies
// "<tenant> <hour> <round> <i>" and a unique seq (above loadGen's range).
func oldLogs(t *testing.T, tenant string, hours []time.Time, round, n int) []byte {
	t.Helper()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "old-"+tenant)
	sl := rl.ScopeLogs().AppendEmpty()
	for hi, h := range hours {
		for i := range n {
			r := sl.LogRecords().AppendEmpty()
			r.SetTimestamp(pcommon.NewTimestampFromTime(h.Add(time.Duration(round*n+i) * time.Second)))
			r.Body().SetStr(fmt.Sprintf("%s %s %d %d", tenant, h.Format(time.RFC3339), round, i))
			r.Attributes().PutInt("seq", int64(1<<40+hi<<20+round<<12+i))
		}
	}
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func postLogs(t *testing.T, addr, tenant string, body []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/logs", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Scope-OrgID", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/logs: %s", resp.Status)
	}
}

// hourSegs returns the catalog's segments of one logs hour partition.
func hourSegs(t *testing.T, cat *catalog.Catalog, tenant string, h time.Time, replaced bool) []catalog.Segment {
	t.Helper()
	segs, err := cat.List(context.Background(), catalog.Filter{Table: "logs", Tenant: tenant,
		From: h.UnixNano(), To: h.Add(time.Hour - 1).UnixNano(), IncludeReplaced: replaced})
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

func sumRows(segs []catalog.Segment) (n int64) {
	for _, s := range segs {
		n += s.Rows
	}
	return n
}

// dirFiles lists the Parquet files under one partition directory.
func dirFiles(t *testing.T, lakeDir, tenant string, h time.Time) []string {
	t.Helper()
	dir := catalog.PartitionDir("logs", tenant, h.Format(time.DateOnly), h.Hour())
	ents, err := os.ReadDir(filepath.Join(lakeDir, filepath.FromSlash(dir)))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".parquet") {
			out = append(out, dir+"/"+e.Name())
		}
	}
	return out
}

// bodies reads the log bodies of segments from their files.
func bodies(t *testing.T, lakeDir string, segs []catalog.Segment) []string {
	t.Helper()
	var out []string
	for _, s := range segs {
		f, err := lake.OpenFile(filepath.Join(lakeDir, filepath.FromSlash(s.Path)))
		if err != nil {
			t.Fatal(err)
		}
		var l signal.Logs
		if err := f.ReadLogs(&l); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for i := range l.Len() {
			out = append(out, string(l.Bytes(signal.Str(l.Body[i]))))
		}
	}
	slices.Sort(out)
	return out
}

// TestUpkeepInRun runs `sluice run` with background upkeep while a load
// generator keeps sending, sends data into old hours in several
// checkpoints, and checks that compaction merged the closed hours (same
// records, fewer segments, replaced files deleted), that retention removed
// the hour older than 48h from the catalog and then from disk (but not for
// tenant "keep", whose override keeps forever), and that no request failed.
func TestUpkeepInRun(t *testing.T) {
	lakeDir := t.TempDir()
	s := startServer(t, upkeepConfig(t, lakeDir))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newLoadGen(20)
	wg := g.run(t, ctx, s.http, 2)

	cat, err := catalog.Open(context.Background(), "sqlite:"+filepath.Join(lakeDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()

	hour := time.Now().UTC().Truncate(time.Hour)
	expired, kept1, kept2 := hour.Add(-72*time.Hour), hour.Add(-5*time.Hour), hour.Add(-4*time.Hour)
	hours := []time.Time{expired, kept1, kept2}
	const rounds, perHour = 3, 200
	var want []string
	for round := range rounds {
		postLogs(t, s.http, "old", oldLogs(t, "old", hours, round, perHour))
		postLogs(t, s.http, "keep", oldLogs(t, "keep", hours[:1], round, perHour))
		for i := range perHour {
			want = append(want, fmt.Sprintf("old %s %d %d", kept1.Format(time.RFC3339), round, i))
		}
		// Wait for the checkpoint, so that each round is its own segment.
		deadline := time.Now().Add(20 * time.Second)
		for sumRows(hourSegs(t, cat, "old", kept1, false)) < int64((round+1)*perHour) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d not committed:\n%s", round, s.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	slices.Sort(want)

	// Upkeep converges: the kept hours compacted into one segment each with
	// every record, replaced inputs swept; the expired hour gone entirely.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var problems []string
		for _, h := range []time.Time{kept1, kept2} {
			live := hourSegs(t, cat, "old", h, false)
			all := hourSegs(t, cat, "old", h, true)
			files := dirFiles(t, lakeDir, "old", h)
			if len(live) != 1 || live[0].Level < 1 || len(all) != 1 || len(files) != 1 {
				problems = append(problems, fmt.Sprintf("hour %s: %d live, %d catalogued, %d files", h, len(live), len(all), len(files)))
			} else if rows := sumRows(live); rows != rounds*perHour {
				t.Fatalf("hour %s: %d rows after compaction, want %d", h, rows, rounds*perHour)
			}
		}
		if n, files := len(hourSegs(t, cat, "old", expired, true)), dirFiles(t, lakeDir, "old", expired); n != 0 || len(files) != 0 {
			problems = append(problems, fmt.Sprintf("expired hour: %d catalogued segments, %d files", n, len(files)))
		}
		if len(problems) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("upkeep did not converge: %v\n%s", problems, s.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := bodies(t, lakeDir, hourSegs(t, cat, "old", kept1, false)); !slices.Equal(got, want) {
		t.Fatalf("compacted hour holds %d records, want the %d sent", len(got), len(want))
	}
	// The tenant override kept tenant "keep"'s expired hour.
	if rows := sumRows(hourSegs(t, cat, "keep", expired, false)); rows != rounds*perHour {
		t.Fatalf("tenant keep: %d rows in the 72h-old hour, want %d", rows, rounds*perHour)
	}

	resp, err := http.Get("http://" + s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{
		`sluice_upkeep_runs_total{result="ok",task="compaction"}`,
		`sluice_upkeep_runs_total{result="ok",task="retention"}`,
		`sluice_upkeep_runs_total{result="ok",task="sweep"}`,
		`sluice_upkeep_segments_replaced_total{task="retention"} 3`,
		`sluice_upkeep_bytes_deleted_total`,
		`sluice_upkeep_last_success_timestamp_seconds{task="sweep"}`,
	} {
		if !strings.Contains(string(metrics), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	if strings.Contains(string(metrics), `result="error"`) {
		t.Errorf("an upkeep task failed:\n%s", s.stderr)
	}

	// Ingestion went on throughout, over several more passes: nothing
	// refused, everything acknowledged is in the lake exactly once.
	// Counted before cancel, which aborts the requests in flight.
	time.Sleep(3 * time.Second)
	refused, failed := g.refused.Load(), g.failed.Load()
	cancel()
	wg.Wait()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := s.wait(t, runShutdownTimeout+5*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, s.stderr)
	}
	if refused != 0 || failed != 0 || g.ackedCount() == 0 {
		t.Fatalf("load during upkeep: %d acked, %d refused, %d failed", g.ackedCount(), refused, failed)
	}
	counts := lakeCounts(t, lakeDir)
	g.mu.Lock()
	for seq := range g.acked {
		if counts[seq] != 1 {
			t.Errorf("acknowledged record %d is in the lake %d times", seq, counts[seq])
			break
		}
	}
	g.mu.Unlock()
	if !strings.Contains(s.stderr.String(), "upkeep task done") {
		t.Errorf("no upkeep log line:\n%s", s.stderr)
	}
}

// writeLogsFile writes an OTLP logs request file with n records in each
// hour from first, hours long, and returns its path.
func writeLogsFile(t *testing.T, first time.Time, hours, n int) string {
	t.Helper()
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	for h := range hours {
		for i := range n {
			r := sl.LogRecords().AppendEmpty()
			r.SetTimestamp(pcommon.NewTimestampFromTime(first.Add(time.Duration(h)*time.Hour + time.Duration(i)*time.Second)))
			r.Body().SetStr(fmt.Sprintf("hour %d record %d", h, i))
		}
	}
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), fmt.Sprintf("logs-%d.binpb", first.Unix()))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRetentionTwoProcesses runs two `sluice retention` processes at once
// on one lake whose catalog is in PostgreSQL: every expired partition is
// removed by exactly one of them, and what is kept keeps its exact rows.
func TestRetentionTwoProcesses(t *testing.T) {
	dsn := pgtest.Schema(t, pgtest.Start(t))
	lakeDir := t.TempDir()
	const hours, perHour = 48, 30
	old := writeLogsFile(t, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), hours, perHour)
	recent := writeLogsFile(t, time.Now().UTC().Truncate(time.Hour), 1, perHour)
	for _, tenant := range []string{"a", "b"} {
		if r := run(t, "ingest", "--lake", lakeDir, "--catalog", dsn, "--tenant", tenant, "--progress", "never", old, recent); r.code != 0 {
			t.Fatalf("ingest: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	// Several segments per partition, so a removal is a multi-row swap.
	if r := run(t, "ingest", "--lake", lakeDir, "--catalog", dsn, "--tenant", "a", "--progress", "never", old); r.code != 0 {
		t.Fatalf("ingest: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	outs := make([]result, 2)
	done := make(chan int)
	for i := range outs {
		go func() {
			outs[i] = run(t, "retention", "--lake", lakeDir, "--catalog", dsn, "--keep", "logs=7d")
			done <- i
		}()
	}
	<-done
	<-done
	removed := map[string]int{} // partition -> times removed with segments
	for i, o := range outs {
		if o.code != 0 {
			t.Fatalf("retention %d: exit %d\n%s%s", i, o.code, o.stdout, o.stderr)
		}
		for _, line := range strings.Split(o.stdout, "\n") {
			f := strings.Fields(line)
			if len(f) >= 9 && f[0] == "logs" && strings.HasSuffix(line, "removed") {
				if f[5] == "0" {
					t.Errorf("retention %d: removed an empty partition: %s", i, line)
				}
				removed[f[1]+"/"+f[2]]++
			}
		}
	}
	if len(removed) != 2*hours {
		t.Errorf("%d partitions removed, want %d\n%s\n%s", len(removed), 2*hours, outs[0].stdout, outs[1].stdout)
	}
	for p, n := range removed {
		if n != 1 {
			t.Errorf("partition %s removed by %d processes", p, n)
		}
	}
	t.Logf("process 0 removed %d partitions, process 1 the rest", strings.Count(outs[0].stdout, "  removed\n"))
	ls := run(t, "lake", "ls", "--lake", lakeDir, "--catalog", dsn)
	if rows := totalRows(t, ls.stdout); rows != 2*perHour {
		t.Errorf("%d rows left, want the %d recent ones\n%s", rows, 2*perHour, ls.stdout)
	}
}

// TestUpkeepCommandsTogether runs two `sluice compact` and two `sluice
// retention` processes at once on one lake with its catalog in PostgreSQL:
// expired partitions end removed, every kept partition ends compacted into
// one segment holding exactly its rows, and every file on disk is one the
// catalog lists.
func TestUpkeepCommandsTogether(t *testing.T) {
	dsn := pgtest.Schema(t, pgtest.Start(t))
	lakeDir := t.TempDir()
	const oldHours, keptHours, perHour = 24, 12, 25
	old := writeLogsFile(t, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), oldHours, perHour)
	keptStart := time.Now().UTC().Truncate(time.Hour).Add(-keptHours * time.Hour)
	kept := writeLogsFile(t, keptStart, keptHours, perHour)
	for range 2 { // two segments per partition
		for _, tenant := range []string{"a", "b"} {
			if r := run(t, "ingest", "--lake", lakeDir, "--catalog", dsn, "--tenant", tenant, "--progress", "never", old, kept); r.code != 0 {
				t.Fatalf("ingest: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
		}
	}
	cmds := [][]string{
		{"compact", "--lake", lakeDir, "--catalog", dsn, "--grace", "0"},
		{"retention", "--lake", lakeDir, "--catalog", dsn, "--keep", "logs=30d"},
		{"compact", "--lake", lakeDir, "--catalog", dsn, "--grace", "0"},
		{"retention", "--lake", lakeDir, "--catalog", dsn, "--keep", "logs=30d"},
	}
	outs := make([]result, len(cmds))
	done := make(chan struct{}, len(cmds))
	for i, args := range cmds {
		go func() { outs[i] = run(t, args...); done <- struct{}{} }()
	}
	for range cmds {
		<-done
	}
	for i, o := range outs {
		// A compaction that planned a partition retention removed before
		// its swap fails that partition with ErrStale (and cleans up): the
		// only failure allowed.
		if o.code != 0 && !(cmds[i][0] == "compact" && strings.Contains(o.stderr, "gone or already replaced")) {
			t.Fatalf("%v: exit %d\n%s%s", cmds[i], o.code, o.stdout, o.stderr)
		}
	}
	// Each expired partition was removed by at most one retention run;
	// one that compaction held when both came by was skipped by both.
	removed := map[string]int{}
	for i, o := range outs {
		if cmds[i][0] != "retention" {
			continue
		}
		for _, line := range strings.Split(o.stdout, "\n") {
			if f := strings.Fields(line); len(f) >= 9 && strings.HasSuffix(line, "  removed") {
				removed[f[1]+"/"+f[2]]++
			}
		}
	}
	for p, n := range removed {
		if n != 1 {
			t.Errorf("partition %s removed by %d processes", p, n)
		}
	}
	t.Logf("%d of %d expired partitions removed while compaction ran", len(removed), 2*oldHours)
	// Then a final retention (for what was skipped) and sweep (a compaction
	// may have finished after the others' sweeps); check catalog and files.
	for _, args := range [][]string{cmds[1], cmds[0]} {
		if r := run(t, args...); r.code != 0 {
			t.Fatalf("final %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	cat, err := catalog.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	all, err := cat.List(context.Background(), catalog.Filter{IncludeReplaced: true})
	if err != nil {
		t.Fatal(err)
	}
	perPart := map[string][]catalog.Segment{}
	var catalogued []string
	for _, s := range all {
		catalogued = append(catalogued, s.Path)
		if !s.ReplacedAt.IsZero() {
			t.Errorf("replaced segment %s left after the final sweep", s.Path)
			continue
		}
		k := s.Tenant + " " + s.Day + " " + fmt.Sprint(s.Hour)
		perPart[k] = append(perPart[k], s)
	}
	if len(perPart) != 2*keptHours {
		t.Errorf("%d live partitions, want the %d kept ones", len(perPart), 2*keptHours)
	}
	for k, segs := range perPart {
		h, _ := time.Parse(time.DateOnly, segs[0].Day)
		if h.Add(time.Duration(segs[0].Hour) * time.Hour).Before(keptStart) {
			t.Errorf("expired partition %s still live", k)
		}
		if len(segs) != 1 || segs[0].Level != 1 || segs[0].Rows != 2*perHour {
			t.Errorf("partition %s: %d live segments, level %d, %d rows; want one compacted segment of %d rows",
				k, len(segs), segs[0].Level, sumRows(segs), 2*perHour)
		}
	}
	slices.Sort(catalogued)
	if files := parquetFiles(t, lakeDir); !slices.Equal(files, catalogued) {
		t.Errorf("files on disk and catalog differ:\nfiles   %d %v\ncatalog %d %v", len(files), files, len(catalogued), catalogued)
	}
}

// TestRetentionMovesFilesOutOfTree: right after `sluice retention` a raw
// glob over the lake's Hive tree (README's read_parquet('data/logs/**'))
// no longer sees the removed partitions' files: they are in _trash/ for
// the sweeper, and the kept partition's files stay in place.
func TestRetentionMovesFilesOutOfTree(t *testing.T) {
	lakeDir := t.TempDir()
	old := writeLogsFile(t, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), 2, 10)
	recent := writeLogsFile(t, time.Now().UTC().Truncate(time.Hour), 1, 10)
	if r := run(t, "ingest", "--lake", lakeDir, "--progress", "never", old, recent); r.code != 0 {
		t.Fatalf("ingest: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	glob := func(root string) (expired, kept []string) {
		t.Helper()
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
				return err
			}
			if strings.Contains(p, "dt=2025-01-01") {
				expired = append(expired, p)
			} else {
				kept = append(kept, p)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return expired, kept
	}
	expired, kept := glob(filepath.Join(lakeDir, "logs"))
	if len(expired) < 2 || len(kept) == 0 {
		t.Fatalf("before retention: %d expired files, %d kept, want >= 2 and > 0", len(expired), len(kept))
	}
	r := run(t, "retention", "--lake", lakeDir, "--keep", "logs=7d")
	if r.code != 0 || !strings.Contains(r.stdout, "removed 2 partitions") {
		t.Fatalf("retention: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	expiredAfter, keptAfter := glob(filepath.Join(lakeDir, "logs"))
	if len(expiredAfter) != 0 {
		t.Errorf("after retention the Hive tree still holds the removed files %v", expiredAfter)
	}
	if !slices.Equal(keptAfter, kept) {
		t.Errorf("kept files %v, want %v", keptAfter, kept)
	}
	if trashed, _ := glob(filepath.Join(lakeDir, "_trash")); len(trashed) != len(expired) {
		t.Errorf("_trash holds %d of the %d removed files: %v", len(trashed), len(expired), trashed)
	}
	ls := run(t, "lake", "ls", "--lake", lakeDir)
	if rows := totalRows(t, ls.stdout); rows != 10 {
		t.Errorf("%d rows left, want the 10 recent ones\n%s", rows, ls.stdout)
	}
}
