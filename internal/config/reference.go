package config

import (
	"fmt"
	"reflect"
	"strings"
)

// Reference renders the reference of every key (type, default,
// description) as Markdown, from the struct tags and the embedded
// defaults. docs/config.md holds its output between ReferenceBegin and
// ReferenceEnd.
func Reference() string {
	var b strings.Builder
	def := reflect.ValueOf(Default())
	var top []field
	for _, f := range fields(configType) {
		if !section(f.typ) {
			top = append(top, f)
		}
	}
	writeTable(&b, "", "Top-level keys.", top, def)
	var walk func(t reflect.Type, v reflect.Value, path string)
	walk = func(t reflect.Type, v reflect.Value, path string) {
		var leaves []field
		for _, f := range fields(t) {
			if !section(f.typ) {
				leaves = append(leaves, f)
			}
		}
		if path != "" && len(leaves) > 0 {
			writeTable(&b, path, "", leaves, v)
		}
		for _, f := range fields(t) {
			if section(f.typ) {
				p := join(path, f.key)
				if path == "" || len(fields(f.typ)) > 0 {
					fmt.Fprintf(&b, "### %s\n\n%s\n\n", p, f.doc)
				}
				walk(f.typ, v.Field(f.index), p)
			}
		}
	}
	walk(configType, def, "")
	b.WriteString("### The defaults as a file\n\n`sluice run` without `--config` behaves as if given this file:\n\n```yaml\n")
	b.Write(defaultsYAML)
	b.WriteString("```\n")
	return b.String()
}

// Markers around the generated part of docs/config.md.
const (
	ReferenceBegin = "<!-- BEGIN GENERATED REFERENCE: go test ./internal/config -run TestReference -update -->"
	ReferenceEnd   = "<!-- END GENERATED REFERENCE -->"
)

func writeTable(b *strings.Builder, path, intro string, fs []field, v reflect.Value) {
	if len(fs) == 0 {
		return
	}
	if intro != "" {
		fmt.Fprintf(b, "### (top level)\n\n%s\n\n", intro)
	}
	b.WriteString("| Key | Type | Default | Description |\n|---|---|---|---|\n")
	for _, f := range fs {
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", join(path, f.key), typeName(f.typ), defaultText(f, v.Field(f.index)), strings.ReplaceAll(f.doc, "|", `\|`))
	}
	b.WriteString("\n")
}

func typeName(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[ByteSize]():
		return "size"
	case reflect.TypeFor[Duration]():
		return "duration"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Bool:
		return "bool"
	case reflect.Slice:
		return "list"
	case reflect.Map:
		return "map"
	}
	return "string"
}

func defaultText(f field, v reflect.Value) string {
	if v.IsZero() && f.derived != "" {
		return "`" + f.derived + "`"
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return "`" + s.String() + "`"
	}
	if v.Kind() == reflect.String {
		if v.String() == "" {
			return "(empty)"
		}
		return "`" + v.String() + "`"
	}
	return fmt.Sprintf("`%v`", v.Interface())
}
