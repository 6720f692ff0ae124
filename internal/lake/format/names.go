package format

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

// Scope says which attribute set an attribute column comes from.
type Scope uint8

const (
	ScopeResource Scope = iota // resource attributes
	ScopeScope                 // instrumentation scope attributes
	ScopeRecord                // the record's own (log record's, data point's, span's)
	NumScopes
)

// Prefixes of attribute column names, by scope.
const (
	PrefixResource = "resource."
	PrefixScope    = "scope."
	PrefixRecord   = "attr."
)

// Overflow columns, by scope (docs/schema.md, "Bounded schema").
const (
	ColResourceOverflow = "resource_overflow"
	ColScopeOverflow    = "scope_overflow"
	ColAttrOverflow     = "attr_overflow"
)

var (
	scopePrefixes   = [NumScopes]string{PrefixResource, PrefixScope, PrefixRecord}
	overflowColumns = [NumScopes]string{ColResourceOverflow, ColScopeOverflow, ColAttrOverflow}
)

// Prefix is the column name prefix of scope s ("resource.", "scope.",
// "attr.").
func (s Scope) Prefix() string { return scopePrefixes[s] }

// Overflow is the overflow column of scope s.
func (s Scope) Overflow() string { return overflowColumns[s] }

// ScopeOfPrefix returns the scope whose attribute columns start with
// prefix ("resource.", "scope." or "attr.").
func ScopeOfPrefix(prefix string) (Scope, bool) {
	for s, p := range scopePrefixes {
		if p == prefix {
			return Scope(s), true
		}
	}
	return 0, false
}

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

// NumValueTypes is the number of attribute value types (signal.ValueType
// values) that have columns.
const NumValueTypes = len(typeSuffixes)

// TypeSuffix is the column name suffix of value type t ("" for string,
// "#int", ...).
func TypeSuffix(t signal.ValueType) string { return typeSuffixes[t] }

// AttrColumn is what an attribute column's name says: whose attribute,
// its exact key and its value type.
type AttrColumn struct {
	Scope Scope
	Key   string
	Type  signal.ValueType
}

// AppendAttrName appends the name of the attribute column of (scope, key,
// type): prefix + key with '%' → "%25" and '#' → "%23" + type suffix. '%'
// is escaped first so that an escaped '#' can never be confused with a
// literal "%23" in a key; the result decodes (ParseAttrName) to exactly
// (s, key, t).
func AppendAttrName(dst []byte, s Scope, key string, t signal.ValueType) []byte {
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

// AttrName is AppendAttrName as a string.
func AttrName(s Scope, key string, t signal.ValueType) string {
	return string(AppendAttrName(make([]byte, 0, len(key)+16), s, key, t))
}

// ParseAttrName is the inverse of AppendAttrName; ok is false for names
// that are not attribute columns (fixed and overflow columns, and names no
// sluice writer produces: an unknown type suffix, a '#' or a '%' that is
// not an escape in the key).
func ParseAttrName(name string) (c AttrColumn, ok bool) {
	var key string
	for i, p := range scopePrefixes {
		if strings.HasPrefix(name, p) {
			c.Scope, key, ok = Scope(i), name[len(p):], true
			break
		}
	}
	if !ok {
		return AttrColumn{}, false
	}
	c.Type = signal.ValueString
	if h := strings.LastIndexByte(key, '#'); h >= 0 {
		ok = false
		for vt, suf := range typeSuffixes {
			if suf != "" && key[h:] == suf {
				c.Type, ok = signal.ValueType(vt), true
				break
			}
		}
		if !ok {
			return AttrColumn{}, false
		}
		key = key[:h]
	}
	if strings.IndexByte(key, '#') >= 0 {
		return AttrColumn{}, false
	}
	if strings.IndexByte(key, '%') >= 0 {
		var b strings.Builder
		b.Grow(len(key))
		for i := 0; i < len(key); i++ {
			if key[i] != '%' {
				b.WriteByte(key[i])
				continue
			}
			if i+2 >= len(key) || key[i+1] != '2' || (key[i+2] != '5' && key[i+2] != '3') {
				return AttrColumn{}, false // not produced by AppendAttrName
			}
			if key[i+2] == '5' {
				b.WriteByte('%')
			} else {
				b.WriteByte('#')
			}
			i += 2
		}
		key = b.String()
	}
	c.Key = key
	return c, true
}

// IsAttrColumn reports whether name is a flattened attribute column (not
// an overflow column): the columns MaxAttributeColumns counts.
func IsAttrColumn(name string) bool {
	_, ok := ParseAttrName(name)
	return ok
}

// ParseOverflowName reports the scope of an overflow column name.
func ParseOverflowName(name string) (Scope, bool) {
	for s, n := range overflowColumns {
		if n == name {
			return Scope(s), true
		}
	}
	return 0, false
}

// IsOverflowColumn reports whether name is an overflow column.
func IsOverflowColumn(name string) bool {
	_, ok := ParseOverflowName(name)
	return ok
}

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

// DefaultMaxAttributeColumns is the default cap on a file's attribute
// columns (lake.max_attribute_columns): Parquet writers and readers slow
// down with tens of thousands of columns, and parquet-go cannot write more
// than 65534 leaves at all.
const DefaultMaxAttributeColumns = 1000

// KeptColumns is the bounded-schema rule: of a file's attribute columns,
// in first-seen order, with freq[i] the number of attribute sets (records,
// or resources and scopes) that use column i, the limit most used stay
// columns (ties: the first seen) and the rest go to their scope's overflow
// column. It returns the indexes that stay, ascending, in dst.
func KeptColumns(dst []int32, freq []int32, limit int) []int32 {
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

// AppendOverflowAttr adds the attribute of attribute column col, holding v
// as a lake file's column does, to obj, a JSON object of an overflow column
// (empty for none yet): key → OTLP JSON AnyValue. It returns the overflow
// column the attribute belongs in and the object.
func AppendOverflowAttr(obj []byte, col string, v parquet.Value) (string, []byte, error) {
	ac, ok := ParseAttrName(col)
	if !ok {
		return "", obj, fmt.Errorf("format: %q is not an attribute column", col)
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
		return "", obj, fmt.Errorf("format: overflow value of %q is not a JSON object", col)
	}
	obj = AppendJSONString(obj, []byte(ac.Key))
	obj = append(obj, ':')
	switch t := ac.Type; t {
	case signal.ValueString, signal.ValueBytes:
		obj = AppendScalarJSON(obj, t, v.ByteArray(), 0)
	case signal.ValueInt:
		obj = AppendScalarJSON(obj, t, nil, uint64(v.Int64()))
	case signal.ValueDouble:
		obj = AppendScalarJSON(obj, t, nil, math.Float64bits(v.Double()))
	case signal.ValueBool:
		b := uint64(0)
		if v.Boolean() {
			b = 1
		}
		obj = AppendScalarJSON(obj, t, nil, b)
	case signal.ValueEmpty:
		obj = AppendScalarJSON(obj, t, nil, 0)
	default: // array, map: the column holds the OTLP JSON AnyValue
		obj = append(obj, v.ByteArray()...)
	}
	return overflowColumns[ac.Scope], append(obj, '}'), nil
}
