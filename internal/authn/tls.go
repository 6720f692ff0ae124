package authn

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
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
// file is set.
func ServerTLS(f TLSFiles) (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, fmt.Errorf("tls: cert file and key file must both be set")
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load key pair %q, %q: %w", f.CertFile, f.KeyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.ClientCAFile != "" {
		pem, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: read client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: client CA %q holds no PEM certificate", f.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
