package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

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
	want := map[string]bool{}
	for name := range cfg.Exporters {
		want[cursorName(name)] = true
	}
	for _, c := range q.CursorNames() {
		if !want[c] {
			log.Warn("removing the queue cursor of an exporter no longer configured", "cursor", c)
			if err := q.RemoveCursor(c); err != nil {
				return nil, err
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	sigs := cfg.ExporterSignals()
	for _, name := range slices.Sorted(maps.Keys(cfg.Exporters)) {
		ec := cfg.Exporters[name].Resolved(name, cfg.Queue.MaxBytes)
		r, err := e.build(name, ec, sigs[name], q, log)
		if err != nil {
			e.stop(context.Background())
			return nil, err
		}
		e.wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				log.Error("exporter stopped", "exporter", name, "err", err)
			}
		})
	}
	return e, nil
}

func (e *exporters) build(name string, ec config.Exporter, sigs []string, q *queue.Queue, log *slog.Logger) (*exporter.Runner, error) {
	policy := sending.Policy{
		InitialBackoff:  ec.RetryInitial.D(),
		MaxBackoff:      ec.RetryMax.D(),
		Concurrency:     ec.Concurrency,
		BreakerFailures: ec.BreakerFailures,
		BreakerCooldown: ec.BreakerCooldown.D(),
		Logger:          log.With("component", "exporter", "exporter", name),
	}
	tc, err := ec.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("exporter %s: tls: %w", name, err)
	}
	var sender exporter.Sender
	takesPRW := false // the sender reads remote-write bodies itself
	fam := prw.NewFamilyTable(0)
	fam.OnRefused = e.metaRefused.WithLabelValues(name).Inc
	switch config.ExporterType(name) {
	case config.ExporterOTLP:
		x, err := otlpexporter.New(otlpexporter.Config{
			Endpoints: ec.Endpoints, Protocol: ec.Protocol, Compression: ec.Compression,
			TenantHeader: ec.TenantHeader, Headers: ec.Headers, Timeout: ec.Timeout.D(), Policy: policy, TLS: tc, CAFile: ec.TLS.CAFile,
		})
		if err != nil {
			return nil, fmt.Errorf("exporter %s: %w", name, err)
		}
		e.closers = append(e.closers, x.Close)
		sender = x
	case config.ExporterPRW:
		x, err := prwexporter.New(prwexporter.Config{
			Endpoints: ec.Endpoints, Protocol: ec.Protocol, Shard: ec.Mode == "shard",
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
	cur, err := q.OpenCursor(cursorName(name), queue.CursorOptions{MaxBytes: int64(ec.MaxBacklogBytes), MaxAge: ec.MaxBacklogAge.D()})
	if err != nil {
		return nil, fmt.Errorf("exporter %s: %w", name, err)
	}
	e.cursors = append(e.cursors, cur)
	var kinds []signal.Kind
	for _, s := range sigs {
		kinds = append(kinds, signalKinds[s])
	}
	if len(kinds) == 0 {
		// Never "everything": the queue also holds io_events, which no
		// exporter speaks.
		kinds = []signal.Kind{signal.KindLogs, signal.KindMetrics, signal.KindTraces}
	}
	r, err := exporter.New(exporter.Options{
		Name: name, Cursor: cur, Sender: sender, Signals: kinds,
		BatchBytes: int(ec.BatchBytes), BatchDelay: ec.BatchDelay.D(),
		Logger: log.With("component", "exporter"),
		Parse:  prwParser(name, takesPRW, e.fractional.WithLabelValues(name), fam),
	})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.runners = append(e.runners, r)
	e.mu.Unlock()
	return r, nil
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
