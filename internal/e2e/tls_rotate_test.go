package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/authn/authntest"
)

// TestTLSCertificateRotationWithoutRestart: a running sluice whose OTLP
// receiver, query API and remote-write listener serve TLS from files on
// disk picks up a certificate and key replaced there (as cert-manager or
// an agent rotates them) from a later handshake on, without a restart,
// counts the reloads, and keeps taking data over the new certificate.
func TestTLSCertificateRotationWithoutRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	a, b := authntest.New(t), authntest.New(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.pem"), filepath.Join(dir, "tls-key.pem")
	authntest.Install(t, a.ServerCert, cert, 0)
	authntest.Install(t, a.ServerKey, key, 0)
	qaddr := freePort(t)
	s := startServer(t, writeConfig(t, fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
    tls: {cert_file: %q, key_file: %q}
  prometheus_remote_write:
    listen: 127.0.0.1:0
admin: {addr: 127.0.0.1:0}
query:
  addr: %s
  tls: {cert_file: %q, key_file: %q}
lake: {root: %q}
shutdown_timeout: %s
`, cert, key, qaddr, cert, key, filepath.Join(dir, "lake"), runShutdownTimeout)))
	if s.prw == "" || s.prw == "off" {
		t.Fatalf("no remote write listener: %q", s.prw)
	}
	trust := x509.NewCertPool()
	trust.AddCert(authntest.Cert(t, a.CAFile))
	trust.AddCert(authntest.Cert(t, b.CAFile))
	served := func(addr string) (*big.Int, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
			&tls.Config{RootCAs: trust, ServerName: "localhost", MinVersion: tls.VersionTLS12})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
	}
	addrs := map[string]string{"otlp grpc": s.grpc, "otlp http": s.http, "query": qaddr, "remote write": s.prw}
	for what, addr := range addrs {
		if got, err := served(addr); err != nil || got.Cmp(authntest.Cert(t, a.ServerCert).SerialNumber) != 0 {
			t.Fatalf("%s (%s) before rotation: serial %v, %v", what, addr, got, err)
		}
	}

	authntest.Install(t, b.ServerCert, cert, time.Hour)
	authntest.Install(t, b.ServerKey, key, time.Hour)
	want := authntest.Cert(t, b.ServerCert).SerialNumber
	for what, addr := range addrs {
		if !waitFor(30*time.Second, func() bool {
			got, err := served(addr)
			return err == nil && got.Cmp(want) == 0
		}) {
			got, err := served(addr)
			t.Fatalf("%s (%s) still serves %v (%v) 30 s after the files were replaced\n%s", what, addr, got, err, s.stderr)
		}
	}
	if v := metricValue(t, s.admin, `sluice_tls_reloads_total{result="reloaded"}`); v < 2 {
		t.Errorf(`sluice_tls_reloads_total{result="reloaded"} = %v, want >= 2 (the receiver's and the query API's files)`, v)
	}

	// Data keeps flowing to a client that trusts only the new CA.
	onlyB := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: b.CAPool, MinVersion: tls.VersionTLS12}}}
	body := wideBody(t, 0, 5, 1, "rotated")
	resp, err := onlyB.Post("https://"+s.http+"/v1/logs", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("OTLP/HTTP over the rotated certificate: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OTLP/HTTP over the rotated certificate: %d", resp.StatusCode)
	}
}
