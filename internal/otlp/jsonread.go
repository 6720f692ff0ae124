package otlp

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonReader is a small pull parser for the OTLP JSON sub-messages the lake
// stores; it needs no reflection and reports positions in its errors.
type jsonReader struct {
	b   []byte
	i   int
	str []byte // scratch for unescaped strings
}

func (r *jsonReader) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s: %w", r.i, fmt.Sprintf(format, args...), ErrJSON)
}

func (r *jsonReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\r', '\n':
			r.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (r *jsonReader) peek() byte {
	r.ws()
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

func (r *jsonReader) consume(c byte) bool {
	if r.peek() == c {
		r.i++
		return true
	}
	return false
}

// more reports whether an object or array (already opened) has another
// member, consuming the comma before it or the closing byte after the last.
func (r *jsonReader) more(closing byte, first bool) (bool, error) {
	if r.consume(closing) {
		return false, nil
	}
	if !first && !r.consume(',') {
		return false, r.errorf("want ',' or '%c'", closing)
	}
	return true, nil
}

// key reads an object key and its colon. The result aliases scratch.
func (r *jsonReader) key() ([]byte, error) {
	k, err := r.string()
	if err != nil {
		return nil, err
	}
	if !r.consume(':') {
		return nil, r.errorf("want ':'")
	}
	return k, nil
}

// string reads a JSON string, unescaped. The result aliases r's scratch and
// is valid until the next call.
func (r *jsonReader) string() ([]byte, error) {
	if !r.consume('"') {
		return nil, r.errorf("want a string")
	}
	start := r.i
	// Fast path: no escapes.
	for r.i < len(r.b) {
		c := r.b[r.i]
		if c == '"' {
			s := r.b[start:r.i]
			r.i++
			if !utf8.Valid(s) {
				return nil, fmt.Errorf("offset %d: %w", start, ErrInvalidUTF8)
			}
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		r.i++
	}
	out := append(r.str[:0], r.b[start:r.i]...)
	for {
		if r.i >= len(r.b) {
			return nil, r.errorf("unterminated string")
		}
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			r.str = out
			if !utf8.Valid(out) {
				return nil, fmt.Errorf("offset %d: %w", start, ErrInvalidUTF8)
			}
			return out, nil
		case c < 0x20:
			return nil, r.errorf("control character in string")
		case c != '\\':
			out = append(out, c)
			r.i++
			continue
		}
		if r.i+1 >= len(r.b) {
			return nil, r.errorf("unterminated escape")
		}
		e := r.b[r.i+1]
		r.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			c1, ok := r.hex4()
			if !ok {
				return nil, r.errorf("bad \\u escape")
			}
			rn := rune(c1)
			if utf16.IsSurrogate(rn) {
				if r.i+1 < len(r.b) && r.b[r.i] == '\\' && r.b[r.i+1] == 'u' {
					save := r.i
					r.i += 2
					c2, ok := r.hex4()
					if d := utf16.DecodeRune(rn, rune(c2)); ok && d != utf8.RuneError {
						rn = d
					} else {
						r.i = save
						rn = utf8.RuneError
					}
				} else {
					rn = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, rn)
		default:
			return nil, r.errorf("bad escape \\%c", e)
		}
	}
}

func (r *jsonReader) hex4() (uint16, bool) {
	if r.i+4 > len(r.b) {
		return 0, false
	}
	var v uint16
	for _, c := range r.b[r.i : r.i+4] {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint16(c - '0')
		case c >= 'a' && c <= 'f':
			v |= uint16(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v |= uint16(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	r.i += 4
	return v, true
}

// number reads the raw text of a JSON number.
func (r *jsonReader) number() ([]byte, error) {
	r.ws()
	start := r.i
	for r.i < len(r.b) {
		c := r.b[r.i]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			r.i++
			continue
		}
		break
	}
	if r.i == start {
		return nil, r.errorf("want a number")
	}
	return r.b[start:r.i], nil
}

// scalar reads a string or number and returns its text (strings unescaped),
// for fields OTLP JSON may write either way (int64 as string, NaN, ...).
func (r *jsonReader) scalar() ([]byte, error) {
	if r.peek() == '"' {
		return r.string()
	}
	return r.number()
}

func (r *jsonReader) literal(word string) bool {
	r.ws()
	if len(r.b)-r.i >= len(word) && string(r.b[r.i:r.i+len(word)]) == word {
		r.i += len(word)
		return true
	}
	return false
}

// skip skips one value of any type.
func (r *jsonReader) skip(depth int) error {
	if depth > maxDepth {
		return r.errorf("nesting too deep")
	}
	switch r.peek() {
	case '{':
		r.i++
		for first := true; ; first = false {
			more, err := r.more('}', first)
			if err != nil || !more {
				return err
			}
			if _, err := r.key(); err != nil {
				return err
			}
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
	case '[':
		r.i++
		for first := true; ; first = false {
			more, err := r.more(']', first)
			if err != nil || !more {
				return err
			}
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
	case '"':
		_, err := r.string()
		return err
	case 't':
		if r.literal("true") {
			return nil
		}
	case 'f':
		if r.literal("false") {
			return nil
		}
	case 'n':
		if r.literal("null") {
			return nil
		}
	default:
		_, err := r.number()
		return err
	}
	return r.errorf("bad literal")
}
