package prwexporter

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// countingConn counts the Write calls on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// bodyServer is an endpoint on 127.0.0.1:0 that keeps the last body
// (discards it unless keep).
func bodyServer(t testing.TB, keep bool) (*httptest.Server, *atomic.Pointer[[]byte]) {
	var last atomic.Pointer[[]byte]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !keep {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		last.Store(&b)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, &last
}

// transport is the exporter's transport (New), its connections counted
// and, with wrap, wrapped in bodyConn as New wraps them.
func transport(wrap bool, writes *atomic.Int64) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.WriteBufferSize = 64 << 10
	d := &net.Dialer{Timeout: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		var nc net.Conn = countingConn{c, writes}
		if wrap {
			nc = bodyConn{nc}
		}
		return nc, nil
	}
	return tr
}

func post(t testing.TB, hc *http.Client, url string, body []byte) {
	req, err := newRequest(context.Background(), url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// TestBodyConnOneWrite: through a real transport and server, a large body
// arrives byte for byte, in two writes (the transport's buffer, then the
// rest) where the transport alone makes one per 32 KiB; small bodies and
// several requests on one connection arrive too.
func TestBodyConnOneWrite(t *testing.T) {
	srv, last := bodyServer(t, true)
	for _, size := range []int{1, 60 << 10, 64 << 10, 1 << 20, 3<<20 + 7} {
		body := make([]byte, size)
		rand.Read(body)
		var plain, wrapped atomic.Int64
		for _, c := range []struct {
			wrap   bool
			writes *atomic.Int64
		}{{false, &plain}, {true, &wrapped}} {
			tr := transport(c.wrap, c.writes)
			hc := &http.Client{Transport: tr}
			for range 3 {
				before := c.writes.Load()
				post(t, hc, srv.URL, body)
				if got := *last.Load(); !bytes.Equal(got, body) {
					t.Fatalf("size %d, wrapped %v: the server got %d bytes, not the body", size, c.wrap, len(got))
				}
				if n := c.writes.Load() - before; c.wrap && n > 2 {
					t.Errorf("size %d: %d writes through bodyConn, want at most 2", size, n)
				}
			}
			tr.CloseIdleConnections()
		}
		if size >= 1<<20 && plain.Load() <= 3*8 {
			t.Errorf("size %d: the transport alone made %d writes for 3 requests: the test no longer shows what bodyConn saves", size, plain.Load())
		}
	}
}

// TestBodyConnReadFromFallback: ReadFrom writes exactly what the limited
// reader allows when it is not the bytes.Reader's whole rest, and copies
// any other reader as before.
func TestBodyConnReadFromFallback(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	got := make(chan []byte, 1)
	go func() {
		all, _ := io.ReadAll(b)
		got <- all
	}()
	c := bodyConn{a}
	br := &body{[]byte("0123456789")}
	if n, err := c.ReadFrom(&io.LimitedReader{R: br, N: 4}); n != 4 || err != nil {
		t.Fatalf("limited to part of the rest: %d, %v", n, err)
	}
	if n, err := c.ReadFrom(&io.LimitedReader{R: br, N: 6}); n != 6 || err != nil {
		t.Fatalf("limited to the rest: %d, %v", n, err)
	}
	if n, err := c.ReadFrom(strings.NewReader("abc")); n != 3 || err != nil {
		t.Fatalf("another reader: %d, %v", n, err)
	}
	a.Close()
	if s := string(<-got); s != "0123456789abc" {
		t.Fatalf("the peer read %q", s)
	}
}

// BenchmarkPostLarge: the CPU of posting a 256 KiB body (a pass-through
// request of about 5,000 samples) to a server in the same process, with
// and without bodyConn (the server's share is the same in both).
func BenchmarkPostLarge(b *testing.B) {
	body := make([]byte, 256<<10)
	rand.Read(body)
	for _, wrap := range []bool{false, true} {
		name := "transport"
		if wrap {
			name = "bodyConn"
		}
		b.Run(name, func(b *testing.B) {
			srv, _ := bodyServer(b, false)
			var writes atomic.Int64
			tr := transport(wrap, &writes)
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			post(b, hc, srv.URL, body)
			writes.Store(0)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for b.Loop() {
				post(b, hc, srv.URL, body)
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/request")
			b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/request")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
