package authn

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/tenant"
)

// Scope is what a token may do.
type Scope uint8

// Scopes. A route needs Read or Write; a token holds one or both.
const (
	Read Scope = 1 << iota
	Write
	ReadWrite = Read | Write
)

// ParseScope reads read, write or readwrite.
func ParseScope(s string) (Scope, error) {
	switch s {
	case "read":
		return Read, nil
	case "write":
		return Write, nil
	case "readwrite":
		return ReadWrite, nil
	}
	return 0, fmt.Errorf("scope %q: want read, write or readwrite", s)
}

func (s Scope) String() string {
	switch s {
	case Read:
		return "read"
	case Write:
		return "write"
	case ReadWrite:
		return "readwrite"
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// Token is one accepted bearer token.
type Token struct {
	Secret string
	Scope  Scope
	// Tenant, when set, is the only tenant the token serves.
	Tenant string
}

// Config configures a Guard.
type Config struct {
	// Tokens accepted as "Authorization: Bearer <secret>"; none turns
	// token authentication off (TLS client certificates may still apply).
	Tokens []Token
	// TenantHeader names the header carrying the tenant; "" (or an absent
	// header) means DefaultTenant, or the token's tenant.
	TenantHeader  string
	DefaultTenant string
	// Realm is sent in WWW-Authenticate, e.g. "query".
	Realm string
}

// Failure reasons, the label values of the failures counter.
const (
	ReasonMissing = "missing_token" // no Authorization: Bearer header
	ReasonInvalid = "invalid_token" // a token no configured token matches
	ReasonScope   = "scope"         // the token lacks the route's scope
	ReasonTenant  = "tenant"        // the token is bound to another tenant
)

// NewFailureCounter returns sluice_<area>_auth_failures_total{reason} with
// every reason initialised to 0, so a dashboard sees the series at start.
func NewFailureCounter(area string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_" + area + "_auth_failures_total",
		Help: "Requests refused by authentication (missing_token, invalid_token: 401) or authorization (scope, tenant: 403)."},
		[]string{"reason"})
	for _, r := range []string{ReasonMissing, ReasonInvalid, ReasonScope, ReasonTenant} {
		c.WithLabelValues(r)
	}
	return c
}

// Guard authenticates requests and resolves their tenant.
type Guard struct {
	cfg      Config
	digests  [][sha256.Size]byte
	failures *prometheus.CounterVec
}

// New checks cfg and returns its Guard. failures may be nil.
func New(cfg Config, failures *prometheus.CounterVec) (*Guard, error) {
	if cfg.DefaultTenant == "" {
		cfg.DefaultTenant = "default"
	}
	if !tenant.Valid(cfg.DefaultTenant) {
		return nil, fmt.Errorf("authn: invalid default tenant %q", cfg.DefaultTenant)
	}
	if cfg.Realm == "" {
		cfg.Realm = "sluice"
	}
	if failures == nil {
		failures = NewFailureCounter("unregistered")
	}
	g := &Guard{cfg: cfg, failures: failures}
	seen := map[[sha256.Size]byte]int{}
	for i, t := range cfg.Tokens {
		switch {
		case t.Secret == "":
			// Never "auth off": an empty token would match an empty header.
			return nil, fmt.Errorf("authn: token %d is empty", i)
		case strings.ContainsAny(t.Secret, " \t\r\n"):
			return nil, fmt.Errorf("authn: token %d contains whitespace", i)
		case t.Scope&ReadWrite == 0 || t.Scope&^ReadWrite != 0:
			return nil, fmt.Errorf("authn: token %d: invalid scope %d", i, t.Scope)
		case t.Tenant != "" && !tenant.Valid(t.Tenant):
			return nil, fmt.Errorf("authn: token %d: invalid tenant %q", i, t.Tenant)
		}
		d := sha256.Sum256([]byte(t.Secret))
		if j, ok := seen[d]; ok {
			return nil, fmt.Errorf("authn: tokens %d and %d are the same", j, i)
		}
		seen[d] = i
		g.digests = append(g.digests, d)
	}
	return g, nil
}

// Enabled reports whether tokens are required.
func (g *Guard) Enabled() bool { return len(g.digests) > 0 }

type tenantKey struct{}

// TenantOf returns the tenant a Guard resolved for the request's context.
func TenantOf(ctx context.Context) (string, bool) {
	t, ok := ctx.Value(tenantKey{}).(string)
	return t, ok
}

type boundKey struct{}

// Bound reports whether the request's token is bound to its tenant (a
// Guard with tokens marks it), so that an endpoint about the whole
// process shows that tenant's rows only.
func Bound(ctx context.Context) bool {
	b, _ := ctx.Value(boundKey{}).(bool)
	return b
}

// WithTenant returns ctx carrying tenant t, as a Guard leaves it.
func WithTenant(ctx context.Context, t string) context.Context {
	return context.WithValue(ctx, tenantKey{}, t)
}

// Wrap returns next behind the guard: the request must carry a token with
// the scope need(r) returns (Read when need is nil), and next sees the
// resolved tenant in TenantOf(r.Context()).
func (g *Guard) Wrap(next http.Handler, need func(*http.Request) Scope) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scope := Read
		if need != nil {
			scope = need(r)
		}
		t, bound, err := g.authorize(r, scope)
		if err != nil {
			WriteError(w, err)
			return
		}
		ctx := WithTenant(r.Context(), t)
		if bound {
			ctx = context.WithValue(ctx, boundKey{}, true)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Error is a refused request: its HTTP status, Prometheus-style error
// type and message.
type Error struct {
	Code   int
	Type   string
	Msg    string
	Reason string // failure reason when counted, else ""
	realm  string
}

func (e *Error) Error() string { return e.Msg }

// Authorize authenticates r for scope need and returns its tenant, or an
// *Error saying why not (counted in the failures counter).
func (g *Guard) Authorize(r *http.Request, need Scope) (string, error) {
	t, _, err := g.authorize(r, need)
	return t, err
}

// authorize is Authorize that also says whether the token is bound to
// the tenant.
func (g *Guard) authorize(r *http.Request, need Scope) (string, bool, error) {
	var tok *Token
	if len(g.digests) > 0 {
		secret, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			return "", false, g.fail(http.StatusUnauthorized, ReasonMissing, "missing bearer token: send 'Authorization: Bearer <token>' (query.auth.tokens)")
		}
		d := sha256.Sum256([]byte(secret))
		match := -1
		for i := range g.digests {
			// Every digest is compared, so the time does not say which
			// token (if any) matched.
			if subtle.ConstantTimeCompare(d[:], g.digests[i][:]) == 1 {
				match = i
			}
		}
		if match < 0 {
			return "", false, g.fail(http.StatusUnauthorized, ReasonInvalid, "invalid bearer token")
		}
		tok = &g.cfg.Tokens[match]
		if tok.Scope&need != need {
			return "", false, g.fail(http.StatusForbidden, ReasonScope, fmt.Sprintf("token has scope %s; this endpoint needs %s", tok.Scope, need))
		}
	}
	t, err := g.tenant(r, tok)
	if err != nil {
		return "", false, err
	}
	return t, tok != nil && tok.Tenant != "", nil
}

func (g *Guard) tenant(r *http.Request, tok *Token) (string, error) {
	var v string
	if h := g.cfg.TenantHeader; h != "" {
		vs := r.Header.Values(h)
		t, err := tenant.FromHeader(vs, h, "")
		if err != nil {
			return "", &Error{Code: http.StatusBadRequest, Type: "bad_data", Msg: err.Error()}
		}
		v = t
	}
	if tok != nil && tok.Tenant != "" {
		if v != "" && v != tok.Tenant {
			return "", g.fail(http.StatusForbidden, ReasonTenant, fmt.Sprintf("this token is bound to one tenant and may not use tenant %q", v))
		}
		return tok.Tenant, nil
	}
	if v == "" {
		return g.cfg.DefaultTenant, nil
	}
	return v, nil
}

func (g *Guard) fail(code int, reason, msg string) error {
	g.failures.WithLabelValues(reason).Inc()
	typ := "unauthorized"
	if code == http.StatusForbidden {
		typ = "forbidden"
	}
	return &Error{Code: code, Type: typ, Msg: msg, Reason: reason, realm: g.cfg.Realm}
}

// bearer returns the token of an "Authorization: Bearer <token>" value;
// the scheme is case-insensitive (RFC 9110), the token is not.
func bearer(h string) (string, bool) {
	const p = "bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	return strings.TrimLeft(h[len(p):], " "), true
}

// WriteError answers err as {"status":"error","errorType":...,"error":...}
// with its status (500 for an error that is not an *Error), adding
// WWW-Authenticate to a 401.
func WriteError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Code: http.StatusInternalServerError, Type: "internal", Msg: err.Error()}
	}
	if e.Code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q`, e.realm))
	}
	b, _ := json.Marshal(struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}{"error", e.Type, e.Msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Code)
	_, _ = w.Write(b)
}
