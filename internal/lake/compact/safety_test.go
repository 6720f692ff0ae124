package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// fileRows renders every row of a lake file by column name, independent of
// the file's schema: one "column=[values]" item per non-null column, sorted
// by name, so files with different attribute columns compare by content.
func fileRows(t *testing.T, store lake.Store, p string) []string {
	t.Helper()
	r, err := lake.OpenSegment(store, p)
	if err != nil {
		t.Fatalf("open %q: %v", p, err)
	}
	defer r.Close()
	f, err := parquet.OpenFile(r, r.Size())
	if err != nil {
		t.Fatalf("parquet %q: %v", p, err)
	}
	cols := f.Schema().Columns()
	var out []string
	buf := make([]parquet.Row, 64)
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, row := range buf[:n] {
				byCol := map[string][]string{}
				for _, v := range row {
					if v.IsNull() {
						continue
					}
					name := strings.Join(cols[v.Column()], ".")
					byCol[name] = append(byCol[name], fmt.Sprintf("%d:%s", v.RepetitionLevel(), v.String()))
				}
				items := make([]string, 0, len(byCol))
				for name, vals := range byCol {
					items = append(items, name+"="+strings.Join(vals, ","))
				}
				slices.Sort(items)
				out = append(out, strings.Join(items, " "))
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("read %q: %v", p, err)
			}
		}
		rows.Close()
	}
	return out
}

// visible returns the sorted rows of every live segment of table: what a
// query sees.
func visible(t *testing.T, cat *catalog.Catalog, store lake.Store, table string) []string {
	t.Helper()
	segs, err := cat.List(context.Background(), catalog.Filter{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, s := range segs {
		all = append(all, fileRows(t, store, s.Path)...)
	}
	slices.Sort(all)
	return all
}

func ingestTraces(t *testing.T, e *lakeEnv) {
	e.ingest(t, dealCorpus(t, "traces", parts, otlp.DecodeTraces, (*lake.Writer).WriteSpans))
}

// runAll plans and runs every job once, failing the test on any error.
func runAll(t *testing.T, cat *catalog.Catalog, store lake.Store, opts Options) (done int) {
	t.Helper()
	ctx := context.Background()
	jobs, err := Plan(ctx, cat, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		res, err := Run(ctx, cat, store, j, opts)
		if err != nil {
			t.Fatalf("run %s: %v", j.Dir(), err)
		}
		if !res.Skipped {
			done++
		}
	}
	return done
}

func TestCompactTraces(t *testing.T) {
	e := newEnv(t)
	ingestTraces(t, e)
	before := visible(t, e.cat, e.store, lake.TableTraces)
	if len(before) < 1000 {
		t.Fatalf("only %d spans ingested", len(before))
	}
	if n := runAll(t, e.cat, e.store, Options{}); n == 0 {
		t.Fatal("no traces partition compacted")
	}
	if jobs, err := Plan(context.Background(), e.cat, Options{}); err != nil || len(jobs) != 0 {
		t.Fatalf("after compaction: %d jobs, %v", len(jobs), err)
	}
	if after := visible(t, e.cat, e.store, lake.TableTraces); !slices.Equal(before, after) {
		t.Fatalf("spans differ after compaction: %d before, %d after", len(before), len(after))
	}
}

// Inputs whose attribute columns differ (other keys, and one key with
// another value type) merge into the union schema, each value in its column.
func TestCompactUnionSchema(t *testing.T) {
	e := newEnv(t)
	const tmpl = `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},
	  "scopeLogs":[{"logRecords":[%s]}]}]}`
	rec := func(ts int64, attrs string) string {
		return fmt.Sprintf(`{"timeUnixNano":"%d","body":{"stringValue":"r%d"},"attributes":[%s]}`, ts, ts, attrs)
	}
	base := ingestNow.Add(-10 * time.Minute).UnixNano()
	a := fmt.Sprintf(tmpl, rec(base+1, `{"key":"a","value":{"stringValue":"x"}},{"key":"n","value":{"intValue":"7"}}`)+","+
		rec(base+3, `{"key":"a","value":{"stringValue":"y"}}`))
	b := fmt.Sprintf(tmpl, rec(base+2, `{"key":"a","value":{"intValue":"42"}},{"key":"b","value":{"doubleValue":1.5}}`)+","+
		rec(base+4, `{"key":"only_b","value":{"boolValue":true}}`))
	var fns []func(*lake.Writer) error
	for _, js := range []string{a, b} {
		var l signal.Logs
		if err := otlp.DecodeLogsJSON(&l, []byte(js)); err != nil {
			t.Fatal(err)
		}
		fns = append(fns, func(w *lake.Writer) error { return w.WriteLogs("acme", &l) })
	}
	e.ingest(t, fns)
	before := visible(t, e.cat, e.store, lake.TableLogs)
	if len(before) != 4 {
		t.Fatalf("ingested %d rows, want 4", len(before))
	}
	if n := runAll(t, e.cat, e.store, Options{}); n != 1 {
		t.Fatalf("%d partitions compacted, want 1", n)
	}
	segs, err := e.cat.List(context.Background(), catalog.Filter{Table: lake.TableLogs})
	if err != nil || len(segs) != 1 {
		t.Fatalf("live segments %v, %v; want one output", segs, err)
	}
	after := visible(t, e.cat, e.store, lake.TableLogs)
	if !slices.Equal(before, after) {
		t.Fatalf("rows differ after merging different schemas:\nbefore %q\nafter  %q", before, after)
	}
	// The output has every input's attribute columns.
	r, _ := e.store.Open(segs[0].Path)
	defer r.Close()
	f, err := parquet.OpenFile(r, r.Size())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range f.Schema().Columns() {
		names = append(names, strings.Join(c, "."))
	}
	for _, want := range []string{"attr.a", "attr.a#int", "attr.n#int", "attr.b#double", "attr.only_b#bool"} {
		if !slices.Contains(names, want) {
			t.Errorf("output lacks column %q; has %q", want, names)
		}
	}
	// Spot-check one value per column against the JSON above.
	joined := strings.Join(after, "\n")
	for _, want := range []string{"attr.a=0:x", "attr.a=0:y", "attr.a#int=0:42", "attr.n#int=0:7", "attr.b#double=0:1.5", "attr.only_b#bool=0:true"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no row has %q:\n%s", want, joined)
		}
	}
}

var errInjected = errors.New("injected fault")

// faultStore fails the n-th Create, Write or Commit (1-based) it sees.
type faultStore struct {
	lake.Store
	failAt int64
	ops    atomic.Int64
	slow   time.Duration // sleep per ReadAt, to make a merge take long
}

func (s *faultStore) step(op string) error {
	if n := s.ops.Add(1); n == s.failAt {
		return fmt.Errorf("%s: %w", op, errInjected)
	}
	return nil
}

func (s *faultStore) Create(p string) (lake.ObjectWriter, error) {
	if err := s.step("create " + p); err != nil {
		return nil, err
	}
	w, err := s.Store.Create(p)
	if err != nil {
		return nil, err
	}
	return &faultWriter{ObjectWriter: w, s: s, p: p}, nil
}

// Rename fails at its step too: the moves after a committed swap.
func (s *faultStore) Rename(src, dst string) error {
	if err := s.step("rename " + src); err != nil {
		return err
	}
	return lake.Move(s.Store, src, dst)
}

func (s *faultStore) Open(p string) (lake.ObjectReader, error) {
	r, err := s.Store.Open(p)
	if err != nil || s.slow == 0 {
		return r, err
	}
	return slowReader{r, s.slow}, nil
}

type slowReader struct {
	lake.ObjectReader
	d time.Duration
}

func (r slowReader) ReadAt(b []byte, off int64) (int, error) {
	time.Sleep(r.d)
	return r.ObjectReader.ReadAt(b, off)
}

type faultWriter struct {
	lake.ObjectWriter
	s     *faultStore
	p     string
	wrote bool
}

func (w *faultWriter) Write(b []byte) (int, error) {
	// Only the first write of each object is a step: later ones take the
	// same error path, and counting them all makes the test slow.
	if !w.wrote {
		w.wrote = true
		if err := w.s.step("write " + w.p); err != nil {
			return 0, err
		}
	}
	return w.ObjectWriter.Write(b)
}

func (w *faultWriter) Commit() error {
	if err := w.s.step("commit " + w.p); err != nil {
		_ = w.ObjectWriter.Abort()
		return err
	}
	return w.ObjectWriter.Commit()
}

// allFiles lists every file under the lake root, temporary ones included.
func allFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A store failing at every step in turn: each failed run leaves exactly the
// old visible set and no stray files; the run that gets through leaves
// exactly the same rows in the new set.
func TestCompactStoreFaults(t *testing.T) {
	e := newEnv(t)
	ingestLogs(t, e)
	ctx := context.Background()
	before := visible(t, e.cat, e.store, lake.TableLogs)
	filesBefore := allFiles(t, e.root)
	jobs, err := Plan(ctx, e.cat, Options{})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	// The biggest job, with small outputs so that it writes several files
	// and a fault can hit after some of them are committed.
	j := slices.MaxFunc(jobs, func(a, b Job) int { return len(a.Inputs) - len(b.Inputs) })
	opts := Options{TargetBytes: 256 << 10, RowGroupRows: 2000}
	liveIDs := func() []int64 {
		segs, err := e.cat.List(ctx, catalog.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, s := range segs {
			ids = append(ids, s.ID)
		}
		return ids
	}
	idsBefore := liveIDs()
	faults := 0
	for failAt := int64(1); ; failAt++ {
		if failAt > 5000 {
			t.Fatal("the run never got past the injected faults")
		}
		fs := &faultStore{Store: e.store, failAt: failAt}
		res, err := Run(ctx, e.cat, fs, j, opts)
		if err == nil {
			if res.Skipped || len(res.Outputs) < 2 {
				t.Fatalf("run: %+v; want several outputs", res)
			}
			break
		}
		if !errors.Is(err, errInjected) {
			t.Fatalf("fault %d: %v, want the injected fault", failAt, err)
		}
		faults++
		// Files are immutable, so the same live ids mean the same rows.
		if got := liveIDs(); !slices.Equal(got, idsBefore) {
			t.Fatalf("fault %d (%v): live segments changed: %v, want %v", failAt, err, got, idsBefore)
		}
		if got := allFiles(t, e.root); !slices.Equal(got, filesBefore) {
			t.Fatalf("fault %d (%v): files left behind:\n got %q\nwant %q", failAt, err, got, filesBefore)
		}
		noIntents(t, e.cat)
	}
	if faults < 3 {
		t.Fatalf("only %d faults injected", faults)
	}
	// The first run to get through failed at its first move after the
	// swap: the catalog's readers find the staged output.
	if got := visible(t, e.cat, e.store, lake.TableLogs); !slices.Equal(got, before) {
		t.Fatal("rows differ after the successful run")
	}
	if moves, err := e.cat.Moves(ctx); err != nil || len(moves) == 0 {
		t.Fatalf("pending moves after a failed move: %v, %v", moves, err)
	}
	// The sweep does what is left; then a glob reads exactly the rows.
	if sr, err := Sweep(ctx, e.cat, e.store, SweepOptions{Grace: time.Hour, Logger: quiet}); err != nil || sr.Moved == 0 {
		t.Fatalf("sweep: %+v, %v", sr, err)
	}
	if moves, err := e.cat.Moves(ctx); err != nil || len(moves) != 0 {
		t.Fatalf("moves left after the sweep: %v, %v", moves, err)
	}
	if got := globbed(t, e, lake.TableLogs); !slices.Equal(got, before) {
		t.Fatalf("after the sweep a glob reads %d rows, want %d", len(got), len(before))
	}
	for _, id := range liveIDs() {
		if slices.ContainsFunc(j.Inputs, func(s catalog.Segment) bool { return s.ID == id }) {
			t.Fatalf("input %d still live after the successful run", id)
		}
	}
	t.Logf("%d injected store faults, each left the old set", faults)
}

// A catalog failure at Replace leaves the old set and removes the outputs.
func TestCompactCatalogFailureAtReplace(t *testing.T) {
	e := newEnv(t)
	ingestLogs(t, e)
	before := visible(t, e.cat, e.store, lake.TableLogs)
	filesBefore := allFiles(t, e.root)
	jobs, err := Plan(context.Background(), e.cat, Options{})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err = Run(ctx, e.cat, e.store, jobs[0], Options{
		// The catalog transaction fails: its context ends just before.
		BeforeReplace: func(context.Context, Job) error { cancel(); return nil },
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v, want the catalog's context error", err)
	}
	if got := visible(t, e.cat, e.store, lake.TableLogs); !slices.Equal(got, before) {
		t.Fatal("visible rows changed by a failed Replace")
	}
	if got := allFiles(t, e.root); !slices.Equal(got, filesBefore) {
		t.Fatalf("files left behind by a failed Replace:\n got %q\nwant %q", got, filesBefore)
	}
	noIntents(t, e.cat)
	// Nothing is stuck: the lease was released and a rerun succeeds.
	if n := runAll(t, e.cat, e.store, Options{}); n != len(jobs) {
		t.Fatalf("rerun compacted %d of %d partitions", n, len(jobs))
	}
	if got := visible(t, e.cat, e.store, lake.TableLogs); !slices.Equal(got, before) {
		t.Fatal("rows differ after the rerun")
	}
}

// A merge longer than LeaseTTL keeps its lease by renewing it, and one
// whose lease is taken away aborts before Replace.
func TestCompactLeaseRenewal(t *testing.T) {
	e := newEnv(t)
	ingestLogs(t, e)
	ingestTraces(t, e)
	ctx := context.Background()
	before := visible(t, e.cat, e.store, lake.TableLogs)
	jobs, err := Plan(ctx, e.cat, Options{})
	if err != nil || len(jobs) < 2 {
		t.Fatalf("plan: %d jobs, %v; want 2", len(jobs), err)
	}
	const ttl = 300 * time.Millisecond
	slow := &faultStore{Store: e.store, slow: 2 * time.Millisecond}

	// 1. Renewed: the merge outlasts several TTLs; meanwhile nobody else
	// can take the partition.
	var stolen atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(ttl / 2):
			}
			if ok, err := e.cat.TryLease(ctx, jobs[0].LeaseKey(), "intruder", ttl); err == nil && ok {
				stolen.Store(true)
				_ = e.cat.ReleaseLease(ctx, jobs[0].LeaseKey(), "intruder")
			}
		}
	}()
	start := time.Now()
	// The intruder stops once the swap is in, while the run still holds
	// the lease: a try that waited on the catalog until after the run's
	// release would take the lease rightly, and is not a steal.
	var stopOnce sync.Once
	stopIntruder := func() { stopOnce.Do(func() { close(stop); wg.Wait() }) }
	res, err := Run(ctx, e.cat, slow, jobs[0], Options{LeaseTTL: ttl,
		AfterReplace: func(context.Context, Job) { stopIntruder() }})
	stopIntruder()
	if err != nil || res.Skipped {
		t.Fatalf("slow run: %+v, %v", res, err)
	}
	if took := time.Since(start); took < 2*ttl {
		t.Fatalf("the merge took %v, not longer than 2 TTLs; slow the store down", took)
	}
	if stolen.Load() {
		t.Fatal("another owner took the lease during a renewed run")
	}

	// 2. Lost: the lease is released behind the run's back and taken.
	filesBefore := allFiles(t, e.root)
	j := jobs[1]
	owner := "victim"
	go func() {
		time.Sleep(ttl / 2)
		_ = e.cat.ReleaseLease(ctx, j.LeaseKey(), owner)
		_, _ = e.cat.TryLease(ctx, j.LeaseKey(), "thief", time.Hour)
	}()
	slower := &faultStore{Store: e.store, slow: 20 * time.Millisecond}
	_, err = Run(ctx, e.cat, slower, j, Options{LeaseTTL: ttl, Owner: owner})
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("run that lost its lease: %v, want ErrLeaseLost", err)
	}
	if got := allFiles(t, e.root); !slices.Equal(got, filesBefore) {
		t.Fatal("a run that lost its lease left files")
	}
	noIntents(t, e.cat)
	if len(live(t, e, j)) != len(j.Inputs) {
		t.Fatal("a run that lost its lease changed the catalog")
	}
	if got := visible(t, e.cat, e.store, lake.TableLogs); !slices.Equal(got, before) {
		t.Fatal("visible rows changed")
	}
}

// Two compactors on one catalog (two handles, as two processes have) never
// work on the same partition at once, and the result is exact.
func testConcurrent(t *testing.T, dsn string) {
	ctx := context.Background()
	e := newEnv(t)
	cat1, err := catalog.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer cat1.Close()
	cat2, err := catalog.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer cat2.Close()
	e.cat = cat1
	ingestLogs(t, e)
	ingestTraces(t, e)
	beforeLogs := visible(t, cat1, e.store, lake.TableLogs)
	beforeTraces := visible(t, cat1, e.store, lake.TableTraces)

	// Both plan first, so that both try every partition.
	jobs1, err := Plan(ctx, cat1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	jobs2, err := Plan(ctx, cat2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	working := map[string]string{} // partition -> compactor inside Run's critical section
	var overlaps, done, skipped, stale atomic.Int64
	run := func(name string, cat *catalog.Catalog, jobs []Job) {
		for _, j := range jobs {
			res, err := Run(ctx, cat, e.store, j, Options{
				BeforeReplace: func(context.Context, Job) error {
					mu.Lock()
					if other, ok := working[j.Dir()]; ok {
						t.Errorf("%s and %s both hold %s", name, other, j.Dir())
						overlaps.Add(1)
					}
					working[j.Dir()] = name
					mu.Unlock()
					time.Sleep(5 * time.Millisecond) // widen the window
					mu.Lock()
					delete(working, j.Dir())
					mu.Unlock()
					return nil
				},
			})
			switch {
			case errors.Is(err, catalog.ErrStale):
				stale.Add(1) // planned before the other one swapped it
			case err != nil:
				t.Errorf("%s: %v", name, err)
			case res.Skipped:
				skipped.Add(1)
			default:
				done.Add(1)
			}
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); run("a", cat1, jobs1) }()
	go func() { defer wg.Done(); slices.Reverse(jobs2); run("b", cat2, jobs2) }()
	waittest.Wait(t, &wg, "the two compactors")
	if overlaps.Load() > 0 {
		t.Fatalf("%d overlapping runs", overlaps.Load())
	}
	if int(done.Load()) != len(jobs1) {
		t.Fatalf("%d partitions compacted (%d skipped, %d stale), want each of %d once", done.Load(), skipped.Load(), stale.Load(), len(jobs1))
	}
	if got := visible(t, cat1, e.store, lake.TableLogs); !slices.Equal(got, beforeLogs) {
		t.Fatal("log rows differ after concurrent compaction")
	}
	if got := visible(t, cat1, e.store, lake.TableTraces); !slices.Equal(got, beforeTraces) {
		t.Fatal("span rows differ after concurrent compaction")
	}
	t.Logf("%d partitions, %d compacted, %d skipped (leased), %d stale", len(jobs1), done.Load(), skipped.Load(), stale.Load())
}

func TestCompactConcurrentSQLite(t *testing.T) {
	testConcurrent(t, "sqlite:"+filepath.Join(t.TempDir(), "shared.db"))
}

func TestCompactConcurrentPostgres(t *testing.T) {
	testConcurrent(t, pgtest.Schema(t, pgtest.Start(t)))
}

func TestSweep(t *testing.T) {
	e := newEnv(t)
	ingestLogs(t, e)
	ingestTraces(t, e)
	ctx := context.Background()
	before := visible(t, e.cat, e.store, lake.TableLogs)
	all0, err := e.cat.List(ctx, catalog.Filter{IncludeReplaced: true})
	if err != nil {
		t.Fatal(err)
	}
	runAll(t, e.cat, e.store, Options{})
	replaced := func() []catalog.Segment {
		segs, err := e.cat.List(ctx, catalog.Filter{IncludeReplaced: true})
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(segs, func(s catalog.Segment) bool { return s.ReplacedAt.IsZero() })
	}
	old := replaced()
	if len(old) != len(all0) {
		t.Fatalf("%d replaced segments, want all %d inputs", len(old), len(all0))
	}
	exists := func(p string) bool {
		_, err := os.Stat(filepath.Join(e.root, filepath.FromSlash(p)))
		return err == nil
	}

	// Inside the grace period nothing goes.
	res, err := Sweep(ctx, e.cat, e.store, SweepOptions{Grace: time.Hour})
	if err != nil || res.Files != 0 || res.Waiting != len(old) {
		t.Fatalf("sweep in grace: %+v, %v", res, err)
	}
	// Dry run after the grace period: nothing changes.
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	res, err = Sweep(ctx, e.cat, e.store, SweepOptions{Grace: time.Hour, Now: later, DryRun: true})
	if err != nil || res.Files != len(old) || len(replaced()) != len(old) || !exists(catalog.TrashPath(old[0].Path)) {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
	// A crash between deleting files and forgetting rows: files gone, rows
	// left. Harmless (not live) and finished by the next sweep.
	for _, s := range old[:2] {
		if err := e.store.Remove(catalog.TrashPath(s.Path)); err != nil {
			t.Fatal(err)
		}
	}
	if got := visible(t, e.cat, e.store, lake.TableLogs); !slices.Equal(got, before) {
		t.Fatal("visible rows changed after deleting replaced files")
	}
	res, err = Sweep(ctx, e.cat, e.store, SweepOptions{Grace: time.Hour, Now: later})
	if err != nil || res.Files != len(old) || res.Segments != len(old) {
		t.Fatalf("sweep: %+v, %v", res, err)
	}
	for _, s := range old {
		if exists(s.Path) || exists(catalog.TrashPath(s.Path)) {
			t.Fatalf("replaced file %q still there", s.Path)
		}
	}
	if n := len(replaced()); n != 0 {
		t.Fatalf("%d replaced rows left", n)
	}
	if got := visible(t, e.cat, e.store, lake.TableLogs); !slices.Equal(got, before) {
		t.Fatal("visible rows changed by the sweep")
	}
	// Idempotent.
	if res, err := Sweep(ctx, e.cat, e.store, SweepOptions{Grace: -1}); err != nil || res != (SweepResult{}) {
		t.Fatalf("second sweep: %+v, %v", res, err)
	}
	// Retention's Replace(ids, nil) is swept the same way; live files stay.
	liveSegs, err := e.cat.List(ctx, catalog.Filter{})
	if err != nil || len(liveSegs) < 2 {
		t.Fatalf("live: %d, %v", len(liveSegs), err)
	}
	if err := e.cat.Replace(ctx, []int64{liveSegs[0].ID}, nil); err != nil {
		t.Fatal(err)
	}
	res, err = Sweep(ctx, e.cat, e.store, SweepOptions{Grace: -1})
	if err != nil || res.Files != 1 || res.Moved != 1 || exists(liveSegs[0].Path) || exists(catalog.TrashPath(liveSegs[0].Path)) {
		t.Fatalf("sweep after retention: %+v, %v", res, err)
	}
	for _, s := range liveSegs[1:] {
		if !exists(s.Path) {
			t.Fatalf("live file %q swept", s.Path)
		}
	}
}
