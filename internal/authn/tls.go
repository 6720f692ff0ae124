package authn

import (
	"crypto/tls"
	"fmt"
	"sync/atomic"
)

// TLSFiles names PEM files of a server's TLS.
type TLSFiles struct {
	CertFile, KeyFile string
	// ClientCAFile, when set, makes clients present a certificate signed
	// by one of its CAs (mutual TLS).
	ClientCAFile string
}

// Enabled reports whether any file is set.
func (f TLSFiles) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" || f.ClientCAFile != "" }

// ServerTLS loads the files now, so that a bad path or key fails at
// start-up rather than at the first handshake. It returns nil when no
// file is set. The files are read again when they change on disk (see
// TLSReloadCheck): a rotated certificate or client CA is served from the
// next handshake on, without a restart.
func ServerTLS(f TLSFiles) (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, fmt.Errorf("tls: cert file and key file must both be set")
	}
	kp, err := keyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load key pair %q, %q: %w", f.CertFile, f.KeyFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, _ := kp.get()
			return c, nil
		}}
	if f.ClientCAFile == "" {
		return cfg, nil
	}
	cas, err := caPool(f.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("tls: client CA: %w", err)
	}
	cfg.ClientCAs = *cas.cur.Load()
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	// The client CAs are part of the config itself: a handshake after a
	// change gets a copy holding the new pool, made once per change.
	var withCAs atomic.Pointer[tls.Config]
	withCAs.Store(cfg)
	base := cfg.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		pool, changed := cas.get()
		if changed {
			c := base.Clone()
			c.ClientCAs = *pool
			withCAs.Store(c)
		}
		return withCAs.Load(), nil
	}
	return cfg, nil
}
