package upkeep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/compact"
	"github.com/sluice-dev/sluice/internal/lake/retention"
	"github.com/sluice-dev/sluice/internal/lake/rollup"
)

// Options are the upkeep settings, from the upkeep section of the config
// (FromConfig).
type Options struct {
	Interval   time.Duration
	LeaseTTL   time.Duration
	SweepGrace time.Duration

	Compaction     bool
	TargetBytes    int64
	CompactMinAge  time.Duration
	RowGroupRows   int
	MaxFutureSkew  time.Duration
	MaxAttrColumns int // lake.max_attribute_columns, for compaction and rollups
	Rollup         bool
	RollupTiers    []time.Duration
	RollupMinAge   time.Duration
	RetentionRules retention.Rules
}

// FromConfig derives Options from a validated config.
func FromConfig(c config.Config) Options {
	u := c.Upkeep
	o := Options{
		Interval:       u.Interval.D(),
		LeaseTTL:       u.LeaseTTL.D(),
		SweepGrace:     u.SweepGrace.D(),
		Compaction:     u.Compaction.Enabled,
		TargetBytes:    int64(u.Compaction.TargetFileBytes),
		CompactMinAge:  u.Compaction.MinAge.D(),
		RowGroupRows:   c.Lake.RowGroupRows,
		MaxFutureSkew:  c.Lake.MaxFutureSkew.D(),
		MaxAttrColumns: c.Lake.MaxAttributeColumns,
		Rollup:         u.Rollup.Enabled,
		RollupMinAge:   u.Rollup.MinAge.D(),
		RetentionRules: RetentionRules(u.Retention),
	}
	for _, t := range u.Rollup.Tiers {
		o.RollupTiers = append(o.RollupTiers, t.D())
	}
	return o
}

// RetentionRules turns the retention section of the config into rules.
func RetentionRules(r config.Retention) retention.Rules {
	rules := retention.Rules{Keep: map[string]time.Duration{
		retention.TableLogs:     r.Logs.D(),
		retention.TableMetrics:  r.Metrics.D(),
		retention.TableTraces:   r.Traces.D(),
		retention.TableIOEvents: r.IOEvents.D(),
	}}
	for tier, age := range r.MetricsRollup {
		rules.Keep[retention.Class(retention.TableRollup, tier)] = age.D()
	}
	for name, o := range r.Tenants {
		m := map[string]time.Duration{}
		for table, d := range map[string]*config.Duration{retention.TableLogs: o.Logs, retention.TableMetrics: o.Metrics, retention.TableTraces: o.Traces, retention.TableIOEvents: o.IOEvents} {
			if d != nil {
				m[table] = d.D()
			}
		}
		for tier, age := range o.MetricsRollup {
			m[retention.Class(retention.TableRollup, tier)] = age.D()
		}
		if rules.Tenants == nil {
			rules.Tenants = map[string]map[string]time.Duration{}
		}
		rules.Tenants[name] = m
	}
	return rules
}

// Settings are supplied by code.
type Settings struct {
	// CatalogDSN is opened by Start as the scheduler's own handle.
	CatalogDSN string
	Store      lake.Store
	Logger     *slog.Logger          // nil: slog.Default()
	Registerer prometheus.Registerer // nil: metrics are not exported
	Now        func() time.Time      // nil: time.Now
}

// Scheduler runs upkeep passes in one background goroutine.
type Scheduler struct {
	opts Options
	set  Settings
	log  *slog.Logger
	m    *metrics

	mu     sync.Mutex
	cat    *catalog.Catalog
	cancel context.CancelFunc
	done   chan struct{}
}

// New checks the options and registers the metrics; nothing runs until
// Start.
func New(opts Options, set Settings) (*Scheduler, error) {
	if opts.Interval <= 0 {
		return nil, fmt.Errorf("upkeep: interval %s must be positive", opts.Interval)
	}
	if set.Store == nil || set.CatalogDSN == "" {
		return nil, errors.New("upkeep: a store and a catalog DSN are required")
	}
	if err := opts.RetentionRules.Validate(); err != nil {
		return nil, fmt.Errorf("upkeep: retention: %w", err)
	}
	if set.Logger == nil {
		set.Logger = slog.Default()
	}
	if set.Now == nil {
		set.Now = time.Now
	}
	s := &Scheduler{opts: opts, set: set, log: set.Logger.With("component", "upkeep"), m: newMetrics()}
	if set.Registerer != nil {
		if err := s.m.register(set.Registerer); err != nil {
			return nil, fmt.Errorf("upkeep: register metrics: %w", err)
		}
	}
	return s, nil
}

// Start opens the scheduler's catalog handle and starts the background
// goroutine: a pass every Interval until Stop.
func (s *Scheduler) Start(ctx context.Context) error {
	cat, err := catalog.Open(ctx, s.set.CatalogDSN)
	if err != nil {
		return fmt.Errorf("upkeep: open catalog: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.mu.Lock()
	s.cat, s.cancel, s.done = cat, cancel, make(chan struct{})
	s.mu.Unlock()
	go s.loop(runCtx, cat)
	s.log.Info("upkeep started", "interval", s.opts.Interval, "compaction", s.opts.Compaction,
		"rollup", s.opts.Rollup, "retention", s.opts.RetentionRules.String(), "sweep_grace", s.opts.SweepGrace)
	return nil
}

func (s *Scheduler) loop(ctx context.Context, cat *catalog.Catalog) {
	defer close(s.done)
	t := time.NewTimer(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.RunOnce(ctx, cat)
		t.Reset(s.opts.Interval)
	}
}

// Cancel asks the running pass to stop and the loop to end, without
// waiting; Stop waits.
func (s *Scheduler) Cancel() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
}

// Stop cancels the pass in progress, waits for the goroutine to end (at
// most until ctx is done) and closes the catalog handle. It is idempotent
// and safe to call without Start.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	cancel, done, cat := s.cancel, s.done, s.cat
	s.cancel, s.cat = nil, nil
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		// The handle stays open under the straggler; the process is
		// exiting anyway.
		return fmt.Errorf("upkeep: pass did not stop in time: %w", ctx.Err())
	}
	if err := cat.Close(); err != nil {
		return fmt.Errorf("upkeep: %w", err)
	}
	return nil
}

// Report sums up one pass.
type Report struct {
	Tasks []TaskReport
}

// TaskReport is what one task did in a pass.
type TaskReport struct {
	Task                string
	Jobs, Done, Skipped int
	SegmentsReplaced    int
	FilesDeleted        int
	Rows, Bytes         int64
	BytesDeleted        int64
	Err                 error
	Took                time.Duration
}

// count adds one job's outcome to tr and returns errs with err appended
// when the job failed.
func (tr *TaskReport) count(errs []error, err error, skipped bool, replaced int, rows, bytes int64) []error {
	switch {
	case err != nil:
		return append(errs, err)
	case skipped:
		tr.Skipped++
	default:
		tr.Done++
		tr.SegmentsReplaced += replaced
		tr.Rows += rows
		tr.Bytes += bytes
	}
	return errs
}

// RunOnce runs one pass on cat and returns what each task did. Errors are
// in the task reports (and logged and counted); a cancelled ctx ends the
// pass early.
func (s *Scheduler) RunOnce(ctx context.Context, cat *catalog.Catalog) Report {
	var rep Report
	for _, task := range []struct {
		name string
		on   bool
		run  func(context.Context, *catalog.Catalog, *TaskReport) error
	}{
		{taskCompaction, s.opts.Compaction, s.compaction},
		{taskRollup, s.opts.Rollup, s.rollup},
		{taskRetention, s.opts.RetentionRules.Active(), s.retention},
		{taskSweep, true, s.sweep},
	} {
		if !task.on || ctx.Err() != nil {
			continue
		}
		tr := TaskReport{Task: task.name}
		start := time.Now()
		tr.Err = task.run(ctx, cat, &tr)
		tr.Took = time.Since(start)
		s.record(ctx, tr)
		rep.Tasks = append(rep.Tasks, tr)
	}
	return rep
}

// record logs one line per task pass and updates the metrics.
func (s *Scheduler) record(ctx context.Context, tr TaskReport) {
	s.m.replaced.WithLabelValues(tr.Task).Add(float64(tr.SegmentsReplaced))
	s.m.bytesDeleted.Add(float64(tr.BytesDeleted))
	attrs := []any{"task", tr.Task, "jobs", tr.Jobs, "done", tr.Done, "skipped", tr.Skipped,
		"segments_replaced", tr.SegmentsReplaced, "rows", tr.Rows, "bytes", tr.Bytes, "took", tr.Took.Round(time.Millisecond)}
	if tr.Task == taskSweep {
		attrs = append(attrs, "files_deleted", tr.FilesDeleted, "bytes_deleted", tr.BytesDeleted)
	}
	switch {
	case tr.Err != nil && ctx.Err() != nil:
		s.m.runs.WithLabelValues(tr.Task, resultCancelled).Inc()
		s.log.Info("upkeep task cut short by shutdown", append(attrs, "err", tr.Err)...)
	case tr.Err != nil:
		s.m.runs.WithLabelValues(tr.Task, resultError).Inc()
		s.log.Error("upkeep task failed", append(attrs, "err", tr.Err)...)
	default:
		s.m.runs.WithLabelValues(tr.Task, resultOK).Inc()
		s.m.lastSuccess.WithLabelValues(tr.Task).Set(float64(s.set.Now().UnixNano()) / 1e9)
		if tr.Jobs > 0 || tr.FilesDeleted > 0 {
			s.log.Info("upkeep task done", attrs...)
		} else {
			s.log.Debug("upkeep task done", attrs...)
		}
	}
}

func (s *Scheduler) compaction(ctx context.Context, cat *catalog.Catalog, tr *TaskReport) error {
	opts := compact.Options{
		TargetBytes: s.opts.TargetBytes, RowGroupRows: s.opts.RowGroupRows, MaxFutureSkew: s.opts.MaxFutureSkew,
		LeaseTTL: s.opts.LeaseTTL, Logger: s.log, Now: s.set.Now, MaxAttributeColumns: s.opts.MaxAttrColumns,
	}
	jobs, err := compact.Plan(ctx, cat, opts)
	if err != nil {
		return err
	}
	cutoff := s.set.Now().Add(-s.opts.CompactMinAge)
	var errs []error
	for _, j := range jobs {
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
		end := catalog.PartitionStart(j.Day, j.Hour).Add(time.Hour)
		if end.After(cutoff) {
			continue
		}
		// Not worth merging what retention removes later in this pass.
		if age := s.opts.RetentionRules.Age(j.Tenant, j.Table, ""); age > 0 && !end.After(s.set.Now().Add(-age)) {
			continue
		}
		tr.Jobs++
		res, err := compact.Run(ctx, cat, s.set.Store, j, opts)
		errs = tr.count(errs, err, res.Skipped, len(res.InputIDs), res.RowsOut, res.BytesIn)
	}
	return errors.Join(errs...)
}

func (s *Scheduler) retention(ctx context.Context, cat *catalog.Catalog, tr *TaskReport) error {
	parts, err := retention.Plan(ctx, cat, s.opts.RetentionRules, s.set.Now())
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range parts {
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
		tr.Jobs++
		res, err := retention.Apply(ctx, cat, p, retention.Options{LeaseTTL: s.opts.LeaseTTL, Logger: s.log, Store: s.set.Store})
		errs = tr.count(errs, err, res.Skipped, len(res.Removed), res.Rows, res.Bytes)
	}
	return errors.Join(errs...)
}

// sweep deletes the files of segments replaced more than SweepGrace ago,
// then their catalog rows, and the uncommitted outputs of killed runs.
func (s *Scheduler) sweep(ctx context.Context, cat *catalog.Catalog, tr *TaskReport) error {
	grace := s.opts.SweepGrace
	if grace == 0 {
		grace = -1 // compact.Sweep reads 0 as its default; ours means none
	}
	res, err := compact.Sweep(ctx, cat, s.set.Store, compact.SweepOptions{Grace: grace, Now: s.set.Now, Logger: s.log})
	// Files: replaced ones, and uncommitted outputs of killed runs (whose
	// size the catalog never knew).
	tr.FilesDeleted, tr.BytesDeleted = res.Files+res.Uncommitted, res.Bytes
	tr.Jobs, tr.Done = res.Files, res.Segments
	return err
}

func (s *Scheduler) rollup(ctx context.Context, cat *catalog.Catalog, tr *TaskReport) error {
	opts := rollup.Options{
		Tiers: s.opts.RollupTiers, MinAge: s.opts.RollupMinAge, Store: s.set.Store,
		LeaseTTL: s.opts.LeaseTTL, Logger: s.log, Now: s.set.Now, MaxAttributeColumns: s.opts.MaxAttrColumns,
	}
	jobs, err := rollup.Plan(ctx, cat, opts)
	if err != nil {
		return err
	}
	var errs []error
	for _, j := range jobs {
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
		tr.Jobs++
		res, err := rollup.Run(ctx, cat, s.set.Store, j, opts)
		errs = tr.count(errs, err, res.Skipped, len(res.Replaced), res.PointsOut, res.BytesIn)
	}
	return errors.Join(errs...)
}
