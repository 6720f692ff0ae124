package format_test

import (
	"bytes"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// TestColumnReaders: the typed column readers give the values of a real
// lake file's columns, for all rows and for a slice of them.
func TestColumnReaders(t *testing.T) {
	b := lakeFile(t)
	pf, err := format.Open(bytes.NewReader(b), int64(len(b)), "f.parquet")
	if err != nil {
		t.Fatal(err)
	}
	col := func(name string) int {
		leaf, ok := pf.Schema().Lookup(name)
		if !ok {
			t.Fatalf("no column %q", name)
		}
		return leaf.ColumnIndex
	}
	rg := pf.RowGroups()[0]
	ccs := rg.ColumnChunks()
	if rg.NumRows() != 2 {
		t.Fatalf("%d rows", rg.NumRows())
	}
	ts, ok := make([]int64, 2), make([]bool, 2)
	if err := format.ReadOptInt64s(ccs[col(format.ColTimestamp)], 0, 2, ts, ok); err != nil {
		t.Fatal(err)
	}
	// Sorted by service, then time: the two records in the order sent.
	if !ok[0] || !ok[1] || ts[0] != 1748781000000000000 || ts[1] != 1748781001000000000 {
		t.Errorf("timestamps %v %v", ts, ok)
	}
	one, ok1 := make([]int64, 1), make([]bool, 1)
	if err := format.ReadOptInt64s(ccs[col(format.ColTimestamp)], 1, 2, one, ok1); err != nil || one[0] != ts[1] {
		t.Errorf("row 1 alone: %v, %v", one, err)
	}
	codes, strs, err := format.ReadCodes(ccs[col(format.ColServiceName)], 2)
	if err != nil || len(codes) != 2 || codes[0] != codes[1] || strs[codes[0]] != "checkout" {
		t.Errorf("service codes %v %v %v", codes, strs, err)
	}
	var sev []int64
	buf := make([]parquet.Value, 1) // one value per call: the callback sees each offset
	err = format.EachValue(ccs[col(format.ColSeverityNumber)], buf, func(off int, vals []parquet.Value) error {
		if off != len(sev) {
			t.Errorf("offset %d after %d values", off, len(sev))
		}
		for _, v := range vals {
			sev = append(sev, v.Int64())
		}
		return nil
	})
	if err != nil || len(sev) != 2 || sev[0] != 9 || sev[1] != 17 {
		t.Errorf("severities %v %v", sev, err)
	}
	var users []string
	err = format.ValuesAt(ccs[col("attr.user")], make([]parquet.Value, 8), []int64{1}, func(i int, v parquet.Value) {
		users = append(users, string(v.ByteArray()))
	})
	if err != nil || len(users) != 1 || users[0] != "u-17" {
		t.Errorf("attr.user at row 1: %q %v", users, err)
	}
	var got []string
	err = format.ReadValuesAt(ccs[col("attr.user")], 0, 2, []int64{0, 1}, func(i int, v parquet.Value) {
		if v.IsNull() {
			got = append(got, "<null>")
		} else {
			got = append(got, string(v.ByteArray()))
		}
	})
	if err != nil || len(got) != 2 || got[0] != "<null>" || got[1] != "u-17" {
		t.Errorf("ReadValuesAt attr.user: %q %v", got, err)
	}
	var cr format.ChunkReader
	vals, err := cr.Read(rg, col(format.ColBody))
	if err != nil || len(vals) != 2 || string(vals[0].ByteArray()) != "hello" {
		t.Errorf("ChunkReader body: %v %v", vals, err)
	}
	if vals, err := cr.Read(rg, -1); vals != nil || err != nil {
		t.Errorf("absent column: %v %v", vals, err)
	}
	if names := format.DictionaryValues(pf, format.ColServiceName, 10); len(names) != 1 || names[0] != "checkout" {
		t.Errorf("DictionaryValues(service_name) = %q", names)
	}
	if names := format.DictionaryValues(pf, format.ColServiceName, 0); names != nil {
		t.Errorf("past the limit: %q", names)
	}
}
