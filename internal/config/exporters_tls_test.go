package config

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/authn/authntest"
)

// TestExporterTLS: exporters.<name>.tls loads a private CA and a client
// certificate into a client TLS config, and validation refuses, naming the
// key, what would fail at the first handshake or silently not apply.
func TestExporterTLS(t *testing.T) {
	pki := authntest.New(t)
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600)
	good := fmt.Sprintf(`
exporters:
  otlp/grpc:
    endpoints: [https://a:4317, b:4317]
    protocol: grpc
    tls: {ca_file: %[1]s, cert_file: %[2]s, key_file: %[3]s, server_name: localhost}
  otlp/http:
    endpoints: [https://a:4318]
    tls: {insecure_skip_verify: true}
  prometheus_remote_write:
    endpoints: [https://mimir/api/v1/push]
    tls: {ca_file: %[1]s}
pipelines:
  metrics: {receivers: [otlp], exporters: [otlp/grpc, otlp/http, prometheus_remote_write]}
`, pki.CAFile, pki.ClientCert, pki.ClientKey)
	c, err := Parse([]byte(good), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid exporter TLS refused: %v", err)
	}
	tc, err := c.Exporters["otlp/grpc"].TLS.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || tc.GetClientCertificate == nil || tc.ServerName != "localhost" || tc.InsecureSkipVerify || tc.MinVersion != tls.VersionTLS12 {
		t.Fatalf("client TLS config: %+v", tc)
	}
	if tc, _ := c.Exporters["otlp/http"].TLS.ClientConfig(); tc == nil || !tc.InsecureSkipVerify || tc.RootCAs != nil {
		t.Fatalf("insecure_skip_verify alone: %+v", tc)
	}
	if tc, err := (ExporterTLS{}).ClientConfig(); tc != nil || err != nil {
		t.Fatalf("no tls keys: want nil, nil; got %v, %v", tc, err)
	}

	missing := filepath.Join(t.TempDir(), "nope.pem")
	for _, tc := range []struct{ ex, want string }{
		{"{endpoints: [http://x:1], tls: {ca_file: " + pki.CAFile + "}}", `exporters.otlp.tls: endpoint "http://x:1" is plaintext (http://), so the tls settings would not apply`},
		{"{endpoints: [http://x:1], protocol: grpc, tls: {insecure_skip_verify: true}}", `exporters.otlp.tls: endpoint "http://x:1" is plaintext (http://)`},
		{"{endpoints: [https://x:1], tls: {cert_file: " + pki.ClientCert + "}}", "exporters.otlp.tls: cert_file and key_file must both be set"},
		{"{endpoints: [https://x:1], tls: {key_file: " + pki.ClientKey + "}}", "exporters.otlp.tls: cert_file and key_file must both be set"},
		{"{endpoints: [https://x:1], tls: {ca_file: " + missing + "}}", "exporters.otlp.tls: ca_file: open " + missing},
		{"{endpoints: [https://x:1], tls: {ca_file: " + notPEM + "}}", fmt.Sprintf("exporters.otlp.tls: ca_file %q holds no PEM certificate", notPEM)},
		{"{endpoints: [https://x:1], tls: {cert_file: " + pki.ClientCert + ", key_file: " + pki.ServerKey + "}}", "exporters.otlp.tls: cert_file " + fmt.Sprintf("%q", pki.ClientCert)},
		{"{endpoints: [https://x:1], tls: {ca_file: " + pki.CAFile + ", bogus: 1}}", "unknown key exporters.otlp.tls.bogus"},
		{"{endpoints: [https://x], protocol: grpc}", `exporters.otlp.endpoints: "x": want host:port`},
	} {
		src := "exporters: {otlp: " + tc.ex + "}\npipelines: {logs: {receivers: [otlp], exporters: [otlp]}}"
		c, err := Parse([]byte(src), env(nil))
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n  got %v, want an error containing %q", src, err, tc.want)
		}
	}
	// The same rules for remote write.
	src := "exporters: {prometheus_remote_write: {endpoints: [http://x:1/w], tls: {ca_file: " + pki.CAFile + "}}}\npipelines: {metrics: {receivers: [otlp], exporters: [prometheus_remote_write]}}"
	c, err = Parse([]byte(src), env(nil))
	if err == nil {
		err = c.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), `exporters.prometheus_remote_write.tls: endpoint "http://x:1/w" is plaintext`) {
		t.Errorf("remote write tls on http://: %v", err)
	}
}
