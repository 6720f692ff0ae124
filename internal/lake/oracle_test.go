package lake

import (
	"bufio"
	"bytes"
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
	"github.com/parquet-go/parquet-go/format"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// oracleEncodeFile is Writer.encodeFile as it was before pqenc: the same
// partition through parquet-go's row writer, one parquet.Value per cell.
func oracleEncodeFile(w *Writer, p *partition, out io.Writer, seg *Segment) error {
	var e valEncoder
	e.maxCols = w.opts.MaxAttributeColumns
	cw := countingWriter{w: out}
	bw := bufio.NewWriter(&cw)
	var pw *parquet.Writer
	open := func(schema *parquet.Schema) (*parquet.Writer, error) {
		pw = parquet.NewWriter(bw, append([]parquet.WriterOption{schema}, FileOptions(seg.Table)...)...)
		return pw, nil
	}
	var schema *parquet.Schema
	var err error
	switch {
	case p.logs != nil:
		_, schema, err = e.encodeLogs(open, p.logs, p.ptime, w.opts.RowGroupRows)
	case p.metrics != nil:
		if slices.Contains(p.metrics.SeriesID, 0) {
			p.metrics.ComputeSeriesIDs()
		}
		_, schema, err = e.encodeMetrics(open, p.metrics, w.opts.RowGroupRows, w.sk)
	case p.spans != nil:
		_, schema, err = e.encodeSpans(open, p.spans, p.ptime, w.opts.RowGroupRows)
	}
	if err != nil {
		return err
	}
	for _, kv := range w.footerKV(seg) {
		pw.SetKeyValueMetadata(kv.Key, kv.Value)
	}
	if err := pw.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	seg.Bytes = cw.n
	seg.SchemaHash = schemaHash(schema)
	return nil
}

// oracleCase is one batch written through both encoders.
type oracleCase struct {
	name  string
	opts  Options
	write func(w *Writer) error
}

// oracleCases are the batches of the oracle tests; with small, only the
// first three metrics corpus files (the whole metrics corpus is the
// slowest case).
func oracleCases(t *testing.T, small bool) []oracleCase {
	var cases []oracleCase
	add := func(name string, opts Options, write func(w *Writer) error) {
		cases = append(cases, oracleCase{name, opts, write})
	}
	add("hostile-logs", Options{}, func(w *Writer) error { return w.WriteLogs("t", hostileLogs(t)) })
	add("hostile-logs-small-groups", Options{RowGroupRows: 3}, func(w *Writer) error { return w.WriteLogs("t", hostileLogs(t)) })
	add("metrics", Options{}, func(w *Writer) error { return w.WriteMetrics("t", testMetrics(t)) })
	add("spans", Options{}, func(w *Writer) error { return w.WriteSpans("t", testSpans(t)) })
	add("metrics-descs", Options{RowGroupRows: 50}, func(w *Writer) error { return w.WriteMetrics("t", descMetrics(300, false)) })
	add("metrics-descs-alike", Options{RowGroupRows: 40}, func(w *Writer) error { return w.WriteMetrics("t", descMetrics(300, true)) })
	add("metrics-scalars", Options{}, func(w *Writer) error { return w.WriteMetrics("t", scalarMetrics(70_000, false)) })
	add("metrics-scalars-stray", Options{RowGroupRows: 30_000}, func(w *Writer) error { return w.WriteMetrics("t", scalarMetrics(5_000, true)) })
	add("overflow", Options{MaxAttributeColumns: 5}, func(w *Writer) error { return w.WriteLogs("t", wideLogs(t, 40, 9, 4, "o")) })
	add("overflow-wide", Options{MaxAttributeColumns: 60, RowGroupRows: 7}, func(w *Writer) error { return w.WriteLogs("t", wideLogs(t, 30, 14, 3, "w")) })
	add("many-logs", Options{RowGroupRows: 2500}, func(w *Writer) error { return w.WriteLogs("t", manyLogs(6000)) })
	// services of pageCutRows rows or more start pages of their own
	// (pageCuts), across row groups
	add("page-cuts", Options{RowGroupRows: 4000}, func(w *Writer) error {
		return w.WriteLogs("t", skewedLogs(5000, 3, 2500, 40, 9000, 1, 4096, 4095))
	})
	add("attr-runs", Options{RowGroupRows: 100}, func(w *Writer) error { return w.WriteLogs("t", runLogs(600)) })
	add("attr-runs-overflow", Options{MaxAttributeColumns: 1, RowGroupRows: 100}, func(w *Writer) error { return w.WriteLogs("t", runLogs(600)) })
	for _, kind := range []string{"logs", "metrics", "traces"} {
		var pbs [][]byte
		for i, f := range corpusFiles(t, kind) {
			if small && kind == "metrics" && i >= 3 {
				break
			}
			pbs = append(pbs, readCorpus(t, f))
		}
		write := func(w *Writer) error {
			for _, pb := range pbs {
				var err error
				switch kind {
				case "logs":
					b := new(signal.Logs)
					if err = otlp.DecodeLogs(b, pb); err == nil {
						err = w.WriteLogs("c", b)
					}
				case "metrics":
					b := new(signal.Metrics)
					if err = otlp.DecodeMetrics(b, pb); err == nil {
						err = w.WriteMetrics("c", b)
					}
				case "traces":
					b := new(signal.Spans)
					if err = otlp.DecodeTraces(b, pb); err == nil {
						err = w.WriteSpans("c", b)
					}
				}
				if err != nil {
					return err
				}
			}
			return nil
		}
		add("corpus-"+kind, Options{RowGroupRows: 5000}, write)
	}
	return cases
}

// writeBoth writes c through the typed encoder and the parquet-go oracle
// and returns the two lakes' files, paired in commit order.
func writeBoth(t *testing.T, c oracleCase) (typed, oracle []string) {
	t.Helper()
	for i, dst := range []*[]string{&typed, &oracle} {
		opts := c.opts
		opts.Root = t.TempDir()
		opts.Now = func() time.Time { return fixedNow }
		w, err := NewWriter(opts, func(s Segment) error {
			*dst = append(*dst, filepath.Join(opts.Root, filepath.FromSlash(s.Path)))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			w.encodeWith = oracleEncodeFile
		}
		if err := c.write(w); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(typed) != len(oracle) || len(typed) == 0 {
		t.Fatalf("typed encoder wrote %d files, the oracle %d", len(typed), len(oracle))
	}
	return typed, oracle
}

func openParquetFile(t *testing.T, path string) *parquet.File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return f
}

// TestOracleEncoder writes the same batches through the typed encoder and
// through parquet-go (the encoder ingest used before) and compares the
// files: schema, footer metadata, row groups, every value, chunk
// statistics, encodings, page indexes and bloom filters.
func TestOracleEncoder(t *testing.T) {
	for _, c := range oracleCases(t, false) {
		t.Run(c.name, func(t *testing.T) {
			typed, oracle := writeBoth(t, c)
			for i := range typed {
				compareFiles(t, openParquetFile(t, typed[i]), openParquetFile(t, oracle[i]))
			}
		})
	}
}

func compareFiles(t *testing.T, got, want *parquet.File) {
	t.Helper()
	if g, w := got.Schema().String(), want.Schema().String(); g != w {
		t.Fatalf("schema:\n%s\nwant:\n%s", g, w)
	}
	gm, wm := got.Metadata(), want.Metadata()
	if !slices.Equal(gm.KeyValueMetadata, wm.KeyValueMetadata) {
		t.Errorf("footer key/values %v, want %v", gm.KeyValueMetadata, wm.KeyValueMetadata)
	}
	if gm.CreatedBy != wm.CreatedBy || gm.NumRows != wm.NumRows || gm.Version != wm.Version ||
		!slices.Equal(gm.ColumnOrders, wm.ColumnOrders) {
		t.Errorf("footer: created_by %q rows %d version %d, want %q %d %d", gm.CreatedBy, gm.NumRows, gm.Version, wm.CreatedBy, wm.NumRows, wm.Version)
	}
	if len(gm.RowGroups) != len(wm.RowGroups) {
		t.Fatalf("%d row groups, want %d", len(gm.RowGroups), len(wm.RowGroups))
	}
	names := got.Schema().Columns()
	for g := range gm.RowGroups {
		grg, wrg := &gm.RowGroups[g], &wm.RowGroups[g]
		if grg.NumRows != wrg.NumRows || len(grg.Columns) != len(wrg.Columns) {
			t.Fatalf("row group %d: %d rows %d columns, want %d %d", g, grg.NumRows, len(grg.Columns), wrg.NumRows, len(wrg.Columns))
		}
		for j := range grg.Columns {
			compareChunk(t, fmt.Sprintf("row group %d column %v", g, names[j]), got, want, g, j)
		}
	}
	compareRows(t, got, want)
}

func compareChunk(t *testing.T, where string, got, want *parquet.File, g, j int) {
	t.Helper()
	gc, wc := &got.Metadata().RowGroups[g].Columns[j].MetaData, &want.Metadata().RowGroups[g].Columns[j].MetaData
	if !slices.Equal(gc.PathInSchema, wc.PathInSchema) || gc.Type != wc.Type || gc.Codec != wc.Codec || gc.NumValues != wc.NumValues {
		t.Errorf("%s: path %v type %v codec %v values %d, want %v %v %v %d", where, gc.PathInSchema, gc.Type, gc.Codec, gc.NumValues, wc.PathInSchema, wc.Type, wc.Codec, wc.NumValues)
	}
	gcc, wcc := got.RowGroups()[g].ColumnChunks()[j], want.RowGroups()[g].ColumnChunks()[j]
	if !slices.Equal(gc.Encoding, wc.Encoding) && !(slices.Contains(gc.Encoding, format.DeltaLengthByteArray) && dictBytes(t, wcc) > MaxDictBytes) {
		// A dictionary past MaxDictBytes: pqenc writes the whole chunk
		// DELTA_LENGTH_BYTE_ARRAY, parquet-go its later pages PLAIN.
		t.Errorf("%s: encodings %v, want %v", where, gc.Encoding, wc.Encoding)
	}
	gs, ws := gc.Statistics, wc.Statistics
	if !bytes.Equal(gs.MinValue, ws.MinValue) || !bytes.Equal(gs.MaxValue, ws.MaxValue) || gs.NullCount != ws.NullCount {
		t.Errorf("%s: statistics min %x max %x nulls %d, want %x %x %d", where, gs.MinValue, gs.MaxValue, gs.NullCount, ws.MinValue, ws.MaxValue, ws.NullCount)
	}
	gi, err := gcc.ColumnIndex()
	if err != nil {
		t.Fatalf("%s: column index: %v", where, err)
	}
	wi, err := wcc.ColumnIndex()
	if err != nil {
		t.Fatalf("%s: oracle column index: %v", where, err)
	}
	goi, err := gcc.OffsetIndex()
	if err != nil {
		t.Fatalf("%s: offset index: %v", where, err)
	}
	// Both cut pages at about the same size but not at the same rows:
	// compare what a reader prunes with. Each page's bounds must hold its
	// rows' values (checked in compareRows via pageBounds), the indexes
	// must agree on the chunk's null count and extreme bounds, and pages
	// must cover the rows from 0 in order.
	if gi.NumPages() != goi.NumPages() {
		t.Fatalf("%s: column index has %d pages, offset index %d", where, gi.NumPages(), goi.NumPages())
	}
	var gNulls, wNulls int64
	for p := range gi.NumPages() {
		gNulls += gi.NullCount(p)
	}
	for p := range wi.NumPages() {
		wNulls += wi.NullCount(p)
	}
	if gNulls != wNulls {
		t.Errorf("%s: column index null counts sum to %d, want %d", where, gNulls, wNulls)
	}
	if goi.NumPages() == 0 || goi.FirstRowIndex(0) != 0 {
		t.Errorf("%s: offset index does not start at row 0", where)
	}
	for p := 1; p < goi.NumPages(); p++ {
		if goi.FirstRowIndex(p) <= goi.FirstRowIndex(p-1) {
			t.Errorf("%s: page %d starts at row %d after %d", where, p, goi.FirstRowIndex(p), goi.FirstRowIndex(p-1))
		}
	}
	if lo, hi, ok := indexBounds(gcc.Type(), gi); ok {
		wlo, whi, _ := indexBounds(wcc.Type(), wi)
		if !valuesEqual(lo, wlo) || !valuesEqual(hi, whi) {
			t.Errorf("%s: page bounds span %v..%v, want %v..%v", where, lo, hi, wlo, whi)
		}
	}
	// Bloom filters: present on the same chunks, and every value of the
	// chunk is in ours.
	gb, wb := gcc.BloomFilter(), wcc.BloomFilter()
	if (gb == nil) != (wb == nil) {
		t.Fatalf("%s: bloom filter %v, oracle's %v", where, gb != nil, wb != nil)
	}
	if gb != nil {
		for _, v := range chunkValues(t, gcc) {
			if v.IsNull() {
				continue
			}
			if ok, err := gb.Check(v); err != nil || !ok {
				t.Errorf("%s: bloom filter misses %v (%v)", where, v, err)
			}
		}
	}
}

// dictBytes is the size of the PLAIN dictionary of cc's distinct values.
func dictBytes(t *testing.T, cc parquet.ColumnChunk) int {
	seen := map[string]bool{}
	n := 0
	for _, v := range chunkValues(t, cc) {
		if !v.IsNull() && !seen[string(v.ByteArray())] {
			seen[string(v.ByteArray())] = true
			n += 4 + len(v.ByteArray())
		}
	}
	return n
}

// indexBounds is the least page min and the greatest page max of a column
// index, NaN pages aside.
func indexBounds(typ parquet.Type, ci parquet.ColumnIndex) (lo, hi parquet.Value, ok bool) {
	for p := range ci.NumPages() {
		if ci.NullPage(p) {
			continue
		}
		mn, mx := ci.MinValue(p), ci.MaxValue(p)
		if !ok || typ.Compare(mn, lo) < 0 {
			lo = mn
		}
		if !ok || typ.Compare(mx, hi) > 0 {
			hi = mx
		}
		ok = true
	}
	return lo, hi, ok
}

func chunkValues(t *testing.T, cc parquet.ColumnChunk) []parquet.Value {
	t.Helper()
	pages := cc.Pages()
	defer pages.Close()
	var out []parquet.Value
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]parquet.Value, p.NumValues())
		n, err := p.Values().ReadValues(vals)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		for _, v := range vals[:n] {
			out = append(out, v.Clone())
		}
		parquet.Release(p)
	}
	return out
}

// compareRows compares every row of the two files.
func compareRows(t *testing.T, got, want *parquet.File) {
	t.Helper()
	gr, wr := parquet.NewReader(got), parquet.NewReader(want)
	defer gr.Close()
	defer wr.Close()
	gb, wb := make([]parquet.Row, 64), make([]parquet.Row, 64)
	row := 0
	for {
		gn, gerr := gr.ReadRows(gb)
		wn, werr := wr.ReadRows(wb[:gn])
		if gn != wn {
			t.Fatalf("row %d: read %d rows, oracle %d (%v, %v)", row, gn, wn, gerr, werr)
		}
		for i := range gn {
			if !rowsEqual(gb[i], wb[i]) {
				t.Fatalf("row %d:\n got  %v\n want %v", row+i, gb[i], wb[i])
			}
		}
		row += gn
		if gerr == io.EOF || gn == 0 {
			if gerr != io.EOF && gerr != nil {
				t.Fatal(gerr)
			}
			break
		}
		if gerr != nil {
			t.Fatal(gerr)
		}
	}
	if int64(row) != want.NumRows() {
		t.Fatalf("compared %d rows, the file has %d", row, want.NumRows())
	}
}

// rowsEqual compares values bit for bit (NaN equals NaN), with levels.
func rowsEqual(a, b parquet.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Kind() != y.Kind() || x.IsNull() != y.IsNull() || x.Column() != y.Column() ||
			x.RepetitionLevel() != y.RepetitionLevel() || x.DefinitionLevel() != y.DefinitionLevel() {
			return false
		}
		if !valuesEqual(x, y) {
			return false
		}
	}
	return true
}

// valuesEqual compares two values of one kind; NaN equals NaN.
func valuesEqual(x, y parquet.Value) bool {
	if x.IsNull() || y.IsNull() {
		return x.IsNull() == y.IsNull()
	}
	if x.Kind() == parquet.Double && y.Kind() == parquet.Double {
		return math.Float64bits(x.Double()) == math.Float64bits(y.Double())
	}
	return parquet.Equal(x, y)
}

// TestOracleEncoderEngines reads the files of both encoders with pyarrow
// and DuckDB and checks they see the same schema and the same data.
func TestOracleEncoderEngines(t *testing.T) {
	py := os.Getenv("SLUICE_PYTHON")
	if py == "" {
		corpustest.Missing(t, "SLUICE_PYTHON (a Python with tests/requirements.txt installed)")
	}
	var args []string
	for _, c := range oracleCases(t, true) {
		typed, oracle := writeBoth(t, c)
		for i := range typed {
			args = append(args, typed[i], oracle[i])
		}
	}
	out, err := exec.Command(py, append([]string{filepath.Join("testdata", "oracle_compare.py")}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("oracle_compare.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestOracleEncoderUninterned encodes batches built by hand, not copied
// into a partition by the writer, so equal attribute values sit in
// different places of the arena (the writer's copy interns them, see
// signal's valueTable): the encoder compares attribute sets and column
// runs by offset, and must write the same file as the oracle when those
// comparisons miss equal values.
func TestOracleEncoderUninterned(t *testing.T) {
	cases := []struct {
		name string
		p    func() *partition
	}{
		{"run-logs", func() *partition { l := runLogs(600); return &partition{logs: l, ptime: l.Time} }},
		{"many-logs", func() *partition { l := manyLogs(3000); return &partition{logs: l, ptime: l.Time} }},
		{"metrics", func() *partition { m := testMetrics(t); return &partition{metrics: m, ptime: m.Time} }},
		{"spans", func() *partition { s := testSpans(t); return &partition{spans: s, ptime: s.StartTime} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var paths [2]string
			for i, enc := range []func(*Writer, *partition, io.Writer, *Segment) error{nil, oracleEncodeFile} {
				w, err := NewWriter(Options{Root: t.TempDir(), Now: func() time.Time { return fixedNow }, RowGroupRows: 700}, nil)
				if err != nil {
					t.Fatal(err)
				}
				w.encodeWith = enc
				p := c.p()
				seg := Segment{Table: tableName(kindOf(p))}
				paths[i] = filepath.Join(t.TempDir(), "f.parquet")
				f, err := os.Create(paths[i])
				if err != nil {
					t.Fatal(err)
				}
				if err := w.encodeFile(p, f, &seg); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			compareFiles(t, openParquetFile(t, paths[0]), openParquetFile(t, paths[1]))
		})
	}
}

func kindOf(p *partition) signal.Kind {
	switch {
	case p.logs != nil:
		return signal.KindLogs
	case p.metrics != nil:
		return signal.KindMetrics
	}
	return signal.KindTraces
}

// TestOracleEncoderRowByRowCommon: files with more resources times
// resource columns than maxCommonCells write their resource and scope
// columns run by run instead of column by column, with the same result.
func TestOracleEncoderRowByRowCommon(t *testing.T) {
	defer func(n int) { maxCommonCells = n }(maxCommonCells)
	maxCommonCells = 0
	for _, c := range oracleCases(t, true) {
		switch c.name {
		case "hostile-logs", "metrics", "spans", "overflow", "corpus-metrics", "corpus-traces":
		default:
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			typed, oracle := writeBoth(t, c)
			for i := range typed {
				compareFiles(t, openParquetFile(t, typed[i]), openParquetFile(t, oracle[i]))
			}
		})
	}
}

// scalarMetrics makes n gauge points, mostly floats (the encoder adds a
// chunk of float values, series ids and equal flags in one call each):
// over pages of the value column, NaNs, some points ints or empty, flags
// that vary in some chunks and are one non-zero value in others; stray puts distribution fields on a few gauges, which the
// encoder must write all the same.
func scalarMetrics(n int, stray bool) *signal.Metrics {
	m := new(signal.Metrics)
	c := &m.Common
	res := addResource(c, func() { attr(c, "service.name", signal.ValueString, "svc") })
	sc := addScope(c, "lib", "1", func() {})
	for i := range 3 {
		m.Descs = append(m.Descs, signal.MetricDesc{Name: c.AppendString(fmt.Sprintf("g%d", i)), Type: signal.MetricGauge})
	}
	base := fixedNow.Truncate(time.Hour).UnixNano()
	for i := range n {
		j := m.AppendPoint(uint32(i%3), res, sc)
		m.Time[j] = base + int64(i/100)*1000
		series := i % 100
		m.SeriesID[j] = uint64(series)*1_000_003 + 1 // in order of series
		switch {
		case i%4000 == 7:
			m.NumberType[j] = signal.ValueInt
			m.Number[j] = uint64(int64(-i))
		case i%5000 == 11:
			// no value
		default:
			m.NumberType[j] = signal.ValueDouble
			v := float64(i%977) * 1.5
			if i%3001 == 5 {
				v = math.NaN()
			}
			m.Number[j] = math.Float64bits(v)
		}
		// Rows sort by name, series and time: chunks of series under 30
		// have one non-zero flag, of series 30-59 varying flags.
		if series < 30 {
			m.Flags[j] = 1
		} else if series < 60 {
			m.Flags[j] = uint32(i % 2)
		}
		if stray && i%1000 == 3 {
			m.Has[j] = signal.HasSum
			m.Sum[j] = float64(i)
		}
		m.Attr[j] = attrRange(c, func() { attr(c, "k", signal.ValueString, fmt.Sprintf("v%d", series)) })
	}
	return m
}

// descMetrics makes n points of one metric name under descriptors that
// differ in unit, description or type, and others of equal content (as
// each request of a stream brings its own), interleaved; alike: of two
// names, three descriptors of equal content each (the encoder takes a
// name's rows as one descriptor run from the sorted keys).
func descMetrics(n int, alike bool) *signal.Metrics {
	m := new(signal.Metrics)
	c := &m.Common
	res := addResource(c, func() { attr(c, "service.name", signal.ValueString, "svc") })
	sc := addScope(c, "lib", "1", func() {})
	for i := range 6 {
		d := signal.MetricDesc{Name: c.AppendString("requests"), Type: signal.MetricGauge}
		if alike {
			d.Name = c.AppendString(fmt.Sprintf("m%d", i%2))
			d.Unit = c.AppendString("ms")
			m.Descs = append(m.Descs, d)
			continue
		}
		switch i % 3 {
		case 1:
			d.Unit = c.AppendString("ms")
		case 2:
			d.Description = c.AppendString("served")
			d.Type = signal.MetricSum
			d.Temporality = signal.TemporalityCumulative
		}
		m.Descs = append(m.Descs, d)
	}
	base := fixedNow.Truncate(time.Hour).UnixNano()
	for i := range n {
		j := m.AppendPoint(uint32(i%len(m.Descs)), res, sc)
		m.Time[j] = base + int64(i/7)*1000
		m.NumberType[j] = signal.ValueDouble
		m.Number[j] = math.Float64bits(float64(i))
		m.Attr[j] = attrRange(c, func() { attr(c, "k", signal.ValueString, fmt.Sprintf("v%d", i%4)) })
	}
	return m
}
