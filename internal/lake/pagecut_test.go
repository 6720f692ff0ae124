package lake

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/signal"
)

// skewedLogs makes logs of services with the given numbers of records,
// in the batch interleaved round robin (the writer sorts them).
func skewedLogs(sizes ...int) *signal.Logs {
	l := new(signal.Logs)
	c := &l.Common
	var res []uint32
	for s := range sizes {
		res = append(res, addResource(c, func() {
			attr(c, "service.name", signal.ValueString, fmt.Sprintf("svc-%04d", s))
		}))
	}
	sc := addScope(c, "lib", "1", func() {})
	base := fixedNow.Truncate(time.Hour).UnixNano()
	left := slices.Clone(sizes)
	for i := 0; ; i++ {
		added := false
		for s := range left {
			if left[s] == 0 {
				continue
			}
			left[s]--
			added = true
			j := l.AppendRecord(res[s], sc)
			l.Time[j] = base + int64(i)*1000 + int64(s)
			l.SeverityNum[j] = int32(1 + i%20)
			l.BodyType[j] = signal.ValueString
			l.Body[j] = uint64(c.AppendString(fmt.Sprintf("request %d of %d", i, s)))
			l.Flags[j] = uint32(i % 3)
			l.Attr[j] = attrRange(c, func() { attr(c, "n", signal.ValueInt, i%7) })
		}
		if !added {
			return l
		}
	}
}

// TestPagesStartAtSortKeyGroups: every column of a file the writer wrote
// of a logs file starts a page at both ends of each run of one service
// name of pageCutRows rows or more, so that compaction copies a flush's
// rows of one service as whole pages; smaller runs start none (a file of
// many small services keeps one page per column chunk), and metrics files
// are not cut at metric names.
func TestPagesStartAtSortKeyGroups(t *testing.T) {
	cases := []struct {
		name, table, key string
		opts             Options
		write            func(w *Writer) error
		maxPages         int // most pages in any column chunk, 0: no bound
		cut              bool
	}{
		{"skewed-logs", TableLogs, format.ColServiceName, Options{},
			func(w *Writer) error { return w.WriteLogs("t", skewedLogs(5000, 3, 2500, 40, 9000, 1, 4096, 4095)) }, 0, true},
		{"skewed-logs-row-groups", TableLogs, format.ColServiceName, Options{RowGroupRows: 4000},
			func(w *Writer) error { return w.WriteLogs("t", skewedLogs(5000, 3, 2500, 40, 9000, 1, 4096, 4095)) }, 0, true},
		{"tiny-services", TableLogs, format.ColServiceName, Options{},
			func(w *Writer) error { return w.WriteLogs("t", skewedLogs(slices.Repeat([]int{2}, 3000)...)) }, 1, true},
		{"metrics", TableMetrics, format.ColMetricName, Options{},
			func(w *Writer) error { return w.WriteMetrics("t", scalarMetrics(20_000, false)) }, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Root = t.TempDir()
			c.opts.Now = func() time.Time { return fixedNow }
			var paths []string
			w, err := NewWriter(c.opts, func(s Segment) error {
				paths = append(paths, filepath.Join(c.opts.Root, filepath.FromSlash(s.Path)))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.write(w); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if len(paths) != 1 {
				t.Fatalf("%d files, want 1", len(paths))
			}
			f := openParquetFile(t, paths[0])
			col, ok := f.Schema().Lookup(c.key)
			if !ok {
				t.Fatalf("no column %s", c.key)
			}
			// The file's groups of one key, and where each row group starts.
			var keys []string
			var rgStart []int
			for _, rg := range f.RowGroups() {
				rgStart = append(rgStart, len(keys))
				for _, v := range chunkValues(t, rg.ColumnChunks()[col.ColumnIndex]) {
					keys = append(keys, string(v.ByteArray()))
				}
			}
			rgStart = append(rgStart, len(keys))
			var cuts []int // file rows where a page must start
			bigGroups := 0
			for s, e := 0, 0; s < len(keys); s = e {
				for e = s; e < len(keys) && keys[e] == keys[s]; e++ {
				}
				if e-s >= pageCutRows {
					cuts = append(cuts, s, e)
					bigGroups++
				}
			}
			if c.maxPages == 0 && bigGroups < 2 {
				t.Fatalf("%d groups of %d rows or more: the case tests nothing", bigGroups, pageCutRows)
			}
			for g, rg := range f.RowGroups() {
				for j, cc := range rg.ColumnChunks() {
					oi, err := cc.OffsetIndex()
					if err != nil {
						t.Fatal(err)
					}
					starts := map[int]bool{}
					for p := range oi.NumPages() {
						starts[rgStart[g]+int(oi.FirstRowIndex(p))] = true
					}
					if c.maxPages > 0 && oi.NumPages() > c.maxPages {
						t.Errorf("row group %d column %d: %d pages, want at most %d", g, j, oi.NumPages(), c.maxPages)
					}
					for _, x := range cuts {
						if x <= rgStart[g] || x >= rgStart[g+1] {
							continue
						}
						if c.cut && !starts[x] {
							t.Errorf("row group %d column %d (%v): no page starts at file row %d (%s)",
								g, j, f.Schema().Columns()[j], x, keys[x])
						}
						if !c.cut && starts[x] {
							t.Errorf("row group %d column %d (%v): a page starts at file row %d (%s), a metric name's first",
								g, j, f.Schema().Columns()[j], x, keys[x])
						}
					}
				}
			}
		})
	}
}

// TestPageCutsBound: pageCuts puts a cut at both ends of each run of
// pageCutRows keys or more and none elsewhere.
func TestPageCutsBound(t *testing.T) {
	var keys []rowKey
	for k, n := range []int{3, 10, 10, 2, 4, 10, 1} {
		for range n {
			keys = append(keys, rowKey{k1: uint32(k)})
		}
	}
	got := pageCuts(nil, keys, 10)
	// runs: [0,3) [3,13) [13,23) [23,25) [25,29) [29,39) [39,40)
	if want := []int64{3, 13, 23, 29, 39}; !slices.Equal(got, want) {
		t.Errorf("cuts %v, want %v", got, want)
	}
	if got := pageCuts(nil, keys[3:23], 10); !slices.Equal(got, []int64{10}) {
		t.Errorf("cuts of two whole runs %v, want [10]", got)
	}
	if got := pageCuts(nil, keys[:3], 10); len(got) != 0 {
		t.Errorf("cuts of a small run %v, want none", got)
	}
}
