package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	ossignal "os/signal"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/processor"
	"github.com/sluice-dev/sluice/internal/signal"
)

// rulesLoader loads the processing rules file into the consumer and
// reloads it on SIGHUP or when its content changes. A reload swaps one
// pointer that each request loads once, so every request is processed by
// exactly one rule set and a reload neither loses nor doubles data. An
// invalid new file keeps the old rules.
type rulesLoader struct {
	path     string
	set      string                           // the rule set's name; "" for processors.rules_file
	dst      *atomic.Pointer[processor.Rules] // where the rules in force are
	check    func(*processor.Rules) error     // refuses rules the routes cannot run; may be nil
	interval time.Duration
	pm       *processor.Metrics
	failures prometheus.Counter
	reloads  prometheus.Counter
	last     []byte // content of the rules in force
	lastErr  string // the last read error logged
	p        *Pipeline
}

// reloadSettle waits d, the time a changed rules file must stay the same
// before a timed reload takes it (a variable for tests).
var reloadSettle = time.Sleep

// settle is how long a changed file must stay the same: 200 ms, or half
// the check interval when that is shorter, so a check ends before the
// next one starts.
func (l *rulesLoader) settle() time.Duration { return min(200*time.Millisecond, l.interval/2) }

// startRules sets up the per-pipeline routes (routes.go), loads the rules
// file and the named rule sets (an error stops the start) and starts their
// reloader, which Shutdown stops (p.rulesStop).
func (p *Pipeline) startRules() error {
	rt := newRouting(&p.cfg)
	if rt.active() {
		p.cons.routes = rt
	}
	path := p.cfg.Processors.RulesFile
	if path == "" && len(rt.sets) == 0 {
		return nil
	}
	pm, err := processor.NewMetrics(p.reg)
	if err != nil {
		return err
	}
	pm.SetMaxRuleEffects(p.cfg.Processors.MaxRuleEffects)
	p.rulesMetrics = pm
	failures := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_processor_reload_failures_total",
		Help: "Reloads of a rules file (processors.rules_file or a rule set's) that failed (the old rules stay in force)."})
	reloads := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_processor_reloads_total",
		Help: "Reloads of a rules file (processors.rules_file or a rule set's) that put new rules in force."})
	if err := p.reg.Register(failures); err != nil {
		return err
	}
	if err := p.reg.Register(reloads); err != nil {
		return err
	}
	var loaders []*rulesLoader
	if path != "" {
		loaders = append(loaders, &rulesLoader{path: path, dst: &p.cons.rules})
	}
	for _, name := range slices.Sorted(maps.Keys(rt.sets)) {
		set := rt.sets[name]
		loaders = append(loaders, &rulesLoader{path: set.path, set: name, dst: &set.rules,
			check: func(r *processor.Rules) error { return rt.checkAggregation(name, r) }})
	}
	for _, l := range loaders {
		l.interval, l.pm, l.p, l.failures, l.reloads = p.cfg.Processors.ReloadInterval.D(), pm, p, failures, reloads
		data, err := os.ReadFile(l.path)
		if err != nil {
			return err
		}
		r, err := l.parse(data)
		if err != nil {
			return err
		}
		l.install(r, data)
		p.log.Info("processing rules loaded", "file", l.path, "rule_set", l.set, "metric_rules", r.MetricRules(), "log_rules", r.LogRules())
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &emitter{cons: p.cons, pm: pm, routes: rt, log: p.log.With("component", "rules"),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_processor_aggregate_emit_dropped_points_total",
			Help: "Output points of aggregate and downsample rules dropped because the queue refused them for longer than the pending bound."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_processor_aggregate_emit_failures_total",
			Help: "Appends of aggregate and downsample output to the queue that failed (retried on the next flush)."}),
	}
	if err := p.reg.Register(e.dropped); err != nil {
		cancel()
		return err
	}
	if err := p.reg.Register(e.failures); err != nil {
		cancel()
		return err
	}
	done := make(chan struct{}, 2)
	go func() { runLoaders(ctx, loaders); done <- struct{}{} }()
	go func() { everyTick(ctx, time.Second, e.flush); done <- struct{}{} }()
	p.rulesStop = func() {
		cancel()
		<-done
		<-done
	}
	return nil
}

// emitter flushes the aggregate and downsample rules' ended intervals
// every tick and queues their output like a received request (an OTLP
// metrics request of the tenant, one queue record a tenant and interval);
// the output does not pass the rules again. The state is in the
// processor.Metrics that every reload shares, and this is its only
// flusher, so a reload neither loses nor doubles an interval. A record the
// queue refuses (full, low disk) is retried on the next tick, up to
// maxPendingEmits records; older ones are dropped and counted.
type emitter struct {
	cons              *consumer
	pm                *processor.Metrics
	routes            *routing // where each rule set's output goes
	log               *slog.Logger
	pending           []pendingEmit
	dropped, failures prometheus.Counter
}

type pendingEmit struct {
	tenant string
	rec    []byte
	points int
}

const maxPendingEmits = 256

// everyTick calls fn with the tick's time every interval until ctx ends:
// the loop of the rules' and the I/O tracer's emitters.
func everyTick(ctx context.Context, every time.Duration, fn func(time.Time)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			fn(now)
		}
	}
}

func (e *emitter) flush(now time.Time) {
	e.retry()
	_, err := e.pm.FlushSets(now, func(set, tenant string, b *signal.Metrics) error {
		body := otlp.AppendMetricsProto(nil, b)
		rec := appendRecordTo(nil, signal.KindMetrics, encOTLP, tenant, e.routes.emitDest(set), body)
		e.pending = append(e.pending, pendingEmit{tenant: tenant, rec: rec, points: b.Len()})
		return nil
	})
	if err != nil {
		e.log.Error("aggregate flush", "err", err)
	}
	e.retry()
}

// retry appends the pending records in order and stops at the first the
// queue refuses.
func (e *emitter) retry() {
	for len(e.pending) > 0 {
		pe := e.pending[0]
		if err := e.cons.appendEmitted(pe.tenant, pe.rec, pe.points); err != nil {
			e.failures.Inc()
			break
		}
		e.pending = e.pending[1:]
	}
	for len(e.pending) > maxPendingEmits {
		e.dropped.Add(float64(e.pending[0].points))
		e.pending = e.pending[1:]
	}
}

func (l *rulesLoader) install(r *processor.Rules, data []byte) {
	l.last = data
	l.dst.Store(r)
}

// parse compiles data as the loader's rules (named after its set) and
// checks that the routes can run them.
func (l *rulesLoader) parse(data []byte) (*processor.Rules, error) {
	r, err := processor.ParseSet(data, l.pm, l.set)
	if err == nil && l.check != nil {
		err = l.check(r)
	}
	if err != nil {
		if l.set != "" {
			return nil, fmt.Errorf("processors.rule_sets.%s: %s: %w", l.set, l.path, err)
		}
		return nil, fmt.Errorf("processors.rules_file: %s: %w", l.path, err)
	}
	return r, nil
}

// runLoaders reloads every loader's file on SIGHUP and, every interval,
// those whose content changed. Each set is installed on its own: an
// invalid file keeps its set's old rules and leaves the others alone.
func runLoaders(ctx context.Context, ls []*rulesLoader) {
	if len(ls) == 0 {
		return
	}
	l0 := ls[0]
	hup := make(chan os.Signal, 1)
	ossignal.Notify(hup, syscall.SIGHUP)
	defer ossignal.Stop(hup)
	var tick <-chan time.Time
	if l0.interval > 0 {
		t := time.NewTicker(l0.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			for _, l := range ls {
				l.reload(true)
			}
		case <-tick:
			for _, l := range ls {
				l.reload(false)
			}
		}
	}
}

// reload reads the file and installs it when its content changed (or
// always, on SIGHUP).
func (l *rulesLoader) reload(force bool) {
	log := l.p.log.With("component", "rules", "file", l.path, "rule_set", l.set)
	data, err := os.ReadFile(l.path)
	if err != nil {
		l.failures.Inc()
		if msg := err.Error(); msg != l.lastErr || force {
			l.lastErr = msg // a removed file is logged once, not every interval
			log.Error("rules reload failed; the old rules stay in force", "err", err)
		}
		return
	}
	l.lastErr = ""
	if !force && bytes.Equal(data, l.last) {
		return
	}
	if !force {
		// A file written in place (an editor, `cat >`) may be read half
		// written, and a half that parses would put part of the rules
		// in force. A change is taken once a second read, settle() later,
		// finds the same bytes; a file replaced at once (a rename, a
		// ConfigMap's symlink swap) passes this tick, a file still being
		// written a later one. SIGHUP takes the file as it is.
		reloadSettle(l.settle())
		again, err := os.ReadFile(l.path)
		if err != nil || !bytes.Equal(again, data) {
			return
		}
	}
	r, err := l.parse(data)
	if err != nil {
		l.failures.Inc()
		l.last = data // do not log the same broken file every interval
		log.Error("rules reload failed; the old rules stay in force", "err", err)
		return
	}
	l.install(r, data)
	l.reloads.Inc()
	log.Info("processing rules reloaded", "metric_rules", r.MetricRules(), "log_rules", r.LogRules())
}
