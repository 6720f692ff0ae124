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

// TestNamesMax: past Max names a new one is refused (known ""), known
// names and their case variants answer as before, and Seed (tenants the
// lake already has) is never refused for the bound.
func TestNamesMax(t *testing.T) {
	n := Names{Max: 2}
	for _, name := range []string{"a", "b", "a"} {
		if _, ok := n.Admit(name); !ok {
			t.Fatalf("Admit(%q) refused within Max", name)
		}
	}
	if known, ok := n.Admit("c"); ok || known != "" {
		t.Fatalf("Admit(c) past Max = %q, %v; want \"\", false", known, ok)
	}
	if known, ok := n.Admit("A"); ok || known != "a" {
		t.Fatalf("Admit(A) = %q, %v; want the case refusal naming a", known, ok)
	}
	if _, ok := n.Seed("d"); !ok || !n.Known("d") || n.Known("c") || n.Len() != 3 {
		t.Fatalf("Seed past Max: known d %v, c %v, len %d", n.Known("d"), n.Known("c"), n.Len())
	}
}

// TestFromHeader: the one rule every edge applies to the tenant header.
func TestFromHeader(t *testing.T) {
	if v, err := FromHeader(nil, "X-Scope-OrgID", "default"); v != "default" || err != nil {
		t.Errorf("absent: %q, %v", v, err)
	}
	if v, err := FromHeader([]string{"acme"}, "X-Scope-OrgID", "default"); v != "acme" || err != nil {
		t.Errorf("acme: %q, %v", v, err)
	}
	for _, tc := range []struct {
		vals []string
		want string
	}{
		{[]string{""}, "empty X-Scope-OrgID header"},
		{[]string{"a", "b"}, "2 X-Scope-OrgID headers"},
		{[]string{"../x"}, `invalid tenant "../x" in header X-Scope-OrgID`},
		{[]string{"a\x01b"}, `invalid tenant "a\x01b"`},
		{[]string{"ünï"}, `invalid tenant "ünï"`},
		{[]string{strings.Repeat("y", 10000)}, `"... (10000 bytes) in header`},
	} {
		_, err := FromHeader(tc.vals, "X-Scope-OrgID", "default")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.80q: %.300v, want %q", tc.vals, err, tc.want)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("%q: a %d-byte error echoes the value", tc.vals[0][:10], len(err.Error()))
		}
	}
}
