package otlpexporter

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/authn/authntest"
	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/signal"
)

// TestGRPCTarget: the rule docs/config.md states for otlp over grpc:
// https:// is TLS, http:// plaintext, and a bare host:port TLS only when
// the exporter has tls settings (plaintext otherwise, as before).
func TestGRPCTarget(t *testing.T) {
	tc := &tls.Config{ServerName: "backend"}
	for _, c := range []struct {
		ep         string
		tls        *tls.Config
		target     string
		wantSecure bool
	}{
		{"host:4317", nil, "host:4317", false},
		{"http://host:4317", nil, "host:4317", false},
		{"http://host:4317/", tc, "host:4317", false}, // validation refuses this pairing
		{"https://host:4317", nil, "host:4317", true},
		{"https://host:4317", tc, "host:4317", true},
		{"host:4317", tc, "host:4317", true},
	} {
		target, creds := grpcTarget(c.ep, c.tls, nil)
		if target != c.target || (creds.Info().SecurityProtocol == "tls") != c.wantSecure {
			t.Errorf("%s (tls %v): target %q security %q, want %q secure=%v", c.ep, c.tls != nil, target, creds.Info().SecurityProtocol, c.target, c.wantSecure)
		}
	}
	if tc.NextProtos != nil {
		t.Error("grpcTarget changed the caller's tls.Config")
	}
}

// A backend's certificate rotated to a new CA: while tls.ca_file holds
// the old CA, new connections fail (retried, the data waits); once the
// file holds the new CA, the exporter trusts it without a restart, over
// HTTP and over gRPC.
func TestCAFileReloadedAfterRotation(t *testing.T) {
	old := authn.TLSReloadCheck
	authn.TLSReloadCheck = 10 * time.Millisecond
	t.Cleanup(func() { authn.TLSReloadCheck = old })
	before, after := authntest.New(t), authntest.New(t) // two CAs
	certOf := func(p *authntest.PKI) *tls.Certificate {
		kp, err := tls.LoadX509KeyPair(p.ServerCert, p.ServerKey)
		if err != nil {
			t.Fatal(err)
		}
		return &kp
	}
	var serving atomic.Pointer[tls.Certificate]
	serverTLS := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return serving.Load(), nil
	}}
	body := corpusLogs(t)[0]

	for _, proto := range []string{"http", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			serving.Store(certOf(before))
			var got atomic.Int64
			var endpoint string
			var restart func() // drops the server's connections, so the next request handshakes again
			if proto == "http" {
				hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					got.Add(1)
				}))
				// Served through a TLS listener of serverTLS: StartTLS
				// would add its own certificate, which a client without
				// SNI (an IP address) gets instead.
				hs.Listener = tls.NewListener(hs.Listener, serverTLS)
				hs.Start()
				defer hs.Close()
				endpoint, restart = "https://"+hs.Listener.Addr().String(), hs.CloseClientConnections
			} else {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				addr := ln.Addr().String()
				serve := func(ln net.Listener) *grpc.Server {
					gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(serverTLS)), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
						var m []byte
						if err := stream.RecvMsg(&m); err != nil {
							return err
						}
						got.Add(1)
						return stream.SendMsg([]byte{})
					}), grpc.ForceServerCodecV2(rawCodec{}))
					go gs.Serve(ln)
					return gs
				}
				gs := serve(ln)
				defer func() { gs.Stop() }()
				endpoint = "https://" + addr
				restart = func() {
					gs.Stop()
					ln, err := net.Listen("tcp", addr)
					if err != nil {
						t.Fatal(err)
					}
					gs = serve(ln)
				}
			}
			caFile := filepath.Join(t.TempDir(), "ca.pem")
			authntest.Install(t, before.CAFile, caFile, 0)
			e, err := New(Config{Endpoints: []string{endpoint}, Protocol: proto, Compression: "none",
				TLS: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: before.CAPool}, CAFile: caFile,
				Policy: sending.Policy{InitialBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, BreakerCooldown: 50 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			send := func(d time.Duration) error {
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				return e.Send(ctx, []exporter.Record{{Kind: signal.KindLogs, Body: body}})
			}
			if err := send(10 * time.Second); err != nil || got.Load() != 1 {
				t.Fatalf("before the rotation: %v, %d delivered", err, got.Load())
			}

			serving.Store(certOf(after))
			restart()
			if err := send(500 * time.Millisecond); err == nil {
				t.Fatal("delivered to a certificate of a CA the ca_file does not hold")
			}
			if e.Endpoints()[0].Stats.Failed.Load() == 0 {
				t.Fatal("the failed handshakes were not counted")
			}

			authntest.Install(t, after.CAFile, caFile, time.Second)
			if err := send(20 * time.Second); err != nil {
				t.Fatalf("after the ca_file got the new CA: %v", err)
			}
			if got.Load() != 2 {
				t.Fatalf("%d delivered, want 2", got.Load())
			}
		})
	}
}
