package prwreceiver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/httpserve"
)

// ListenConfig is a listener of remote write's own
// (receivers.prometheus_remote_write.listen), or the query address of a
// forward-only `sluice run`, which has no query API to mount the handler.
type ListenConfig struct {
	Addr string
	// Tokens, TLS and the tenant settings are the query address's
	// (query.auth, query.tls), so a sender uses the same credentials on
	// either address; a token needs the write scope.
	Tokens        []authn.Token
	TLS           authn.TLSFiles
	TenantHeader  string
	DefaultTenant string
	// Area names the auth failures counter, sluice_<area>_auth_failures_total.
	Area string
	// MaxConnections bounds the connections open at once on Addr
	// (receivers.prometheus_remote_write.max_connections); 0:
	// httpserve's default.
	MaxConnections int
	Logger         *slog.Logger
	Registerer     prometheus.Registerer
}

// Server serves only POST /api/v1/write (Path) behind an authn guard.
type Server struct {
	*httpserve.Server
}

// Listen serves h on cfg.Addr. Every path passes the guard with the write
// scope first; paths other than Path then get 404.
func Listen(ctx context.Context, cfg ListenConfig, h *Handler) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	failures := authn.NewFailureCounter(cfg.Area)
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(failures); err != nil {
			return nil, fmt.Errorf("prwreceiver: register metrics: %w", err)
		}
		if err := httpserve.RegisterMetrics(cfg.Registerer); err != nil {
			return nil, fmt.Errorf("prwreceiver: register metrics: %w", err)
		}
	}
	guard, err := authn.New(authn.Config{Tokens: cfg.Tokens, TenantHeader: cfg.TenantHeader,
		DefaultTenant: cfg.DefaultTenant, Realm: "sluice remote write"}, failures)
	if err != nil {
		return nil, fmt.Errorf("prwreceiver: %w", err)
	}
	tlsConf, err := authn.ServerTLS(cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("prwreceiver: query.tls: %w", err)
	}
	// The guard's tenant goes to the handler as an argument, not in a
	// copy of the request with a new context (authn.Guard.Wrap): two
	// allocations and a request copy less per request.
	serve := func(w http.ResponseWriter, r *http.Request) {
		tenant, err := guard.Authorize(r, authn.Write)
		if err != nil {
			authn.WriteError(w, err)
			return
		}
		if r.URL.Path != Path {
			http.NotFound(w, r)
			return
		}
		h.serveTenant(w, r, tenant)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("remote write: listen on %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(serve),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute,
		IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		TLSConfig: tlsConf,
	}
	cfg.Logger.Info("remote write listening", "addr", ln.Addr().String(), "tls", tlsConf != nil, "tokens", len(cfg.Tokens))
	return &Server{httpserve.Serve(srv, ln, "remote write", cfg.MaxConnections, cfg.Logger)}, nil
}
