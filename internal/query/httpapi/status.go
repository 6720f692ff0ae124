package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/stats"
)

// Bounds of the limit parameter of the status endpoints.
const (
	defaultStatusLimit = 10
	maxStatusLimit     = 10_000
)

// statusRoutes serves the live statistics (package stats, docs/stats.md):
// /api/v1/status/tsdb in Prometheus's format, for the request's tenant,
// and /api/v1/status/sluice, the document `sluice top` reads. Neither
// touches the lake, so neither takes a query slot.
func (h *Handler) statusRoutes() {
	h.handle("/api/v1/status/tsdb", "status_tsdb", func(r *http.Request, t string) (any, error) {
		limit, err := statusLimit(r)
		if err != nil {
			return nil, err
		}
		if h.cfg.Stats == nil {
			return stats.TSDBStatus{SeriesCountByMetricName: []stats.Stat{}, LabelValueCountByLabelName: []stats.Stat{},
				MemoryInBytesByLabelName: []stats.Stat{}, SeriesCountByLabelValuePair: []stats.Stat{}}, nil
		}
		return h.cfg.Stats.TSDB(t, limit), nil
	})
	h.handle("/api/v1/status/sluice", "status_sluice", func(r *http.Request, t string) (any, error) {
		limit, err := statusLimit(r)
		if err != nil {
			return nil, err
		}
		// A token bound to a tenant sees that tenant's rows; any other
		// request sees every tenant (the process-wide rows either way).
		if !authn.Bound(r.Context()) {
			t = ""
		}
		g := h.cfg.Gatherer
		if g == nil {
			g = prometheus.NewRegistry()
		}
		return stats.CollectStatus(g, h.cfg.Stats, h.cfg.RuleEffects, t, limit, time.Now())
	})
}

func statusLimit(r *http.Request) (int, error) {
	s := r.Form.Get("limit")
	if s == "" {
		return defaultStatusLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > maxStatusLimit {
		return 0, badData("limit must be a number in 1..%d, got %q", maxStatusLimit, s)
	}
	return n, nil
}
