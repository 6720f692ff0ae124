package compact

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/signal"
)

// names is n copies of each of the given names, in order.
func names(groups ...any) []string {
	var out []string
	for i := 0; i < len(groups); i += 2 {
		out = append(out, slices.Repeat([]string{groups[i].(string)}, groups[i+1].(int))...)
	}
	return out
}

// TestBlockCuts: the column merge starts a page of every output column at
// the start of each service's rows that are pageCutRows or more in a
// block, and at the end of each service's rows that are that many in the
// output row group, across blocks; metrics are not cut.
func TestBlockCuts(t *testing.T) {
	defer func(n int) { pageCutRows = n }(pageCutRows)
	pageCutRows = 2048
	m := &colMerger{job: Job{Table: lake.TableLogs}}
	m.keyLeaf = [4]int{0, -1, 1, -1}
	a := &colInput{name: names("a", 3000, "b", 100)}
	b := &colInput{name: names("b", 50, "c", 2500)}
	blocks := []struct {
		runs []run
		want []int64
	}{
		// a ends at 3000; b is small; c starts at 3150, goes on
		{[]run{{in: a, n: 3100, from: 0, out: 0}, {in: b, n: 2550, from: 0, out: 3100}}, []int64{3000, 3150}},
		// c (2510 rows) ends at 10, d starts there and ends at 3010
		{[]run{{in: &colInput{name: names("c", 10, "d", 3000, "e", 5)}, n: 3015, out: 0}}, []int64{5660, 8660}},
		// e (5 rows) ended with the last block: f starts a page
		{[]run{{in: &colInput{name: names("f", 3000)}, n: 3000, out: 0}}, []int64{8665}},
		// f (3000 rows) ended with the last block
		{[]run{{in: &colInput{name: names("g", 10)}, n: 10, out: 0}}, []int64{11665}},
		// g goes on, small: no cut
		{[]run{{in: &colInput{name: names("g", 10, "h", 4)}, n: 14, out: 0}}, nil},
	}
	for i, bl := range blocks {
		m.runs, m.block = bl.runs, 0
		for _, r := range bl.runs {
			m.block += r.n
		}
		m.blockCuts()
		if !slices.Equal(m.cuts, bl.want) {
			t.Errorf("block %d: cuts %v, want %v", i, m.cuts, bl.want)
		}
		m.rgRows += m.block
	}
	// A new row group starts a page anyway: no cut at its first row.
	m.rgRows = 0
	m.runs, m.block = []run{{in: &colInput{name: names("h", 3000, "i", 1)}, n: 3001}}, 3001
	m.blockCuts()
	if !slices.Equal(m.cuts, []int64{3000}) {
		t.Errorf("new row group: cuts %v, want [3000]", m.cuts)
	}
	m.job.Table = lake.TableMetrics
	m.blockCuts()
	if len(m.cuts) != 0 {
		t.Errorf("metrics: cuts %v, want none", m.cuts)
	}
}

// checkServicePages checks that every column of the compacted logs or
// spans file p starts a page where each service's rows end when they are
// pageCutRows or more of its row group (blockCuts), and returns how many
// such ends it checked.
func checkServicePages(t *testing.T, p string) int {
	t.Helper()
	pf := openParquet(t, p)
	col, ok := pf.Schema().Lookup("service_name")
	if !ok {
		t.Fatalf("%s: no service_name", p)
	}
	checked := 0
	for g, rg := range pf.RowGroups() {
		var svc []string
		forPages(t, rg.ColumnChunks()[col.ColumnIndex], func(_ parquet.Page, vals []parquet.Value) {
			for _, v := range vals {
				svc = append(svc, v.String())
			}
		})
		var ends []int64
		for s, e := 0, 0; s < len(svc); s = e {
			for e = s; e < len(svc) && svc[e] == svc[s]; e++ {
			}
			if e-s >= pageCutRows && e < len(svc) {
				ends = append(ends, int64(e))
			}
		}
		for j, cc := range rg.ColumnChunks() {
			oi, err := cc.OffsetIndex()
			if err != nil {
				t.Fatal(err)
			}
			var starts []int64
			for k := range oi.NumPages() {
				starts = append(starts, oi.FirstRowIndex(k))
			}
			for _, x := range ends {
				if _, found := slices.BinarySearch(starts, x); !found {
					t.Errorf("%s row group %d column %d: no page starts at row %d, where a service of %d rows or more ends",
						p, g, j, x, pageCutRows)
				}
				checked++
			}
		}
	}
	return checked
}

// simpleLogs makes n logs of service svc at times from base + first
// (nanoseconds), one per nanosecond.
func simpleLogs(svc string, first, n int) *signal.Logs {
	l := new(signal.Logs)
	c := &l.Common
	start := uint32(c.Attrs.Len())
	c.Attrs.Append(c.Keys.IDString("service.name"), signal.ValueString, uint64(c.AppendString(svc)))
	c.Resources = append(c.Resources, signal.Resource{Attrs: signal.Range{Start: start, End: uint32(c.Attrs.Len())}})
	c.Scopes = append(c.Scopes, signal.Scope{Name: c.AppendString("lib")})
	base := ingestNow.Truncate(time.Hour).UnixNano()
	for i := range n {
		j := l.AppendRecord(0, 0)
		l.Time[j] = base + int64(first+i)
		l.SeverityNum[j] = int32(1 + i%9)
		l.BodyType[j] = signal.ValueString
		l.Body[j] = uint64(c.AppendString(fmt.Sprintf("r%d", first+i)))
	}
	return l
}

// TestRowGroupsEndBeforeLongRuns: a run of one input that would cross the
// output row group's end, when the row group is half full at least, goes
// whole into the next row group, so its pages are copied as they are
// instead of cut in two and copied row by row; the output equals the one
// built value by value.
func TestRowGroupsEndBeforeLongRuns(t *testing.T) {
	e := newEnv(t)
	e.ingestRowGroups(t, 0, []func(*lake.Writer) error{
		func(w *lake.Writer) error { return w.WriteLogs("acme", simpleLogs("svc", 0, 30_000)) },
		func(w *lake.Writer) error { return w.WriteLogs("acme", simpleLogs("svc", 30_000, 30_000)) },
	})
	jobs, err := Plan(context.Background(), e.cat, Options{Table: lake.TableLogs, MaxMergeRows: 1 << 40})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	opts := Options{RowGroupRows: 40_000, TargetBytes: 1 << 40, MaxMergeRows: 1 << 40}.withDefaults()
	decoded, _ := mergeOut(t, e, jobs[0], opts, false)
	res, written, err := columnMerge(context.Background(), e.store, jobs[0], opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 1 || len(decoded) != 1 {
		t.Fatalf("%d and %d output files, want 1", len(written), len(decoded))
	}
	got := filepath.Join(e.root, filepath.FromSlash(written[0].Path))
	compareFiles(t, got, decoded[0])
	var rows []int64
	for _, rg := range openParquet(t, got).RowGroups() {
		rows = append(rows, rg.NumRows())
	}
	if !slices.Equal(rows, []int64{30_000, 30_000}) {
		t.Errorf("row groups of %v rows, want [30000 30000]: the second input's run was cut", rows)
	}
	// Every page of the second input is copied: none is cut in two.
	if res.PagesCopied == 0 {
		t.Fatal("no page copied")
	}
	t.Logf("%d pages copied", res.PagesCopied)
}
