package lake

import (
	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/signal"
)

// The attribute-name codec and the bounded-schema rule are package
// format's (format/names.go); these names keep the encoder and the reader
// of this package reading as they did.

type attrScope = format.Scope

const (
	scopeResource = format.ScopeResource
	scopeScope    = format.ScopeScope
	scopeRecord   = format.ScopeRecord
	numAttrScopes = format.NumScopes
	numValueTypes = format.NumValueTypes
)

var (
	scopePrefixes   = [numAttrScopes]string{format.PrefixResource, format.PrefixScope, format.PrefixRecord}
	overflowColumns = [numAttrScopes]string{format.ColResourceOverflow, format.ColScopeOverflow, format.ColAttrOverflow}
)

// appendColumnName appends the column name of (scope, key, type).
func appendColumnName(dst []byte, s attrScope, key string, t signal.ValueType) []byte {
	return format.AppendAttrName(dst, s, key, t)
}

// parseColumnName is the inverse of appendColumnName; ok is false for names
// that are not attribute columns.
func parseColumnName(name string) (s attrScope, key string, t signal.ValueType, ok bool) {
	c, ok := format.ParseAttrName(name)
	return c.Scope, c.Key, c.Type, ok
}

// DefaultMaxAttributeColumns is the default cap on a file's attribute
// columns (Options.MaxAttributeColumns).
const DefaultMaxAttributeColumns = format.DefaultMaxAttributeColumns

// OverflowColumn is the overflow column of attribute scope "resource",
// "scope" or "attr" (record attributes), or "" for another scope.
func OverflowColumn(scope string) string { return format.OverflowColumn(scope) }

// parseOverflowColumn reports the scope of an overflow column name.
func parseOverflowColumn(name string) (attrScope, bool) { return format.ParseOverflowName(name) }

// IsOverflowColumn reports whether name is an overflow column.
func IsOverflowColumn(name string) bool { return format.IsOverflowColumn(name) }

// IsAttributeColumn reports whether name is a flattened attribute column
// (not an overflow column): the columns MaxAttributeColumns counts.
func IsAttributeColumn(name string) bool { return format.IsAttrColumn(name) }

// keptColumns is format.KeptColumns, the bounded-schema rule.
func keptColumns(dst []int32, freq []int32, limit int) []int32 {
	return format.KeptColumns(dst, freq, limit)
}

// KeptColumns is format.KeptColumns into a new slice.
func KeptColumns(freq []int32, limit int) []int32 { return format.KeptColumns(nil, freq, limit) }

// AppendOverflowAttr is format.AppendOverflowAttr.
func AppendOverflowAttr(obj []byte, col string, v parquet.Value) (string, []byte, error) {
	return format.AppendOverflowAttr(obj, col, v)
}
