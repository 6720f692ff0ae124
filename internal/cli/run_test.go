package cli

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigRefused: sluice validate and sluice run refuse a broken config
// with exit code 2, one line per problem as FILE:LINE: KEY: PROBLEM, and
// run starts nothing: no lake directory, no listener.
func TestConfigRefused(t *testing.T) {
	dir := t.TempDir()
	lake := filepath.Join(dir, "lake")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := l.Addr().String()
	l.Close()
	cfg := filepath.Join(dir, "sluice.yaml")
	src := "lake:\n  root: " + lake + "\nreceivers:\n  otlp:\n    grpc_addr: " + free + "\n    max_connections: 0\nqueue:\n  max_bytes: 10%\n"
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"validate", "run"} {
		var out, errOut bytes.Buffer
		code := Main([]string{cmd, "--config", cfg}, nil, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "sluice: "+cfg+`:8: queue.max_bytes: size "10%"`) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %s:8 naming queue.max_bytes", cmd, code, errOut.String(), cfg)
		}
	}
	// Parsed, but refused by validation: still file:line and exit 2.
	if err := os.WriteFile(cfg, []byte(strings.Replace(src, "10%", "1GiB", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"validate", "run"} {
		var out, errOut bytes.Buffer
		code := Main([]string{cmd, "--config", cfg}, nil, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "sluice: "+cfg+":6: receivers.otlp.max_connections: must be positive") {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %s:6 naming receivers.otlp.max_connections", cmd, code, errOut.String(), cfg)
		}
	}
	// A problem with a value a flag set is not the file's line.
	var out, errOut bytes.Buffer
	if code := Main([]string{"validate", "--config", cfg, "--grpc-addr", "nohost"}, nil, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "sluice: "+cfg+`: receivers.otlp.grpc_addr: "nohost"`) {
		t.Errorf("flag: exit %d, stderr %q", code, errOut.String())
	}
	if _, err := os.Stat(lake); !os.IsNotExist(err) {
		t.Errorf("a refused run created the lake (%v)", err)
	}
	if l, err := net.Listen("tcp", free); err != nil {
		t.Errorf("a refused run left %s bound: %v", free, err)
	} else {
		l.Close()
	}
}
