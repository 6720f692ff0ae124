package otlpexporter

import (
	"crypto/tls"
	"testing"
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
		target, creds := grpcTarget(c.ep, c.tls)
		if target != c.target || (creds.Info().SecurityProtocol == "tls") != c.wantSecure {
			t.Errorf("%s (tls %v): target %q security %q, want %q secure=%v", c.ep, c.tls != nil, target, creds.Info().SecurityProtocol, c.target, c.wantSecure)
		}
	}
	if tc.NextProtos != nil {
		t.Error("grpcTarget changed the caller's tls.Config")
	}
}
