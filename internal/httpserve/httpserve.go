// Package httpserve runs an http.Server on a listener the caller bound,
// over TLS when the server has a TLSConfig, and shuts it down: the one
// serve-and-stop sequence of sluice's own HTTP servers (the query API,
// remote write's own listener and the admin server, admin.go).
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
)

// MaxHeaderBytes bounds the request headers of a server Serve runs when
// it sets no bound of its own; larger ones get 431.
const MaxHeaderBytes = 64 << 10

// Server is srv serving ln.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	name string
	done chan struct{}
}

// Serve serves ln with srv in a goroutine (TLS when srv.TLSConfig is set,
// its certificates taken from it; MaxHeaderBytes when srv sets none),
// keeping at most maxConns connections open (Limit; 0:
// DefaultMaxConnections), counted by name in the metrics RegisterMetrics
// registers. name prefixes errors and logs ("query API"); a serve error
// other than a shutdown is logged on log.
func Serve(srv *http.Server, ln net.Listener, name string, maxConns int, log *slog.Logger) *Server {
	if maxConns <= 0 {
		maxConns = DefaultMaxConnections
	}
	ln = Limit(ln, maxConns, connsRefused.WithLabelValues(name), connsOpen.WithLabelValues(name))
	if srv.MaxHeaderBytes == 0 {
		// net/http's default takes 1 MiB of headers per request; no
		// client of a query or remote-write API needs more than a token,
		// a tenant and a few tracing headers.
		srv.MaxHeaderBytes = MaxHeaderBytes
	}
	s := &Server{srv: srv, ln: ln, name: name, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		var err error
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(name+" server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return s
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops accepting requests and waits for those in flight until
// ctx ends, then closes them, and waits for the serving goroutine.
// Idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	if err != nil {
		return fmt.Errorf("%s: shutdown: %w", s.name, err)
	}
	return nil
}
