package otlpreceiver

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/internal/waittest"
)

// testCert is a certificate and its key, signed by ca (self-signed when ca
// is nil), written as PEM files.
type testCert struct {
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	certFile string
	keyFile  string
}

func newTestCert(t *testing.T, dir, name string, ca *testCert, isCA bool, usage x509.ExtKeyUsage) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		IsCA:                  isCA,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCert{cert: cert, key: key,
		certFile: filepath.Join(dir, name+".crt"), keyFile: filepath.Join(dir, name+".key")}
	writePEM(t, c.certFile, "CERTIFICATE", der)
	writePEM(t, c.keyFile, "EC PRIVATE KEY", keyDER)
	return c
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (c *testCert) tlsCert(t *testing.T) tls.Certificate {
	t.Helper()
	kp, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	server := newTestCert(t, dir, "server", nil, true, x509.ExtKeyUsageServerAuth)
	cfg := testConfig()
	cfg.TLS = &TLSConfig{CertFile: server.certFile, KeyFile: server.keyFile}
	rec := &recorder{}
	r, _ := startReceiver(t, cfg, rec)
	roots := x509.NewCertPool()
	roots.AddCert(server.cert)
	clientTLS := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	p := samplePayloads(t, 4)[0]

	cc := grpcConn(t, r, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
	if _, _, err := p.export(waittest.Context(t), cc); err != nil {
		t.Fatalf("grpc over tls: %v", err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS, ForceAttemptHTTP2: true}}
	resp, _ := post(t, client, "https://"+r.HTTPAddr().String()+p.path, "application/x-protobuf", "", p.proto, nil)
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("https: status %d over %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto)
	}
	// A plaintext client must not get through.
	if _, err := http.Post(httpURL(r, p.path), "application/x-protobuf", bytes.NewReader(p.proto)); err == nil {
		if n := len(rec.requests()); n != 2 {
			t.Fatalf("plaintext request reached the consumer")
		}
	}
	if n := len(rec.requests()); n != 2 {
		t.Fatalf("consumer saw %d requests, want 2", n)
	}
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCert(t, dir, "ca", nil, true, x509.ExtKeyUsageAny)
	server := newTestCert(t, dir, "server", ca, false, x509.ExtKeyUsageServerAuth)
	client := newTestCert(t, dir, "client", ca, false, x509.ExtKeyUsageClientAuth)
	cfg := testConfig()
	cfg.TLS = &TLSConfig{CertFile: server.certFile, KeyFile: server.keyFile, ClientCAFile: ca.certFile}
	r, _ := startReceiver(t, cfg, &recorder{})
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	p := samplePayloads(t, 4)[1]

	anon := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if _, _, err := p.export(waittest.Context(t), grpcConn(t, r, grpc.WithTransportCredentials(credentials.NewTLS(anon)))); status.Code(err) != codes.Unavailable {
		t.Fatalf("grpc without client cert: %v, want a failed handshake", err)
	}
	withCert := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{client.tlsCert(t)}}
	if _, _, err := p.export(waittest.Context(t), grpcConn(t, r, grpc.WithTransportCredentials(credentials.NewTLS(withCert)))); err != nil {
		t.Fatalf("grpc with client cert: %v", err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: withCert}}
	if resp, _ := post(t, hc, "https://"+r.HTTPAddr().String()+p.path, "application/x-protobuf", "", p.proto, nil); resp.StatusCode != 200 {
		t.Fatalf("https with client cert: %d", resp.StatusCode)
	}
}

func TestShutdownDrainsInFlight(t *testing.T) {
	for _, transport := range []string{TransportGRPC, TransportHTTP} {
		t.Run(transport, func(t *testing.T) {
			entered, unblock := make(chan struct{}, 1), make(chan struct{})
			rec := &recorder{respond: func(*Request) (Result, error) {
				entered <- struct{}{}
				<-unblock
				return Result{}, nil
			}}
			r, err := New(testConfig(), rec, nil, quietLogger())
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			p := samplePayloads(t, 10)[2]
			result := make(chan error, 1)
			if transport == TransportGRPC {
				cc := grpcConn(t, r)
				go func() { _, _, err := p.export(waittest.Context(t), cc); result <- err }()
			} else {
				url := httpURL(r, p.path)
				go func() {
					resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(p.proto))
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode != 200 {
							err = errors.New(resp.Status)
						}
					}
					result <- err
				}()
			}
			waittest.Recv(t, entered, "the request to reach the consumer")

			shutdown := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				shutdown <- r.Shutdown(ctx)
			}()
			select {
			case err := <-shutdown:
				t.Fatalf("Shutdown returned (%v) while a request was in flight", err)
			case <-time.After(200 * time.Millisecond):
			}
			close(unblock)
			if err := waittest.Recv(t, result, "the in-flight request"); err != nil {
				t.Fatalf("in-flight request failed: %v", err)
			}
			if err := waittest.Recv(t, shutdown, "Shutdown"); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if err := r.Shutdown(context.Background()); err != nil {
				t.Fatalf("second Shutdown: %v", err)
			}
			addr := r.HTTPAddr().String()
			if transport == TransportGRPC {
				addr = r.GRPCAddr().String()
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Fatal("listener still accepts after Shutdown")
			}
		})
	}
}

func TestShutdownDeadline(t *testing.T) {
	unblock := make(chan struct{})
	defer close(unblock)
	entered := make(chan struct{}, 1)
	c := consumerFunc(func(ctx context.Context, _ *Request) (Result, error) {
		entered <- struct{}{}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-unblock:
			return Result{}, nil
		}
	})
	r, err := New(testConfig(), c, nil, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := samplePayloads(t, 1)[0]
	go func() {
		if resp, err := http.Post(httpURL(r, p.path), "application/x-protobuf", bytes.NewReader(p.proto)); err == nil {
			resp.Body.Close()
		}
	}()
	waittest.Recv(t, entered, "the request to reach the consumer")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := r.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want deadline exceeded", err)
	}
}

type consumerFunc func(context.Context, *Request) (Result, error)

func (f consumerFunc) Consume(ctx context.Context, req *Request) (Result, error) { return f(ctx, req) }

func TestStartFailsFastOnBusyPort(t *testing.T) {
	r1, _ := startReceiver(t, testConfig(), nopConsumer{})
	cfg := testConfig()
	cfg.HTTPAddr = r1.HTTPAddr().String()
	r2, err := New(cfg, nopConsumer{}, nil, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "listen http") {
		t.Fatalf("Start on a busy port = %v, want a listen error", err)
	}
	if r2.GRPCAddr() != nil {
		t.Fatal("grpc address set after failed start")
	}
	if err := r2.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown after failed Start: %v", err)
	}
}

func TestDisabledTransport(t *testing.T) {
	cfg := testConfig()
	cfg.GRPCAddr = ""
	r, _ := startReceiver(t, cfg, nopConsumer{})
	if r.GRPCAddr() != nil || r.HTTPAddr() == nil {
		t.Fatalf("addrs = %v, %v", r.GRPCAddr(), r.HTTPAddr())
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := map[string]Config{
		"nothing enabled":  {},
		"bad tenant hdr":   {HTTPAddr: ":0", TenantHeader: "X Tenant"},
		"bad default":      {HTTPAddr: ":0", DefaultTenant: "a/b"},
		"token whitespace": {HTTPAddr: ":0", BearerToken: "a b"},
		"negative size":    {HTTPAddr: ":0", MaxRequestBytes: -1},
		"huge size":        {HTTPAddr: ":0", MaxRequestBytes: 1 << 40},
		"negative timeout": {HTTPAddr: ":0", ReadTimeout: -time.Second},
		"tls without key":  {HTTPAddr: ":0", TLS: &TLSConfig{CertFile: "x"}},
	}
	for name, cfg := range bad {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
		if _, err := New(cfg, nopConsumer{}, nil, nil); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	if _, err := New(Config{HTTPAddr: ":0", TLS: &TLSConfig{CertFile: "/nonexistent.crt", KeyFile: "/nonexistent.key"}}, nopConsumer{}, nil, nil); err == nil {
		t.Error("New accepted missing tls files")
	}
}

// TestHTTPSlowClient checks that a client trickling its body is cut off by
// ReadTimeout instead of holding a slot forever.
func TestHTTPSlowClient(t *testing.T) {
	cfg := testConfig()
	cfg.ReadTimeout = 300 * time.Millisecond
	cfg.MaxConcurrentRequests = 1
	rec := &recorder{}
	r, _ := startReceiver(t, cfg, rec)
	conn, err := net.Dial("tcp", r.HTTPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = conn.Write([]byte("POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\nabc"))
	if err != nil {
		t.Fatal(err)
	}
	// The stalled request gives up its slot once the read times out.
	p := samplePayloads(t, 1)[0]
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := post(t, nil, httpURL(r, p.path), "application/x-protobuf", "", p.proto, nil)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot never freed: status %d", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(rec.requests()) != 1 {
		t.Fatal("truncated request reached the consumer")
	}
}

// TestGRPCSlowClient sends the start of a gRPC message and stalls: the
// read timeout must end the stream instead of holding the slot forever.
func TestGRPCSlowClient(t *testing.T) {
	cfg := testConfig()
	cfg.ReadTimeout = 300 * time.Millisecond
	rec := &recorder{}
	r, reg := startReceiver(t, cfg, rec)

	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: protocols}}
	pr, pw := io.Pipe()
	defer pw.Close()
	req, err := http.NewRequest(http.MethodPost,
		"http://"+r.GRPCAddr().String()+"/opentelemetry.proto.collector.logs.v1.LogsService/Export", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	go func() {
		// A 1000-byte uncompressed message, of which 10 bytes ever arrive.
		_, _ = pw.Write([]byte{0, 0, 0, 0x03, 0xe8})
		_, _ = pw.Write(make([]byte, 10))
	}()
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	code := resp.Header.Get("Grpc-Status")
	if code == "" {
		code = resp.Trailer.Get("Grpc-Status")
	}
	// gRPC answers a failed receive itself, as CANCELLED (retryable in OTLP).
	if code != strconv.Itoa(int(codes.Canceled)) && code != strconv.Itoa(int(codes.DeadlineExceeded)) {
		t.Fatalf("grpc-status %q, want Canceled or DeadlineExceeded", code)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stalled stream ended after %v", d)
	}
	if len(rec.requests()) != 0 {
		t.Fatal("truncated request reached the consumer")
	}
	if got := counterValue(t, reg, "sluice_receiver_requests_total", map[string]string{
		"transport": "grpc", "outcome": "error"}); got != 1 {
		t.Fatalf("error outcome = %v, want 1", got)
	}
}
