package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Lines maps a key path (receivers.otlp.grpc_addr, query.auth.tokens[0])
// to the line of the file that sets it, so that Validate can point at the
// line of a value it refuses. Nil for the embedded defaults.
type lines map[string]int

// line returns the line of key, else of its nearest enclosing key the file
// sets (queue for queue.max_bytes left at its default beside a
// queue.segment_bytes that makes it too small); 0 when the file sets none
// or a flag overrode the key (Override).
func (l lines) line(key string) int {
	for key != "" {
		if n, ok := l[key]; ok {
			return n
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			return 0
		}
		key = key[:i]
	}
	return 0
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// checkTree walks the document against the Config type before anything
// is decoded and reports every problem with its line and full key path:
// unknown and duplicate keys, a section that is not a mapping, and a
// value of the wrong type. yaml.v3 alone stops at the first value an
// Unmarshaler refuses, names no key, and truncates 1.5 into an int.
// It records the line of every key in ls.
func checkTree(n *yaml.Node, t reflect.Type, path string, ls lines) []error {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil // "key:" with nothing after it keeps the default
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case section(t):
		return checkMapping(n, path, ls, func(k *yaml.Node) (reflect.Type, string, error) {
			fs := fields(t)
			for _, f := range fs {
				if f.key == k.Value {
					return f.typ, join(path, f.key), nil
				}
			}
			msg := "unknown key " + join(path, k.Value)
			if s := closest(k.Value, fs); s != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", join(path, s))
			}
			return nil, "", errors.New(msg)
		})
	case t.Kind() == reflect.Map:
		return checkMapping(n, path, ls, func(k *yaml.Node) (reflect.Type, string, error) {
			return t.Elem(), join(path, k.Value), nil
		})
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return []error{fmt.Errorf("line %d: %s: want a list, such as [a, b]", n.Line, path)}
		}
		var errs []error
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			ls[p] = c.Line
			errs = append(errs, checkTree(c, t.Elem(), p, ls)...)
		}
		return errs
	}
	if err := checkScalar(n, t, path); err != nil {
		return []error{err}
	}
	return nil
}

// checkMapping checks the keys of a mapping node; key resolves a key to
// the type and path of its value, or an error.
func checkMapping(n *yaml.Node, path string, ls lines, key func(k *yaml.Node) (reflect.Type, string, error)) []error {
	if n.Kind != yaml.MappingNode {
		what := path
		if what == "" {
			what = "the config file"
		}
		return []error{fmt.Errorf("line %d: %s: want a mapping of keys", n.Line, what)}
	}
	var errs []error
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("line %d: %s: a key must be a plain name", k.Line, path))
			continue
		}
		if k.ShortTag() == "!!merge" { // <<: *anchor merges the anchored mapping's keys
			errs = append(errs, checkMergeTarget(v, path, ls, key)...)
			continue
		}
		typ, p, err := key(k)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", k.Line, err))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			errs = append(errs, fmt.Errorf("line %d: %s: set twice (first at line %d)", k.Line, p, first))
			continue
		}
		seen[k.Value] = k.Line
		ls[p] = k.Line
		errs = append(errs, checkTree(v, typ, p, ls)...)
	}
	return errs
}

func checkMergeTarget(v *yaml.Node, path string, ls lines, key func(k *yaml.Node) (reflect.Type, string, error)) []error {
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	var errs []error
	targets := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		targets = v.Content
	}
	for _, m := range targets {
		if m.Kind == yaml.AliasNode && m.Alias != nil {
			m = m.Alias
		}
		// The merged keys' lines are the anchor's; the file's own keys
		// after the merge override them, as yaml.v3 decodes it.
		errs = append(errs, checkMapping(m, path, lines{}, key)...)
	}
	return errs
}

var yamlLinePrefix = regexp.MustCompile(`^(yaml: )?line \d+: `)

// checkScalar decodes a value on its own, so that its error names its key.
func checkScalar(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %s: want a single value, not a list or mapping", n.Line, path)
	}
	if !reflect.PointerTo(t).Implements(unmarshalerType) {
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			// yaml.v3 would truncate 1.5 into 1 and take 1e3 silently.
			if n.ShortTag() != "!!int" {
				return fmt.Errorf("line %d: %s: want an integer, got %q", n.Line, path, n.Value)
			}
		}
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		msg := err.Error()
		if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
			msg = te.Errors[0]
		}
		msg = yamlLinePrefix.ReplaceAllString(msg, "")
		if t.Kind() == reflect.Bool {
			msg = fmt.Sprintf("want true or false, got %s", strconv.Quote(n.Value))
		}
		return fmt.Errorf("line %d: %s: %s", n.Line, path, msg)
	}
	return nil
}
