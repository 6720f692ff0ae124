package lake

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/signal"
)

// attrScope says which attribute set a column comes from.
type attrScope uint8

const (
	scopeResource attrScope = iota
	scopeScope
	scopeRecord
	numAttrScopes
)

var scopePrefixes = [numAttrScopes]string{"resource.", "scope.", "attr."}

// typeSuffixes is indexed by signal.ValueType; string has none so that the
// common case reads naturally in SQL.
var typeSuffixes = [...]string{
	signal.ValueEmpty:  "#empty",
	signal.ValueString: "",
	signal.ValueBool:   "#bool",
	signal.ValueInt:    "#int",
	signal.ValueDouble: "#double",
	signal.ValueBytes:  "#bytes",
	signal.ValueArray:  "#array",
	signal.ValueMap:    "#map",
}

const numValueTypes = len(typeSuffixes)

// appendColumnName appends the column name of (scope, key, type). '%' is
// escaped first so that an escaped '#' can never be confused with a literal
// "%23" in a key.
func appendColumnName(dst []byte, s attrScope, key string, t signal.ValueType) []byte {
	dst = append(dst, scopePrefixes[s]...)
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '%':
			dst = append(dst, "%25"...)
		case '#':
			dst = append(dst, "%23"...)
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, typeSuffixes[t]...)
}

// parseColumnName is the inverse of appendColumnName; ok is false for names
// that are not attribute columns.
func parseColumnName(name string) (s attrScope, key string, t signal.ValueType, ok bool) {
	for i, p := range scopePrefixes {
		if strings.HasPrefix(name, p) {
			s, key, ok = attrScope(i), name[len(p):], true
			break
		}
	}
	if !ok {
		return 0, "", 0, false
	}
	t = signal.ValueString
	if h := strings.LastIndexByte(key, '#'); h >= 0 {
		ok = false
		for vt, suf := range typeSuffixes {
			if suf != "" && key[h:] == suf {
				t, ok = signal.ValueType(vt), true
				break
			}
		}
		if !ok {
			return 0, "", 0, false
		}
		key = key[:h]
	}
	if strings.IndexByte(key, '#') >= 0 {
		return 0, "", 0, false
	}
	if strings.IndexByte(key, '%') >= 0 {
		var b strings.Builder
		for i := 0; i < len(key); i++ {
			if key[i] == '%' && i+2 < len(key) && key[i+1] == '2' && (key[i+2] == '5' || key[i+2] == '3') {
				if key[i+2] == '5' {
					b.WriteByte('%')
				} else {
					b.WriteByte('#')
				}
				i += 2
				continue
			}
			if key[i] == '%' {
				return 0, "", 0, false // not produced by appendColumnName
			}
			b.WriteByte(key[i])
		}
		key = b.String()
	}
	return s, key, t, true
}

// DefaultMaxAttributeColumns is the default cap on a file's attribute
// columns (Options.MaxAttributeColumns): Parquet writers and readers slow
// down with tens of thousands of columns, and parquet-go cannot write more
// than 65534 leaves at all.
const DefaultMaxAttributeColumns = 1000

// overflowColumns are, per attribute scope, the columns that hold the
// attributes of a row which did not get a column of their own in its file
// (keptColumns): one JSON object per row, attribute key → OTLP JSON
// AnyValue ({"stringValue":"x"}, {"intValue":"5"}, ...), so the value
// type survives. The names cannot be attribute columns (those contain a
// '.'), and a file has one only when some row needs it.
var overflowColumns = [numAttrScopes]string{"resource_overflow", "scope_overflow", "attr_overflow"}

// OverflowColumn is the overflow column of attribute scope "resource",
// "scope" or "attr" (record attributes), or "" for another scope.
func OverflowColumn(scope string) string {
	for s, p := range scopePrefixes {
		if p[:len(p)-1] == scope {
			return overflowColumns[s]
		}
	}
	return ""
}

// parseOverflowColumn reports the scope of an overflow column name.
func parseOverflowColumn(name string) (attrScope, bool) {
	for s, n := range overflowColumns {
		if n == name {
			return attrScope(s), true
		}
	}
	return 0, false
}

// IsOverflowColumn reports whether name is an overflow column.
func IsOverflowColumn(name string) bool {
	_, ok := parseOverflowColumn(name)
	return ok
}

// IsAttributeColumn reports whether name is a flattened attribute column
// (not an overflow column): the columns MaxAttributeColumns counts.
func IsAttributeColumn(name string) bool {
	_, _, _, ok := parseColumnName(name)
	return ok
}

// keptColumns is the bounded-schema rule: of a file's n attribute columns,
// in first-seen order, with freq[i] the number of attribute sets (records,
// or resources and scopes) that use column i, the limit most used stay
// columns (ties: the first seen) and the rest go to their scope's overflow
// column. It returns the indexes that stay, ascending, in dst.
func keptColumns(dst []int32, freq []int32, limit int) []int32 {
	dst = dst[:0]
	for i := range freq {
		dst = append(dst, int32(i))
	}
	if len(dst) <= limit {
		return dst
	}
	slices.SortStableFunc(dst, func(a, b int32) int { return cmp.Compare(freq[b], freq[a]) })
	dst = dst[:limit]
	slices.Sort(dst)
	return dst
}

// KeptColumns is keptColumns for other packages that write lake files
// (rollups): of n columns in first-seen order, with freq[i] the number of
// attribute sets using column i, the indexes of the at most limit that keep
// a column, ascending.
func KeptColumns(freq []int32, limit int) []int32 { return keptColumns(nil, freq, limit) }

// AppendOverflowAttr adds the attribute of attribute column col, holding v
// as a lake file's column does, to obj, a JSON object of an overflow column
// (empty for none yet), in the format of the lake's own overflow columns.
// It returns the object and the overflow column it belongs in.
func AppendOverflowAttr(obj []byte, col string, v parquet.Value) (string, []byte, error) {
	s, key, t, ok := parseColumnName(col)
	if !ok {
		return "", obj, fmt.Errorf("lake: %q is not an attribute column", col)
	}
	obj = bytes.TrimSpace(obj)
	switch {
	case len(obj) == 0:
		obj = append(obj, '{')
	case len(obj) >= 2 && obj[0] == '{' && obj[len(obj)-1] == '}':
		obj = obj[:len(obj)-1]
		if len(bytes.TrimSpace(obj[1:])) > 0 {
			obj = append(obj, ',')
		}
	default:
		return "", obj, fmt.Errorf("lake: overflow value of %q is not a JSON object", col)
	}
	obj = appendJSONString(obj, []byte(key))
	obj = append(obj, ':')
	switch t {
	case signal.ValueString, signal.ValueBytes:
		obj = appendScalarJSON(obj, t, v.ByteArray(), 0)
	case signal.ValueInt:
		obj = appendScalarJSON(obj, t, nil, uint64(v.Int64()))
	case signal.ValueDouble:
		obj = appendScalarJSON(obj, t, nil, math.Float64bits(v.Double()))
	case signal.ValueBool:
		b := uint64(0)
		if v.Boolean() {
			b = 1
		}
		obj = appendScalarJSON(obj, t, nil, b)
	case signal.ValueEmpty:
		obj = appendScalarJSON(obj, t, nil, 0)
	default: // array, map: the column holds the OTLP JSON AnyValue
		obj = append(obj, v.ByteArray()...)
	}
	return overflowColumns[s], append(obj, '}'), nil
}
