package pqenc

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// testSchema has a leaf of every kind and encoding the lake writes.
func testSchema() *parquet.Schema {
	dict := parquet.Encoded(parquet.String(), &parquet.RLEDictionary)
	return parquet.NewSchema("t", parquet.Group{
		"a_dict":     parquet.Optional(dict),
		"b_dictreq":  dict,
		"c_str":      parquet.Optional(parquet.String()),
		"d_i64":      parquet.Optional(parquet.Int(64)),
		"e_u64":      parquet.Uint(64),
		"f_i32":      parquet.Optional(parquet.Int(32)),
		"g_u32":      parquet.Uint(32),
		"h_f64":      parquet.Optional(parquet.Leaf(parquet.DoubleType)),
		"i_bool":     parquet.Leaf(parquet.BooleanType),
		"j_optbool":  parquet.Optional(parquet.Leaf(parquet.BooleanType)),
		"k_listu64":  parquet.List(parquet.Uint(64)),
		"l_listf64":  parquet.List(parquet.Leaf(parquet.DoubleType)),
		"m_bytes":    parquet.Optional(parquet.Leaf(parquet.ByteArrayType)),
		"n_ts":       parquet.Optional(parquet.Timestamp(parquet.Nanosecond)),
		"o_highcard": parquet.Optional(dict),
		"p_slowcard": parquet.Optional(dict),
	})
}

// randomRows returns n rows of schema s: runs of repeated values, nulls,
// NaN, empty and null lists, long and empty strings, and a dictionary
// column with a value per row (which outgrows small dictionaries).
func randomRows(rnd *rand.Rand, s *parquet.Schema, n int, tag string) []parquet.Row {
	type gen func(i int) any
	pick := func(vals ...any) gen { return func(int) any { return vals[rnd.IntN(len(vals))] } }
	sticky := func(g gen) gen {
		var cur any
		return func(i int) any {
			if i == 0 || rnd.IntN(8) == 0 {
				cur = g(i)
			}
			return cur
		}
	}
	gens := map[string]gen{
		"a_dict":    sticky(pick(nil, "alpha", "beta", "", "gamma"+tag)),
		"b_dictreq": sticky(pick("x", "y", "z"+tag)),
		"c_str": func(i int) any {
			return []any{nil, "", fmt.Sprintf("body %s %d %s", tag, i, bytes.Repeat([]byte{'q'}, rnd.IntN(300)))}[rnd.IntN(3)]
		},
		"d_i64":     pick(nil, int64(-5), int64(math.MaxInt64), int64(math.MinInt64), int64(0)),
		"e_u64":     func(int) any { return rnd.Uint64() },
		"f_i32":     pick(nil, int32(-1), int32(7), int32(math.MaxInt32)),
		"g_u32":     func(int) any { return rnd.Uint32() },
		"h_f64":     pick(nil, 1.5, -2.25, math.NaN(), math.Inf(1), 0.0),
		"i_bool":    pick(true, false),
		"j_optbool": pick(nil, true, false),
		"k_listu64": func(int) any {
			switch rnd.IntN(3) {
			case 0:
				return nil
			case 1:
				return []uint64{}
			}
			l := make([]uint64, 1+rnd.IntN(4))
			for j := range l {
				l[j] = rnd.Uint64()
			}
			return l
		},
		"l_listf64": func(int) any {
			if rnd.IntN(2) == 0 {
				return nil
			}
			l := make([]float64, rnd.IntN(3))
			for j := range l {
				l[j] = rnd.NormFloat64()
			}
			return l
		},
		"m_bytes":    pick(nil, "\x00\xff", "bytes"),
		"n_ts":       func(i int) any { return []any{nil, int64(1_700_000_000_000_000_000 + i)}[rnd.IntN(2)] },
		"o_highcard": func(i int) any { return fmt.Sprintf("unique-%s-%d-%x", tag, i, rnd.Uint64()) },
		"p_slowcard": func(i int) any { return fmt.Sprintf("slow-%s-%d", tag, i/100) },
	}
	var rows []parquet.Row
	cols := make([]gen, 0)
	for _, f := range s.Fields() {
		cols = append(cols, sticky(gens[f.Name()]))
	}
	for i := range n {
		var row parquet.Row
		for c, f := range s.Fields() {
			row = appendValue(row, f, c, cols[c](i))
		}
		rows = append(rows, row)
	}
	return rows
}

// appendValue appends the values of v for top-level field f (leaf c).
func appendValue(row parquet.Row, f parquet.Field, c int, v any) parquet.Row {
	opt := f.Optional()
	def := 0
	if opt {
		def = 1
	}
	if v == nil {
		return append(row, parquet.NullValue().Level(0, 0, c))
	}
	switch x := v.(type) {
	case string:
		if x == "" && opt && f.Name() != "c_str" {
			return append(row, parquet.NullValue().Level(0, 0, c))
		}
		return append(row, parquet.ByteArrayValue([]byte(x)).Level(0, def, c))
	case int64:
		return append(row, parquet.Int64Value(x).Level(0, def, c))
	case uint64:
		return append(row, parquet.Int64Value(int64(x)).Level(0, def, c))
	case int32:
		return append(row, parquet.Int32Value(x).Level(0, def, c))
	case uint32:
		return append(row, parquet.Int32Value(int32(x)).Level(0, def, c))
	case float64:
		return append(row, parquet.DoubleValue(x).Level(0, def, c))
	case bool:
		return append(row, parquet.BooleanValue(x).Level(0, def, c))
	case []uint64:
		// A required list: an empty list has definition level def.
		if len(x) == 0 {
			return append(row, parquet.NullValue().Level(0, def, c))
		}
		for j, e := range x {
			row = append(row, parquet.Int64Value(int64(e)).Level(min(j, 1), def+1, c))
		}
		return row
	case []float64:
		if len(x) == 0 {
			return append(row, parquet.NullValue().Level(0, def, c))
		}
		for j, e := range x {
			row = append(row, parquet.DoubleValue(e).Level(min(j, 1), def+1, c))
		}
		return row
	}
	panic(fmt.Sprintf("value %T", v))
}

// writeWithParquetGo writes rows with parquet-go's writer, small pages and
// dictionaries so that chunks have many pages and fall back to plain.
func writeWithParquetGo(t testing.TB, s *parquet.Schema, rows []parquet.Row, rowGroupRows int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, s, parquet.Compression(&parquet.Zstd), parquet.PageBufferSize(4<<10),
		parquet.DictionaryMaxBytes(2<<10), parquet.DataPageStatistics(false))
	for i := 0; i < len(rows); i += rowGroupRows {
		if _, err := w.WriteRows(rows[i:min(i+rowGroupRows, len(rows))]); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readRows(t testing.TB, data []byte) []parquet.Row {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	r := parquet.NewReader(pf)
	var out []parquet.Row
	buf := make([]parquet.Row, 100)
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			out = append(out, row.Clone())
		}
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// sameRow is parquet.Row.Equal with NaN equal to NaN.
func sameRow(a, b parquet.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Kind() != y.Kind() || x.IsNull() != y.IsNull() || x.Column() != y.Column() ||
			x.DefinitionLevel() != y.DefinitionLevel() || x.RepetitionLevel() != y.RepetitionLevel() ||
			!bytes.Equal(x.AppendBytes(nil), y.AppendBytes(nil)) {
			return false
		}
	}
	return true
}

// merged is one input file, decoded chunk by chunk.
type merged struct {
	pf    *parquet.File
	rows  []parquet.Row
	rg    int
	next  int // next row of the file
	left  int // rows left in the current row group
	chunk []Chunk
}

func (in *merged) load(t testing.TB, s *parquet.Schema) {
	t.Helper()
	rg := in.pf.RowGroups()[in.rg]
	in.rg++
	in.left = int(rg.NumRows())
	for j, cc := range rg.ColumnChunks() {
		leaf, _ := s.Lookup(s.Columns()[j]...)
		if err := in.chunk[j].Read(cc, leaf.MaxDefinitionLevel, leaf.MaxRepetitionLevel, 0); err != nil {
			t.Fatal(err)
		}
		if in.chunk[j].Rows() != in.left {
			t.Fatalf("column %d: %d rows, want %d", j, in.chunk[j].Rows(), in.left)
		}
	}
}

// TestCopyRowsRoundTrip interleaves random runs of rows of two files
// written by parquet-go (many pages, dictionaries falling back to plain,
// several row groups) into new files with CopyRows and Null, and reads
// them back with parquet-go: every row as expected, and the statistics,
// column and offset indexes and bloom filters consistent with the values.
func TestCopyRowsRoundTrip(t *testing.T) {
	defer func(n int) { pageRows = n }(pageRows)
	for seed := range uint64(6) {
		// Small pages: dictionary chunks hold pages when they fall back.
		pageRows = []int{PageRows, 700}[seed%2]
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 99))
			s := testSchema()
			var ins []*merged
			for k := range 2 {
				rows := randomRows(rnd, s, 3000+rnd.IntN(4000), fmt.Sprint(k))
				data := writeWithParquetGo(t, s, rows, 1000+rnd.IntN(2500))
				pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
				if err != nil {
					t.Fatal(err)
				}
				ins = append(ins, &merged{pf: pf, rows: rows, chunk: make([]Chunk, len(s.Columns()))})
			}
			var leaves []Leaf
			for _, p := range s.Columns() {
				leaf, _ := s.Lookup(p...)
				li, err := NewLeaf(leaf)
				if err != nil {
					t.Fatal(err)
				}
				if p[0] != "b_dictreq" {
					li.MaxDictBytes = 300
				}
				li.Bloom = li.Kind == parquet.ByteArray
				leaves = append(leaves, li)
			}
			footer, err := Footer(s, parquet.Compression(&parquet.Zstd))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			f := NewFile(&out, leaves, &parquet.Zstd)
			cols := make([]Column, len(leaves))
			pending := make([]int, len(leaves)) // null rows CopyFew left to add
			var want []parquet.Row
			rgRows, rgMax := 0, 2500+rnd.IntN(3000)
			flush := func() {
				if rgRows == 0 {
					return
				}
				f.BeginRowGroup(rgRows)
				for j := range cols {
					cols[j].Null(pending[j])
					pending[j] = 0
					for _, in := range ins {
						if in.chunk[j].Err() != nil {
							t.Fatalf("column %d: %v", j, in.chunk[j].Err())
						}
					}
					if err := f.WriteChunk(&cols[j]); err != nil {
						t.Fatal(err)
					}
				}
				rgRows = 0
			}
			for {
				var live []*merged
				for _, in := range ins {
					if in.next < len(in.rows) {
						live = append(live, in)
					}
				}
				if len(live) == 0 {
					break
				}
				in := live[rnd.IntN(len(live))]
				if in.left == 0 {
					in.load(t, s)
				}
				n := min(in.left, rgMax-rgRows, 1+rnd.IntN([]int{3, 40, 2000}[rnd.IntN(3)]))
				if rgRows == 0 {
					for j := range cols {
						cols[j].Reset(&leaves[j], f.Codec())
					}
				}
				// Column 0 is null for runs of input 1, as if it lacked it.
				for j := range cols {
					if j == 0 && in == ins[1] {
						cols[j].Null(pending[j])
						pending[j] = 0
						cols[j].Null(n)
						in.chunk[j].SkipNullRows(n) // the values are not copied: keep the cursor in step
						continue
					}
					if n <= 2 && rnd.IntN(2) == 0 {
						// The merge's runs of one or two rows (flat
						// columns; others fall back to CopyRows): null
						// rows stay pending, as the merge keeps them, until
						// the column's next values or other call.
						cols[j].CopyFew(&in.chunk[j], n, &pending[j])
						continue
					}
					cols[j].Null(pending[j])
					pending[j] = 0
					if rnd.IntN(2) == 0 && in.chunk[j].SkipNulls(n) {
						cols[j].Null(n)
						continue
					}
					cols[j].CopyRows(&in.chunk[j], n)
				}
				for _, row := range in.rows[in.next : in.next+n] {
					if in == ins[1] {
						row = append(parquet.Row{parquet.NullValue().Level(0, 0, 0)}, row[1:]...)
					}
					want = append(want, row)
				}
				in.next += n
				in.left -= n
				rgRows += n
				if rgRows == rgMax {
					flush()
				}
			}
			flush()
			if err := f.Close(footer); err != nil {
				t.Fatal(err)
			}
			got := readRows(t, out.Bytes())
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for i := range got {
				if !sameRow(got[i], want[i]) {
					t.Fatalf("row %d:\n got %v\nwant %v", i, got[i], want[i])
				}
			}
			checkFile(t, out.Bytes())
		})
	}
}

// checkFile checks that the statistics, column index and bloom filters of
// a file hold every value of its chunks, and that the offset index locates
// its pages.
func checkFile(t *testing.T, data []byte) {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	s := pf.Schema()
	for g, rg := range pf.RowGroups() {
		for j, cc := range rg.ColumnChunks() {
			md := pf.Metadata().RowGroups[g].Columns[j].MetaData
			typ := cc.Type()
			ci, err := cc.ColumnIndex()
			if err != nil {
				t.Fatal(err)
			}
			oi, err := cc.OffsetIndex()
			if err != nil {
				t.Fatal(err)
			}
			if ci.NumPages() != oi.NumPages() {
				t.Fatalf("rg %d col %d: %d column index pages, %d offset index pages", g, j, ci.NumPages(), oi.NumPages())
			}
			bf := cc.BloomFilter()
			pages := cc.Pages()
			var all []parquet.Value
			for p := 0; ; p++ {
				page, err := pages.ReadPage()
				if err == io.EOF {
					if p != ci.NumPages() {
						t.Fatalf("rg %d col %d: %d pages, column index has %d", g, j, p, ci.NumPages())
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				vals := make([]parquet.Value, page.NumValues())
				n, _ := page.Values().ReadValues(vals)
				vals = vals[:n]
				lo, hi := ci.MinValue(p), ci.MaxValue(p)
				nonNull := 0
				for _, v := range vals {
					if v.IsNull() {
						continue
					}
					nonNull++
					if !(v.Kind() == parquet.Double && math.IsNaN(v.Double())) &&
						(typ.Compare(v, lo) < 0 || typ.Compare(v, hi) > 0) {
						t.Fatalf("rg %d col %d page %d: value %v outside [%v, %v]", g, j, p, v, lo, hi)
					}
					if bf != nil {
						ok, err := bf.Check(v)
						if err != nil || !ok {
							t.Fatalf("rg %d col %d: bloom filter misses %v (%v)", g, j, v, err)
						}
					}
				}
				if ci.NullPage(p) != (nonNull == 0) || ci.NullCount(p) != int64(len(vals)-nonNull) {
					t.Fatalf("rg %d col %d page %d: null page %v, null count %d; %d of %d values null", g, j, p,
						ci.NullPage(p), ci.NullCount(p), len(vals)-nonNull, len(vals))
				}
				for _, v := range vals {
					all = append(all, v.Clone())
				}
				parquet.Release(page)
			}
			pages.Close()
			if md.NumValues != int64(len(all)) {
				t.Fatalf("rg %d col %d: chunk says %d values, has %d", g, j, md.NumValues, len(all))
			}
			checkChunkStats(t, typ, md, all)
			_ = s
		}
	}
}

func checkChunkStats(t *testing.T, typ parquet.Type, md format.ColumnMetaData, vals []parquet.Value) {
	t.Helper()
	st := md.Statistics
	var nulls int64
	var lo, hi parquet.Value
	for _, v := range vals {
		if v.IsNull() {
			nulls++
			continue
		}
		if v.Kind() == parquet.Double && math.IsNaN(v.Double()) {
			continue
		}
		if lo.IsNull() || typ.Compare(v, lo) < 0 {
			lo = v
		}
		if hi.IsNull() || typ.Compare(v, hi) > 0 {
			hi = v
		}
	}
	if st.NullCount != nulls {
		t.Fatalf("column %v: null count %d, want %d", md.PathInSchema, st.NullCount, nulls)
	}
	if lo.IsNull() {
		return
	}
	if !bytes.Equal(st.MinValue, lo.AppendBytes(nil)) || !bytes.Equal(st.MaxValue, hi.AppendBytes(nil)) {
		t.Fatalf("column %v: statistics [%x, %x], want [%x, %x]", md.PathInSchema, st.MinValue, st.MaxValue,
			lo.AppendBytes(nil), hi.AppendBytes(nil))
	}
}
