package pipeline

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAdminPprof serves /debug/pprof/ only when admin.pprof is set.
func TestAdminPprof(t *testing.T) {
	off := start(t, testConfig(t))
	if code, _ := get(t, off, "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("admin.pprof false: /debug/pprof/ answered %d, want 404", code)
	}
	cfg := testConfig(t)
	cfg.Admin.Pprof = true
	on := start(t, cfg)
	if code, body := get(t, on, "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("admin.pprof true: /debug/pprof/ answered %d:\n%.300s", code, body)
	}
	if code, body := get(t, on, "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("admin.pprof true: goroutine profile answered %d:\n%.300s", code, body)
	}
	if code, _ := get(t, on, "/metrics"); code != http.StatusOK {
		t.Errorf("/metrics answered %d with pprof on", code)
	}
}

// TestAdminBounds: the admin server closes idle keep-alive connections
// (it kept them for ever), refuses a 1 MB header with 431, and a port in
// use is an error naming admin.addr.
func TestAdminBounds(t *testing.T) {
	defer func(d time.Duration) { adminIdleTimeout = d }(adminIdleTimeout)
	adminIdleTimeout = 300 * time.Millisecond
	p := start(t, testConfig(t))
	c, err := net.Dial("tcp", p.Addrs().Admin.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("idle keep-alive connection: read %v, want EOF (closed by the server)", err)
	}

	req, _ := http.NewRequest(http.MethodGet, "http://"+p.Addrs().Admin.String()+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 1<<20))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("1 MB header: %v %v, want 431", resp, err)
	} else {
		resp.Body.Close()
	}

	cfg := testConfig(t)
	cfg.Admin.Addr = p.Addrs().Admin.String()
	q, err := New(cfg, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "admin.addr") || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("admin port in use: %v, want an error naming admin.addr", err)
	}
}
