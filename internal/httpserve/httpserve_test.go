package httpserve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestServeShutdown: the server answers on its listener until Shutdown,
// which is idempotent and leaves the address refusing connections.
func TestServeShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	s := Serve(srv, ln, "test", 0, slog.New(slog.DiscardHandler))
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
		s := Serve(srv, ln, "test", 0, slog.New(slog.DiscardHandler))
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

var boundedRuns atomic.Int64

// TestServeBoundsConnections: past maxConns open connections one more is
// closed at once and counted, the open ones are still served, and a
// connection is taken again once one closes.
func TestServeBoundsConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if err := RegisterMetrics(reg); err != nil {
		t.Fatalf("registering twice: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	// The metrics are the process's: a name of its own per run keeps a
	// run's counts apart from an earlier run's (go test -count).
	name := fmt.Sprintf("bounded test %d", boundedRuns.Add(1))
	s := Serve(srv, ln, name, 3, slog.New(slog.DiscardHandler))
	defer s.Shutdown(context.Background())
	addr := s.Addr().String()
	get := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	var open []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := get(c); err != nil {
			t.Fatalf("connection within the bound: %v", err)
		}
		open = append(open, c)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if err := get(extra); err == nil {
		t.Fatal("a fourth connection was served past max connections 3")
	}
	// value is the sample of metric for this server in reg.
	value := func(metric string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if mf.GetName() == metric && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == name {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no %s{server=%q}", metric, name)
		return 0
	}
	if got := value("sluice_http_connections_refused_total"); got != 1 {
		t.Errorf("refused connections %v, want 1", got)
	}
	if got := value("sluice_http_connections_open"); got != 3 {
		t.Errorf("open connections %v, want 3", got)
	}
	if err := get(open[0]); err != nil {
		t.Errorf("an open connection is no longer served: %v", err)
	}
	open[0].Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		err = get(c)
		c.Close()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection taken after one closed: %v", err)
		}
	}
}
