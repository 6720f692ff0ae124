package sending

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/sluice-dev/sluice/internal/authn"
)

// ClientTLS is an exporter's client TLS config whose trusted CAs follow a
// CA file on disk: a backend whose certificate was rotated to a new CA
// (cert-manager, Vault, a renewed private CA) is trusted again once the
// file holds that CA, without a restart. The file is looked at for new
// connections only, at most once per authn.TLSReloadCheck; connections
// already open keep the handshake they made.
type ClientTLS struct {
	ca   func() (*x509.CertPool, bool)
	cfg  atomic.Pointer[tls.Config] // base with the current RootCAs; never changed once stored
	base *tls.Config
}

// NewClientTLS returns base (not nil) with its RootCAs read from caFile,
// again whenever the file changes. Its errors name the file.
func NewClientTLS(base *tls.Config, caFile string) (*ClientTLS, error) {
	get, err := authn.WatchCA(caFile)
	if err != nil {
		return nil, err
	}
	c := &ClientTLS{ca: get, base: base.Clone()}
	pool, _ := get()
	c.store(pool)
	return c, nil
}

func (c *ClientTLS) store(pool *x509.CertPool) {
	cfg := c.base.Clone()
	cfg.RootCAs = pool
	c.cfg.Store(cfg)
}

// Config returns the config for the next handshake, after looking at the
// CA file if a check is due. The caller must not modify it.
func (c *ClientTLS) Config() *tls.Config {
	if pool, changed := c.ca(); changed {
		c.store(pool)
	}
	return c.cfg.Load()
}

// Transport is an http.RoundTripper over an http.Transport built by
// newTransport for the ClientTLS's current config, built again when the
// CA file changed: the old one's idle connections are closed, and those
// in flight finish on it.
type Transport struct {
	tls          *ClientTLS
	newTransport func(*tls.Config) *http.Transport

	mu  sync.Mutex
	cfg *tls.Config
	cur *http.Transport
}

// NewTransport returns a Transport over c; newTransport must set the
// config it gets as the transport's TLSClientConfig.
func NewTransport(c *ClientTLS, newTransport func(*tls.Config) *http.Transport) *Transport {
	t := &Transport{tls: c, newTransport: newTransport}
	t.cfg = c.Config()
	t.cur = newTransport(t.cfg)
	return t
}

func (t *Transport) transport() *http.Transport {
	cfg := t.tls.Config()
	t.mu.Lock()
	defer t.mu.Unlock()
	if cfg != t.cfg {
		old := t.cur
		t.cfg, t.cur = cfg, t.newTransport(cfg)
		old.CloseIdleConnections()
	}
	return t.cur
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.transport().RoundTrip(req)
}

// CloseIdleConnections closes the current transport's idle connections
// (http.Client.CloseIdleConnections calls it).
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	cur := t.cur
	t.mu.Unlock()
	cur.CloseIdleConnections()
}

// HTTPTransport returns the RoundTripper of an exporter's HTTP endpoints:
// newTransport(tc) itself, or with caFile set (tc's RootCAs came from
// it) a Transport that follows the file. newTransport must set the config
// it gets (nil: the system's roots) as the transport's TLSClientConfig.
// The ClientTLS is nil without caFile.
func HTTPTransport(tc *tls.Config, caFile string, newTransport func(*tls.Config) *http.Transport) (http.RoundTripper, *ClientTLS, error) {
	if caFile == "" || tc == nil || tc.InsecureSkipVerify {
		return newTransport(tc), nil, nil
	}
	c, err := NewClientTLS(tc, caFile)
	if err != nil {
		return nil, nil, err
	}
	return NewTransport(c, newTransport), c, nil
}
