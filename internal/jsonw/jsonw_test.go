package jsonw

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendStringIsValidJSON(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " and \ backslash`, "line\nfeed\r\ttab", "\x00\x01\x1f\x7f",
		"héllo wörld ✓ 𝄞", "bad \xff utf8 \xc3", "sep\u2028\u2029end", strings.Repeat("x", 100),
	} {
		for _, out := range [][]byte{AppendString(nil, s), AppendString(nil, []byte(s))} {
			var got string
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%q -> %s: not JSON: %v", s, out, err)
			}
			want := strings.ToValidUTF8(s, "\uFFFD")
			if !utf8.ValidString(s) {
				// Each invalid byte becomes one U+FFFD.
				want = ""
				for i := 0; i < len(s); {
					r, n := utf8.DecodeRuneInString(s[i:])
					want += string(r)
					i += n
				}
			}
			if got != want {
				t.Fatalf("%q -> %s decodes to %q, want %q", s, out, got, want)
			}
		}
	}
	if got := string(AppendString([]byte("x:"), "a\u2028")); got != `x:"a\u2028"` {
		t.Fatalf("U+2028 not escaped: %s", got)
	}
}

func TestAppendFloat(t *testing.T) {
	for f, want := range map[float64]string{
		1.5: "1.5", -2: "-2", 1e21: "1e+21", math.NaN(): `"NaN"`, math.Inf(1): `"Infinity"`, math.Inf(-1): `"-Infinity"`,
	} {
		if got := string(AppendFloat(nil, f)); got != want {
			t.Fatalf("AppendFloat(%v) = %s, want %s", f, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\\c\n\x00\xff\u2028")
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString(nil, s)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q -> %s: not JSON: %v", s, out, err)
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("%q round-trips to %q", s, got)
		}
	})
}
