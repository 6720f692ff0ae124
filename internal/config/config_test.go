package config

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestDefaults(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	o := c.Receivers.OTLP
	if o.GRPCAddr != "localhost:4317" || o.HTTPAddr != "localhost:4318" || c.Admin.Addr != "localhost:9464" {
		t.Errorf("addresses: %q %q %q", o.GRPCAddr, o.HTTPAddr, c.Admin.Addr)
	}
	if c.Lake.Root != "./data" || c.QueueDir() != filepath.Join("data", "_queue") || c.CatalogDSN() != "sqlite:"+filepath.Join("data", "catalog.db") {
		t.Errorf("paths: %q %q %q", c.Lake.Root, c.QueueDir(), c.CatalogDSN())
	}
	if c.Queue.MaxBytes != 1<<30 || c.Queue.SegmentBytes != 64<<20 || c.Queue.FullPolicy != "backpressure" {
		t.Errorf("queue: %+v", c.Queue)
	}
	if c.Lake.FlushInterval.D() != time.Minute || c.CheckpointQueueBytes() != 256<<20 {
		t.Errorf("lake: %+v", c.Lake)
	}
	// An empty file is the defaults.
	e, err := Parse([]byte("# nothing\n"), env(nil))
	if err != nil || !reflect.DeepEqual(e, c) {
		t.Errorf("empty file: %v, %+v", err, e)
	}
}

func TestParseOverlaysAndExpands(t *testing.T) {
	src := `
receivers:
  otlp:
    http_addr: 127.0.0.1:${PORT}
    grpc_addr: "${GRPC:-}"
    bearer_token: ${TOKEN}
    tenant_header: ${HDR:-X-Scope-OrgID}
    max_concurrent_requests: ${CONC}
queue:
  max_bytes: 2GiB
  full_policy: drop_oldest
lake:
  root: ${ROOT:-/tmp/lake}
  flush_interval: 5s
log:
  format: "cost: $$5"
`
	c, err := Parse([]byte(src), env(map[string]string{"PORT": "4999", "TOKEN": "s3cr#t: x", "CONC": "7"}))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Receivers.OTLP
	if o.HTTPAddr != "127.0.0.1:4999" || o.GRPCAddr != "" || o.BearerToken != "s3cr#t: x" || o.TenantHeader != "X-Scope-OrgID" || o.MaxConcurrentRequests != 7 {
		t.Errorf("otlp: %+v", o)
	}
	if c.Queue.MaxBytes != 2<<30 || c.Queue.FullPolicy != "drop_oldest" || c.Queue.SegmentBytes != 64<<20 {
		t.Errorf("queue: %+v", c.Queue)
	}
	if c.Lake.Root != "/tmp/lake" || c.Lake.FlushInterval.D() != 5*time.Second || c.Lake.TargetFileBytes != 128<<20 {
		t.Errorf("lake: %+v", c.Lake)
	}
	if c.QueueDir() != "/tmp/lake/_queue" {
		t.Errorf("queue dir %q", c.QueueDir())
	}
	if c.Log.Format != "cost: $5" {
		t.Errorf("$$: %q", c.Log.Format)
	}
	if c.Redacted().Receivers.OTLP.BearerToken == o.BearerToken || !strings.Contains(c.Redacted().YAML(), "<redacted>") {
		t.Error("Redacted keeps the token")
	}
}

func TestExpand(t *testing.T) {
	look := env(map[string]string{"A": "x", "E": ""})
	for in, want := range map[string]string{
		"${A}": "x", "a${A}b${A}": "axbx", "${E:-d}": "d", "${U:-}": "", "${U:-a:b}": "a:b",
		"$A": "$A", "$$": "$", "$${A}": "${A}", "${E}": "", "tail$": "tail$",
	} {
		got, err := Expand(in, look)
		if err != nil || got != want {
			t.Errorf("Expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"${U}":   "environment variable U is not set",
		"${A":    "unterminated",
		"${1A}":  "not a valid environment variable name",
		"${}":    "not a valid",
		"${A-B}": "not a valid",
	} {
		if _, err := Expand(in, look); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Expand(%q) error %v, want %q", in, err, want)
		}
	}
}

func TestUnknownKeys(t *testing.T) {
	src := `
receivers:
  otlp:
    grcp_addr: x
    tls:
      cert: a
quue:
  dir: /x
lake: 5
`
	_, err := Parse([]byte(src), env(nil))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		"line 4: unknown key receivers.otlp.grcp_addr (did you mean receivers.otlp.grpc_addr?)",
		"line 6: unknown key receivers.otlp.tls.cert",
		"line 7: unknown key quue (did you mean queue?)",
		"line 9: lake: want a mapping",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for src, want := range map[string]string{
		"queue:\n  max_bytes: lots\n":        "line 2: queue.max_bytes: size \"lots\"",
		"lake:\n  flush_interval: 10\n":      "line 2: lake.flush_interval: duration \"10\"",
		"lake:\n  row_group_rows: many\n":    "line 2: lake.row_group_rows: want an integer, got \"many\"",
		"admin:\n  addr: ${NOPE}\n":          "line 2: admin.addr: environment variable NOPE is not set",
		"a: [\n":                             "yaml",
		"log: {level: info}\n---\nlog: {}\n": "one YAML document",
		"- a\n- b\n":                         "want a mapping",
		"queue:\n  dir: a\n  dir: b\n":       "line 3: queue.dir: set twice (first at line 2)",
	} {
		_, err := Parse([]byte(src), env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) error %v, want %q", src, err, want)
		}
	}
}

func TestValidate(t *testing.T) {
	src := `
receivers:
  otlp:
    grpc_addr: ""
    http_addr: nohost
    tenant_header: "bad header"
    default_tenant: "a/b"
    bearer_token: "two words"
    tls: {cert_file: /nonexistent/cert.pem}
    max_request_bytes: 60MiB
queue:
  segment_bytes: 32MiB
  max_bytes: 48MiB
  full_policy: yolo
lake:
  root: ""
  flush_interval: 0s
catalog:
  dsn: "postgres://u:secret@x:port/db"
admin:
  addr: 127.0.0.1:99999
log:
  level: loud
  format: xml
shutdown_timeout: 0s
`
	c, err := Parse([]byte(src), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	if err == nil {
		t.Fatal("want problems")
	}
	for _, want := range []string{
		"receivers.otlp.http_addr: \"nohost\": want host:port",
		"receivers.otlp.tenant_header: \"bad header\" is not a valid header name",
		"receivers.otlp.default_tenant: \"a/b\" must match",
		"receivers.otlp.bearer_token: must not contain whitespace",
		"receivers.otlp.tls: cert_file and key_file must both be set",
		"receivers.otlp.tls.cert_file: stat /nonexistent/cert.pem",
		"receivers.otlp.max_request_bytes: 60MiB does not fit in one queue segment",
		"queue.full_policy: \"yolo\": want backpressure or drop_oldest",
		"queue.max_bytes: 48MiB must be at least 2 × queue.segment_bytes (32MiB)",
		"lake.root: must not be empty",
		"lake.flush_interval: must be a positive duration",
		"catalog.dsn: PostgreSQL DSN is not a valid URL: invalid port",
		"admin.addr: \"127.0.0.1:99999\": port \"99999\"",
		"log.level: \"loud\"",
		"log.format: \"xml\"",
		"shutdown_timeout: must be a positive duration",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("problems reveal the catalog password:\n%v", err)
	}

	c = Default()
	c.Receivers.OTLP.GRPCAddr, c.Receivers.OTLP.HTTPAddr = "", ""
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "both empty") {
		t.Errorf("no transport: %v", err)
	}
	c = Default()
	c.Admin.Addr = c.Receivers.OTLP.HTTPAddr
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "admin.addr: \"localhost:4318\" is also receivers.otlp.http_addr") {
		t.Errorf("same address: %v", err)
	}
	c.Admin.Addr, c.Receivers.OTLP.HTTPAddr, c.Receivers.OTLP.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	if err := c.Validate(); err != nil {
		t.Errorf("free ports are distinct: %v", err)
	}
	for _, dsn := range []string{"postgres://sluice:pw@db.example:5432/lake?sslmode=require", "postgresql://db/lake"} {
		c.Catalog.DSN = dsn
		if err := c.Validate(); err != nil {
			t.Errorf("PostgreSQL DSN %q: %v", dsn, err)
		}
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"0": 0, "4096": 4096, "1KiB": 1024, "64 MiB": 64 << 20, "1gb": 1e9, "2GiB": 2 << 30, "10B": 10} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5GiB", "MiB", "1 parsec", "99999999999TiB"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) accepted", in)
		}
	}
	if s := ByteSize(64 << 20).String(); s != "64MiB" {
		t.Errorf("String %q", s)
	}
	if s := Duration(time.Minute).String(); s != "1m" {
		t.Errorf("Duration %q", s)
	}
	if s := Duration(2 * time.Hour).String(); s != "2h" {
		t.Errorf("Duration %q", s)
	}
}

// The printed config parses back to the same value.
func TestYAMLRoundTrip(t *testing.T) {
	c := Default()
	c.Lake.Root = "/x"
	c.Queue.GroupCommitDelay = Duration(3 * time.Millisecond)
	back, err := Parse([]byte(c.YAML()), env(nil))
	back.lines = nil // where the keys were, not what they say
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip: %v\n%s", err, c.YAML())
	}
}

var update = flag.Bool("update", false, "rewrite the generated part of docs/config.md")

// TestReference keeps docs/config.md in sync with the Config type and the
// defaults, and checks that it names every key.
func TestReference(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "config.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, ReferenceBegin), strings.Index(s, ReferenceEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated-reference markers", path)
	}
	want := s[:i+len(ReferenceBegin)] + "\n\n" + Reference() + "\n" + s[j:]
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		s = want
	} else if s != want {
		t.Errorf("%s is out of date: run go test ./internal/config -run TestReference -update", path)
	}
	for _, k := range Keys() {
		if !strings.Contains(s, "`"+k+"`") && !strings.Contains(s, "### "+k+"\n") {
			t.Errorf("%s does not mention key %s", path, k)
		}
	}
	for _, f := range append(fields(configType), allFields(configType)...) {
		if f.doc == "" {
			t.Errorf("key %s has no doc tag", f.key)
		}
	}
}

func allFields(t reflect.Type) []field {
	var out []field
	for _, f := range fields(t) {
		out = append(out, f)
		if section(f.typ) {
			out = append(out, allFields(f.typ)...)
		}
	}
	return out
}
