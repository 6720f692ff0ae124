package config

import (
	"strings"
	"testing"
)

func TestQueryAuth(t *testing.T) {
	src := `
query:
  auth:
    tokens:
      - {token: "${READ}", scope: read}
      - {token: "${WRITE}", scope: write, tenant: acme}
      - token: plain
`
	c, err := Parse([]byte(src), env(map[string]string{"READ": "r1", "WRITE": "w1"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	toks := c.Query.Auth.Tokens
	if len(toks) != 3 || toks[0] != (QueryToken{"r1", "read", ""}) || toks[1] != (QueryToken{"w1", "write", "acme"}) || toks[2].Scope != "" {
		t.Fatalf("tokens %+v", toks)
	}
	r := c.Redacted()
	if s := r.YAML(); strings.Contains(s, "r1") || strings.Contains(s, "w1") || !strings.Contains(s, "<redacted>") {
		t.Errorf("redacted config shows a token:\n%s", s)
	}
	if c.Query.Auth.Tokens[0].Token != "r1" {
		t.Error("Redacted changed the original")
	}

	// An unset variable is a parse error, never an empty token.
	if _, err := Parse([]byte(src), env(map[string]string{"READ": "r1"})); err == nil || !strings.Contains(err.Error(), "WRITE") {
		t.Errorf("unset variable: %v", err)
	}
	// A misspelt key in a token is an error.
	if _, err := Parse([]byte("query:\n  auth:\n    tokens:\n      - {token: x, tennant: acme}\n"), env(nil)); err == nil || !strings.Contains(err.Error(), "tennant") {
		t.Errorf("unknown token key: %v", err)
	}
	for _, c := range []struct{ yaml, want string }{
		{`{token: ""}`, "query.auth.tokens[0].token: must not be empty"},
		{`{token: "${EMPTY}"}`, "query.auth.tokens[0].token: must not be empty"},
		{`{token: "a b"}`, "whitespace"},
		{`{token: x, scope: admin}`, `query.auth.tokens[0].scope: "admin"`},
		{`{token: x, tenant: "a/b"}`, "query.auth.tokens[0].tenant"},
	} {
		cfg, err := Parse([]byte("query:\n  auth:\n    tokens:\n      - "+c.yaml+"\n"), env(map[string]string{"EMPTY": ""}))
		if err != nil {
			t.Fatalf("%s: %v", c.yaml, err)
		}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.yaml, err, c.want)
		}
	}
	cfg, _ := Parse([]byte("query:\n  auth:\n    tokens: [{token: x}, {token: x, scope: write}]\n"), env(nil))
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "same token") {
		t.Errorf("duplicate token: %v", err)
	}
	cfg, _ = Parse([]byte("query:\n  tls: {cert_file: /nonexistent.pem}\n"), env(nil))
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "query.tls: cert_file and key_file") {
		t.Errorf("tls without key: %v", err)
	}
}
