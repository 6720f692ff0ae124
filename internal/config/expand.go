package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// expandNode replaces ${NAME} and ${NAME:-default} in every scalar value
// under n; "$$" is a literal "$". Keys and comments are left alone.
// path is n's key path, for error messages.
func expandNode(n *yaml.Node, path string, lookup func(string) (string, bool)) []error {
	var errs []error
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			errs = append(errs, expandNode(c, path, lookup)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			errs = append(errs, expandNode(c, fmt.Sprintf("%s[%d]", path, i), lookup)...)
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			errs = append(errs, expandNode(n.Content[i], join(path, n.Content[i-1].Value), lookup)...)
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return nil
		}
		v, err := Expand(n.Value, lookup)
		if err != nil {
			return []error{fmt.Errorf("line %d: %s: %w", n.Line, path, err)}
		}
		n.Value = v
		if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
			// A plain scalar's type follows its text: "${PORT}" resolved
			// as a string, "4317" must now resolve as an int.
			n.Tag = ""
		}
	}
	return errs
}

// Expand replaces ${NAME} and ${NAME:-default} in s ("$$" is "$"). With
// ":-", the default is used when NAME is unset or empty, as in the shell;
// without it an unset NAME is an error.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '{':
		default:
			b.WriteByte(c)
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ in %q", s)
		}
		expr := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validEnvName(name) {
			return "", fmt.Errorf("${%s}: %q is not a valid environment variable name", expr, name)
		}
		v, ok := lookup(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			return "", fmt.Errorf("environment variable %s is not set (write ${%s:-} to allow it to be empty)", name, name)
		}
		b.WriteString(v)
		i += end
	}
	return b.String(), nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
