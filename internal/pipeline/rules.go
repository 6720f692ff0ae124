package pipeline

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/processor"
)

// rulesLoader loads the processing rules file into the consumer and
// reloads it on SIGHUP or when its content changes. A reload swaps one
// pointer that each request loads once, so every request is processed by
// exactly one rule set and a reload neither loses nor doubles data. An
// invalid new file keeps the old rules.
type rulesLoader struct {
	path     string
	interval time.Duration
	cons     *consumer
	pm       *processor.Metrics
	failures prometheus.Counter
	reloads  prometheus.Counter
	last     []byte // content of the rules in force
	p        *Pipeline
}

// startRules loads the rules file (an error stops the start) and starts the
// reloader, which Shutdown stops (p.rulesStop).
func (p *Pipeline) startRules() error {
	path := p.cfg.Processors.RulesFile
	if path == "" {
		return nil
	}
	pm, err := processor.NewMetrics(p.reg)
	if err != nil {
		return err
	}
	l := &rulesLoader{path: path, interval: p.cfg.Processors.ReloadInterval.D(), cons: p.cons, pm: pm, p: p,
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_processor_reload_failures_total",
			Help: "Reloads of the rules file that failed (the old rules stay in force)."}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_processor_reloads_total",
			Help: "Reloads of the rules file that put new rules in force."}),
	}
	if err := p.reg.Register(l.failures); err != nil {
		return err
	}
	if err := p.reg.Register(l.reloads); err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	r, err := processor.Parse(data, pm)
	if err != nil {
		return err
	}
	l.install(r, data)
	p.log.Info("processing rules loaded", "file", path, "metric_rules", r.MetricRules(), "log_rules", r.LogRules())
	ctx, cancel := context.WithCancel(context.Background())
	p.rulesStop = cancel
	go l.run(ctx)
	return nil
}

func (l *rulesLoader) install(r *processor.Rules, data []byte) {
	l.last = data
	l.cons.rules.Store(r)
}

func (l *rulesLoader) run(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var tick <-chan time.Time
	if l.interval > 0 {
		t := time.NewTicker(l.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			l.reload(true)
		case <-tick:
			l.reload(false)
		}
	}
}

// reload reads the file and installs it when its content changed (or
// always, on SIGHUP).
func (l *rulesLoader) reload(force bool) {
	log := l.p.log.With("component", "rules", "file", l.path)
	data, err := os.ReadFile(l.path)
	if err != nil {
		l.failures.Inc()
		log.Error("rules reload failed; the old rules stay in force", "err", err)
		return
	}
	if !force && bytes.Equal(data, l.last) {
		return
	}
	r, err := processor.Parse(data, l.pm)
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
