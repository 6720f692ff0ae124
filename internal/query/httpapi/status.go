package httpapi

import (
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

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
	h.handle("/api/v1/status/runtimeinfo", "status_runtimeinfo", serveRuntimeInfo)
	h.handle("/api/v1/status/flags", "status_flags", func(*http.Request, string) (any, error) { return h.flags(), nil })
	h.handle("/api/v1/status/config", "status_config", func(*http.Request, string) (any, error) { return map[string]string{"yaml": promConfig}, nil })
	h.handle("/api/v1/status/tsdb", "status_tsdb", func(r *http.Request, t string) (any, error) {
		limit, err := statusLimit(r)
		if err != nil {
			return nil, err
		}
		if h.cfg.Stats == nil && h.cfg.StatusFromLake {
			return h.limited(func(r *http.Request, t string) (any, error) { return h.lakeTSDB(r, t, limit) })(r, t)
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

// processStart is when the process started, as near as a package
// variable knows it: runtimeinfo's startTime.
var processStart = time.Now()

// runtimeInfo is Prometheus's /api/v1/status/runtimeinfo answer, its
// fields in Prometheus's order. sluice loads its configuration once at
// start, so the last (and only) load is the start and succeeded; it keeps
// no TSDB, so nothing is ever corrupt; retention is per table in the
// lake (upkeep.retention), not one setting, so storageRetention is empty.
type runtimeInfo struct {
	StartTime           time.Time `json:"startTime"`
	CWD                 string    `json:"CWD"`
	Hostname            string    `json:"hostname"`
	ServerTime          time.Time `json:"serverTime"`
	ReloadConfigSuccess bool      `json:"reloadConfigSuccess"`
	LastConfigTime      time.Time `json:"lastConfigTime"`
	CorruptionCount     int64     `json:"corruptionCount"`
	GoroutineCount      int       `json:"goroutineCount"`
	GOMAXPROCS          int       `json:"GOMAXPROCS"`
	GOMEMLIMIT          int64     `json:"GOMEMLIMIT"`
	GOGC                string    `json:"GOGC"`
	GODEBUG             string    `json:"GODEBUG"`
	StorageRetention    string    `json:"storageRetention"`
}

// serveRuntimeInfo answers /api/v1/status/runtimeinfo as Prometheus does
// (its status page and clients that probe a server read it).
func serveRuntimeInfo(*http.Request, string) (any, error) {
	cwd, err := os.Getwd()
	if err != nil {
		cwd = err.Error() // as Prometheus reports it
	}
	host, _ := os.Hostname()
	return runtimeInfo{StartTime: processStart, CWD: cwd, Hostname: host, ServerTime: time.Now().UTC(),
		ReloadConfigSuccess: true, LastConfigTime: processStart, GoroutineCount: runtime.NumGoroutine(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), GOMEMLIMIT: debug.SetMemoryLimit(-1),
		GOGC: os.Getenv("GOGC"), GODEBUG: os.Getenv("GODEBUG")}, nil
}

// promConfig answers /api/v1/status/config: the Prometheus configuration
// that stands for sluice's, as Prometheus prints a file with an empty
// global section (so a client that parses it as a Prometheus config
// can). sluice scrapes nothing and evaluates no rules: scrape_interval
// and scrape_timeout are Prometheus's defaults; evaluation_interval is the
// step of a subquery that names none, the one place it applies here. The
// query settings are under Prometheus's names in /api/v1/status/flags.
var promConfig = "global:\n  scrape_interval: 1m\n  scrape_timeout: 10s\n  evaluation_interval: " +
	model.Duration(DefaultSubqueryStep).String() + "\n"

// flags answers /api/v1/status/flags: Prometheus's command-line flags
// that sluice's query settings stand for, under Prometheus's names and
// with its spelling of values, so that a client reading the engine's
// settings there (the lookback, the sample limit) reads sluice's.
func (h *Handler) flags() map[string]string {
	return map[string]string{
		"query.lookback-delta":             model.Duration(h.cfg.LookbackDelta).String(),
		"query.max-concurrency":            strconv.Itoa(h.cfg.MaxConcurrency),
		"query.max-samples":                strconv.Itoa(h.engineSamples),
		"query.timeout":                    model.Duration(h.cfg.Timeout).String(),
		"web.enable-remote-write-receiver": strconv.FormatBool(h.cfg.RemoteWrite != nil),
	}
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

// lakeTSDB counts the tenant's series with a point in the last
// StatusWindow, read from the lake like /api/v1/series (in a query slot,
// each series charged to the query's memory budget).
func (h *Handler) lakeTSDB(r *http.Request, t string, limit int) (any, error) {
	ctx, cancel, err := h.queryContext(r)
	if err != nil {
		return nil, err
	}
	defer cancel()
	maxt := time.Now().UnixMilli()
	mint := maxt - h.cfg.StatusWindow.Milliseconds()
	q, err := h.queryable(ctx, t).Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	var tally stats.Tally
	seen := map[uint64][]labels.Labels{}
	ss := q.Select(ctx, true, &storage.SelectHints{Start: mint, End: maxt, Func: "series"},
		labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	for ss.Next() {
		l := ss.At().Labels()
		k := l.Hash()
		if slices.ContainsFunc(seen[k], func(o labels.Labels) bool { return labels.Equal(o, l) }) {
			continue
		}
		seen[k] = append(seen[k], l)
		if b := budgetOf(ctx); b != nil {
			if err := b.charge(3 * int64(l.ByteSize()+64)); err != nil {
				return nil, err
			}
		}
		tally.Add(l)
	}
	if err := ss.Err(); err != nil {
		return nil, err
	}
	return tally.Status(limit, mint, maxt), nil
}
