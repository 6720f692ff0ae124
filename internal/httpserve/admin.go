package httpserve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Admin configures the admin server of a sluice process (`sluice run`'s
// admin.addr, `sluice query-server --admin-addr`): /metrics, /healthz,
// /readyz and, when asked, Go's profiles.
type Admin struct {
	// Registry is served on /metrics in the Prometheus text format (and
	// gets promhttp's own error counter).
	Registry *prometheus.Registry
	// Unready says why /readyz answers 503, "" when ready; nil: always
	// ready once serving.
	Unready func() string
	// Pprof also serves /debug/pprof/ (admin.pprof).
	Pprof bool
	// IdleTimeout closes idle keep-alive connections (default 2m);
	// WriteTimeout bounds an answer, a CPU profile included (default 5m).
	IdleTimeout, WriteTimeout time.Duration
}

// Handler returns the admin endpoints.
func (a Admin) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", MetricsHandler(a.Registry))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if a.Unready != nil {
			if msg := a.Unready(); msg != "" {
				http.Error(w, msg, http.StatusServiceUnavailable)
				return
			}
		}
		io.WriteString(w, "ready\n")
	})
	if a.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// MetricsHandler serves reg in the Prometheus text format (or what the
// scraper negotiates), as /metrics of the admin server does.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// StartAdmin listens on addr (the error names it as setting, e.g.
// "admin.addr") and serves the admin endpoints until Shutdown.
func StartAdmin(ctx context.Context, setting, addr string, a Admin, log *slog.Logger) (*Server, error) {
	if err := RegisterMetrics(a.Registry); err != nil {
		return nil, fmt.Errorf("%s: register metrics: %w", setting, err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %q: %w", setting, addr, err)
	}
	if a.IdleTimeout <= 0 {
		a.IdleTimeout = 2 * time.Minute
	}
	if a.WriteTimeout <= 0 {
		a.WriteTimeout = 5 * time.Minute
	}
	// Its requests have no bodies and its answers are small, except
	// profiles (up to WriteTimeout - 10s of CPU profile can be taken). An
	// idle keep-alive connection is closed: it once stayed open for ever.
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		WriteTimeout: a.WriteTimeout, IdleTimeout: a.IdleTimeout, MaxHeaderBytes: MaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	return Serve(srv, ln, "admin", 0, log), nil
}
