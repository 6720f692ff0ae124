package config

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

var configType = reflect.TypeFor[Config]()

// field is one key of a config section.
type field struct {
	key     string
	index   int
	typ     reflect.Type
	doc     string
	derived string // how an empty value is derived, for the reference
}

// section reports whether t is a nested section rather than a value.
func section(t reflect.Type) bool { return t.Kind() == reflect.Struct }

func fields(t reflect.Type) []field {
	out := make([]field, 0, t.NumField())
	for i := range t.NumField() {
		sf := t.Field(i)
		key, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if key == "" || key == "-" {
			continue
		}
		out = append(out, field{key: key, index: i, typ: sf.Type, doc: sf.Tag.Get("doc"), derived: sf.Tag.Get("derived")})
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkKeys reports every key under n that t does not have, with its full
// path, line and the closest known key.
func checkKeys(n *yaml.Node, t reflect.Type, path string) []error {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // "section:" with nothing under it keeps the defaults
	}
	if n.Kind != yaml.MappingNode {
		what := "the config file"
		if path != "" {
			what = path
		}
		return []error{fmt.Errorf("line %d: %s: want a mapping of keys", n.Line, what)}
	}
	fs := fields(t)
	var errs []error
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var f *field
		for j := range fs {
			if fs[j].key == k.Value {
				f = &fs[j]
				break
			}
		}
		if f == nil {
			msg := fmt.Sprintf("line %d: unknown key %s", k.Line, join(path, k.Value))
			if s := closest(k.Value, fs); s != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", join(path, s))
			}
			errs = append(errs, fmt.Errorf("%s", msg))
			continue
		}
		if section(f.typ) {
			errs = append(errs, checkKeys(v, f.typ, join(path, f.key))...)
		}
	}
	return errs
}

// closest returns the known key nearest to k, if it is near enough to be
// a typo.
func closest(k string, fs []field) string {
	best, bestD := "", 4
	for _, f := range fs {
		if d := editDistance(strings.ToLower(k), f.key); d < bestD {
			best, bestD = f.key, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Keys returns the full path of every key, sections included, in the
// order of the Config type.
func Keys() []string {
	var out []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for _, f := range fields(t) {
			p := join(path, f.key)
			out = append(out, p)
			if section(f.typ) {
				walk(f.typ, p)
			}
		}
	}
	walk(configType, "")
	return out
}
