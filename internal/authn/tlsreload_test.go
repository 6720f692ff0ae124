package authn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/authn/authntest"
)

// serve accepts TLS connections with cfg, completes each handshake and
// writes one byte on success, so that a client learns whether the server
// accepted it (over TLS 1.3 a refused client certificate shows only on
// the client's first read).
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = c.Write([]byte("k"))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial connects with cfg and returns the server's leaf serial, or the
// error of the handshake or of the first read.
func dial(addr string, cfg *tls.Config) (*big.Int, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

func fastChecks(t *testing.T) {
	old := TLSReloadCheck
	TLSReloadCheck = 5 * time.Millisecond
	t.Cleanup(func() { TLSReloadCheck = old })
}

// eventually polls f until it returns nil, for at most 30 s.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServerTLSReloadsRotatedCertificate: a certificate and key replaced
// on disk are served from a later handshake on, without a restart; a
// replacement that does not load (a key that is not PEM) keeps the pair
// in use, is counted, and a good pair after it is taken.
func TestServerTLSReloadsRotatedCertificate(t *testing.T) {
	fastChecks(t)
	a, b := authntest.New(t), authntest.New(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.pem"), filepath.Join(dir, "tls-key.pem")
	authntest.Install(t, a.ServerCert, cert, 0)
	authntest.Install(t, a.ServerKey, key, 0)
	cfg, err := ServerTLS(TLSFiles{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	trustBoth := x509.NewCertPool()
	for _, p := range []*authntest.PKI{a, b} {
		pem, _ := os.ReadFile(p.CAFile)
		trustBoth.AppendCertsFromPEM(pem)
	}
	client := &tls.Config{RootCAs: trustBoth, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	want := authntest.Cert(t, a.ServerCert).SerialNumber
	if got, err := dial(addr, client); err != nil || got.Cmp(want) != 0 {
		t.Fatalf("before rotation: serial %v, %v; want %v", got, err, want)
	}

	authntest.Install(t, b.ServerCert, cert, time.Hour)
	authntest.Install(t, b.ServerKey, key, time.Hour)
	want = authntest.Cert(t, b.ServerCert).SerialNumber
	eventually(t, "rotated certificate served", func() error {
		got, err := dial(addr, client)
		if err != nil {
			return err
		}
		if got.Cmp(want) != 0 {
			return errors.New("still the old certificate")
		}
		return nil
	})

	failed := counterValue(TLSReloads.WithLabelValues("failed"))
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(2 * time.Hour)
	_ = os.Chtimes(key, at, at)
	eventually(t, "failed reload counted", func() error {
		if _, err := dial(addr, client); err != nil {
			return err
		}
		if counterValue(TLSReloads.WithLabelValues("failed")) <= failed {
			return errors.New("no failed reload counted")
		}
		return nil
	})
	for range 5 {
		if got, err := dial(addr, client); err != nil || got.Cmp(want) != 0 {
			t.Fatalf("after a bad key: serial %v, %v; want the pair in use, %v", got, err, want)
		}
	}

	authntest.Install(t, a.ServerCert, cert, 3*time.Hour)
	authntest.Install(t, a.ServerKey, key, 3*time.Hour)
	want = authntest.Cert(t, a.ServerCert).SerialNumber
	eventually(t, "good pair after a bad one", func() error {
		got, err := dial(addr, client)
		if err != nil {
			return err
		}
		if got.Cmp(want) != 0 {
			return errors.New("not reloaded")
		}
		return nil
	})
}

// TestServerTLSReloadsClientCA: mutual TLS keeps refusing a client whose
// CA is not in client_ca_file until the file is replaced by one holding
// it; then that client is taken and the old CA's client refused.
func TestServerTLSReloadsClientCA(t *testing.T) {
	fastChecks(t)
	a, b := authntest.New(t), authntest.New(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "clients-ca.pem")
	authntest.Install(t, a.CAFile, ca, 0)
	cfg, err := ServerTLS(TLSFiles{CertFile: a.ServerCert, KeyFile: a.ServerKey, ClientCAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	clientOf := func(p *authntest.PKI) *tls.Config {
		c := p.Client(t, true)
		c.RootCAs, c.ServerName = a.CAPool, "localhost"
		return c
	}
	if _, err := dial(addr, clientOf(a)); err != nil {
		t.Fatalf("client of CA a refused: %v", err)
	}
	if _, err := dial(addr, clientOf(b)); err == nil {
		t.Fatal("client of CA b taken before its CA was installed")
	}
	authntest.Install(t, b.CAFile, ca, time.Hour)
	eventually(t, "client of the new CA taken", func() error {
		_, err := dial(addr, clientOf(b))
		return err
	})
	if _, err := dial(addr, clientOf(a)); err == nil {
		t.Fatal("client of the replaced CA still taken")
	}
}

// TestClientCertificateReloads: the client side (exporters' tls.cert_file)
// presents a rotated certificate from a later handshake on.
func TestClientCertificateReloads(t *testing.T) {
	fastChecks(t)
	a, b := authntest.New(t), authntest.New(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	authntest.Install(t, a.ClientCert, cert, 0)
	authntest.Install(t, a.ClientKey, key, 0)
	get, err := ClientCertificate(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() *big.Int {
		c, err := get(&tls.CertificateRequestInfo{})
		if err != nil {
			t.Fatal(err)
		}
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x.SerialNumber
	}
	if got, want := serial(), authntest.Cert(t, a.ClientCert).SerialNumber; got.Cmp(want) != 0 {
		t.Fatalf("serial %v, want %v", got, want)
	}
	authntest.Install(t, b.ClientCert, cert, time.Hour)
	authntest.Install(t, b.ClientKey, key, time.Hour)
	want := authntest.Cert(t, b.ClientCert).SerialNumber
	eventually(t, "rotated client certificate", func() error {
		if serial().Cmp(want) != 0 {
			return errors.New("still the old certificate")
		}
		return nil
	})
	if _, err := ClientCertificate(cert, filepath.Join(dir, "missing.pem")); err == nil {
		t.Fatal("a missing key file loaded")
	}
}
