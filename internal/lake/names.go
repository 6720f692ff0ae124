package lake

import (
	"strings"

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
