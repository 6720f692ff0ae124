package compact

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/otlp"
)

// TestColumnMergeMatchesRowMerge merges the same partitions of the corpus
// by columns and by decoded rows (the writer ingest uses) and compares the
// outputs row by row, in order, every column: the two merges are
// independent implementations of one contract. Small row groups and files
// make both roll output row groups and files mid-partition.
func TestColumnMergeMatchesRowMerge(t *testing.T) {
	tables := []struct {
		table string
		write func(testing.TB) []func(*lake.Writer) error
	}{
		{lake.TableLogs, func(t testing.TB) []func(*lake.Writer) error {
			return dealCorpus(t, "logs", 5, otlp.DecodeLogs, (*lake.Writer).WriteLogs)
		}},
		{lake.TableMetrics, func(t testing.TB) []func(*lake.Writer) error {
			return dealCorpus(t, "metrics", 5, otlp.DecodeMetrics, (*lake.Writer).WriteMetrics)
		}},
		{lake.TableTraces, func(t testing.TB) []func(*lake.Writer) error {
			return dealCorpus(t, "traces", 5, otlp.DecodeTraces, (*lake.Writer).WriteSpans)
		}},
	}
	for _, tc := range tables {
		for _, rg := range []int{0, 333} {
			if tc.table == lake.TableMetrics && rg == 0 {
				continue // the slowest table; one shape is enough
			}
			t.Run(fmt.Sprintf("%s/rowgroups=%d", tc.table, rg), func(t *testing.T) {
				e := newEnv(t)
				e.ingestRowGroups(t, rg, tc.write(t))
				jobs, err := Plan(context.Background(), e.cat, Options{Table: tc.table})
				if err != nil || len(jobs) == 0 {
					t.Fatalf("plan: %d jobs, %v", len(jobs), err)
				}
				opts := Options{RowGroupRows: 1000, TargetBytes: 256 << 10}.withDefaults()
				for _, job := range jobs {
					cres, cw, err := columnMerge(context.Background(), e.store, job, opts)
					if err != nil {
						t.Fatalf("column merge %s: %v", job.Dir(), err)
					}
					rres, rw, err := rowMerge(context.Background(), e.store, job, opts)
					if err != nil {
						t.Fatalf("row merge %s: %v", job.Dir(), err)
					}
					if cres.RowsOut != rres.RowsOut || cres.RowsIn != rres.RowsIn {
						t.Fatalf("%s: column merge %d -> %d rows, row merge %d -> %d", job.Dir(), cres.RowsIn, cres.RowsOut, rres.RowsIn, rres.RowsOut)
					}
					// The row merge's files are each sorted, but its short
					// runs reach the writer in rounds, so rows of one file
					// may sort before the last of the previous one: compare
					// the rows as sets, and the column merge's order alone.
					got, want := mergedRows(t, e, cw), mergedRows(t, e, rw)
					if len(got) != len(want) {
						t.Fatalf("%d rows, row merge %d", len(got), len(want))
					}
					slices.Sort(got)
					slices.Sort(want)
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("%s sorted row %d:\n column merge %s\n    row merge %s", job.Dir(), i, got[i], want[i])
						}
					}
					checkOrder(t, e, job, cw)
					checkSegments(t, e, job, cw, rw)
				}
			})
		}
	}
}

// mergedRows is every row of the files, in order, rendered by fileRows;
// each file also opens as a lake file.
func mergedRows(t *testing.T, e *lakeEnv, files []lake.Segment) []string {
	t.Helper()
	var rows []string
	for _, s := range files {
		f, err := lake.OpenObject(e.store, s.Path)
		if err != nil {
			t.Fatal(err)
		}
		if f.NumRows() != s.Rows {
			t.Fatalf("%s: %d rows, segment says %d", s.Path, f.NumRows(), s.Rows)
		}
		f.Close()
		rows = append(rows, fileRows(t, e.store, s.Path)...)
	}
	return rows
}

// checkSegments compares what the two merges say of their files (level,
// partition, time range over all files, as they split rows differently),
// checks the services and metric names of each column merge file against
// its rows, and its footer.
func checkSegments(t *testing.T, e *lakeEnv, job Job, col, row []lake.Segment) {
	t.Helper()
	type summary struct {
		level      int
		minT, maxT int64
	}
	sum := func(segs []lake.Segment) summary {
		s := summary{minT: segs[0].MinTime, maxT: segs[0].MaxTime, level: segs[0].Level}
		for _, g := range segs {
			if g.Table != job.Table || g.Tenant != job.Tenant || g.Day != job.Day || g.Hour != job.Hour || g.Level != s.level {
				t.Fatalf("segment %+v not in the job's partition at one level", g)
			}
			s.minT, s.maxT = min(s.minT, g.MinTime), max(s.maxT, g.MaxTime)
		}
		return s
	}
	if c, r := sum(col), sum(row); c != r {
		t.Fatalf("%s: column merge files %+v, row merge files %+v", job.Dir(), c, r)
	}
	for _, s := range col {
		services, metrics := map[string]bool{}, map[string]bool{}
		for _, r := range fileRows(t, e.store, s.Path) {
			for _, item := range strings.Split(r, " ") {
				if v, ok := strings.CutPrefix(item, "service_name=0:"); ok {
					services[v] = true
				}
				if v, ok := strings.CutPrefix(item, "metric_name=0:"); ok {
					metrics[v] = true
				}
			}
		}
		names := func(set map[string]bool) []string {
			if len(set) > lake.MaxSegmentNames {
				return nil
			}
			return slices.Sorted(maps.Keys(set))
		}
		if want := names(services); !slices.Equal(s.Services, want) {
			t.Fatalf("%s: services %q, rows have %q", s.Path, s.Services, want)
		}
		if want := names(metrics); job.Table == lake.TableMetrics && !slices.Equal(s.MetricNames, want) {
			t.Fatalf("%s: metric names %q, rows have %q", s.Path, s.MetricNames, want)
		}
	}
	for _, s := range col {
		rd, err := e.store.Open(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(rd, rd.Size())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range s.FooterMetadata() {
			if v, ok := pf.Lookup(kv.Key); !ok || v != kv.Value {
				t.Fatalf("%s: footer %s = %q, want %q", s.Path, kv.Key, v, kv.Value)
			}
		}
		if s.SchemaHash != catalog.ParquetSchemaHash(pf.Schema()) || s.Bytes != rd.Size() {
			t.Fatalf("%s: schema hash %s, bytes %d; file has %s, %d", s.Path, s.SchemaHash, s.Bytes,
				catalog.ParquetSchemaHash(pf.Schema()), rd.Size())
		}
		// Every chunk names its whole column path (list elements too).
		for _, rg := range pf.Metadata().RowGroups {
			for j, cc := range rg.Columns {
				if want := pf.Schema().Columns()[j]; !slices.Equal(cc.MetaData.PathInSchema, want) {
					t.Fatalf("%s: chunk %d path_in_schema %v, want %v", s.Path, j, cc.MetaData.PathInSchema, want)
				}
			}
		}
		if job.Table == lake.TableTraces {
			// The bloom filter on trace_id holds every trace id.
			leaf, _ := pf.Schema().Lookup(lake.BloomColumn)
			for _, rg := range pf.RowGroups() {
				cc := rg.ColumnChunks()[leaf.ColumnIndex]
				bf := cc.BloomFilter()
				if bf == nil {
					t.Fatalf("%s: no bloom filter on %s", s.Path, lake.BloomColumn)
				}
				vals := make([]parquet.Value, rg.NumRows())
				pages := cc.Pages()
				for {
					p, err := pages.ReadPage()
					if err != nil {
						break
					}
					n, _ := p.Values().ReadValues(vals)
					for _, v := range vals[:n] {
						if ok, err := bf.Check(v); !v.IsNull() && (err != nil || !ok) {
							t.Fatalf("%s: bloom filter misses trace id %s", s.Path, v)
						}
					}
				}
				pages.Close()
			}
		}
		rd.Close()
	}
}

// checkOrder checks that the rows of files, read in order, are sorted by
// the table's sort key as the compactor computes it.
func checkOrder(t *testing.T, e *lakeEnv, job Job, files []lake.Segment) {
	t.Helper()
	var prev sortKey
	n := 0
	for _, s := range files {
		_, keys := readSeg(t, e, s.CatalogRow())
		for _, k := range keys {
			if n > 0 && keyLess(k, prev) {
				t.Fatalf("%s: row %d key %+v sorts before the previous row's %+v", s.Path, n, k, prev)
			}
			prev = k
			n++
		}
	}
}

// TestCompactTablesInTurn compacts logs, metrics and traces partitions in
// one process, one job after the other: the buffers a job leaves for the
// next (chunkSets, columnSets, colInputs) come from jobs of other tables,
// with more or fewer columns, and must not leak into the output.
func TestCompactTablesInTurn(t *testing.T) {
	// One P: sync.Pool hands a job what the previous job put back.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	e := newEnv(t)
	ingestLogs(t, e)
	ingestMetrics(t, e)
	ingestTraces(t, e)
	tables := []string{lake.TableLogs, lake.TableMetrics, lake.TableTraces}
	before := map[string][]string{}
	for _, table := range tables {
		before[table] = visible(t, e.cat, e.store, table)
	}
	// Metrics (most columns) between logs and traces (fewer).
	for _, table := range tables {
		if runAll(t, e.cat, e.store, Options{Table: table}) == 0 {
			t.Fatalf("no %s partition compacted", table)
		}
	}
	for _, table := range tables {
		if after := visible(t, e.cat, e.store, table); !slices.Equal(before[table], after) {
			t.Fatalf("%s differs after compaction: %d rows before, %d after", table, len(before[table]), len(after))
		}
	}
}
