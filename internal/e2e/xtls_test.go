package e2e

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/authn/authntest"
)

// xtlsLogLine reports whether stderr has a line holding every one of want.
func xtlsLogLine(stderr string, want ...string) bool {
	for _, l := range strings.Split(stderr, "\n") {
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestXTLSOTLPForward: sluice forwards OTLP over TLS with a private CA and
// mutual TLS into a second sluice run whose OTLP receiver (gRPC and HTTP)
// requires a client certificate signed by that CA. otlp over grpc to
// https://host:port and to a bare host:port with tls settings, and otlp
// over http to https:// (with server_name), all deliver every record. An
// exporter without a client certificate and one trusting another CA
// deliver nothing: their requests fail and are retried (not dropped), the
// data waits in the queue, and the breaker's warning names the endpoint
// and the TLS error.
func TestXTLSOTLPForward(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	pki, other := authntest.New(t), authntest.New(t)
	downLake := t.TempDir()
	down := startServer(t, writeConfig(t, fmt.Sprintf(`
receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
    tls: {cert_file: %q, key_file: %q, client_ca_file: %q}
lake: {root: %q, flush_interval: 1s}
admin: {addr: 127.0.0.1:0}
query: {addr: 127.0.0.1:0}
shutdown_timeout: 10s
`, pki.ServerCert, pki.ServerKey, pki.CAFile, downLake)))

	mtls := fmt.Sprintf("ca_file: %q, cert_file: %q, key_file: %q", pki.CAFile, pki.ClientCert, pki.ClientKey)
	common := "batch_delay: 20ms, retry_initial_backoff: 20ms, retry_max_backoff: 200ms, breaker_failures: 2, breaker_cooldown: 200ms"
	exporters := map[string]string{
		"otlp/grpc":     fmt.Sprintf("{endpoints: [https://%s], protocol: grpc, tls: {%s}, %s}", down.grpc, mtls, common),
		"otlp/grpcbare": fmt.Sprintf("{endpoints: [%s], protocol: grpc, tls: {%s}, %s}", down.grpc, mtls, common),
		"otlp/http":     fmt.Sprintf("{endpoints: [https://%s], tls: {%s, server_name: localhost}, %s}", down.http, mtls, common),
		"otlp/nocert":   fmt.Sprintf("{endpoints: [https://%s], protocol: grpc, tls: {ca_file: %q}, %s}", down.grpc, pki.CAFile, common),
		"otlp/wrongca":  fmt.Sprintf("{endpoints: [https://%s], tls: {ca_file: %q, cert_file: %q, key_file: %q}, %s}", down.http, other.CAFile, pki.ClientCert, pki.ClientKey, common),
	}
	var yaml, names []string
	for _, n := range []string{"otlp/grpc", "otlp/grpcbare", "otlp/http", "otlp/nocert", "otlp/wrongca"} {
		yaml = append(yaml, "  "+n+": "+exporters[n])
		names = append(names, n)
	}
	dir := t.TempDir()
	up := startServer(t, writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}
admin: {addr: 127.0.0.1:0}
query: {addr: 127.0.0.1:0}
lake: {root: %s}
queue: {dir: %s}
exporters:
%s
pipelines:
  logs: {receivers: [otlp], exporters: [%s]}
shutdown_timeout: %s
`, filepath.Join(dir, "lake"), filepath.Join(dir, "queue"), strings.Join(yaml, "\n"), strings.Join(names, ", "), runShutdownTimeout)))

	const reqs, per = 5, 20
	for i := range reqs {
		if code, body := sendLogs(t, up.http, "", wideBody(t, int64(i*per), per, 1, "x")); code != http.StatusOK {
			t.Fatalf("upstream refused request %d: %d %s", i, code, body)
		}
	}
	for _, n := range []string{"otlp/grpc", "otlp/grpcbare", "otlp/http"} {
		series := fmt.Sprintf(`sluice_exporter_sent_records_total{exporter=%q}`, n)
		if !waitFor(60*time.Second, func() bool { return metricValue(t, up.admin, series) == reqs }) {
			t.Fatalf("%s = %v, want %d (every request delivered over TLS)\n%s", series, metricValue(t, up.admin, series), reqs, up.stderr)
		}
	}
	eps := map[string]string{"otlp/nocert": "https://" + down.grpc, "otlp/wrongca": "https://" + down.http}
	for n, ep := range eps {
		retried := fmt.Sprintf(`sluice_exporter_retried_requests_total{endpoint=%q,exporter=%q}`, ep, n)
		if !waitFor(60*time.Second, func() bool { return metricValue(t, up.admin, retried) >= 2 }) {
			t.Fatalf("%s = %v: a TLS failure must be retried\n%s", retried, metricValue(t, up.admin, retried), up.stderr)
		}
		for _, s := range []string{
			fmt.Sprintf(`sluice_exporter_sent_records_total{exporter=%q}`, n),
			fmt.Sprintf(`sluice_exporter_dropped_requests_total{endpoint=%q,exporter=%q}`, ep, n),
		} {
			if v := metricValue(t, up.admin, s); v != 0 {
				t.Errorf("%s = %v, want 0 (not delivered, not dropped: held in the queue)", s, v)
			}
		}
		if v := metricValue(t, up.admin, fmt.Sprintf(`sluice_exporter_queue_lag_bytes{exporter=%q}`, n)); v <= 0 {
			t.Errorf("%s: queue lag %v, want > 0 while its endpoint refuses the handshake", n, v)
		}
	}
	// The breaker's warning names the endpoint and says what is wrong.
	if !waitFor(30*time.Second, func() bool {
		return xtlsLogLine(up.stderr.String(), "circuit breaker open", "https://"+down.http, "certificate signed by unknown authority")
	}) {
		t.Errorf("no warning naming %s and the unknown authority:\n%s", "https://"+down.http, up.stderr)
	}
	if !waitFor(30*time.Second, func() bool {
		// Over TLS 1.3 the server refuses a missing client certificate
		// after the client's handshake is done: the error the client
		// sees is the server's alert or the connection it closed.
		return xtlsLogLine(up.stderr.String(), "circuit breaker open", "exporter=otlp/nocert", "https://"+down.grpc)
	}) {
		t.Errorf("no warning naming %s:\n%s", "https://"+down.grpc, up.stderr)
	}

	// Graceful stop commits the downstream lake: every record arrived
	// once per delivering exporter (at least once).
	down.cmd.Process.Signal(os.Interrupt)
	down.wait(t, time.Minute)
	got := seqCounts(t, downLake, "default")
	for seq := range int64(reqs * per) {
		if got[seq] < 3 {
			t.Fatalf("seq %d arrived %d times downstream, want at least 3 (three TLS exporters)", seq, got[seq])
		}
	}
}

// TestXTLSRemoteWrite: a remote-write exporter to an https:// endpoint
// whose server requires a client certificate signed by a private CA:
// with ca_file, cert_file and key_file (and server_name: localhost on an
// IP address endpoint) every sample arrives; with insecure_skip_verify and
// the client certificate too; without a client certificate nothing
// reaches the backend's handler, and the requests are retried, not
// dropped.
func TestXTLSRemoteWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	pki := authntest.New(t)
	srvTLS, err := authn.ServerTLS(authn.TLSFiles{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: pki.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	tlsBackend := func() *audBackend {
		b := &audBackend{samples: map[string]int{}}
		b.srv = httptest.NewUnstartedServer(http.HandlerFunc(b.serve))
		b.srv.TLS = srvTLS.Clone()
		b.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
		b.srv.StartTLS()
		t.Cleanup(b.srv.Close)
		b.URL = b.srv.URL + "/api/v1/write"
		if !strings.HasPrefix(b.URL, "https://127.0.0.1:") {
			t.Fatalf("backend URL %s", b.URL)
		}
		return b
	}
	good, skip, nocert := tlsBackend(), tlsBackend(), tlsBackend()
	common := "batch_delay: 20ms, retry_initial_backoff: 20ms, retry_max_backoff: 200ms, breaker_failures: 2, breaker_cooldown: 200ms"
	s := audRelay(t, strings.Join([]string{
		fmt.Sprintf("  prometheus_remote_write/mtls: {endpoints: [%s], tls: {ca_file: %q, cert_file: %q, key_file: %q, server_name: localhost}, %s}", good.URL, pki.CAFile, pki.ClientCert, pki.ClientKey, common),
		fmt.Sprintf("  prometheus_remote_write/skip: {endpoints: [%s], tls: {insecure_skip_verify: true, cert_file: %q, key_file: %q}, %s}", skip.URL, pki.ClientCert, pki.ClientKey, common),
		fmt.Sprintf("  prometheus_remote_write/nocert: {endpoints: [%s], tls: {ca_file: %q}, %s}", nocert.URL, pki.CAFile, common),
	}, "\n"), "prometheus_remote_write/mtls", "prometheus_remote_write/skip", "prometheus_remote_write/nocert")
	audWrite(t, s.prw, "xtls_samples", 7)
	audWrite(t, s.prw, "xtls_samples", 5)
	for name, b := range map[string]*audBackend{"mtls": good, "skip": skip} {
		if !waitFor(60*time.Second, func() bool { return b.got("xtls_samples") == 12 }) {
			t.Fatalf("%s: the backend got %d samples, want 12\n%s", name, b.got("xtls_samples"), s.stderr)
		}
	}
	n := "prometheus_remote_write/nocert"
	retried := fmt.Sprintf(`sluice_exporter_retried_requests_total{endpoint=%q,exporter=%q}`, nocert.URL, n)
	if !waitFor(60*time.Second, func() bool { return metricValue(t, s.admin, retried) >= 2 }) {
		t.Fatalf("%s = %v: a handshake refused for want of a client certificate must be retried\n%s", retried, metricValue(t, s.admin, retried), s.stderr)
	}
	if got := nocert.requests(); got != 0 {
		t.Errorf("the backend's handler saw %d requests from the exporter without a client certificate", got)
	}
	for _, series := range []string{
		fmt.Sprintf(`sluice_exporter_sent_records_total{exporter=%q}`, n),
		fmt.Sprintf(`sluice_exporter_dropped_requests_total{endpoint=%q,exporter=%q}`, nocert.URL, n),
	} {
		if v := metricValue(t, s.admin, series); v != 0 {
			t.Errorf("%s = %v, want 0", series, v)
		}
	}
	if v := metricValue(t, s.admin, fmt.Sprintf(`sluice_exporter_queue_lag_bytes{exporter=%q}`, n)); v <= 0 {
		t.Errorf("queue lag %v, want > 0: the data waits for the endpoint", v)
	}
}

// TestXTLSValidate: sluice validate and sluice run refuse exporter TLS
// settings that cannot work, naming the key and the problem.
func TestXTLSValidate(t *testing.T) {
	pki := authntest.New(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	os.WriteFile(notPEM, []byte("hello\n"), 0o600)
	for _, c := range []struct{ ex, want string }{
		{fmt.Sprintf("{endpoints: [http://127.0.0.1:1], tls: {ca_file: %q}}", pki.CAFile), `exporters.otlp.tls: endpoint "http://127.0.0.1:1" is plaintext`},
		{fmt.Sprintf("{endpoints: [https://127.0.0.1:1], tls: {cert_file: %q}}", pki.ClientCert), "exporters.otlp.tls: cert_file and key_file must both be set"},
		{fmt.Sprintf("{endpoints: [127.0.0.1:1], protocol: grpc, tls: {ca_file: %q}}", notPEM), fmt.Sprintf("exporters.otlp.tls: ca_file %q holds no PEM certificate", notPEM)},
		{fmt.Sprintf("{endpoints: [https://127.0.0.1:1], tls: {ca_file: %q}}", filepath.Join(dir, "missing.pem")), "exporters.otlp.tls: ca_file: open " + filepath.Join(dir, "missing.pem")},
	} {
		cfg := filepath.Join(t.TempDir(), "sluice.yaml")
		os.WriteFile(cfg, []byte("exporters:\n  otlp: "+c.ex+"\npipelines:\n  logs: {receivers: [otlp], exporters: [otlp]}\n"), 0o644)
		for _, cmd := range []string{"validate", "run"} {
			if r := run(t, cmd, "--config", cfg); r.code != 2 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%s %s: exit %d, want 2 and %q in:\n%s", cmd, c.ex, r.code, c.want, r.stderr)
			}
		}
	}
	ok := writeConfig(t, fmt.Sprintf("exporters:\n  otlp: {endpoints: [https://127.0.0.1:1], tls: {ca_file: %q, cert_file: %q, key_file: %q}}\npipelines:\n  logs: {receivers: [otlp], exporters: [otlp]}\n",
		pki.CAFile, pki.ClientCert, pki.ClientKey))
	if r := run(t, "validate", "--config", ok); r.code != 0 {
		t.Errorf("validate a good exporter tls block: exit %d\n%s", r.code, r.stderr)
	}
}
