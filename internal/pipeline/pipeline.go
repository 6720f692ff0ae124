package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	ossignal "os/signal"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/httpserve"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/s3store"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/processor"
	"github.com/sluice-dev/sluice/internal/query/httpapi"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/receiver/prwreceiver"
	"github.com/sluice-dev/sluice/internal/stats"
	"github.com/sluice-dev/sluice/internal/upkeep"
)

// Settings are supplied by code, not by the user's config.
type Settings struct {
	Logger *slog.Logger // nil: slog.Default()
	// Registry receives every metric; nil creates one with the Go and
	// process collectors.
	Registry *prometheus.Registry
}

// Addrs are the bound listener addresses; nil when disabled.
type Addrs struct {
	GRPC, HTTP, Admin net.Addr
	Query             net.Addr // the query API (query.addr); remote write only when the lake is off
	RemoteWrite       net.Addr // remote write's own listener (receivers.prometheus_remote_write.listen)
}

// Pipeline is a running `sluice run`. Create it with New, then Start and,
// later, Shutdown.
type Pipeline struct {
	cfg config.Config
	log *slog.Logger
	reg *prometheus.Registry
	m   *metrics

	ready atomic.Bool
	// stopping is set when Shutdown begins, so that /readyz says why.
	stopping atomic.Bool
	// lakeStatus is the lake loop for /readyz, which starts before it.
	lakeStatus atomic.Pointer[lakeLoop]
	fatal      chan error // the lake loop ended on its own

	lock  *os.File
	cat   *catalog.Catalog
	q     atomic.Pointer[queue.Queue]
	loop  *lakeLoop
	exps  *exporters // forwarding exporters (exporters.go); nil when none
	tail  *tail      // the unflushed tail served to the query API
	cons  *consumer
	recv  *otlpreceiver.Receiver
	rw    *prwreceiver.Handler  // remote write; nil when disabled
	rwSrv []*prwreceiver.Server // remote write's own listener, and query.addr when the lake is off
	admin *httpserve.Server
	addrs Addrs
	io    *ioSource  // the I/O tracer source (receivers.iotrace); nil when off
	iom   *ioMetrics // its counters, registered whether or not it runs

	upkeep *upkeep.Scheduler // background compaction, rollups, retention, sweep; nil when disabled
	query  *httpapi.Server   // the query API; nil when query.addr is empty
	stats  *stats.Stats      // live series statistics (docs/stats.md); nil when stats.enabled is false

	rulesStop    context.CancelFunc // stops the rules reloader; nil when none
	rulesMetrics *processor.Metrics // the rules' counters and effects; nil without rules
	shutdownOnce sync.Once
	shutdownErr  error
}

// New validates cfg and prepares a pipeline; nothing is opened or bound
// until Start.
func New(cfg config.Config, set Settings) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config:\n%w", err)
	}
	log := set.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := set.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	authn.RegisterTLSMetrics(reg)
	p := &Pipeline{cfg: cfg, log: log, reg: reg, m: newMetrics(), iom: newIOMetrics(), fatal: make(chan error, 1)}
	if cfg.Receivers.IOTrace.Enabled {
		// Names the key now rather than at Start.
		if _, err := ioOptions(cfg.Receivers.IOTrace); err != nil {
			return nil, fmt.Errorf("invalid config:\n%w", err)
		}
		if err := p.iom.register(reg); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	if err := p.m.register(reg); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	if err := reg.Register(newQueueCollector(p.q.Load)); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	if sc := cfg.Stats; sc.Enabled {
		st, err := stats.New(stats.Config{Window: sc.Window.D(), MaxSeries: sc.MaxSeries, MaxMetrics: sc.MaxMetrics, MaxLabelPairs: sc.MaxLabelPairs})
		if err != nil {
			return nil, err
		}
		if err := reg.Register(st.Collector()); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
		p.stats = st
	}
	return p, nil
}

// Start opens everything downstream first: admin server, lake lock,
// catalog, orphan sweep, queue, lake loop, and the receivers last. On
// failure what was started is stopped again.
func (p *Pipeline) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownTimeout.D())
			defer cancel()
			_ = p.Shutdown(sctx)
		}
	}()
	if err := p.startAdmin(ctx); err != nil {
		return err
	}
	lakeOn := p.cfg.LakeEnabled()
	var (
		committed int64
		store     lake.Store
		where     = "off (forward only)"
		swept     sweepResult
	)
	if lakeOn {
		root := p.cfg.Lake.Root
		if err := os.MkdirAll(root, 0o755); err != nil {
			return fmt.Errorf("create lake root: %w", err)
		}
		if p.lock, err = LockLake(root); err != nil {
			return err
		}
		if p.cat, err = catalog.Open(ctx, p.cfg.CatalogDSN()); err != nil {
			return fmt.Errorf("open catalog: %w", err)
		}
		if committed, err = p.cat.QueuePosition(ctx, QueueName); err != nil {
			return err
		}
		if store, where, err = p.lakeStore(ctx); err != nil {
			return err
		}
		if swept, err = sweepOrphans(ctx, p.cat, store, committed, p.log); err != nil {
			return fmt.Errorf("sweep uncommitted lake files: %w", err)
		}
		p.m.orphans.Add(float64(swept.Removed + swept.Quarantined))
	} else {
		// Forward only: no lake root, catalog or lake files; the queue
		// directory is locked instead, for the same one-process rule.
		if err := os.MkdirAll(p.cfg.QueueDir(), 0o755); err != nil {
			return fmt.Errorf("create queue dir: %w", err)
		}
		if p.lock, err = lockFile(filepath.Join(p.cfg.QueueDir(), "_run.lock")); err != nil {
			return err
		}
	}

	full := queue.Backpressure
	if p.cfg.Queue.FullPolicy == "drop_oldest" {
		full = queue.DropOldest
	}
	q, err := queue.Open(queue.Options{
		Dir:              p.cfg.QueueDir(),
		MaxBytes:         int64(p.cfg.Queue.MaxBytes),
		SegmentBytes:     int64(p.cfg.Queue.SegmentBytes),
		Full:             full,
		GroupCommitDelay: p.cfg.Queue.GroupCommitDelay.D(),
		MinFreeBytes:     int64(p.cfg.Queue.MinFreeBytes),
		// Positions never restart below what the catalog counts as
		// delivered, even if the queue directory was lost.
		Start:  queue.Position(committed),
		Logger: p.log.With("component", "queue"),
	})
	if err != nil {
		return fmt.Errorf("open queue: %w", err)
	}
	p.q.Store(q)
	if lakeOn {
		if err := p.startLake(q, store, committed); err != nil {
			return err
		}
	} else {
		// No lake consumer: only the exporters' cursors hold segments
		// (queue invariant 10).
		if err := q.Release(queue.MaxPosition); err != nil {
			return fmt.Errorf("release queue: %w", err)
		}
		st := q.Stats()
		p.log.Info("queue open (forward only: no pipeline lists lake)", "dir", p.cfg.QueueDir(), "bytes", st.Bytes, "records", st.Records)
	}

	// Always: with no exporters left, it still deletes the cursors of
	// removed ones, which would otherwise hold queue segments for good.
	if p.exps, err = startExporters(p.cfg, q, p.reg, p.log); err != nil {
		return err
	}

	p.cons = newConsumer(q, p.cfg.Queue.RetryAfter.D(), p.m)
	p.cons.tenants.Max = p.cfg.Receivers.OTLP.MaxTenants
	p.cons.limits = otlp.Limits{
		MaxAttrsPerRecord:  p.cfg.Receivers.OTLP.MaxAttrsPerRecord,
		MaxAttrsPerRequest: p.cfg.Receivers.OTLP.MaxAttrsPerRequest,
	}
	if lakeOn {
		p.cons.limits.MetricsFutureSkew = p.cfg.Lake.MaxFutureSkew.D()
	}
	for sig, kind := range signalKinds {
		p.cons.refuse[kind] = !slices.Contains(p.cfg.PipelineSignals(), sig)
	}
	if p.loop != nil {
		p.cons.lowDisk = p.loop.nudgeLowDisk
		p.cons.handoff = p.loop.hand
	}
	p.cons.stats = p.stats
	if p.cfg.Receivers.PrometheusRemoteWrite.Enabled {
		if p.cat != nil {
			p.cons.meta = newFamilyMeta(p.cat, p.cfg.Receivers.PrometheusRemoteWrite.MaxMetadataFamilies, p.reg)
		}
		for name, sigs := range p.cfg.ExporterSignals() {
			if config.ExporterType(name) == config.ExporterPRW && slices.Contains(sigs, "metrics") {
				p.cons.forwardMeta = true
			}
		}
	}
	if err := p.startRules(); err != nil {
		return fmt.Errorf("processors.rules_file: %w", err)
	}
	if p.cat != nil {
		if err := p.seedTenants(ctx); err != nil {
			return err
		}
	}
	rc := receiverConfig(p.cfg.Receivers.OTLP)
	rc.TenantLabel = p.cons.tenantLabel
	if p.recv, err = otlpreceiver.New(rc, p.cons, p.reg, p.log); err != nil {
		return err
	}
	if err := p.recv.Start(ctx); err != nil {
		return err
	}
	p.addrs.GRPC, p.addrs.HTTP = p.recv.GRPCAddr(), p.recv.HTTPAddr()
	if err := p.startRemoteWrite(ctx, lakeOn); err != nil {
		return err
	}
	if p.cfg.Receivers.IOTrace.Enabled {
		if err := p.startIOTrace(); err != nil {
			return err
		}
	}
	if lakeOn {
		if err := p.startUpkeep(ctx, store); err != nil {
			return err
		}
		if err := p.startQuery(ctx, store); err != nil {
			return err
		}
	}
	p.ready.Store(true)
	catDSN := "off (forward only)"
	if lakeOn {
		catDSN = p.cfg.CatalogDSN()
	}
	p.log.Info("sluice run started", "otlp_grpc", addrString(p.addrs.GRPC), "otlp_http", addrString(p.addrs.HTTP),
		"admin", addrString(p.addrs.Admin), "query", addrString(p.addrs.Query), "remote_write_listen", addrString(p.addrs.RemoteWrite),
		"lake", where, "catalog", catDSN, "orphans_removed", swept.Removed, "orphans_quarantined", swept.Quarantined)
	return nil
}

// startLake starts the tail and the lake loop, reading q from the
// position the catalog committed.
func (p *Pipeline) startLake(q *queue.Queue, store lake.Store, committed int64) error {
	from := queue.Position(committed)
	if committed > 0 {
		// Segments wholly below the committed position are in the lake; a
		// crash between commit and release left them behind.
		if err := q.Release(from); err != nil {
			p.log.Warn("releasing committed queue segments failed", "position", from, "err", err)
		}
	} else {
		from = q.Stats().First
	}
	st := q.Stats()
	p.log.Info("queue open", "dir", p.cfg.QueueDir(), "committed", committed, "replay_bytes", int64(st.Last)-int64(from), "records", st.Records)

	wopts := lake.Options{
		Root:             p.cfg.Lake.Root,
		Store:            store,
		TargetFileBytes:  int64(p.cfg.Lake.TargetFileBytes),
		MaxBufferedBytes: int64(p.cfg.Lake.MaxBufferedBytes),
		RowGroupRows:     p.cfg.Lake.RowGroupRows,
		MaxFutureSkew:    p.cfg.Lake.MaxFutureSkew.D(),

		MaxAttributeColumns: p.cfg.Lake.MaxAttributeColumns,
		// Fault injection for the quarantine's end-to-end test only.
		PoisonKey: os.Getenv("SLUICE_FAULT_POISON_KEY"),
	}
	var err error
	if p.cfg.Query.Addr != "" && p.cfg.Lake.TailMaxBytes > 0 {
		if p.tail, err = newTail(q, p.cat, committed, int64(p.cfg.Lake.TailMaxBytes), wopts, p.m, p.log.With("component", "tail")); err != nil {
			return err
		}
		p.tail.warm()
	}
	var hand *handoff
	if n := int64(p.cfg.Lake.HandoffMaxBytes); n > 0 && p.cfg.Receivers.PrometheusRemoteWrite.Enabled {
		hand = newHandoff(n)
		if err := hand.register(p.reg); err != nil {
			return err
		}
	}
	p.loop, err = newLakeLoop(q, p.cat, wopts, from, &lakeLoop{
		log:      p.log.With("component", "lake"),
		m:        p.m,
		interval: p.cfg.Lake.FlushInterval.D(),
		maxBuf:   int64(p.cfg.Lake.CheckpointBufferedBytes),
		maxQueue: p.cfg.CheckpointQueueBytes(),
		tail:     p.tail,
		hand:     hand,
	})
	if err != nil {
		return err
	}
	p.lakeStatus.Store(p.loop)
	// The reader starts at from, but the committed position is what the
	// catalog holds; they differ only when nothing was ever committed.
	p.loop.committed = queue.Position(committed)
	loop := p.loop
	go loop.run()
	go func() {
		<-loop.done
		if !loop.isStopping() {
			p.ready.Store(false)
			p.fatal <- fmt.Errorf("lake loop stopped: %w", loop.err)
		}
	}()
	return nil
}

// startRemoteWrite builds the remote-write handler (one, whichever address
// serves it) and serves it on its own listener when one is configured,
// and on query.addr when the lake is off (there is no query API then to
// mount it; with the lake on, startQuery mounts it there).
func (p *Pipeline) startRemoteWrite(ctx context.Context, lakeOn bool) error {
	pw := p.cfg.Receivers.PrometheusRemoteWrite
	if !pw.Enabled {
		return nil
	}
	var err error
	rc := prwreceiver.Config{MaxRequestBytes: int64(pw.MaxRequestBytes),
		MaxConcurrentRequests: pw.MaxConcurrentRequests, DefaultTenant: p.cfg.Receivers.OTLP.DefaultTenant,
		Logger: p.log.With("component", "prometheus_remote_write"), Registerer: p.reg}
	if lakeOn {
		rc.LakeFutureSkew = p.cfg.Lake.MaxFutureSkew.D()
	}
	p.rw, err = prwreceiver.New(rc, p.cons)
	if err != nil {
		return err
	}
	hc := httpapi.FromConfig(p.cfg) // the query address's tokens and TLS
	listen := func(addr, area string) (net.Addr, error) {
		srv, err := prwreceiver.Listen(ctx, prwreceiver.ListenConfig{Addr: addr, Tokens: hc.Tokens, TLS: hc.TLS,
			TenantHeader: hc.TenantHeader, DefaultTenant: hc.DefaultTenant, Area: area,
			MaxConnections: p.cfg.Receivers.PrometheusRemoteWrite.MaxConnections,
			Logger:         p.log.With("component", "prometheus_remote_write"), Registerer: p.reg}, p.rw)
		if err != nil {
			return nil, err
		}
		p.rwSrv = append(p.rwSrv, srv)
		return srv.Addr(), nil
	}
	if pw.Listen != "" {
		if p.addrs.RemoteWrite, err = listen(pw.Listen, "prw"); err != nil {
			return fmt.Errorf("receivers.prometheus_remote_write.listen: %w", err)
		}
	}
	if !lakeOn && p.cfg.Query.Addr != "" {
		p.log.Info("no pipeline lists lake: query.addr serves remote write only (no query API without a lake)")
		if p.addrs.Query, err = listen(p.cfg.Query.Addr, "query"); err != nil {
			return fmt.Errorf("query.addr: %w", err)
		}
	}
	return nil
}

// Addrs returns the bound addresses (valid after Start).
func (p *Pipeline) Addrs() Addrs { return p.addrs }

// Fatal delivers an error when the pipeline cannot go on (the lake loop
// ended on its own); the caller should Shutdown.
func (p *Pipeline) Fatal() <-chan error { return p.fatal }

// Checkpoint writes everything acknowledged so far into the lake and
// commits it, and waits for that. Tests and admin tooling use it.
func (p *Pipeline) Checkpoint(ctx context.Context) error {
	if p.q.Load() == nil {
		return errors.New("pipeline: not started")
	}
	if p.loop == nil {
		return nil // forward only: no lake to write
	}
	return p.loop.checkpoint(ctx)
}

// Shutdown stops in the reverse order of Start: receivers (answering
// requests in flight), the lake loop (writing and committing everything
// the queue holds), queue, catalog, lock, admin server. When ctx ends
// first, what is not committed stays in the queue for the next start.
// It is idempotent.
func (p *Pipeline) Shutdown(ctx context.Context) error {
	p.shutdownOnce.Do(func() { p.shutdownErr = p.shutdown(ctx) })
	return p.shutdownErr
}

func (p *Pipeline) shutdown(ctx context.Context) error {
	p.stopping.Store(true)
	p.ready.Store(false)
	if p.rulesStop != nil {
		p.rulesStop()
	}
	start := time.Now()
	var errs []error
	if p.upkeep != nil {
		p.upkeep.Cancel() // at once; waited for below, so it never delays the final checkpoint
	}
	if p.query != nil {
		// Queries read the catalog, closed below; they stop first.
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := p.query.Shutdown(qctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if p.io != nil {
		// A source like the receivers: what it read from the kernel is in
		// the queue before the final checkpoint.
		if err := p.io.stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if p.recv != nil {
		if err := p.recv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, srv := range p.rwSrv {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	var committed queue.Position
	if p.tail != nil {
		p.tail.stop() // its builds read the queue, closed below
	}
	if p.loop != nil {
		p.loop.stop()
		select {
		case <-p.loop.done:
			committed = p.loop.committed
			if p.loop.err != nil {
				errs = append(errs, fmt.Errorf("final lake checkpoint: %w", p.loop.err))
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("final lake checkpoint did not finish in time (%w); the queue keeps the data for the next start", ctx.Err()))
		}
	}
	if p.exps != nil {
		if err := p.exps.stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if q := p.q.Load(); q != nil {
		if err := q.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close queue: %w", err))
		}
	}
	if p.upkeep != nil {
		if err := p.upkeep.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if p.cat != nil {
		if err := p.cat.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if p.lock != nil {
		p.lock.Close() // releases the flock
	}
	if p.admin != nil {
		actx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = p.admin.Shutdown(actx)
		cancel()
	}
	err := errors.Join(errs...)
	if p.q.Load() != nil {
		p.log.Info("sluice run stopped", "took", time.Since(start).Round(time.Millisecond), "committed_position", committed, "err", err)
	}
	return err
}

func (p *Pipeline) startAdmin(ctx context.Context) error {
	if p.cfg.Admin.Addr == "" {
		return nil
	}
	srv, err := httpserve.StartAdmin(ctx, "admin.addr", p.cfg.Admin.Addr, httpserve.Admin{Registry: p.reg, Unready: p.unready,
		Pprof: p.cfg.Admin.Pprof, IdleTimeout: adminIdleTimeout, WriteTimeout: adminWriteTimeout}, p.log)
	if err != nil {
		return err
	}
	p.admin = srv
	p.addrs.Admin = srv.Addr()
	return nil
}

// Admin server bounds (variables for tests): a CPU profile of up to
// adminWriteTimeout - 10s can be taken.
var (
	adminIdleTimeout  = 2 * time.Minute
	adminWriteTimeout = 5 * time.Minute
)

// unready says why /readyz answers 503, or "" when ready. Each state is
// read once, so the answer names the state that made it 503.
func (p *Pipeline) unready() string {
	if p.cons != nil && p.cons.failed.Load() {
		return "queue failed: restart needed"
	}
	if msg := p.diskLow(); msg != "" {
		return msg
	}
	if l := p.lakeStatus.Load(); l != nil {
		if msg := l.failing(); msg != "" {
			return msg
		}
	}
	if p.stopping.Load() {
		return "shutting down: receivers stopped, committing the queue to the lake"
	}
	if !p.ready.Load() {
		return "not ready: starting"
	}
	return ""
}

// diskLow says why ingestion is refused for disk space, or "" when it is not.
func (p *Pipeline) diskLow() string {
	q := p.q.Load()
	if q == nil {
		return ""
	}
	free, min, low := q.DiskSpace()
	if !low {
		return ""
	}
	return fmt.Sprintf("queue disk space low: %d bytes free, %d kept free (queue.min_free_bytes); ingestion is refused until the lake writer or an operator frees space", free, min)
}

// seedTenants tells the consumer the tenants the lake already has, so that
// a tenant differing from one of them only in case is refused after a
// restart too (see tenant.Names).
func (p *Pipeline) seedTenants(ctx context.Context) error {
	parts, err := p.cat.Summary(ctx)
	if err != nil {
		return fmt.Errorf("list lake tenants: %w", err)
	}
	for _, part := range parts {
		if known, ok := p.cons.tenants.Seed(part.Tenant); !ok {
			p.log.Warn("the lake holds tenants that differ only in case; new data for the second is refused",
				"tenant", part.Tenant, "first", known)
		}
	}
	return nil
}

// startUpkeep starts the background upkeep (internal/upkeep) with its own
// catalog handle, so that it never holds a connection the lake loop waits for.
func (p *Pipeline) startUpkeep(ctx context.Context, store lake.Store) error {
	if !p.cfg.Upkeep.Enabled {
		return nil
	}
	u, err := upkeep.New(upkeep.FromConfig(p.cfg), upkeep.Settings{
		CatalogDSN: p.cfg.CatalogDSN(), Store: store, Logger: p.log, Registerer: p.reg,
	})
	if err != nil {
		return err
	}
	if err := u.Start(ctx); err != nil {
		return err
	}
	p.upkeep = u
	return nil
}

// startQuery serves the query API (internal/query/httpapi) on query.addr,
// reading the lake through the pipeline's catalog handle and store, and
// the unflushed tail (tail.go) on top.
func (p *Pipeline) startQuery(ctx context.Context, store lake.Store) error {
	if p.cfg.Query.Addr == "" {
		return nil
	}
	hc := httpapi.FromConfig(p.cfg)
	hc.Stats, hc.Gatherer = p.stats, p.reg
	if pm := p.rulesMetrics; pm != nil {
		hc.RuleEffects = func(tenant string) []stats.RuleEffect {
			es := pm.RuleEffects(tenant)
			out := make([]stats.RuleEffect, len(es))
			for i, e := range es {
				out[i] = stats.RuleEffect(e)
			}
			return out
		}
	}
	if p.rw != nil {
		// Remote write hands its batches to the same consumer as OTLP.
		hc.RemoteWrite = p.rw
	}
	if p.tail != nil {
		hc.Tail, store = p.tail, p.tail.store(store)
	}
	srv, err := httpapi.Start(ctx, p.cfg.Query.Addr, hc, p.cat, store, p.log.With("component", "query"), p.reg)
	if err != nil {
		return err
	}
	p.query = srv
	p.addrs.Query = srv.Addr()
	return nil
}

// Run starts a pipeline, calls started with it, runs until ctx is done
// (SIGTERM/SIGINT in the CLI) or the pipeline fails, then shuts down
// within cfg.ShutdownTimeout.
func Run(ctx context.Context, cfg config.Config, set Settings, started func(*Pipeline)) error {
	// SIGHUP's default action ends the process: without rules to reload,
	// a `systemctl reload` or a log rotator's HUP would stop sluice with
	// no drain. It is taken from the start and answered in the log.
	hup := make(chan os.Signal, 1)
	ossignal.Notify(hup, syscall.SIGHUP)
	defer ossignal.Stop(hup)
	p, err := New(cfg, set)
	if err != nil {
		return err
	}
	hupDone := make(chan struct{})
	defer close(hupDone)
	go p.logHangups(hup, hupDone)
	if err := p.Start(ctx); err != nil {
		return err
	}
	if started != nil {
		started(p)
	}
	var runErr error
	select {
	case <-ctx.Done():
		p.stopping.Store(true) // /readyz says so from the log line on
		p.log.Info("shutting down (a second SIGTERM or SIGINT stops at once)", "timeout", cfg.ShutdownTimeout.D())
	case runErr = <-p.fatal:
		p.log.Error("shutting down after a fatal error", "err", runErr)
	}
	// A second signal ends the drain: everything acknowledged is already
	// fsynced in the queue, and what is not committed to the lake is
	// replayed at the next start, so stopping at once loses nothing.
	again := make(chan os.Signal, 1)
	ossignal.Notify(again, syscall.SIGINT, syscall.SIGTERM)
	defer ossignal.Stop(again)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.D())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(sctx) }()
	select {
	case err := <-done:
		return errors.Join(runErr, err)
	case sig := <-again:
		p.log.Warn("second signal: stopping at once; what the lake has not committed stays in the queue and is replayed at the next start", "signal", sig.String())
		cancel()
	}
	select {
	case err := <-done:
		return errors.Join(runErr, err, ErrInterrupted)
	case <-time.After(time.Second):
		return errors.Join(runErr, ErrInterrupted)
	}
}

// ErrInterrupted is Run's error when a second SIGTERM or SIGINT ended the
// graceful shutdown.
var ErrInterrupted = errors.New("shutdown interrupted by a second signal")

// logHangups answers each SIGHUP in the log, naming what it reloads: the
// processing rules (runLoaders reloads them), nothing else.
func (p *Pipeline) logHangups(hup <-chan os.Signal, done <-chan struct{}) {
	var files []string
	if f := p.cfg.Processors.RulesFile; f != "" {
		files = append(files, f)
	}
	for _, name := range slices.Sorted(maps.Keys(p.cfg.Processors.RuleSets)) {
		files = append(files, p.cfg.Processors.RuleSets[name].RulesFile)
	}
	for {
		select {
		case <-done:
			return
		case <-hup:
			if len(files) == 0 {
				p.log.Info("SIGHUP: nothing to reload: no processing rules are configured (TLS files are read again when they change on disk; other settings need a restart)")
				continue
			}
			p.log.Info("SIGHUP: reloading the processing rules (other settings need a restart)", "files", files)
		}
	}
}

func receiverConfig(o config.OTLP) otlpreceiver.Config {
	rc := otlpreceiver.Config{
		GRPCAddr:              o.GRPCAddr,
		HTTPAddr:              o.HTTPAddr,
		TenantHeader:          o.TenantHeader,
		DefaultTenant:         o.DefaultTenant,
		BearerToken:           o.BearerToken,
		MaxRequestBytes:       int64(o.MaxRequestBytes),
		ReadTimeout:           o.ReadTimeout.D(),
		WriteTimeout:          o.WriteTimeout.D(),
		IdleTimeout:           o.IdleTimeout.D(),
		MaxConcurrentRequests: o.MaxConcurrentRequests,
		MaxInflightBytes:      int64(o.MaxInflightBytes),
		MinBodyRate:           int64(o.MinBodyRate),
		BodyRateGrace:         o.BodyRateGrace.D(),
		MaxConnections:        o.MaxConnections,
		MaxRecordsPerRequest:  o.MaxRecordsPerRequest,
	}
	if o.MinBodyRate == 0 {
		rc.MinBodyRate = -1 // 0 is "off" in the config, "default" in the receiver
	}
	if o.MaxRecordsPerRequest == 0 {
		rc.MaxRecordsPerRequest = -1 // likewise
	}
	if o.TLS.Enabled() {
		rc.TLS = &otlpreceiver.TLSConfig{CertFile: o.TLS.CertFile, KeyFile: o.TLS.KeyFile, ClientCAFile: o.TLS.ClientCAFile}
	}
	return rc
}

func addrString(a net.Addr) string {
	if a == nil {
		return "off"
	}
	return a.String()
}

// NewLogger builds the process logger from the log section.
func NewLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated; info on anything else
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// lakeStore returns where lake files go, and its name for logs: the S3
// bucket of lake.s3 when a bucket is set, else lake.root.
func (p *Pipeline) lakeStore(ctx context.Context) (lake.Store, string, error) {
	c := p.cfg.Lake.S3
	if !c.Enabled() {
		return lake.NewLocalStore(p.cfg.Lake.Root), p.cfg.Lake.Root, nil
	}
	st, err := s3store.New(ctx, s3store.Config{
		Bucket: c.Bucket, Prefix: c.Prefix, Region: c.Region, Endpoint: c.Endpoint,
		AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken,
		ForcePathStyle: c.ForcePathStyle, PartSize: int64(c.PartSize), MaxRetries: c.MaxRetries,
		Logger: p.log, Registerer: p.reg,
	})
	if err != nil {
		return nil, "", fmt.Errorf("lake.s3: %w", err)
	}
	return st, st.String(), nil
}

// LockLake takes the lake's process lock (<root>/_run.lock), which sluice
// run holds for its lifetime. sluice ingest takes it too: run's start-up
// sweep deletes Parquet files the catalog does not know, which includes a
// file another process has renamed into place but not yet committed.
func LockLake(root string) (*os.File, error) {
	return lockFile(filepath.Join(root, "_run.lock"))
}
