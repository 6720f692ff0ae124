package httpapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/authn/authntest"
	"github.com/sluice-dev/sluice/internal/query/prom"
	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
)

var testTokens = []authn.Token{
	{Secret: "read-any", Scope: authn.Read},
	{Secret: "write-any", Scope: authn.Write},
	{Secret: "read-acme", Scope: authn.Read, Tenant: "acme"},
}

// startAuth runs Start (the query API with the search API mounted, as
// sluice run serves it) on 127.0.0.1:0 over a lake holding tenants acme
// and globex, and returns its base URL and handler routes.
func startAuth(t *testing.T, cfg Config) (string, []Route, *prometheus.Registry) {
	t.Helper()
	l := promtest.NewLake(t)
	l.Write(t, "acme", 0, synth([]string{"a-shop"}, []string{"/a"}, 30).JSON())
	l.Write(t, "globex", 0, synth([]string{"g-shop"}, []string{"/g"}, 60).JSON())
	cfg.TenantHeader = "X-Scope-OrgID"
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	srv, err := Start(context.Background(), "127.0.0.1:0", cfg, l.Catalog, l.Store, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	// The same routes as the server's handler: New is deterministic.
	a, _ := New(Config{Adapter: new(prom.Adapter), Search: http.NotFoundHandler(), Tokens: cfg.Tokens})
	scheme := "http"
	if cfg.TLS.Enabled() {
		scheme = "https"
	}
	return scheme + "://" + srv.Addr().String(), a.Routes(), reg
}

type authResp struct {
	code    int
	body    string
	wwwAuth string
}

func authGet(t *testing.T, c *http.Client, u, token, tenant string) authResp {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if tenant != "" {
		req.Header.Set("X-Scope-OrgID", tenant)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return authResp{resp.StatusCode, string(b), resp.Header.Get("WWW-Authenticate")}
}

// Every registered endpoint refuses requests without a valid token, and
// honours scope and tenant binding. The table is the handler's own route
// list, so an endpoint added without the guard fails here.
func TestAuthEveryEndpoint(t *testing.T) {
	base, routes, reg := startAuth(t, Config{Tokens: testTokens})
	if len(routes) < 10 {
		t.Fatalf("only %d routes: %+v", len(routes), routes)
	}
	c := http.DefaultClient
	params := "?query=up&match[]=up&start=0&end=1&step=1"
	for _, rt := range append(routes, Route{Pattern: "(unrouted)", Example: "/api/v1/nosuch", Scope: authn.Read}) {
		u := base + rt.Example + params
		for _, bad := range []struct{ token, reason string }{{"", "missing"}, {"read-anyx", "invalid"}, {"READ-ANY", "invalid"}} {
			r := authGet(t, c, u, bad.token, "")
			if r.code != 401 || !strings.HasPrefix(r.wwwAuth, "Bearer") || !strings.Contains(r.body, `"errorType":"unauthorized"`) {
				t.Errorf("%s with token %q: %d %q %q, want 401 with WWW-Authenticate: Bearer", rt.Example, bad.token, r.code, r.wwwAuth, r.body)
			}
		}
		if rt.Scope != authn.Read {
			t.Errorf("%s needs %s; today every endpoint reads", rt.Pattern, rt.Scope)
		}
		if r := authGet(t, c, u, "write-any", ""); r.code != 403 || !strings.Contains(r.body, "needs read") {
			t.Errorf("%s with a write token: %d %q, want 403", rt.Example, r.code, r.body)
		}
		if r := authGet(t, c, u, "read-acme", "globex"); r.code != 403 || !strings.Contains(r.body, "globex") {
			t.Errorf("%s with acme's token for globex: %d %q, want 403", rt.Example, r.code, r.body)
		}
		if rt.Pattern == "(unrouted)" {
			if r := authGet(t, c, u, "read-any", ""); r.code != 404 {
				t.Errorf("%s with a read token: %d, want 404", rt.Example, r.code)
			}
			continue
		}
		for _, tok := range []string{"read-any", "read-acme"} {
			if r := authGet(t, c, u, tok, ""); r.code == 401 || r.code == 403 || r.code == 404 {
				t.Errorf("%s with token %s: %d %q", rt.Example, tok, r.code, r.body)
			}
		}
	}
	fails := map[string]float64{}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "sluice_query_auth_failures_total" {
			for _, m := range mf.GetMetric() {
				fails[label(m, "reason")] = m.GetCounter().GetValue()
			}
		}
	}
	n := float64(len(routes) + 1)
	if fails["missing_token"] != n || fails["invalid_token"] != 2*n || fails["scope"] != n || fails["tenant"] != n {
		t.Errorf("sluice_query_auth_failures_total %v, want missing %v, invalid %v, scope %v, tenant %v", fails, n, 2*n, n, n)
	}

	// A bound token without a tenant header reads its own tenant; an
	// unbound one reads the header's tenant.
	q := base + "/api/v1/label/service_name/values"
	for _, c2 := range []struct{ token, tenant, want string }{
		{"read-acme", "", `["a-shop"]`}, {"read-acme", "acme", `["a-shop"]`},
		{"read-any", "globex", `["g-shop"]`}, {"read-any", "", `[]`},
	} {
		r := authGet(t, c, q, c2.token, c2.tenant)
		var v struct{ Data json.RawMessage }
		if r.code != 200 || json.Unmarshal([]byte(r.body), &v) != nil || string(v.Data) != c2.want {
			t.Errorf("token %s tenant %q: %d %s, want %s", c2.token, c2.tenant, r.code, r.body, c2.want)
		}
	}
	// The search API sees the token's tenant too.
	s := base + "/api/v1/logs/search?" + url.Values{"start": {"0"}, "end": {fmt.Sprint(time.Now().Unix())}}.Encode()
	if r := authGet(t, c, s, "read-acme", ""); r.code != 200 {
		t.Errorf("logs search with a bound token: %d %s", r.code, r.body)
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Without tokens the API stays open, as before.
func TestAuthOff(t *testing.T) {
	base, _, _ := startAuth(t, Config{})
	if r := authGet(t, http.DefaultClient, base+"/api/v1/labels", "", "acme"); r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
}

// TLS and mutual TLS with generated certificates, tokens on top.
func TestAuthTLS(t *testing.T) {
	p := authntest.New(t)
	client := func(c *tls.Config) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: c}, Timeout: 10 * time.Second}
	}
	base, _, _ := startAuth(t, Config{Tokens: testTokens, TLS: authn.TLSFiles{CertFile: p.ServerCert, KeyFile: p.ServerKey}})
	if !strings.HasPrefix(base, "https://") {
		t.Fatal(base)
	}
	if r := authGet(t, client(p.Client(t, false)), base+"/api/v1/labels", "read-any", ""); r.code != 200 {
		t.Fatalf("TLS with token: %d %s", r.code, r.body)
	}
	if r := authGet(t, client(p.Client(t, false)), base+"/api/v1/labels", "", ""); r.code != 401 {
		t.Fatalf("TLS without token: %d %s", r.code, r.body)
	}
	if resp, err := http.Get("http" + strings.TrimPrefix(base, "https") + "/api/v1/labels"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plaintext served on the TLS port")
		}
	}

	mbase, _, _ := startAuth(t, Config{Tokens: testTokens, TLS: authn.TLSFiles{CertFile: p.ServerCert, KeyFile: p.ServerKey, ClientCAFile: p.CAFile}})
	if r := authGet(t, client(p.Client(t, true)), mbase+"/api/v1/labels", "read-any", ""); r.code != 200 {
		t.Fatalf("mTLS with certificate and token: %d %s", r.code, r.body)
	}
	for name, c := range map[string]*tls.Config{"no certificate": p.Client(t, false), "untrusted certificate": p.UntrustedClient(t)} {
		req, _ := http.NewRequest(http.MethodGet, mbase+"/api/v1/labels", nil)
		req.Header.Set("Authorization", "Bearer read-any")
		if resp, err := client(c).Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("mTLS with %s: served %d", name, resp.StatusCode)
		}
	}
	// A bad certificate path fails Start, not the first handshake.
	l := promtest.NewLake(t)
	if _, err := Start(context.Background(), "127.0.0.1:0", Config{TLS: authn.TLSFiles{CertFile: p.ServerCert, KeyFile: "/nonexistent"}},
		l.Catalog, l.Store, slog.New(slog.DiscardHandler), nil); err == nil || !strings.Contains(err.Error(), "query.tls") {
		t.Errorf("Start with a missing key: %v", err)
	}
}
