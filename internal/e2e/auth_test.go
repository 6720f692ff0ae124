package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/authn/authntest"
)

// TestQueryAuth: `sluice run` and `sluice query-server` with query.auth
// tokens from the environment and mutual TLS answer only clients with a
// trusted certificate and a valid token, within the token's tenant.
func TestQueryAuth(t *testing.T) {
	p := authntest.New(t)
	lakeDir := t.TempDir()
	body := fmt.Sprintf(`receivers:
  otlp:
    grpc_addr: ""
    http_addr: 127.0.0.1:0
    tenant_header: X-Scope-OrgID
admin:
  addr: 127.0.0.1:0
query:
  addr: 127.0.0.1:0
  auth:
    tokens:
      - {token: "${Q_READ}", scope: read}
      - {token: "${Q_ACME}", scope: read, tenant: acme}
      - {token: "${Q_WRITE}", scope: write}
  tls: {cert_file: %s, key_file: %s, client_ca_file: %s}
upkeep:
  enabled: false
lake:
  root: %s
`, p.ServerCert, p.ServerKey, p.CAFile, lakeDir)
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// An unset variable or an empty token never turns authentication off.
	if r := run(t, "validate", "--config", cfg); r.code == 0 || !strings.Contains(r.stderr+r.stdout, "Q_READ") {
		t.Fatalf("validate with Q_READ unset: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	env := []string{"Q_READ=r-" + t.Name(), "Q_ACME=a-" + t.Name(), "Q_WRITE=w-" + t.Name()}
	s := startQueryRun(t, cfg, env...)

	client := func(c *tls.Config) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: c}, Timeout: 30 * time.Second}
	}
	withCert := client(p.Client(t, true))
	get := func(c *http.Client, base, token, tenant string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+base+"/api/v1/label/__name__/values", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if tenant != "" {
			req.Header.Set("X-Scope-OrgID", tenant)
		}
		resp, err := c.Do(req)
		if err != nil {
			return -1, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	side := startQueryServerEnv(t, env, "--lake", lakeDir, "--config", cfg)
	for _, base := range []string{s.query, side} {
		for _, c := range []struct {
			name, token, tenant string
			code                int
		}{
			{"no token", "", "", 401},
			{"wrong token", "nope", "", 401},
			{"read token", "r-" + t.Name(), "globex", 200},
			{"write token", "w-" + t.Name(), "", 403},
			{"acme token", "a-" + t.Name(), "", 200},
			{"acme token for globex", "a-" + t.Name(), "globex", 403},
		} {
			if code, b := get(withCert, base, c.token, c.tenant); code != c.code {
				t.Errorf("%s %s: %d %s, want %d", base, c.name, code, b, c.code)
			}
		}
		if code, b := get(client(p.Client(t, false)), base, "r-"+t.Name(), ""); code != -1 {
			t.Errorf("%s without a client certificate: %d %s", base, code, b)
		}
		if code, _ := get(http.DefaultClient, base, "r-"+t.Name(), ""); code != -1 {
			t.Errorf("%s: a client not trusting the server's CA got %d", base, code)
		}
	}
	// sluice run counted each refusal once, by reason (the TLS refusals
	// never reached HTTP).
	resp, err := http.Get("http://" + s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, r := range []string{"missing_token", "invalid_token", "scope", "tenant"} {
		if want := `sluice_query_auth_failures_total{reason="` + r + `"} 1` + "\n"; !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Ingestion is unaffected (receivers.otlp has no token here).
	resp, err = http.Post("http://"+s.http+"/v1/metrics", "application/json", strings.NewReader(`{"resourceMetrics":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("ingestion: %d", resp.StatusCode)
	}
}

// startQueryServerEnv is startQueryServer with extra environment.
func startQueryServerEnv(t *testing.T, env []string, args ...string) string {
	t.Helper()
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v)
	}
	return startQueryServer(t, args...)
}
