package compact

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// ingestNow is the clock of the ingest writers in these tests.
var ingestNow = time.Date(2025, 6, 1, 12, 30, 0, 0, time.UTC)

// parts is how many ingest writers each corpus batch is split over, so
// that every partition gets several segments.
const parts = 3

type lakeEnv struct {
	root  string
	store lake.Store
	cat   *catalog.Catalog
}

func newEnv(t *testing.T) *lakeEnv {
	t.Helper()
	dir := t.TempDir()
	cat, err := catalog.Open(context.Background(), filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	root := filepath.Join(dir, "lake")
	return &lakeEnv{root: root, store: lake.NewLocalStore(root), cat: cat}
}

func corpus(t testing.TB, kind string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range corpustest.Files(t, kind) {
		if !strings.Contains(p, ".binpb") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if b, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, b)
	}
	return out
}

// ingest writes each part with its own writer (small row groups, so the
// merge streams several per input) and catalogs the files.
func (e *lakeEnv) ingest(t testing.TB, write []func(w *lake.Writer) error) {
	t.Helper()
	for _, fn := range write {
		var segs []catalog.Segment
		w, err := lake.NewWriter(lake.Options{
			Store: e.store, RowGroupRows: 500,
			Now: func() time.Time { return ingestNow },
		}, func(s lake.Segment) error { segs = append(segs, s.CatalogRow()); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := fn(w); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := e.cat.AddSegments(context.Background(), segs...); err != nil {
			t.Fatal(err)
		}
	}
}

// dealCorpus decodes the corpus files of kind and deals their records
// round robin over n batches, so that every batch spans the whole corpus
// and a merge of them interleaves; it returns one write of tenant "acme"
// per batch.
func dealCorpus[B any, P interface {
	*B
	Len() int
	CopyFrom(*B, int)
}](t testing.TB, kind string, n int, decode func(P, []byte) error, write func(*lake.Writer, string, P) error) []func(*lake.Writer) error {
	split := make([]B, n)
	for _, pb := range corpus(t, kind) {
		var b B
		if err := decode(&b, pb); err != nil {
			t.Fatal(err)
		}
		for i := range P(&b).Len() {
			P(&split[i%n]).CopyFrom(&b, i)
		}
	}
	var fns []func(*lake.Writer) error
	for i := range split {
		fns = append(fns, func(w *lake.Writer) error { return write(w, "acme", &split[i]) })
	}
	return fns
}

func ingestLogs(t *testing.T, e *lakeEnv) {
	e.ingest(t, dealCorpus(t, "logs", parts, otlp.DecodeLogs, (*lake.Writer).WriteLogs))
}

func ingestMetrics(t *testing.T, e *lakeEnv) {
	e.ingest(t, dealCorpus(t, "metrics", parts, otlp.DecodeMetrics, (*lake.Writer).WriteMetrics))
}

// canon renders a record so that equal records render equally.
type canon struct {
	c *signal.Common
	b strings.Builder
}

func (k *canon) f(format string, args ...any) { fmt.Fprintf(&k.b, format, args...) }

func (k *canon) value(t signal.ValueType, v uint64) {
	switch t {
	case signal.ValueString, signal.ValueBytes, signal.ValueArray, signal.ValueMap:
		b := k.c.Bytes(signal.Str(v))
		k.b.WriteString(strconv.Itoa(int(t)) + ":" + strconv.Itoa(len(b)) + ":")
		k.b.Write(b)
	default:
		k.b.WriteString(strconv.Itoa(int(t)) + ":" + strconv.FormatUint(v, 10))
	}
}

func (k *canon) attrs(r signal.Range) {
	var kv []string
	for i := r.Start; i < r.End; i++ {
		s := canon{c: k.c}
		s.b.WriteString(k.c.Keys.Name(k.c.Attrs.Key[i]))
		s.b.WriteByte('=')
		s.value(k.c.Attrs.Type[i], k.c.Attrs.Val[i])
		kv = append(kv, s.b.String())
	}
	slices.Sort(kv)
	k.f("{%s}", strings.Join(kv, ","))
}

// common renders the resource and scope, once per batch (they are shared
// by many records; rendering them per record made the tests slow).
func (k *canon) common(cache map[[2]uint32]string, res, scope uint32) {
	if s, ok := cache[[2]uint32{res, scope}]; ok {
		k.b.WriteString(s)
		return
	}
	sub := canon{c: k.c}
	r, s := k.c.Resources[res], k.c.Scopes[scope]
	sub.f(" res=")
	sub.attrs(r.Attrs)
	sub.f("%q scope=%q/%q", k.c.Bytes(r.SchemaURL), k.c.Bytes(s.Name), k.c.Bytes(s.Version))
	sub.attrs(s.Attrs)
	cache[[2]uint32{res, scope}] = sub.b.String()
	k.b.WriteString(sub.b.String())
}

func canonLog(cache map[[2]uint32]string, l *signal.Logs, i int) string {
	k := canon{c: &l.Common}
	k.f("t=%d o=%d sev=%d/%q body=", l.Time[i], l.ObservedTime[i], l.SeverityNum[i], l.Bytes(l.SeverityText[i]))
	k.value(l.BodyType[i], l.Body[i])
	k.f(" trace=%x/%x flags=%d ev=%q attrs=", l.TraceID[i], l.SpanID[i], l.Flags[i], l.Bytes(l.EventName[i]))
	k.attrs(l.Attr[i])
	k.common(cache, l.Resource[i], l.Scope[i])
	return k.b.String()
}

func canonPoint(cache map[[2]uint32]string, m *signal.Metrics, i int) string {
	k := canon{c: &m.Common}
	d := m.Descs[m.Desc[i]]
	k.f("name=%q type=%d sid=%d st=%d t=%d num=", m.Bytes(d.Name), d.Type, m.SeriesID[i], m.StartTime[i], m.Time[i])
	k.value(m.NumberType[i], m.Number[i])
	k.f(" count=%d sum=%v has=%d buckets=%v bounds=%v attrs=", m.Count[i], m.Sum[i], m.Has[i],
		m.U64[m.BucketCounts[i].Start:m.BucketCounts[i].End], m.F64[m.Bounds[i].Start:m.Bounds[i].End])
	k.attrs(m.Attr[i])
	k.common(cache, m.Resource[i], m.Scope[i])
	return k.b.String()
}

// sortKey is the table's sort key of a row as the compaction writer sees
// it (clock pinned to the hour's last nanosecond).
type sortKey struct {
	key string
	sid uint64
	t   int64
}

func keyLess(a, b sortKey) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	if a.sid != b.sid {
		return a.sid < b.sid
	}
	return a.t < b.t
}

// readSeg returns the canonical records of a segment and their sort keys.
func readSeg(t *testing.T, e *lakeEnv, s catalog.Segment) (recs []string, keys []sortKey) {
	t.Helper()
	f, err := lake.OpenObject(e.store, s.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	day, _ := time.Parse("2006-01-02", s.Day)
	clock := day.Add(time.Duration(s.Hour)*time.Hour + time.Hour - 1).UnixNano()
	skew := int64(lake.DefaultMaxFutureSkew)
	for {
		cache := map[[2]uint32]string{}
		switch s.Table {
		case lake.TableLogs:
			var l signal.Logs
			err = f.NextLogs(&l)
			for i := range l.Len() {
				recs = append(recs, canonLog(cache, &l, i))
				pt := l.Time[i]
				if !validTime(pt, clock, skew) {
					if pt = l.ObservedTime[i]; !validTime(pt, clock, skew) {
						pt = clock
					}
				}
				keys = append(keys, sortKey{key: strings.Clone(l.ServiceName(l.Resource[i])), t: pt})
			}
		case lake.TableTraces:
			var sp signal.Spans
			err = f.NextSpans(&sp)
			for i := range sp.Len() {
				recs = append(recs, fmt.Sprintf("%x/%x", sp.TraceID[i], sp.SpanID[i]))
				pt := sp.StartTime[i]
				if !validTime(pt, clock, skew) {
					pt = clock
				}
				keys = append(keys, sortKey{key: strings.Clone(sp.ServiceName(sp.Resource[i])), t: pt})
			}
		case lake.TableMetrics:
			var m signal.Metrics
			err = f.NextMetrics(&m)
			for i := range m.Len() {
				recs = append(recs, canonPoint(cache, &m, i))
				keys = append(keys, sortKey{strings.Clone(m.String(m.Descs[m.Desc[i]].Name)), m.SeriesID[i], m.Time[i]})
			}
		}
		if errors.Is(err, io.EOF) {
			return recs, keys
		}
		if err != nil {
			t.Fatalf("read %q: %v", s.Path, err)
		}
	}
}

func partitionRecords(t *testing.T, e *lakeEnv, segs []catalog.Segment) []string {
	var all []string
	for _, s := range segs {
		r, _ := readSeg(t, e, s)
		all = append(all, r...)
	}
	slices.Sort(all)
	return all
}

func live(t *testing.T, e *lakeEnv, j Job) []catalog.Segment {
	t.Helper()
	segs, err := e.cat.List(context.Background(), catalog.Filter{Table: j.Table, Tenant: j.Tenant, IncludeReplaced: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []catalog.Segment
	for _, s := range segs {
		if s.Day == j.Day && s.Hour == j.Hour && s.ReplacedAt.IsZero() {
			out = append(out, s)
		}
	}
	return out
}

func lakeFiles(t *testing.T, e *lakeEnv) []string {
	t.Helper()
	var out []string
	if err := e.store.Walk("", func(p string, _ int64) error {
		out = append(out, p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// compactAll plans, runs every job and checks the invariants of each.
// It returns the rows compacted and the most outputs of one job.
func compactAll(t *testing.T, e *lakeEnv, opts Options) (rows int64, maxOutputs int) {
	t.Helper()
	ctx := context.Background()
	jobs, err := Plan(ctx, e.cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) == 0 {
		t.Fatal("no compaction jobs planned")
	}
	for _, j := range jobs {
		if len(j.Inputs) < 2 {
			t.Fatalf("job %s has %d inputs", j.Dir(), len(j.Inputs))
		}
		before := partitionRecords(t, e, j.Inputs)
		res, err := Run(ctx, e.cat, e.store, j, opts)
		if err != nil {
			t.Fatalf("run %s: %v", j.Dir(), err)
		}
		if res.Skipped || len(res.Outputs) == 0 || res.RowsOut != int64(len(before)) {
			t.Fatalf("run %s: %+v (%d rows before)", j.Dir(), res, len(before))
		}
		rows += res.RowsOut
		maxOutputs = max(maxOutputs, len(res.Outputs))
		now := live(t, e, j)
		if len(now) != len(res.Outputs) {
			t.Fatalf("%s: %d live segments after compaction, want the %d outputs", j.Dir(), len(now), len(res.Outputs))
		}
		maxLevel := 0
		for _, s := range j.Inputs {
			maxLevel = max(maxLevel, s.Level)
		}
		for _, s := range now {
			if !slices.ContainsFunc(res.Outputs, func(o catalog.Segment) bool { return o.Path == s.Path }) {
				t.Fatalf("%s: live segment %q is not an output", j.Dir(), s.Path)
			}
			if s.Level != maxLevel+1 {
				t.Fatalf("%s: output level %d, want %d", j.Dir(), s.Level, maxLevel+1)
			}
			_, keys := readSeg(t, e, s)
			for i := 1; i < len(keys); i++ {
				if keyLess(keys[i], keys[i-1]) {
					t.Fatalf("%s: %q not sorted at row %d: %+v after %+v", j.Dir(), s.Path, i, keys[i], keys[i-1])
				}
			}
		}
		after := partitionRecords(t, e, now)
		if !slices.Equal(before, after) {
			t.Fatalf("%s: records differ after compaction: %d before, %d after", j.Dir(), len(before), len(after))
		}
		all, err := e.cat.List(ctx, catalog.Filter{Table: j.Table, IncludeReplaced: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range j.Inputs {
			i := slices.IndexFunc(all, func(s catalog.Segment) bool { return s.ID == in.ID })
			if i < 0 || all[i].ReplacedAt.IsZero() {
				t.Fatalf("%s: input %d not marked replaced", j.Dir(), in.ID)
			}
			// Out of the Hive tree at the swap, kept in the trash for the sweeper.
			if _, err := os.Stat(filepath.Join(e.root, filepath.FromSlash(catalog.TrashPath(in.Path)))); err != nil {
				t.Fatalf("%s: input file not in the trash until the sweeper: %v", j.Dir(), err)
			}
			if _, err := os.Stat(filepath.Join(e.root, filepath.FromSlash(in.Path))); err == nil {
				t.Fatalf("%s: replaced input %s still in the Hive tree after the swap", j.Dir(), in.Path)
			}
		}
	}
	// Nothing left to do.
	if jobs, err := Plan(ctx, e.cat, Options{}); err != nil || len(jobs) != 0 && opts.TargetBytes == 0 {
		t.Fatalf("second plan: %d jobs, %v", len(jobs), err)
	}
	return rows, maxOutputs
}

func TestCompactLogs(t *testing.T) {
	e := newEnv(t)
	ingestLogs(t, e)
	if rows, _ := compactAll(t, e, Options{}); rows < 1000 {
		t.Fatalf("compacted only %d log records", rows)
	}
}

func TestCompactMetricsRolls(t *testing.T) {
	e := newEnv(t)
	ingestMetrics(t, e)
	// Small outputs, so a job writes several files, each sorted.
	rows, outs := compactAll(t, e, Options{TargetBytes: 1 << 20, RowGroupRows: 1000})
	if rows < 1000 || outs < 2 {
		t.Fatalf("compacted %d points, at most %d outputs per job; want a job that rolls", rows, outs)
	}
}

func TestCompactStaleLeavesOldSet(t *testing.T) {
	e := newEnv(t)
	ingestLogs(t, e)
	ctx := context.Background()
	jobs, err := Plan(ctx, e.cat, Options{})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	j := jobs[0]
	// A concurrent run already replaced the first input.
	if err := e.cat.Replace(ctx, []int64{j.Inputs[0].ID}, nil); err != nil {
		t.Fatal(err)
	}
	filesBefore := lakeFiles(t, e)
	liveBefore := live(t, e, j)
	_, err = Run(ctx, e.cat, e.store, j, Options{})
	if !errors.Is(err, catalog.ErrStale) {
		t.Fatalf("run on stale inputs: %v, want ErrStale", err)
	}
	if got := lakeFiles(t, e); !slices.Equal(got, filesBefore) {
		t.Fatalf("files changed by a failed run:\n got %q\nwant %q", got, filesBefore)
	}
	liveAfter := live(t, e, j)
	if len(liveAfter) != len(liveBefore) {
		t.Fatalf("live segments changed: %d before, %d after", len(liveBefore), len(liveAfter))
	}
	for i := range liveAfter {
		if liveAfter[i].ID != liveBefore[i].ID {
			t.Fatalf("live segments changed: %v", liveAfter)
		}
	}
	// The lease was released: a fresh plan compacts the partition.
	jobs, err = Plan(ctx, e.cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j2 := range jobs {
		if j2.Dir() == j.Dir() {
			if res, err := Run(ctx, e.cat, e.store, j2, Options{}); err != nil || res.Skipped {
				t.Fatalf("rerun: %+v, %v", res, err)
			}
		}
	}
}

func TestCompactSkipsLeasedPartition(t *testing.T) {
	e := newEnv(t)
	ingestLogs(t, e)
	ctx := context.Background()
	jobs, err := Plan(ctx, e.cat, Options{})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	j := jobs[0]
	if ok, err := e.cat.TryLease(ctx, j.LeaseKey(), "someone-else", time.Minute); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	filesBefore := lakeFiles(t, e)
	res, err := Run(ctx, e.cat, e.store, j, Options{})
	if err != nil || !res.Skipped {
		t.Fatalf("run on leased partition: %+v, %v", res, err)
	}
	if got := lakeFiles(t, e); !slices.Equal(got, filesBefore) {
		t.Fatal("a skipped run wrote files")
	}
	if len(live(t, e, j)) != len(j.Inputs) {
		t.Fatal("a skipped run changed the catalog")
	}
}

func TestPlanThresholds(t *testing.T) {
	e := newEnv(t)
	ingestLogs(t, e)
	ctx := context.Background()
	// Every segment is at least 1 byte: nothing is small.
	if jobs, err := Plan(ctx, e.cat, Options{TargetBytes: 1}); err != nil || len(jobs) != 0 {
		t.Fatalf("plan with TargetBytes 1: %d jobs, %v", len(jobs), err)
	}
	jobs, err := Plan(ctx, e.cat, Options{MaxInputs: 2})
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	for _, j := range jobs {
		if len(j.Inputs) != 2 || j.Inputs[0].ID >= j.Inputs[1].ID {
			t.Fatalf("job %s inputs %v", j.Dir(), j.Inputs)
		}
	}
	if jobs, err := Plan(ctx, e.cat, Options{Table: lake.TableMetrics}); err != nil || len(jobs) != 0 {
		t.Fatalf("plan for metrics in a logs-only lake: %d jobs, %v", len(jobs), err)
	}
}

// Rollup hours hold one file per tier; compaction must leave them alone.
func TestPlanSkipsRollupTable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var segs []catalog.Segment
	hour := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC).UnixNano()
	for i, lvl := range []int{60, 300, 3600} {
		segs = append(segs, catalog.Segment{
			Table: "metrics_rollup", Tenant: "default", Day: "2026-01-02", Hour: 3,
			Path: fmt.Sprintf("metrics_rollup/tenant=default/dt=2026-01-02/hour=03/r%d.parquet", i),
			Rows: 10, Bytes: 100, Level: lvl, MinTime: hour, MaxTime: hour + 1,
		})
	}
	if err := e.cat.AddSegments(ctx, segs...); err != nil {
		t.Fatal(err)
	}
	jobs, err := Plan(ctx, e.cat, Options{})
	if err != nil || len(jobs) != 0 {
		t.Fatalf("plan over rollup segments only: %v, %v; want no jobs", jobs, err)
	}
}

func TestPlanMergeRowBudget(t *testing.T) {
	e := newEnv(t)
	ingestLogs(t, e)
	ctx := context.Background()
	jobs, err := Plan(ctx, e.cat, Options{})
	if err != nil || len(jobs) != 1 || len(jobs[0].Inputs) != parts {
		t.Fatalf("plan: %v, %v", jobs, err)
	}
	one := jobs[0].Inputs[0].Rows
	// Room for two inputs only; a budget below one input still gives two.
	for _, c := range []struct {
		budget int64
		want   int
	}{{2*one + 1, 2}, {1, 2}, {1 << 30, parts}} {
		jobs, err := Plan(ctx, e.cat, Options{MaxMergeRows: c.budget})
		if err != nil || len(jobs) != 1 || len(jobs[0].Inputs) != c.want {
			t.Fatalf("budget %d: %d jobs (%v), want one of %d inputs", c.budget, len(jobs), err, c.want)
		}
	}
}
