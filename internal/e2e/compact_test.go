package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// liveHashPy prints, per table, the row count and a content hash of the
// given files as DuckDB reads them: every row as JSON with its non-null
// columns sorted, so files with different attribute columns compare by
// content. argv: table=file,file,... per table.
const liveHashPy = `
import hashlib, json, sys, duckdb
con = duckdb.connect()
con.execute("PRAGMA disable_progress_bar")  # on a loaded machine it would land in the output
for arg in sys.argv[1:]:
    table, _, files = arg.partition("=")
    files = [f for f in files.split(",") if f]
    rows = []
    for (j,) in con.execute("SELECT to_json(t) FROM read_parquet(?, union_by_name=true, hive_partitioning=false) t", [files]).fetchall():
        d = {k: v for k, v in json.loads(j).items() if v is not None}
        rows.append(json.dumps(d, sort_keys=True))
    rows.sort()
    h = hashlib.sha256("\n".join(rows).encode()).hexdigest()
    print(f"{table} {len(rows)} {h}")
`

// globRowsPy prints, per table, the rows a raw DuckDB glob over the lake
// directory reads: every file in the layout, whether the catalog lists it
// or not. argv: lake dir, tables.
const globRowsPy = `
import sys, duckdb
con = duckdb.connect()
con.execute("PRAGMA disable_progress_bar")  # on a loaded machine it would land in the output
lake = sys.argv[1]
for table in sys.argv[2:]:
    (n,) = con.execute(f"SELECT count(*) FROM read_parquet('{lake}/{table}/**/*.parquet', union_by_name=true, hive_partitioning=true)").fetchone()
    print(f"{table} {n}")
`

// globRows returns what globRowsPy prints for tables, by default logs
// and traces.
func globRows(t *testing.T, lake string, tables ...string) map[string]int64 {
	t.Helper()
	if len(tables) == 0 {
		tables = []string{"logs", "traces"}
	}
	out, err := exec.Command(python(t), append([]string{"-c", globRowsPy, lake}, tables...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("duckdb glob over the lake: %v\n%s", err, out)
	}
	rows := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		table, n, _ := strings.Cut(line, " ")
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			t.Fatalf("duckdb glob: %q", out)
		}
		rows[table] = v
	}
	return rows
}

// intentsLeft returns the catalog's intents: outputs of compactions not
// yet swapped in nor cleaned up.
func intentsLeft(t *testing.T, lake string) []catalog.Intent {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, filepath.Join(lake, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	ins, err := cat.Intents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

// lakeState is what a query of the lake sees (the catalog's live segments,
// read by DuckDB) and what the catalog holds.
type lakeState struct {
	duck     string           // per table: rows and content hash
	rows     map[string]int64 // per table, from the catalog
	live     []catalog.Segment
	replaced []catalog.Segment
}

func readLakeState(t *testing.T, lake string) lakeState {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, filepath.Join(lake, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	segs, err := cat.List(ctx, catalog.Filter{IncludeReplaced: true})
	if err != nil {
		t.Fatal(err)
	}
	st := lakeState{rows: map[string]int64{}}
	files := map[string][]string{}
	for _, s := range segs {
		if !s.ReplacedAt.IsZero() {
			st.replaced = append(st.replaced, s)
			continue
		}
		st.live = append(st.live, s)
		st.rows[s.Table] += s.Rows
		// Where a reader of the catalog finds it (lake.OpenSegment, lake ls
		// --paths): still staged after a kill between a swap and its moves.
		p := filepath.Join(lake, s.Path)
		if staged := filepath.Join(lake, "_staging", s.Path); !exists(p) && exists(staged) {
			p = staged
		}
		files[s.Table] = append(files[s.Table], p)
	}
	args := []string{"-c", liveHashPy}
	for _, table := range []string{"logs", "traces"} {
		args = append(args, table+"="+strings.Join(files[table], ","))
	}
	out, err := exec.Command(python(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("duckdb over the live files: %v\n%s", err, out)
	}
	st.duck = string(out)
	return st
}

func (a lakeState) sameContent(t *testing.T, b lakeState, when string) {
	t.Helper()
	if a.duck != b.duck {
		t.Fatalf("%s: live content differs:\nbefore %s\nnow    %s", when, a.duck, b.duck)
	}
	for table, n := range a.rows {
		if b.rows[table] != n {
			t.Fatalf("%s: catalog has %d live %s rows, want %d", when, b.rows[table], table, n)
		}
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// killCompact starts cmd, a `sluice compact` run, and kills it with
// SIGKILL: once it says it is pausing (atPause: run with
// --debug-pause-before-replace or -after-replace), else after after. It
// returns once the process is gone.
func killCompact(t *testing.T, cmd *exec.Cmd, trial int, atPause bool, after time.Duration) {
	t.Helper()
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	if atPause {
		deadline := time.After(time.Minute)
		for !strings.Contains(out.String(), "pausing") {
			select {
			case <-exited:
				t.Fatalf("trial %d: compact exited before pausing:\n%s", trial, out)
			case <-deadline:
				t.Fatalf("trial %d: compact did not pause:\n%s", trial, out)
			case <-time.After(5 * time.Millisecond):
			}
		}
	} else {
		time.Sleep(after)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); errors.Is(err, os.ErrProcessDone) {
		// The run finished before the kill: still, the content must hold.
		t.Logf("trial %d: compact finished before the kill after %v", trial, after)
	} else if err != nil {
		t.Fatal(err)
	}
	<-exited
}

// TestCompactKill9 ingests the corpus as many small files, kills
// 'sluice compact' with SIGKILL at several moments (between writing its
// outputs and swapping them in, between the swap and its file moves, and
// at random), and checks after each that the live set read by DuckDB has
// exactly the rows it had before, and after the first two that a raw
// DuckDB glob over the lake reads exactly the ingested rows (staged
// outputs are outside the Hive tree); then it compacts to completion,
// checking again, and checks that a raw glob reads exactly the ingested
// rows right away, with the replaced files in _trash/ for their grace
// period, and after the sweep.
func TestCompactKill9(t *testing.T) {
	python(t)
	lake := filepath.Join(t.TempDir(), "lake")
	dir := filepath.Join(corpustest.Dir(t), "otlp")
	for i := range 4 {
		// Tiny files: many segments per partition.
		r := run(t, "ingest", "--lake", lake, "--target-file-size", "65536",
			filepath.Join(dir, "logs"), filepath.Join(dir, "traces"))
		if r.code != 0 {
			t.Fatalf("ingest %d: exit %d\n%s", i, r.code, r.stderr)
		}
	}
	before := readLakeState(t, lake)
	if len(before.live) < 8 || before.rows["logs"] == 0 || before.rows["traces"] == 0 {
		t.Fatalf("ingest made %d segments (%v rows)", len(before.live), before.rows)
	}
	t.Logf("before: %d live segments\n%s", len(before.live), before.duck)

	// --min-age: every corpus hour ended less than ten years ago.
	if r := run(t, "compact", "--lake", lake, "--dry-run", "--min-age", "87600h"); r.code != 0 || !strings.Contains(r.stdout, "plan: 0 partitions") {
		t.Fatalf("--min-age 87600h should leave every partition: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, "compact", "--lake", lake, "--dry-run", "--min-age", "1h"); r.code != 0 || strings.Contains(r.stdout, "plan: 0 partitions") {
		t.Fatalf("--min-age 1h should plan the corpus hours: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// pause: "before" or "after" the swap, or "" to kill after a delay.
	kill := func(trial int, pause string, after time.Duration) {
		args := []string{"compact", "--lake", lake, "--grace", "1h", "--lease-ttl", "1s", "--max-inputs", "8"}
		atPause := pause != ""
		if atPause {
			args = append(args, "--debug-pause-"+pause+"-replace", "1m")
		}
		killCompact(t, exec.Command(sluiceBin, args...), trial, atPause, after)
		now := readLakeState(t, lake)
		before.sameContent(t, now, "after kill -9 in trial "+strconv.Itoa(trial))
		if atPause {
			// Killed before its swap, its output is staged; killed after,
			// before moving files, its outputs are staged and its inputs
			// still in place: either way a glob reads the ingested rows.
			globbed := globRows(t, lake)
			for _, table := range []string{"logs", "traces"} {
				if globbed[table] != before.rows[table] {
					t.Fatalf("trial %d: right after kill -9 %s the swap a glob reads %d %s rows, want the %d ingested",
						trial, pause, globbed[table], table, before.rows[table])
				}
			}
		}
		t.Logf("trial %d (pause %q, after %v): %d live, %d replaced; content unchanged", trial, pause, after, len(now.live), len(now.replaced))
		time.Sleep(1100 * time.Millisecond) // the killed run's leases expire
	}
	kill(1, "before", 0)
	kill(2, "after", 0)
	for trial := 3; trial <= 5; trial++ {
		// Anywhere in the run, which swaps several partitions.
		kill(trial, "", time.Duration(rand.IntN(1500))*time.Millisecond)
	}

	// To completion: one or a few files per partition, same content, the
	// replaced files still there for queries in flight.
	r := run(t, "compact", "--lake", lake, "--grace", "1h")
	if r.code != 0 {
		t.Fatalf("compact: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("compact:\n%s%s", r.stdout, r.stderr)
	done := readLakeState(t, lake)
	before.sameContent(t, done, "after compaction")
	if len(done.live) >= len(before.live) || len(done.replaced) < len(before.live) {
		t.Fatalf("after compaction: %d live, %d replaced; before %d live", len(done.live), len(done.replaced), len(before.live))
	}
	// Replaced files left the Hive tree at their swap (or, for the swap
	// killed before its moves, at this run's sweep) and wait in _trash/.
	for _, s := range done.replaced {
		if !exists(filepath.Join(lake, "_trash", s.Path)) {
			t.Fatalf("replaced file %s deleted before its grace period", s.Path)
		}
		if exists(filepath.Join(lake, s.Path)) {
			t.Fatalf("replaced file %s still in the Hive tree", s.Path)
		}
	}
	// The killed runs' uncommitted outputs are gone (the run cleaned up
	// the partitions it compacted, its sweep the others): a glob reads
	// exactly the live rows, which are the ingested ones.
	if ins := intentsLeft(t, lake); len(ins) != 0 {
		t.Fatalf("%d intents left after compaction, first %+v", len(ins), ins[0])
	}
	globbed := globRows(t, lake)
	for _, table := range []string{"logs", "traces"} {
		if globbed[table] != done.rows[table] || globbed[table] != before.rows[table] {
			t.Fatalf("right after compaction a glob reads %d %s rows, want the %d ingested", globbed[table], table, before.rows[table])
		}
	}
	if r := run(t, "compact", "--lake", lake, "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "plan: 0 partitions") {
		t.Fatalf("nothing should be left to compact: exit %d\n%s", r.code, r.stdout)
	}

	// Sweep with no grace: replaced files go, nothing live is missing.
	r = run(t, "compact", "--lake", lake, "--grace", "0")
	if r.code != 0 || !strings.Contains(r.stdout, "swept "+strconv.Itoa(len(done.replaced))+" replaced files") {
		t.Fatalf("sweep: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	swept := readLakeState(t, lake)
	before.sameContent(t, swept, "after the sweep")
	if len(swept.replaced) != 0 {
		t.Fatalf("%d replaced segments left after the sweep", len(swept.replaced))
	}
	for _, s := range done.replaced {
		if exists(filepath.Join(lake, s.Path)) || exists(filepath.Join(lake, "_trash", s.Path)) {
			t.Fatalf("replaced file %s not swept", s.Path)
		}
	}
	for _, s := range swept.live {
		if !exists(filepath.Join(lake, s.Path)) {
			t.Fatalf("live file %s missing", s.Path)
		}
	}
	globbed = globRows(t, lake)
	for _, table := range []string{"logs", "traces"} {
		if globbed[table] != before.rows[table] {
			t.Fatalf("after the sweep a glob reads %d %s rows, want the %d ingested", globbed[table], table, before.rows[table])
		}
	}
}

// TestCompactSummary: the summary line of a run that takes several passes
// (more small files than --max-inputs) counts the files it replaced and
// the files that stand now, as the catalog lists them, not the
// intermediate outputs of earlier passes.
func TestCompactSummary(t *testing.T) {
	python(t)
	lake := filepath.Join(t.TempDir(), "lake")
	dir := filepath.Join(corpustest.Dir(t), "otlp")
	if r := run(t, "ingest", "--lake", lake, "--target-file-size", "32768", "--progress", "never",
		filepath.Join(dir, "logs"), filepath.Join(dir, "traces")); r.code != 0 {
		t.Fatalf("ingest: exit %d\n%s", r.code, r.stderr)
	}
	before := readLakeState(t, lake)
	r := run(t, "compact", "--lake", lake, "--max-inputs", "4")
	if r.code != 0 {
		t.Fatalf("compact: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	after := readLakeState(t, lake)
	before.sameContent(t, after, "after compaction")
	parts := map[string]bool{}
	for _, s := range after.live {
		parts[s.Table+"/"+s.Day+"/"+strconv.Itoa(s.Hour)] = true
	}
	want := fmt.Sprintf("compacted %d partitions: %d files, ", len(parts), len(before.live))
	wantInto := fmt.Sprintf(" into %d files, ", len(after.live))
	wantRows := fmt.Sprintf("(%d rows; ", after.rows["logs"]+after.rows["traces"])
	for _, w := range []string{want, wantInto, wantRows} {
		if !strings.Contains(r.stdout, w) {
			t.Fatalf("summary lacks %q:\n%s", w, r.stdout)
		}
	}
	if len(after.replaced) <= len(before.live) {
		t.Fatalf("%d replaced segments: want more than the %d inputs (earlier passes' outputs merged again)", len(after.replaced), len(before.live))
	}
}
