package tracer

import (
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/signal"
)

const (
	hexDigits = "0123456789abcdef"
	upperHex  = "0123456789ABCDEF"
)

// appendUTF8 appends b to dst with every byte that is not part of valid
// UTF-8 written as \xNN, as Python's backslashreplace does. A Linux path
// or command name is any bytes, but Parquet strings (DuckDB and pyarrow
// refuse others), Prometheus labels and protobuf strings must be UTF-8.
func appendUTF8(dst, b []byte) []byte {
	if utf8.Valid(b) {
		return append(dst, b...)
	}
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			dst = append(dst, '\\', 'x', hexDigits[b[0]>>4], hexDigits[b[0]&15])
			b = b[1:]
			continue
		}
		dst = append(dst, b[:n]...)
		b = b[n:]
	}
	return dst
}

// appendStrUTF8 appends b to out's arena as UTF-8 (see appendUTF8).
func appendStrUTF8(out *signal.IOEvents, b []byte) signal.Str {
	if len(b) == 0 {
		return 0
	}
	off := len(out.Buf)
	out.Buf = appendUTF8(out.Buf, b)
	return signal.MakeStr(off, len(out.Buf)-off)
}

// utf8String is s made valid UTF-8 (see appendUTF8).
func utf8String(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string(appendUTF8(nil, []byte(s)))
}

// displayKey is key for a terminal: control characters (a newline in a
// file name would break the table) become \n, \t or \xNN.
func displayKey(key string) string {
	clean := true
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return key
	}
	b := make([]byte, 0, len(key)+8)
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20 || c == 0x7f:
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// appendFrame appends s as one frame of a folded stack. flamegraph.pl,
// inferno and speedscope split a line at ';' and take the number after
// the last space as its weight (and one before it as a second weight of a
// differential graph: a file "run 2" would be misread), so a space, ';',
// '%' and control characters are percent-encoded: %20, %3B, %25, %0A.
func appendFrame(dst, s []byte) []byte {
	for _, c := range s {
		if c == ' ' || c == ';' || c == '%' || c < 0x20 || c == 0x7f {
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
			continue
		}
		dst = append(dst, c)
	}
	return dst
}
