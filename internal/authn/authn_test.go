package authn

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice/internal/authn/authntest"
)

func guard(t *testing.T) (*Guard, http.Handler) {
	t.Helper()
	g, err := New(Config{TenantHeader: "X-Scope-OrgID", Realm: "query", Tokens: []Token{
		{Secret: "r-any", Scope: Read},
		{Secret: "w-any", Scope: Write},
		{Secret: "rw-acme", Scope: ReadWrite, Tenant: "acme"},
	}}, NewFailureCounter("test"))
	if err != nil {
		t.Fatal(err)
	}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tn, _ := TenantOf(r.Context())
		io.WriteString(w, tn)
	}), func(r *http.Request) Scope {
		if r.URL.Path == "/write" {
			return Write
		}
		return Read
	})
	return g, h
}

func TestGuard(t *testing.T) {
	g, h := guard(t)
	for _, c := range []struct {
		name, path, auth, tenant string
		code                     int
		body, reason             string
	}{
		{"no token", "/read", "", "", 401, "missing bearer token", ReasonMissing},
		{"basic auth", "/read", "Basic cjphbnk=", "", 401, "missing bearer token", ReasonMissing},
		{"wrong token", "/read", "Bearer r-anyx", "", 401, "invalid bearer token", ReasonInvalid},
		{"prefix of a token", "/read", "Bearer r-an", "", 401, "invalid bearer token", ReasonInvalid},
		{"empty token", "/read", "Bearer ", "", 401, "missing bearer token", ReasonMissing},
		{"read token reads", "/read", "Bearer r-any", "", 200, "default", ""},
		{"scheme is case-insensitive", "/read", "bearer r-any", "globex", 200, "globex", ""},
		{"read token cannot write", "/write", "Bearer r-any", "", 403, "needs write", ReasonScope},
		{"write token cannot read", "/read", "Bearer w-any", "", 403, "needs read", ReasonScope},
		{"write token writes", "/write", "Bearer w-any", "acme", 200, "acme", ""},
		{"bound token, no header", "/read", "Bearer rw-acme", "", 200, "acme", ""},
		{"bound token, own header", "/write", "Bearer rw-acme", "acme", 200, "acme", ""},
		{"bound token, other tenant", "/read", "Bearer rw-acme", "globex", 403, "may not use tenant", ReasonTenant},
		{"bad tenant", "/read", "Bearer r-any", "a/b", 400, "invalid tenant", ""},
	} {
		before := 0.0
		if c.reason != "" {
			before = counterValue(g.failures.WithLabelValues(c.reason))
		}
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		if c.tenant != "" {
			req.Header.Set("X-Scope-OrgID", c.tenant)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		body := w.Body.String()
		if w.Code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s: %d %q, want %d containing %q", c.name, w.Code, body, c.code, c.body)
		}
		if c.code != 200 {
			var e struct{ Status, ErrorType, Error string }
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Status != "error" || w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("%s: error body %q is not Prometheus error JSON", c.name, body)
			}
		}
		if got := w.Header().Get("WWW-Authenticate"); (c.code == 401) != (got == `Bearer realm="query"`) {
			t.Errorf("%s: WWW-Authenticate %q", c.name, got)
		}
		if c.reason != "" {
			if d := counterValue(g.failures.WithLabelValues(c.reason)) - before; d != 1 {
				t.Errorf("%s: failures{reason=%s} grew by %v, want 1", c.name, c.reason, d)
			}
		}
	}
	// Two tenant headers are ambiguous.
	req := httptest.NewRequest(http.MethodGet, "/read", nil)
	req.Header.Set("Authorization", "Bearer r-any")
	req.Header.Add("X-Scope-OrgID", "acme")
	req.Header.Add("X-Scope-OrgID", "globex")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 400 {
		t.Errorf("two tenant headers: %d %s", w.Code, w.Body)
	}
}

// Without tokens the guard only resolves the tenant.
func TestGuardOff(t *testing.T) {
	g, err := New(Config{TenantHeader: "X-Scope-OrgID", DefaultTenant: "dflt"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Enabled() {
		t.Fatal("enabled without tokens")
	}
	for hdr, want := range map[string]string{"": "dflt", "acme": "acme"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if hdr != "" {
			r.Header.Set("X-Scope-OrgID", hdr)
		}
		if tn, err := g.Authorize(r, Write); err != nil || tn != want {
			t.Errorf("header %q: %q %v", hdr, tn, err)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	for _, c := range []struct {
		tok  Token
		want string
	}{
		{Token{Secret: "", Scope: Read}, "empty"},
		{Token{Secret: "a b", Scope: Read}, "whitespace"},
		{Token{Secret: "x", Scope: 0}, "scope"},
		{Token{Secret: "x", Scope: Read, Tenant: "a/b"}, "tenant"},
	} {
		if _, err := New(Config{Tokens: []Token{c.tok}}, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want error containing %q", c.tok, err, c.want)
		}
	}
	if _, err := New(Config{Tokens: []Token{{Secret: "x", Scope: Read}, {Secret: "x", Scope: Write}}}, nil); err == nil {
		t.Error("duplicate token accepted")
	}
	for _, s := range []string{"read", "write", "readwrite"} {
		sc, err := ParseScope(s)
		if err != nil || sc.String() != s {
			t.Errorf("ParseScope(%q) = %v, %v", s, sc, err)
		}
	}
	if _, err := ParseScope("admin"); err == nil {
		t.Error("ParseScope(admin) accepted")
	}
}

// Real TLS and mutual TLS on 127.0.0.1:0 with generated certificates.
func TestServerTLS(t *testing.T) {
	p := authntest.New(t)
	serve := func(f TLSFiles) string {
		cfg, err := ServerTLS(f)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return "https://" + ln.Addr().String()
	}
	get := func(url string, c *tls.Config) error {
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: c}}
		resp, err := cl.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "ok" {
			return errors.New(string(b))
		}
		return nil
	}
	plain := serve(TLSFiles{CertFile: p.ServerCert, KeyFile: p.ServerKey})
	if err := get(plain, p.Client(t, false)); err != nil {
		t.Fatalf("TLS: %v", err)
	}
	if err := get(plain, &tls.Config{}); err == nil {
		t.Fatal("TLS: a client not trusting the CA connected")
	}
	mtls := serve(TLSFiles{CertFile: p.ServerCert, KeyFile: p.ServerKey, ClientCAFile: p.CAFile})
	if err := get(mtls, p.Client(t, true)); err != nil {
		t.Fatalf("mTLS with a client certificate: %v", err)
	}
	if err := get(mtls, p.Client(t, false)); err == nil {
		t.Fatal("mTLS: a client without a certificate was served")
	}
	if err := get(mtls, p.UntrustedClient(t)); err == nil {
		t.Fatal("mTLS: a client with an untrusted certificate was served")
	}
	// Plain HTTP to a TLS port gets no answer from the handler.
	if resp, err := http.Get("http://" + strings.TrimPrefix(plain, "https://")); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) == "ok" {
			t.Fatal("plaintext request served on the TLS port")
		}
	}
	if _, err := ServerTLS(TLSFiles{CertFile: p.ServerCert}); err == nil {
		t.Error("cert without key accepted")
	}
	if _, err := ServerTLS(TLSFiles{CertFile: p.ServerCert, KeyFile: p.ServerKey, ClientCAFile: p.ServerKey}); err == nil {
		t.Error("a key file as client CA accepted")
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
