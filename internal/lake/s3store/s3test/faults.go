package s3test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Op names the S3 operation of a request as a proxy sees it: put, part,
// copy, create-multipart, complete, abort, delete, head, get, list.
func Op(r *http.Request) string {
	q := r.URL.Query()
	switch r.Method {
	case http.MethodPut:
		if r.Header.Get("X-Amz-Copy-Source") != "" {
			return "copy"
		}
		if q.Has("uploadId") {
			return "part"
		}
		return "put"
	case http.MethodPost:
		switch {
		case q.Has("uploads"):
			return "create-multipart"
		case q.Has("uploadId"):
			return "complete"
		case q.Has("delete"):
			return "delete"
		}
		return "post"
	case http.MethodDelete:
		if q.Has("uploadId") {
			return "abort"
		}
		return "delete"
	case http.MethodHead:
		return "head"
	case http.MethodGet:
		if q.Has("list-type") || !strings.Contains(strings.Trim(r.URL.Path, "/"), "/") {
			return "list"
		}
		return "get"
	}
	return r.Method
}

// FaultProxy stands in front of a real S3 server and answers the requests
// its fault function picks itself, as an overloaded or broken S3 does.
type FaultProxy struct {
	Endpoint string // http://127.0.0.1:PORT, to use in place of the server's
	mu       sync.Mutex
	fault    func(op string, n int) int
	seen     map[string]int
	hits     atomic.Int64
}

// NewFaultProxy starts a proxy to endpoint that passes every request on
// until Set gives it faults; it stops when the test ends.
func NewFaultProxy(tb testing.TB, endpoint string) *FaultProxy {
	tb.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		tb.Fatal(err)
	}
	p := &FaultProxy{seen: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := Op(r)
		p.mu.Lock()
		p.seen[op]++
		n, f := p.seen[op], p.fault
		p.mu.Unlock()
		code := 0
		if f != nil {
			code = f(op, n)
		}
		if code == 0 {
			rp.ServeHTTP(w, r)
			return
		}
		p.hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body) // as a server that read the body, then failed
		name := map[int]string{500: "InternalError", 503: "SlowDown"}[code]
		if name == "" {
			name = http.StatusText(code)
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(code)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by the test</Message></Error>`, name)
	}))
	tb.Cleanup(srv.Close)
	p.Endpoint = srv.URL
	return p
}

// Set makes fault decide every request from now on: it gets the
// request's Op and how many requests of that Op the proxy has seen since
// this Set (from 1), and returns the HTTP status to answer with, or 0 to
// pass the request on. nil passes everything on.
func (p *FaultProxy) Set(fault func(op string, n int) int) {
	p.mu.Lock()
	p.fault, p.seen = fault, map[string]int{}
	p.mu.Unlock()
}

// Faults returns how many requests the proxy answered itself.
func (p *FaultProxy) Faults() int64 { return p.hits.Load() }
