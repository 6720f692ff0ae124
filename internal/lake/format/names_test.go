package format

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestAttrNameExamples: the names docs/schema.md gives as examples, both
// ways.
func TestAttrNameExamples(t *testing.T) {
	for _, c := range []struct {
		s    Scope
		key  string
		t    signal.ValueType
		name string
	}{
		{ScopeRecord, "a", signal.ValueString, "attr.a"},
		{ScopeRecord, "a", signal.ValueInt, "attr.a#int"},
		{ScopeRecord, "a#int", signal.ValueString, "attr.a%23int"},
		{ScopeRecord, "a%23int", signal.ValueString, "attr.a%2523int"},
		{ScopeRecord, "a.b", signal.ValueString, "attr.a.b"},
		{ScopeRecord, "a_b", signal.ValueString, "attr.a_b"},
		{ScopeResource, "k8s.pod.name", signal.ValueString, "resource.k8s.pod.name"},
		{ScopeRecord, "http.response.status_code", signal.ValueInt, "attr.http.response.status_code#int"},
		{ScopeScope, "", signal.ValueEmpty, "scope.#empty"},
		{ScopeRecord, "%", signal.ValueDouble, "attr.%25#double"},
		{ScopeRecord, "x", signal.ValueBool, "attr.x#bool"},
		{ScopeRecord, "x", signal.ValueBytes, "attr.x#bytes"},
		{ScopeRecord, "x", signal.ValueArray, "attr.x#array"},
		{ScopeRecord, "x", signal.ValueMap, "attr.x#map"},
	} {
		if got := AttrName(c.s, c.key, c.t); got != c.name {
			t.Errorf("AttrName(%d, %q, %d) = %q, want %q", c.s, c.key, c.t, got, c.name)
		}
		got, ok := ParseAttrName(c.name)
		if !ok || got != (AttrColumn{c.s, c.key, c.t}) {
			t.Errorf("ParseAttrName(%q) = %+v, %v; want %d %q %d", c.name, got, ok, c.s, c.key, c.t)
		}
	}
}

// TestParseAttrNameRejects: fixed and overflow columns, and names no writer
// produces, are not attribute columns.
func TestParseAttrNameRejects(t *testing.T) {
	var fixed []string
	for _, tb := range Tables {
		for _, c := range tb.Columns {
			fixed = append(fixed, c.Name)
		}
	}
	bad := []string{"attr.a#float", "attr.a#", "attr.a#b#int", "attr.%2", "attr.%", "attr.%41", "attr.a%2x",
		"attr", "attrs.a", "Attr.a", "resource", "resource_re.a", "attr_re.a", "x.attr.a"}
	for _, name := range append(append(fixed, bad...), ColResourceOverflow, ColScopeOverflow, ColAttrOverflow) {
		if c, ok := ParseAttrName(name); ok {
			t.Errorf("ParseAttrName(%q) = %+v, want not an attribute column", name, c)
		}
		if IsAttrColumn(name) {
			t.Errorf("IsAttrColumn(%q) = true", name)
		}
	}
	for s := range NumScopes {
		if n, ok := ParseOverflowName(s.Overflow()); !ok || n != s || !IsOverflowColumn(s.Overflow()) {
			t.Errorf("ParseOverflowName(%q) = %d, %v", s.Overflow(), n, ok)
		}
		if got := OverflowColumn(strings.TrimSuffix(s.Prefix(), ".")); got != s.Overflow() {
			t.Errorf("OverflowColumn(%q) = %q, want %q", s.Prefix(), got, s.Overflow())
		}
		if got, ok := ScopeOfPrefix(s.Prefix()); !ok || got != s {
			t.Errorf("ScopeOfPrefix(%q) = %d, %v", s.Prefix(), got, ok)
		}
	}
	if OverflowColumn("span") != "" || IsOverflowColumn("attr.overflow") {
		t.Error("unknown scope has an overflow column")
	}
}

// FuzzAttrName: the codec is a bijection between (scope, key, type) and
// the names ParseAttrName accepts (package doc invariant 1), and no
// attribute name is a fixed or overflow column's.
func FuzzAttrName(f *testing.F) {
	for _, k := range []string{"", "a", "a#int", "a%23int", "%", "#", "%25%23", "%2", "k8s.pod.name", "ü #%"} {
		f.Add(uint8(2), k, uint8(1), "attr."+k)
	}
	f.Add(uint8(0), "service.name", uint8(3), "resource.a%25b#double")
	f.Fuzz(func(t *testing.T, s uint8, key string, typ uint8, name string) {
		sc, vt := Scope(s%uint8(NumScopes)), signal.ValueType(typ%uint8(NumValueTypes))
		n := AttrName(sc, key, vt)
		got, ok := ParseAttrName(n)
		if !ok || got != (AttrColumn{sc, key, vt}) {
			t.Fatalf("ParseAttrName(AttrName(%d, %q, %d) = %q) = %+v, %v", sc, key, vt, n, got, ok)
		}
		if IsOverflowColumn(n) || !strings.Contains(n, ".") {
			t.Fatalf("attribute name %q looks like a fixed or overflow column", n)
		}
		if c, ok := ParseAttrName(name); ok {
			if back := AttrName(c.Scope, c.Key, c.Type); back != name {
				t.Fatalf("ParseAttrName(%q) = %+v, whose name is %q", name, c, back)
			}
			if utf8.ValidString(name) && !utf8.ValidString(c.Key) {
				t.Fatalf("ParseAttrName(%q) made invalid UTF-8 %q", name, c.Key)
			}
		}
	})
}

func TestKeptColumns(t *testing.T) {
	for _, c := range []struct {
		freq  []int32
		limit int
		want  []int32
	}{
		{[]int32{1, 2, 3}, 5, []int32{0, 1, 2}},
		{[]int32{1, 5, 3, 5}, 2, []int32{1, 3}},
		{[]int32{2, 2, 2}, 2, []int32{0, 1}}, // ties: first seen
		{[]int32{1, 9, 1, 1}, 1, []int32{1}},
		{nil, 3, nil},
	} {
		got := KeptColumns(nil, c.freq, c.limit)
		if len(got) != len(c.want) || (len(got) > 0 && string(asBytes(got)) != string(asBytes(c.want))) {
			t.Errorf("KeptColumns(%v, %d) = %v, want %v", c.freq, c.limit, got, c.want)
		}
	}
}

func asBytes(v []int32) []byte {
	var b []byte
	for _, x := range v {
		b = append(b, byte(x), byte(x>>8))
	}
	return b
}

// TestAppendOverflowAttr: attribute column values become the typed OTLP
// JSON an overflow column holds, merged into an existing object.
func TestAppendOverflowAttr(t *testing.T) {
	var obj []byte
	var col string
	var err error
	for _, a := range []struct {
		col string
		v   parquet.Value
	}{
		{"attr.s", parquet.ByteArrayValue([]byte(`q"x`))},
		{"attr.i#int", parquet.Int64Value(-3)},
		{"attr.d#double", parquet.DoubleValue(0.25)},
		{"attr.b#bool", parquet.BooleanValue(true)},
		{"attr.raw#bytes", parquet.ByteArrayValue([]byte{0, 255})},
		{"attr.e#empty", parquet.BooleanValue(true)},
		{"attr.arr#array", parquet.ByteArrayValue([]byte(`{"arrayValue":{}}`))},
		{"attr.a%23b", parquet.ByteArrayValue([]byte("v"))},
	} {
		if col, obj, err = AppendOverflowAttr(obj, a.col, a.v); err != nil || col != ColAttrOverflow {
			t.Fatalf("AppendOverflowAttr(%q) = %q, %v", a.col, col, err)
		}
	}
	want := `{"s":{"stringValue":"q\"x"},"i":{"intValue":"-3"},"d":{"doubleValue":0.25},"b":{"boolValue":true},` +
		`"raw":{"bytesValue":"AP8="},"e":{},"arr":{"arrayValue":{}},"a#b":{"stringValue":"v"}}`
	if string(obj) != want {
		t.Errorf("object\n got %s\nwant %s", obj, want)
	}
	if col, o, err := AppendOverflowAttr([]byte(" {} "), "resource.k", parquet.ByteArrayValue([]byte("v"))); err != nil ||
		col != ColResourceOverflow || string(o) != `{"k":{"stringValue":"v"}}` {
		t.Errorf("into {}: %q %s %v", col, o, err)
	}
	if _, _, err := AppendOverflowAttr(nil, ColServiceName, parquet.ByteArrayValue([]byte("v"))); err == nil {
		t.Error("service_name accepted as an attribute column")
	}
	if _, _, err := AppendOverflowAttr([]byte("[1]"), "attr.k", parquet.ByteArrayValue([]byte("v"))); err == nil {
		t.Error("a JSON array accepted as an overflow object")
	}
}
