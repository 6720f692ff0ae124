package httpserve

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestServeShutdown: the server answers on its listener until Shutdown,
// which is idempotent and leaves the address refusing connections.
func TestServeShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	s := Serve(srv, ln, "test", slog.New(slog.DiscardHandler))
	resp, err := http.Get("http://" + s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
	for range 2 {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}
	if c, err := net.Dial("tcp", s.Addr().String()); err == nil {
		c.Close()
		t.Fatal("still accepting after Shutdown")
	}
}

// TestServeBoundsHeaders: a server that sets no header bound gets
// MaxHeaderBytes (net/http's default took 1 MiB), one that sets its own
// keeps it.
func TestServeBoundsHeaders(t *testing.T) {
	for _, tc := range []struct {
		own, header int
		want        int
	}{
		{0, 32 << 10, http.StatusOK},
		{0, 1 << 20, http.StatusRequestHeaderFieldsTooLarge},
		{2 << 20, 1 << 20, http.StatusOK},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{MaxHeaderBytes: tc.own, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
		s := Serve(srv, ln, "test", slog.New(slog.DiscardHandler))
		req, _ := http.NewRequest(http.MethodGet, "http://"+s.Addr().String(), nil)
		req.Header.Set("X-Big", strings.Repeat("a", tc.header))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("own bound %d, %d-byte header: %d, want %d", tc.own, tc.header, resp.StatusCode, tc.want)
		}
		s.Shutdown(context.Background())
	}
}
