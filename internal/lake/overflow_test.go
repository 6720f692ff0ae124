package lake

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/signal"
)

// wideLogs builds n records of perRecord distinct attribute keys each (so
// n*perRecord keys in all) with every value type, plus a resource and a
// scope with resKeys keys of their own; "common" is in every record.
func wideLogs(tb testing.TB, n, perRecord, resKeys int, prefix string) *signal.Logs {
	l := new(signal.Logs)
	c := &l.Common
	res := addResource(c, func() {
		attr(c, "service.name", signal.ValueString, "wide")
		for i := range resKeys {
			attr(c, fmt.Sprintf("res.%s%d", prefix, i), signal.ValueInt, i)
		}
	})
	sc := addScope(c, "lib", "1", func() {
		for i := range resKeys {
			attr(c, fmt.Sprintf("sc.%s%d", prefix, i), signal.ValueString, fmt.Sprint("v", i))
		}
	})
	arr := mustProto(tb, `{"arrayValue":{"values":[{"intValue":"1"},{"stringValue":"x"}]}}`)
	base := fixedNow.Truncate(time.Hour).UnixNano()
	for i := range n {
		j := l.AppendRecord(res, sc)
		l.Time[j] = base + int64(i)
		l.BodyType[j] = signal.ValueString
		l.Body[j] = uint64(c.AppendString("wide record"))
		l.Attr[j] = attrRange(c, func() {
			attr(c, "common", signal.ValueString, "in every record")
			for k := range perRecord {
				key := fmt.Sprintf("%sk%d.%d", prefix, i, k)
				switch k % 7 {
				case 0:
					attr(c, key, signal.ValueString, fmt.Sprintf("s%d \"quoted\" \\ \x01", k))
				case 1:
					attr(c, key, signal.ValueInt, -k*1_000_000_007)
				case 2:
					attr(c, key, signal.ValueDouble, float64(k)+0.25)
				case 3:
					attr(c, key, signal.ValueBool, k%2 == 0)
				case 4:
					attr(c, key, signal.ValueBytes, []byte{0, 0xff, byte(k)})
				case 5:
					c.Attrs.Append(c.Keys.IDString(key), signal.ValueArray, uint64(c.AppendBytes(arr)))
				case 6:
					attr(c, key, signal.ValueEmpty, nil)
				}
			}
		})
	}
	return l
}

// attrColumns counts the attribute and overflow columns of f.
func attrColumns(f *File) (attrs int, overflow []string) {
	for _, p := range f.Parquet().Schema().Columns() {
		if IsAttributeColumn(p[0]) {
			attrs++
		} else if _, ok := parseOverflowColumn(p[0]); ok {
			overflow = append(overflow, p[0])
		}
	}
	return attrs, overflow
}

// TestManyAttributeKeys is issue 11 item 1: one request of 65,000 distinct
// attribute keys used to make every later checkpoint fail ("column index
// out of range: 65535"). Now the file keeps MaxAttributeColumns columns,
// the rest go to overflow, and every attribute reads back.
func TestManyAttributeKeys(t *testing.T) {
	src := wideLogs(t, 65, 1000, 1100, "")
	root, segs := writeAll(t, Options{}, func(w *Writer) error { return w.WriteLogs("t", src) })
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	f := openSeg(t, root, segs[0])
	attrs, ovf := attrColumns(f)
	if attrs != DefaultMaxAttributeColumns {
		t.Errorf("%d attribute columns, want the cap %d", attrs, DefaultMaxAttributeColumns)
	}
	if !slices.Equal(ovf, []string{"attr_overflow", "resource_overflow", "scope_overflow"}) {
		t.Errorf("overflow columns %v", ovf)
	}
	// "common" is in every record, so it keeps its column.
	if _, ok := f.Parquet().Schema().Lookup("attr.common"); !ok {
		t.Error("the most used key lost its column")
	}
	got := new(signal.Logs)
	if err := f.ReadLogs(got); err != nil {
		t.Fatal(err)
	}
	compareCanon(t, canonLogs(src), canonLogs(got))
}

// TestManyRequestsOfManyKeys is the second shape: 70 batches of
// 1,000 keys each into one partition.
func TestManyRequestsOfManyKeys(t *testing.T) {
	var srcs []*signal.Logs
	root, segs := writeAll(t, Options{}, func(w *Writer) error {
		for i := range 70 {
			src := wideLogs(t, 10, 100, 0, fmt.Sprintf("r%d.", i))
			srcs = append(srcs, src)
			if err := w.WriteLogs("t", src); err != nil {
				return err
			}
		}
		return nil
	})
	var want []string
	for _, s := range srcs {
		want = append(want, canonLogs(s)...)
	}
	got := new(signal.Logs)
	for _, s := range segs {
		f := openSeg(t, root, s)
		if attrs, _ := attrColumns(f); attrs > DefaultMaxAttributeColumns {
			t.Errorf("%s: %d attribute columns", s.Path, attrs)
		}
		if err := f.ReadLogs(got); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	compareCanon(t, want, canonLogs(got))
}

// TestOverflowRoundTrip runs the hostile round trips of every table with a
// cap of one column, so that most attributes of every scope, duplicates
// and nested values included, go through the overflow columns.
func TestOverflowRoundTrip(t *testing.T) {
	opts := Options{MaxAttributeColumns: 1}
	check := func(t *testing.T, root string, segs []Segment) []*File {
		var files []*File
		sawOverflow := false
		for _, s := range segs {
			f := openSeg(t, root, s)
			attrs, ovf := attrColumns(f)
			if attrs > 1 {
				t.Errorf("%s: %d attribute columns past the cap", s.Path, attrs)
			}
			sawOverflow = sawOverflow || len(ovf) > 0
			files = append(files, f)
		}
		if !sawOverflow {
			t.Error("no file has an overflow column")
		}
		return files
	}
	t.Run("logs", func(t *testing.T) {
		src := hostileLogs(t)
		root, segs := writeAll(t, opts, func(w *Writer) error { return w.WriteLogs("t", src) })
		got := new(signal.Logs)
		for _, f := range check(t, root, segs) {
			if err := f.ReadLogs(got); err != nil {
				t.Fatal(err)
			}
		}
		compareCanon(t, canonLogs(src), canonLogs(got))
	})
	t.Run("metrics", func(t *testing.T) {
		src := testMetrics(t)
		root, segs := writeAll(t, opts, func(w *Writer) error { return w.WriteMetrics("t", src) })
		got := new(signal.Metrics)
		for _, f := range check(t, root, segs) {
			if err := f.ReadMetrics(got); err != nil {
				t.Fatal(err)
			}
		}
		compareCanon(t, canonMetrics(src), canonMetrics(got))
	})
	t.Run("traces", func(t *testing.T) {
		src := testSpans(t)
		c := &src.Common
		for j := range src.Len() { // a second key, some with two types
			src.Attr[j] = attrRange(c, func() {
				attr(c, "http.status_code", signal.ValueInt, 200+j)
				attr(c, "peer", signal.ValueString, "p")
				if j%2 == 0 {
					attr(c, "peer", signal.ValueDouble, 1.5)
				}
			})
		}
		root, segs := writeAll(t, opts, func(w *Writer) error { return w.WriteSpans("t", src) })
		got := new(signal.Spans)
		for _, f := range check(t, root, segs) {
			if err := f.ReadSpans(got); err != nil {
				t.Fatal(err)
			}
		}
		compareCanon(t, canonSpans(src), canonSpans(got))
	})
	t.Run("wide", func(t *testing.T) {
		src := wideLogs(t, 30, 14, 5, "")
		root, segs := writeAll(t, opts, func(w *Writer) error { return w.WriteLogs("t", src) })
		got := new(signal.Logs)
		for _, f := range check(t, root, segs) {
			if err := f.ReadLogs(got); err != nil {
				t.Fatal(err)
			}
		}
		compareCanon(t, canonLogs(src), canonLogs(got))
	})
}

func TestKeptColumns(t *testing.T) {
	for _, tc := range []struct {
		freq  []int32
		limit int
		want  []int32
	}{
		{[]int32{1, 2, 3}, 5, []int32{0, 1, 2}},
		{[]int32{1, 5, 1, 5, 2}, 3, []int32{1, 3, 4}},
		{[]int32{1, 1, 1, 1}, 2, []int32{0, 1}}, // ties: first seen
		{[]int32{1, 1, 9, 1}, 2, []int32{0, 2}},
	} {
		if got := keptColumns(nil, tc.freq, tc.limit); !slices.Equal(got, tc.want) {
			t.Errorf("keptColumns(%v, %d) = %v, want %v", tc.freq, tc.limit, got, tc.want)
		}
	}
	for _, name := range overflowColumns {
		if IsAttributeColumn(name) || strings.Contains(name, ".") {
			t.Errorf("overflow column %q could be taken for an attribute column", name)
		}
	}
}

// TestAppendOverflowAttr: attribute column values moved to an overflow
// object by another writer (rollups) read back with their keys, types and
// values, after what the object already held.
func TestAppendOverflowAttr(t *testing.T) {
	obj := []byte(`{"old":{"stringValue":"kept"}}`)
	for _, a := range []struct {
		col string
		v   parquet.Value
	}{
		{"attr.s", parquet.ByteArrayValue([]byte("a\"b"))},
		{"attr.i#int", parquet.Int64Value(-7)},
		{"attr.d#double", parquet.DoubleValue(0.25)},
		{"attr.b#bool", parquet.BooleanValue(false)},
		{"attr.y#bytes", parquet.ByteArrayValue([]byte{0, 255})},
		{"attr.e#empty", parquet.BooleanValue(true)},
		{"attr.a%23x#array", parquet.ByteArrayValue([]byte(`{"arrayValue":{"values":[{"intValue":"1"}]}}`))},
	} {
		var ovf string
		var err error
		if ovf, obj, err = AppendOverflowAttr(obj, a.col, a.v); err != nil || ovf != "attr_overflow" {
			t.Fatalf("%s: %q %v", a.col, ovf, err)
		}
	}
	var c signal.Common
	if err := appendOverflowAttrs(&c, obj); err != nil {
		t.Fatalf("%s: %v", obj, err)
	}
	var got []string
	for i := range c.Attrs.Len() {
		js, err := appendAnyValueJSON(nil, &c, c.Attrs.Type[i], c.Attrs.Val[i])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c.Keys.Name(c.Attrs.Key[i])+"="+string(js))
	}
	want := []string{`old={"stringValue":"kept"}`, `s={"stringValue":"a\"b"}`, `i={"intValue":"-7"}`,
		`d={"doubleValue":0.25}`, `b={"boolValue":false}`, `y={"bytesValue":"AP8="}`, `e={}`,
		`a#x={"arrayValue":{"values":[{"intValue":"1"}]}}`}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if ovf, o2, err := AppendOverflowAttr(nil, "resource.k", parquet.ByteArrayValue([]byte("v"))); err != nil ||
		ovf != "resource_overflow" || string(o2) != `{"k":{"stringValue":"v"}}` {
		t.Fatalf("resource: %q %s %v", ovf, o2, err)
	}
	if _, _, err := AppendOverflowAttr(nil, "service_name", parquet.ByteArrayValue([]byte("v"))); err == nil {
		t.Fatal("service_name is not an attribute column")
	}
}
