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

func TestNamesRefuseCaseVariants(t *testing.T) {
	var n Names
	for _, name := range []string{"Acme", "Acme", "other", "b.c-d_E"} {
		if known, ok := n.Admit(name); !ok || known != name {
			t.Fatalf("Admit(%q) = %q, %v; want itself, true", name, known, ok)
		}
	}
	for _, tc := range []struct{ name, known string }{{"acme", "Acme"}, {"ACME", "Acme"}, {"Other", "other"}, {"B.C-D_e", "b.c-d_E"}} {
		if known, ok := n.Admit(tc.name); ok || known != tc.known {
			t.Errorf("Admit(%q) = %q, %v; want %q, false", tc.name, known, ok, tc.known)
		}
	}
	// A refused spelling is not remembered: the first one keeps winning.
	if known, ok := n.Admit("Acme"); !ok || known != "Acme" {
		t.Errorf("Admit(Acme) after refusals = %q, %v", known, ok)
	}
}
