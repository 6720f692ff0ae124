package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/httpserve"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/query/prom"
	"github.com/sluice-dev/sluice/internal/query/search"
)

// FromConfig returns the handler settings of a sluice config (the query
// section and the ingestion tenant settings); Adapter, Search, Logger and
// Registerer are left to the caller.
func FromConfig(c config.Config) Config {
	hc := Config{
		TenantHeader:  c.Receivers.OTLP.TenantHeader,
		DefaultTenant: c.Receivers.OTLP.DefaultTenant,
		Limits: prom.Limits{
			MaxSeries:  c.Query.MaxSeries,
			MaxSamples: int64(c.Query.MaxSamples),
			MaxBytes:   int64(c.Query.MaxBytes),
		},
		MaxSamples:     c.Query.MaxSamples,
		Timeout:        c.Query.Timeout.D(),
		MaxPoints:      c.Query.MaxPoints,
		LookbackDelta:  c.Query.LookbackDelta.D(),
		Rollups:        c.Query.Rollups,
		SearchOptions:  search.FromConfig(c, nil, nil),
		MaxConcurrency: c.Query.MaxConcurrency,
		MaxQueued:      c.Query.MaxQueued,
		MaxConnections: c.Query.MaxConnections,
		MaxQueryBytes:  int64(c.Query.MaxQueryBytes),
		MaxTotalBytes:  int64(c.Query.MaxTotalBytes),
		MaxQueryLength: int(c.Query.MaxQueryLength),
		MaxQueryDepth:  c.Query.MaxQueryDepth,
		StatusWindow:   2 * c.Stats.Window.D(),
		TLS:            authn.TLSFiles{CertFile: c.Query.TLS.CertFile, KeyFile: c.Query.TLS.KeyFile, ClientCAFile: c.Query.TLS.ClientCAFile},
	}
	if hc.MaxQueued == 0 {
		hc.MaxQueued = -1 // none wait
	}
	for _, t := range c.Query.Auth.Tokens {
		scope := authn.Read
		if t.Scope != "" {
			// Validate checked the name; New reports a zero scope.
			scope, _ = authn.ParseScope(t.Scope)
		}
		hc.Tokens = append(hc.Tokens, authn.Token{Secret: t.Token, Scope: scope, Tenant: t.Tenant})
	}
	return hc
}

// Server is the query API listening on an address.
type Server struct {
	*httpserve.Server
	search http.Handler // closed at Shutdown when it is an io.Closer (its file cache)
}

func closeSearch(h http.Handler) {
	if c, ok := h.(io.Closer); ok {
		_ = c.Close()
	}
}

// Start builds the adapter and handler over cat and store and serves them
// on addr. The catalog and store stay the caller's.
func Start(ctx context.Context, addr string, cfg Config, cat *catalog.Catalog, store lake.Store, log *slog.Logger, reg prometheus.Registerer) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	a, err := prom.NewAdapter(prom.Options{Catalog: cat, Store: store, Logger: log, Registerer: reg, Rollups: cfg.Rollups, Tail: cfg.Tail})
	if err != nil {
		return nil, err
	}
	cfg.Adapter, cfg.Logger, cfg.Registerer = a, log, reg
	if cfg.Search == nil {
		// The logs and traces search API (package search) on the same port.
		so := cfg.SearchOptions
		so.TenantHeader, so.DefaultTenant, so.Logger, so.Registerer = cfg.TenantHeader, cfg.DefaultTenant, log, reg
		so.Tail = cfg.Tail
		cfg.Search = search.NewHandler(cat, store, so)
	}
	h, err := New(cfg)
	if err != nil {
		closeSearch(cfg.Search)
		return nil, err
	}
	authn.RegisterTLSMetrics(reg)
	if err := httpserve.RegisterMetrics(reg); err != nil {
		closeSearch(cfg.Search)
		return nil, fmt.Errorf("query API: register metrics: %w", err)
	}
	tlsConf, err := authn.ServerTLS(cfg.TLS)
	if err != nil {
		closeSearch(cfg.Search)
		return nil, fmt.Errorf("query API: query.tls: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		closeSearch(cfg.Search)
		return nil, fmt.Errorf("query API: listen on %s (query.addr; empty turns it off in sluice run): %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		// Writing may wait for the whole query.
		WriteTimeout: cfg.Timeout + time.Minute, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn), TLSConfig: tlsConf}
	if srv.WriteTimeout <= time.Minute {
		srv.WriteTimeout = DefaultTimeout + time.Minute
	}
	log.Info("query API listening", "addr", ln.Addr().String(), "tls", tlsConf != nil,
		"mtls", tlsConf != nil && tlsConf.ClientCAs != nil, "tokens", len(cfg.Tokens),
		"max_concurrency", h.cfg.MaxConcurrency, "max_queued", h.cfg.MaxQueued,
		"max_query_bytes", h.cfg.MaxQueryBytes, "max_total_bytes", h.cfg.MaxTotalBytes)
	return &Server{Server: httpserve.Serve(srv, ln, "query API", h.cfg.MaxConnections, log), search: cfg.Search}, nil
}

// Shutdown stops accepting requests and waits for those in flight until
// ctx ends, then closes them and the search file cache. It is idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.Server.Shutdown(ctx)
	closeSearch(s.search)
	return err
}
