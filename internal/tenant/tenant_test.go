package tenant

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, s := range []string{"default", "acme", "a.b-c_D9", strings.Repeat("x", MaxLen), "..."} {
		if !Valid(s) {
			t.Errorf("Valid(%q) = false, want true", s)
		}
	}
	for _, s := range []string{"", ".", "..", "a/b", "a b", "tenant=x", "é", strings.Repeat("x", MaxLen+1), "a\x00"} {
		if Valid(s) {
			t.Errorf("Valid(%q) = true, want false", s)
		}
	}
}
