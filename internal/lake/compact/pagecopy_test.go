package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// flushCorpus is the "flushes" shape of BenchmarkCompactMerge, smaller:
// inputs segments, each per copies of the corpus whose times are squeezed
// into their own slice of benchHour, copies in time order over the
// inputs. A service's rows then come from one input after the other in
// long runs, which cover whole pages. per <= 0 takes as many copies as
// make benchFlushRows rows. mirrorOdd reverses the times within each copy
// of the odd inputs: a service's rows then come in the opposite order,
// and those inputs' dictionaries list their values in another order than
// the even inputs' (flushes of different data).
func flushCorpus[B any, P interface {
	*B
	Len() int
	CopyFrom(*B, int)
}](t testing.TB, kind string, inputs, per int, mirrorOdd bool, decode func(P, []byte) error, times func(P) [][]int64,
	write func(*lake.Writer, string, P) error) []func(*lake.Writer) error {
	var one B
	for _, pb := range corpus(t, kind) {
		if err := decode(&one, pb); err != nil {
			t.Fatal(err)
		}
	}
	if per <= 0 {
		per = (benchFlushRows + P(&one).Len() - 1) / P(&one).Len()
	}
	lo, hi := timeSpan(times(&one)...)
	split := make([]B, inputs)
	for in := range split {
		for k := range per {
			base := P(&split[in]).Len()
			for i := range P(&one).Len() {
				P(&split[in]).CopyFrom(&one, i)
			}
			for _, ts := range times(&split[in]) {
				squeeze(ts[base:], lo, hi, in*per+k, inputs*per)
				if mirrorOdd && in%2 == 1 {
					mirror(ts[base:], in*per+k, inputs*per)
				}
			}
		}
	}
	var fns []func(*lake.Writer) error
	for i := range split {
		fns = append(fns, func(w *lake.Writer) error { return write(w, "acme", &split[i]) })
	}
	return fns
}

// mirror reverses the non-zero times of ts within slot i of n equal
// slots of benchHour (squeeze put them there).
func mirror(ts []int64, i, n int) {
	width := int64(time.Hour) / int64(n)
	start := benchHour.UnixNano() + int64(i)*width
	for j, t := range ts {
		if t != 0 {
			ts[j] = 2*start + width - 1 - t
		}
	}
}

func flushLogs(t testing.TB, inputs, per int) []func(*lake.Writer) error {
	return flushLogsMixed(t, inputs, per, false)
}

// flushLogsMixed is flushLogs, the odd inputs' times mirrored when
// mirrorOdd (flushCorpus).
func flushLogsMixed(t testing.TB, inputs, per int, mirrorOdd bool) []func(*lake.Writer) error {
	return flushCorpus(t, "logs", inputs, per, mirrorOdd, otlp.DecodeLogs,
		func(l *signal.Logs) [][]int64 { return [][]int64{l.Time, l.ObservedTime} }, (*lake.Writer).WriteLogs)
}

// TestVerbatimPagesMatchDecoded merges the same flush-shaped partitions
// twice: copying the pages runs cover whole as they are, and building
// every page from the decoded values. The two outputs must hold the same
// rows in the same order, the same chunk statistics, and a column index,
// offset index and bloom filter that agree with their pages; pyarrow and
// DuckDB must read both the same (when SLUICE_PYTHON is set).
func TestVerbatimPagesMatchDecoded(t *testing.T) {
	cases := []struct {
		name, table string
		write       func(testing.TB) []func(*lake.Writer) error
		// dictionary pages copied verbatim: a service's runs cover whole
		// pages of dictionary columns (pqenc.DictPageRows)
		dict bool
		// dictionary pages remapped: the second input's dictionaries
		// order their values otherwise (pqenc/dictremap.go)
		remap bool
		// output row group rows: several row groups, so pages are
		// copied into row groups after the first too
		rgRows int
	}{
		{"logs", lake.TableLogs, func(t testing.TB) []func(*lake.Writer) error { return flushLogs(t, 2, 4) }, true, false, 20000},
		{"logs-mixed-dictionaries", lake.TableLogs, func(t testing.TB) []func(*lake.Writer) error {
			return flushLogsMixed(t, 2, 4, true)
		}, true, true, 20000},
		{"traces", lake.TableTraces, func(t testing.TB) []func(*lake.Writer) error {
			return flushCorpus(t, "traces", 2, 6, false, otlp.DecodeTraces,
				func(s *signal.Spans) [][]int64 { return [][]int64{s.StartTime, s.EndTime} }, (*lake.Writer).WriteSpans)
		}, false, false, 7000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var pairs []string
			e := newEnv(t)
			e.ingestRowGroups(t, 0, tc.write(t))
			jobs, err := Plan(context.Background(), e.cat, Options{Table: tc.table, MaxMergeRows: 1 << 40})
			if err != nil || len(jobs) == 0 {
				t.Fatalf("plan: %d jobs, %v", len(jobs), err)
			}
			// One output file per job, of several row groups.
			opts := Options{RowGroupRows: tc.rgRows, TargetBytes: 1 << 40, MaxMergeRows: 1 << 40}.withDefaults()
			copied, dictCopied, remapped := int64(0), int64(0), int64(0)
			serviceEnds := 0
			for _, job := range jobs {
				decoded, dres := mergeOut(t, e, job, opts, false)
				if dres.PagesCopied != 0 || dres.DictPagesRemapped != 0 {
					t.Fatalf("%d pages copied, %d remapped with verbatim copies off", dres.PagesCopied, dres.DictPagesRemapped)
				}
				vres, written, err := columnMerge(context.Background(), e.store, job, opts)
				if err != nil {
					t.Fatalf("merge %s: %v", job.Dir(), err)
				}
				copied += vres.PagesCopied
				dictCopied += vres.DictPagesCopied
				remapped += vres.DictPagesRemapped
				if len(written) != 1 || len(decoded) != 1 {
					t.Fatalf("%d and %d output files, want 1", len(written), len(decoded))
				}
				got := filepath.Join(e.root, filepath.FromSlash(written[0].Path))
				compareFiles(t, got, decoded[0])
				checkPageIndexes(t, got)
				serviceEnds += checkServicePages(t, got)
				checkOrder(t, e, job, written)
				checkSegments(t, e, job, written, written)
				// Outside the Hive tree: DuckDB would add its dt, hour and
				// tenant to the schema.
				b, err := os.ReadFile(got)
				if err != nil {
					t.Fatal(err)
				}
				cp := filepath.Join(filepath.Dir(decoded[0]), "verbatim.parquet")
				if err := os.WriteFile(cp, b, 0o644); err != nil {
					t.Fatal(err)
				}
				pairs = append(pairs, cp, decoded[0])
			}
			if copied == 0 {
				t.Fatalf("no page copied verbatim: the test does not test it")
			}
			// (The traces case's services hold fewer rows than that in
			// its 7,000-row row groups.)
			if serviceEnds == 0 && tc.table == lake.TableLogs {
				t.Fatalf("no service of %d rows or more ends inside an output row group: the test does not test blockCuts", pageCutRows)
			}
			t.Logf("%d column chunks' pages checked to start where a service of %d rows or more ends", serviceEnds, pageCutRows)
			// Dictionary pages too: the inputs' dictionaries list the
			// corpus's values in the same order, so the output chunk's
			// can take them (pqenc/dictcopy.go).
			if tc.dict && dictCopied == 0 {
				t.Fatalf("no dictionary page copied verbatim (%d pages)", copied)
			}
			// Remapped only where an input's dictionary orders its values
			// otherwise than the output chunk's.
			if tc.remap != (remapped > 0) {
				t.Fatalf("%d dictionary pages remapped, want some: %v", remapped, tc.remap)
			}
			t.Logf("%s: %d pages copied verbatim, %d of them dictionary-encoded; %d dictionary pages remapped",
				tc.name, copied, dictCopied, remapped)
			py := os.Getenv("SLUICE_PYTHON")
			if py == "" {
				corpustest.Missing(t, "SLUICE_PYTHON (pyarrow and DuckDB read the verbatim-copied files)")
				return
			}
			out, err := exec.Command(py, append([]string{filepath.Join("..", "testdata", "oracle_compare.py")}, pairs...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("oracle_compare.py: %v\n%s", err, out)
			}
			t.Logf("%s", out)
		})
	}
}

// mergeOut merges job with verbatim page copies on or off, moves the
// output files out of the lake (a second merge of the job writes the same
// paths) and returns their paths.
func mergeOut(t *testing.T, e *lakeEnv, job Job, opts Options, verbatim bool) ([]string, Result) {
	t.Helper()
	defer func(v bool) { verbatimPages = v }(verbatimPages)
	verbatimPages = verbatim
	res, written, err := columnMerge(context.Background(), e.store, job, opts)
	if err != nil {
		t.Fatalf("merge %s: %v", job.Dir(), err)
	}
	dir := t.TempDir()
	var out []string
	for i, s := range written {
		p := filepath.Join(dir, fmt.Sprintf("%d.parquet", i))
		if err := os.Rename(filepath.Join(e.root, filepath.FromSlash(s.Path)), p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out, res
}

func openParquet(t *testing.T, p string) *parquet.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return pf
}

// compareFiles compares two files value by value, row group by row
// group, and their chunks' statistics.
func compareFiles(t *testing.T, got, want string) {
	t.Helper()
	g, w := openParquet(t, got), openParquet(t, want)
	if !parquet.EqualNodes(g.Schema(), w.Schema()) {
		t.Fatalf("schemas differ:\n%s\n%s", g.Schema(), w.Schema())
	}
	grg, wrg := g.Metadata().RowGroups, w.Metadata().RowGroups
	if len(grg) != len(wrg) {
		t.Fatalf("%d row groups, want %d", len(grg), len(wrg))
	}
	for i := range grg {
		if grg[i].NumRows != wrg[i].NumRows {
			t.Fatalf("row group %d: %d rows, want %d", i, grg[i].NumRows, wrg[i].NumRows)
		}
		for j := range grg[i].Columns {
			gm, wm := &grg[i].Columns[j].MetaData, &wrg[i].Columns[j].MetaData
			gs, ws := gm.Statistics, wm.Statistics
			if gm.NumValues != wm.NumValues || gs.NullCount != ws.NullCount ||
				string(gs.MinValue) != string(ws.MinValue) || string(gs.MaxValue) != string(ws.MaxValue) ||
				!slices.Equal(gm.Encoding, wm.Encoding) {
				t.Fatalf("row group %d column %v: %d values, statistics %+v, encodings %v; want %d, %+v, %v",
					i, gm.PathInSchema, gm.NumValues, gs, gm.Encoding, wm.NumValues, ws, wm.Encoding)
			}
		}
		gcc, wcc := g.RowGroups()[i].ColumnChunks(), w.RowGroups()[i].ColumnChunks()
		for j := range gcc {
			gv, wv := readValues(t, gcc[j]), readValues(t, wcc[j])
			if len(gv) != len(wv) {
				t.Fatalf("row group %d column %d: %d values, want %d", i, j, len(gv), len(wv))
			}
			for k := range gv {
				x, y := gv[k], wv[k]
				if x.RepetitionLevel() != y.RepetitionLevel() || x.DefinitionLevel() != y.DefinitionLevel() || !sameValue(x, y) {
					t.Fatalf("row group %d column %d value %d: %v, want %v", i, j, k, x, y)
				}
			}
		}
	}
}

func sameValue(x, y parquet.Value) bool {
	if x.IsNull() || y.IsNull() {
		return x.IsNull() == y.IsNull()
	}
	if x.Kind() == parquet.Double {
		return math.Float64bits(x.Double()) == math.Float64bits(y.Double())
	}
	return parquet.Equal(x, y)
}

// readValues reads every value of a chunk, with its levels.
func readValues(t *testing.T, cc parquet.ColumnChunk) []parquet.Value {
	t.Helper()
	var out []parquet.Value
	forPages(t, cc, func(p parquet.Page, vals []parquet.Value) {
		for _, v := range vals {
			out = append(out, v.Clone())
		}
	})
	return out
}

func forPages(t *testing.T, cc parquet.ColumnChunk, fn func(parquet.Page, []parquet.Value)) {
	t.Helper()
	pages := cc.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]parquet.Value, p.NumValues())
		n, err := p.Values().ReadValues(vals)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		fn(p, vals[:n])
		parquet.Release(p)
	}
}

// checkPageIndexes checks every page of the file against its column
// index and offset index entries: its first row, its nulls, and bounds
// that are the page's (byte arrays: that hold the page's values, as they
// may be cut).
func checkPageIndexes(t *testing.T, p string) {
	t.Helper()
	pf := openParquet(t, p)
	for g, rg := range pf.RowGroups() {
		for j, cc := range rg.ColumnChunks() {
			ci, err := cc.ColumnIndex()
			if err != nil {
				t.Fatalf("row group %d column %d: column index: %v", g, j, err)
			}
			oi, err := cc.OffsetIndex()
			if err != nil {
				t.Fatalf("row group %d column %d: offset index: %v", g, j, err)
			}
			typ := cc.Type()
			k, row := 0, int64(0)
			forPages(t, cc, func(page parquet.Page, vals []parquet.Value) {
				where := fmt.Sprintf("row group %d column %d page %d", g, j, k)
				if k >= ci.NumPages() || k >= oi.NumPages() {
					t.Fatalf("%s: past the %d pages of the column index", where, ci.NumPages())
				}
				if oi.FirstRowIndex(k) != row {
					t.Fatalf("%s: first row %d, offset index says %d", where, row, oi.FirstRowIndex(k))
				}
				var lo, hi parquet.Value
				nulls, have := int64(0), false
				for _, v := range vals {
					if v.IsNull() {
						nulls++
						continue
					}
					if v.Kind() == parquet.Double && math.IsNaN(v.Double()) {
						continue
					}
					if !have || typ.Compare(v, lo) < 0 {
						lo = v
					}
					if !have || typ.Compare(v, hi) > 0 {
						hi = v
					}
					have = true
				}
				if ci.NullCount(k) != nulls {
					t.Fatalf("%s: %d nulls, column index says %d", where, nulls, ci.NullCount(k))
				}
				if have {
					if ci.NullPage(k) {
						t.Fatalf("%s: values in a page the column index says is null", where)
					}
					mn, mx := ci.MinValue(k), ci.MaxValue(k)
					if typ.Kind() == parquet.ByteArray {
						if typ.Compare(mn, lo) > 0 || typ.Compare(mx, hi) < 0 {
							t.Fatalf("%s: bounds [%v, %v] do not hold [%v, %v]", where, mn, mx, lo, hi)
						}
					} else if !parquet.Equal(mn, lo) || !parquet.Equal(mx, hi) {
						t.Fatalf("%s: bounds [%v, %v], values [%v, %v]", where, mn, mx, lo, hi)
					}
				}
				row += page.NumRows()
				k++
			})
			if k != ci.NumPages() || row != rg.NumRows() {
				t.Fatalf("row group %d column %d: %d pages of %d rows, index %d pages, row group %d rows", g, j, k, row, ci.NumPages(), rg.NumRows())
			}
		}
	}
}

// TestVerbatimDamagedPageRefused damages the values of a page that a
// merge would copy without decoding: the job fails with an error wrapping
// format.ErrCorrupt (the page's CRC no longer matches), writes nothing,
// and the catalog keeps the inputs live.
func TestVerbatimDamagedPageRefused(t *testing.T) {
	e := newEnv(t)
	e.ingestRowGroups(t, 0, flushLogs(t, 2, 1))
	jobs, err := Plan(context.Background(), e.cat, Options{Table: lake.TableLogs, MaxMergeRows: 1 << 40})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	job := jobs[0]
	// A byte in the middle of the body column's first data page, inside
	// its compressed values.
	in := filepath.Join(e.root, filepath.FromSlash(job.Inputs[1].Path))
	pf := openParquet(t, in)
	leaf, ok := pf.Schema().Lookup(format.ColBody)
	if !ok {
		t.Fatal("no body column")
	}
	var rc format.RawChunk
	if err := format.ReadRawChunk(pf.RowGroups()[0].ColumnChunks()[leaf.ColumnIndex], &rc); err != nil {
		t.Fatal(err)
	}
	pg := rc.Pages[0]
	at := rc.Base + int64(pg.Off+pg.Len-pg.Len/4)
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0x5a
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}

	before, err := e.cat.List(context.Background(), catalog.Filter{Table: lake.TableLogs})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), e.cat, e.store, job, Options{MaxMergeRows: 1 << 40})
	if !errors.Is(err, format.ErrCorrupt) {
		t.Fatalf("merge of a damaged page: %v, want an error wrapping format.ErrCorrupt", err)
	}
	after, err := e.cat.List(context.Background(), catalog.Filter{Table: lake.TableLogs})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("%d live segments after a failed merge, %d before", len(after), len(before))
	}
	for i := range after {
		if after[i].ID != before[i].ID || after[i].Path != before[i].Path {
			t.Fatalf("live segment %d: %+v, before %+v", i, after[i], before[i])
		}
	}
	// Nothing left in the partition but the inputs.
	files, err := filepath.Glob(filepath.Join(e.root, filepath.FromSlash(job.Dir()), "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(job.Inputs) {
		t.Fatalf("%d files in the partition after a failed merge, want its %d inputs: %v", len(files), len(job.Inputs), files)
	}
}
