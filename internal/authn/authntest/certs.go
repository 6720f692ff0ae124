// Package authntest generates throw-away TLS certificates for tests: a CA,
// a server certificate for 127.0.0.1 and localhost, and client
// certificates signed by the CA (for mutual TLS).
package authntest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA with a server and a client certificate, written as PEM files
// in a test's temporary directory.
type PKI struct {
	Dir                             string
	CAFile                          string
	ServerCert, ServerKey           string
	ClientCert, ClientKey           string
	OtherClientCert, OtherClientKey string // signed by a CA the server does not trust
	CAPool                          *x509.CertPool
}

// New writes the files.
func New(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p := &PKI{Dir: dir}
	caKey, caCert, caDER := ca(t, "sluice test CA")
	p.CAFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)
	p.CAPool = x509.NewCertPool()
	p.CAPool.AddCert(caCert)
	p.ServerCert, p.ServerKey = leaf(t, dir, "server", caCert, caKey, x509.ExtKeyUsageServerAuth)
	p.ClientCert, p.ClientKey = leaf(t, dir, "client", caCert, caKey, x509.ExtKeyUsageClientAuth)
	otherKey, otherCert, _ := ca(t, "untrusted CA")
	p.OtherClientCert, p.OtherClientKey = leaf(t, dir, "other-client", otherCert, otherKey, x509.ExtKeyUsageClientAuth)
	return p
}

// Client returns a TLS client config trusting the CA, presenting the
// client certificate when withCert.
func (p *PKI) Client(t testing.TB, withCert bool) *tls.Config {
	t.Helper()
	c := &tls.Config{RootCAs: p.CAPool, MinVersion: tls.VersionTLS12}
	if withCert {
		kp, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c
}

// UntrustedClient presents a certificate the server's CA did not sign.
func (p *PKI) UntrustedClient(t testing.TB) *tls.Config {
	t.Helper()
	kp, err := tls.LoadX509KeyPair(p.OtherClientCert, p.OtherClientKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: p.CAPool, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{kp}}
}

func key(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func ca(t testing.TB, name string) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	k := key(t)
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return k, c, der
}

func leaf(t testing.TB, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) (string, string) {
	k := key(t)
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name+".pem", "CERTIFICATE", der), writePEM(t, dir, name+"-key.pem", "PRIVATE KEY", kd)
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Install copies src over dst, as a certificate rotation on disk does, and
// sets dst's modification time to now+bump, so that a reload sees the file
// changed even within the file system's timestamp granularity.
func Install(t testing.TB, src, dst string, bump time.Duration) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(bump)
	if err := os.Chtimes(dst, at, at); err != nil {
		t.Fatal(err)
	}
}

// Cert parses the first PEM certificate of the file path.
func Cert(t testing.TB, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
