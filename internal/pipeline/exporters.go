package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/otlpexporter"
	"github.com/sluice-dev/sluice/internal/exporter/prwexporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
)

// exporters runs the forwarding exporters of the config, each on a queue
// cursor of its own (docs/design/exporters.md). The lake loop is not one of
// them: it keeps its exactly-once commit through the catalog.
type exporters struct {
	// fractional counts, per exporter, the float histograms with
	// fractional counts an OTLP exporter dropped (prwParser).
	fractional *prometheus.CounterVec
	// metaRefused counts, per exporter, metric families whose metadata
	// did not fit its table (prw.FamilyTable).
	metaRefused *prometheus.CounterVec
	mu          sync.Mutex
	runners     []*exporter.Runner
	cursors     []*queue.Cursor
	closers     []func() error
	cancel      context.CancelFunc
	wg          sync.WaitGroup
}

// cursorName maps an exporter name (type[/name]) to a queue cursor name.
func cursorName(exporter string) string { return strings.ReplaceAll(exporter, "/", ".") }

// endpointCursors are the queue cursors of an exporter: one, named after
// it, for one endpoint; else one per endpoint, named after the exporter
// and a hash of the endpoint, so that an endpoint that is down holds back
// none of the others (each has its own runner and backlog bound), and
// reordering the endpoints in the config moves no cursor.
func endpointCursors(exporter string, endpoints []string) []string {
	if len(endpoints) <= 1 {
		return []string{cursorName(exporter)}
	}
	out := make([]string, len(endpoints))
	for i, ep := range endpoints {
		out[i] = fmt.Sprintf("%s.%016x", cursorName(exporter), xxhash.Sum64String(ep))
	}
	return out
}

var signalKinds = map[string]signal.Kind{"logs": signal.KindLogs, "metrics": signal.KindMetrics, "traces": signal.KindTraces}

// startExporters opens a cursor per configured exporter, removes cursors
// of exporters no longer configured (so they stop holding segments), and
// starts one goroutine per exporter.
func startExporters(cfg config.Config, q *queue.Queue, reg prometheus.Registerer, log *slog.Logger) (*exporters, error) {
	e := &exporters{fractional: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_exporter_fractional_histograms_dropped_total",
		Help: "Remote-write float native histograms with fractional counts an OTLP exporter dropped: OTLP counts are integers."}, []string{"exporter"}),
		metaRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_exporter_metadata_families_refused_total",
			Help: "Metric families whose remote-write metadata (sent without series) an exporter could not remember for later series: its table of 16 MiB was full."}, []string{"exporter"})}
	if err := reg.Register(exporter.NewCollector(e.list)); err != nil {
		return nil, fmt.Errorf("register exporter metrics: %w", err)
	}
	for _, c := range []prometheus.Collector{e.fractional, e.metaRefused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register exporter metrics: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	sigs := cfg.ExporterSignals()
	want := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Exporters)) {
		ec := cfg.Exporters[name].Resolved(name, cfg.Queue.MaxBytes)
		runners, err := e.build(name, ec, sigs[name], q, log)
		if err != nil {
			e.stop(context.Background())
			return nil, err
		}
		for _, c := range endpointCursors(name, ec.Endpoints) {
			want[c] = true
		}
		for _, r := range runners {
			e.wg.Go(func() {
				if err := r.Run(ctx); err != nil {
					log.Error("exporter stopped", "exporter", name, "err", err)
				}
			})
		}
	}
	// After the cursors are open: a new one took over the backlog of the
	// one it replaces (queue.CursorOptions.From).
	for _, c := range q.CursorNames() {
		if !want[c] {
			log.Warn("removing the queue cursor of an exporter (or endpoint) no longer configured", "cursor", c)
			if err := q.RemoveCursor(c); err != nil {
				e.stop(context.Background())
				return nil, err
			}
		}
	}
	return e, nil
}

// build starts the runners of exporter name: one, or one per endpoint
// when it has several (endpointCursors), each with a sender of that
// endpoint only (remote write under mode: shard: its share of the series,
// the ring still over every endpoint).
func (e *exporters) build(name string, ec config.Exporter, sigs []string, q *queue.Queue, log *slog.Logger) ([]*exporter.Runner, error) {
	tc, err := ec.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("exporter %s: tls: %w", name, err)
	}
	var kinds []signal.Kind
	for _, s := range sigs {
		kinds = append(kinds, signalKinds[s])
	}
	if len(kinds) == 0 {
		// Never "everything": the queue also holds io_events, which no
		// exporter speaks.
		kinds = []signal.Kind{signal.KindLogs, signal.KindMetrics, signal.KindTraces}
	}
	fam := prw.NewFamilyTable(0)
	fam.OnRefused = e.metaRefused.WithLabelValues(name).Inc
	cursors := endpointCursors(name, ec.Endpoints)
	// A cursor new to the queue starts where the exporter's others are
	// (the one it had before, or its other endpoints'): a change of
	// endpoints skips nothing acknowledged.
	from := append([]string{cursorName(name)}, cursors...)
	var runners []*exporter.Runner
	for i, cn := range cursors {
		logger := log.With("component", "exporter", "exporter", name)
		endpoints, only := ec.Endpoints, ""
		if len(cursors) > 1 {
			logger = logger.With("endpoint", ec.Endpoints[i])
			endpoints = ec.Endpoints[i : i+1]
			if ec.Mode == "shard" {
				endpoints, only = ec.Endpoints, ec.Endpoints[i]
			}
		}
		policy := sending.Policy{
			InitialBackoff:  ec.RetryInitial.D(),
			MaxBackoff:      ec.RetryMax.D(),
			Concurrency:     ec.Concurrency,
			BreakerFailures: ec.BreakerFailures,
			BreakerCooldown: ec.BreakerCooldown.D(),
			Logger:          logger,
		}
		var sender exporter.Sender
		takesPRW := false // the sender reads remote-write bodies itself
		switch config.ExporterType(name) {
		case config.ExporterOTLP:
			x, err := otlpexporter.New(otlpexporter.Config{
				Endpoints: endpoints, Protocol: ec.Protocol, Compression: ec.Compression,
				TenantHeader: ec.TenantHeader, Headers: ec.Headers, Timeout: ec.Timeout.D(), Policy: policy, TLS: tc, CAFile: ec.TLS.CAFile,
			})
			if err != nil {
				return nil, fmt.Errorf("exporter %s: %w", name, err)
			}
			e.closers = append(e.closers, x.Close)
			sender = x
		case config.ExporterPRW:
			x, err := prwexporter.New(prwexporter.Config{
				Endpoints: endpoints, Only: only, Protocol: ec.Protocol, Shard: ec.Mode == "shard",
				TenantHeader: ec.TenantHeader, Headers: ec.Headers, Timeout: ec.Timeout.D(), Policy: policy,
				SendNativeHistograms: ec.SendNativeHistograms, NoMetadata: ec.SendMetadata != nil && !*ec.SendMetadata,
				Families: fam, TLS: tc, CAFile: ec.TLS.CAFile, Concurrency: ec.Concurrency,
			})
			if err != nil {
				return nil, fmt.Errorf("exporter %s: %w", name, err)
			}
			sender = x
			takesPRW = true
		default:
			return nil, fmt.Errorf("exporter %s: unknown type", name)
		}
		cur, err := q.OpenCursor(cn, queue.CursorOptions{MaxBytes: int64(ec.MaxBacklogBytes), MaxAge: ec.MaxBacklogAge.D(), From: from})
		if err != nil {
			return nil, fmt.Errorf("exporter %s: %w", name, err)
		}
		e.cursors = append(e.cursors, cur)
		// Every runner reads the same records: the first one counts what
		// they all drop.
		var fractional prometheus.Counter
		if i == 0 {
			fractional = e.fractional.WithLabelValues(name)
		}
		r, err := exporter.New(exporter.Options{
			Name: name, Cursor: cur, Sender: sender, Signals: kinds,
			BatchBytes: int(ec.BatchBytes), BatchDelay: ec.BatchDelay.D(),
			Logger: log.With("component", "exporter"),
			Parse:  prwParser(name, takesPRW, fractional, fam),
		})
		if err != nil {
			return nil, err
		}
		runners = append(runners, r)
	}
	e.mu.Lock()
	e.runners = append(e.runners, runners...)
	e.mu.Unlock()
	return runners, nil
}

func (e *exporters) list() []*exporter.Runner {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.runners)
}

// stop ends the exporters: a batch in flight is abandoned uncommitted (sent
// again at the next start: at least once). It waits until ctx ends.
func (e *exporters) stop(ctx context.Context) error {
	e.cancel()
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("exporters did not stop in time: %w", ctx.Err())
	}
	for _, c := range e.cursors {
		c.Close()
	}
	for _, c := range e.closers {
		c()
	}
	return nil
}
