package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/authn/authntest"
)

// TestProblemsNameKeyAndLine: every problem of a file, from parsing or
// from Validate, names the full key path and the line that sets it, and
// every one is reported, not only the first.
func TestProblemsNameKeyAndLine(t *testing.T) {
	parse := `receivers:
  otlp:
    max_connections: 1.5
    read_timeout: [1]
    max_request_bytes: 10%
    tls: 5
queue:
  max_bytes: 1GiB
  max_bytes: 2GiB
upkeep:
  enabled: maybe
  rollup: {tiers: [1m, x]}
exporters:
  otlp/x: {endpoint: http://a:1}
query:
  auth:
    tokens:
      - token: ${NOT_SET_ANYWHERE}
`
	_, err := Parse([]byte(parse), env(nil))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		`line 3: receivers.otlp.max_connections: want an integer, got "1.5"`,
		`line 4: receivers.otlp.read_timeout: want a single value`,
		`line 5: receivers.otlp.max_request_bytes: size "10%"`,
		`line 6: receivers.otlp.tls: want a mapping of keys`,
		`line 9: queue.max_bytes: set twice (first at line 8)`,
		`line 11: upkeep.enabled: want true or false, got "maybe"`,
		`line 12: upkeep.rollup.tiers[1]: duration "x"`,
		`line 14: unknown key exporters.otlp/x.endpoint (did you mean exporters.otlp/x.endpoints?)`,
		`line 18: query.auth.tokens[0].token: environment variable NOT_SET_ANYWHERE is not set`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	valid := `receivers:
  otlp:
    max_connections: -5
queue:
  segment_bytes: 1GiB
query:
  auth:
    tokens:
      - token: a
        scope: everything
log: {level: loud}
`
	c, err := Parse([]byte(valid), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	for _, want := range []string{
		"line 3: receivers.otlp.max_connections: must be positive, got -5",
		// max_bytes is the default; the line is its section's.
		"line 4: queue.max_bytes: 1GiB must be at least 2 × queue.segment_bytes",
		`line 10: query.auth.tokens[0].scope: "everything"`,
		`line 11: log.level: "loud"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error lacks %q:\n%v", want, err)
		}
	}
	// A key a flag set has no line in the file.
	c.Override("receivers.otlp")
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "receivers.otlp.max_connections: must be positive") {
		t.Errorf("after Override the error still names a line:\n%v", err)
	}
}

// TestMergeKeys: YAML anchors and <<: merges are checked like the keys they
// bring in.
func TestMergeKeys(t *testing.T) {
	c, err := Parse([]byte("x-common: &c {max_connections: 7}\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "unknown key x-common") {
		t.Fatalf("a top-level anchor holder is still an unknown key: %v", err)
	}
	c, err = Parse([]byte("receivers:\n  otlp: &o {max_tenants: 7}\n  prometheus_remote_write: {<<: *o}\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "unknown key receivers.prometheus_remote_write.max_tenants") {
		t.Fatalf("merged keys are not checked: %v", err)
	}
	c, err = Parse([]byte("query: &q {max_series: 7}\nstats: {}\nupkeep: {compaction: {<<: {enabled: false}}}\n"), env(nil))
	if err != nil || c.Query.MaxSeries != 7 || c.Upkeep.Compaction.Enabled {
		t.Fatalf("merge: %v %+v", err, c.Upkeep.Compaction)
	}
}

// TestListenersCollide: two listeners whose binds would fail with
// "address already in use" are refused before anything starts.
func TestListenersCollide(t *testing.T) {
	for _, tc := range []struct {
		grpc, http string
		collide    bool
	}{
		{"localhost:5000", "localhost:5000", true},
		{":5000", "0.0.0.0:5000", true},
		{"0.0.0.0:5000", "127.0.0.1:5000", true},
		{"localhost:5000", "127.0.0.1:5000", true},
		{"[::]:5000", "127.0.0.1:5000", true},
		{"[::1]:5000", "[::0001]:5000", true},
		{"0.0.0.0:5000", "[::1]:5000", false},
		{"127.0.0.1:5000", "127.0.0.2:5000", false},
		{"localhost:5000", "localhost:5001", false},
		{"localhost:0", ":0", false},
	} {
		src := fmt.Sprintf("receivers: {otlp: {grpc_addr: %q, http_addr: %q}}\n", tc.grpc, tc.http)
		c, err := Parse([]byte(src), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		got := err != nil && strings.Contains(err.Error(), "receivers.otlp.grpc_addr")
		if got != tc.collide {
			t.Errorf("%s and %s: collide %v, want %v (%v)", tc.grpc, tc.http, got, tc.collide, err)
		}
	}
}

// TestServerTLSLoaded: validation loads the server key pair and client CA,
// so that a key that is not the certificate's, or a file that is no PEM,
// fails in sluice validate and not only when sluice run starts.
func TestServerTLSLoaded(t *testing.T) {
	pki := authntest.New(t)
	for _, tc := range []struct{ tls, want string }{
		{fmt.Sprintf("{cert_file: %s, key_file: %s}", pki.ServerCert, pki.ClientKey), "tls.key_file: cert_file"},
		{fmt.Sprintf("{cert_file: %s, key_file: %s}", pki.CAFile, pki.CAFile), "tls.key_file: cert_file"},
		{fmt.Sprintf("{cert_file: %s, key_file: %s, client_ca_file: %s}", pki.ServerCert, pki.ServerKey, pki.ServerKey), "tls.client_ca_file:"},
	} {
		for _, section := range []string{"receivers: {otlp: {tls: %s}}", "query: {tls: %s}"} {
			src := fmt.Sprintf(section, tc.tls)
			c, err := Parse([]byte(src), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", src, err, tc.want)
			}
		}
	}
	c, _ := Parse([]byte(fmt.Sprintf("receivers: {otlp: {tls: {cert_file: %s, key_file: %s, client_ca_file: %s}}}", pki.ServerCert, pki.ServerKey, pki.CAFile)), env(nil))
	if err := c.Validate(); err != nil {
		t.Errorf("good TLS files refused: %v", err)
	}
}
