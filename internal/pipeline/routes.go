package pipeline

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/processor"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Routing by pipeline (issue 14: "an ordered list [of rules] per
// pipeline"). The pipelines of one signal are grouped by their processor
// chain (pipelines.<p>.processors, the named rule sets in order). A
// request runs processors.rules_file once, then, when its signal has one
// group that every consumer of the signal is in (the usual case, and
// always without per-pipeline processors), it is queued as one record for
// everyone, exactly as without routing. Otherwise each group runs its
// chain on its own copy of the batch and gets one record naming the
// group's exporters ("lake" among them when a pipeline of the group lists
// it); the request's records are appended in one queue call (one fsync)
// before it is acknowledged. The receivers a pipeline lists do not route:
// every pipeline of a signal sees every request of that signal.

// ruleSet is one named rule set (processors.rule_sets.<name>): its rules
// in force, swapped by its reloader.
type ruleSet struct {
	name, path string
	rules      atomic.Pointer[processor.Rules]
}

// route is the pipelines of one signal that share a processor chain.
type route struct {
	key       string // the chain's set names joined by "\x00"
	pipelines []string
	chain     []*ruleSet
	dest      dest // nil: every consumer of the signal
	lake      bool // the lake takes the route's records
}

// routing is the routes of every signal. plain[kind] means kind's requests
// are queued as one record for everyone (no copy, no chain).
type routing struct {
	routes [signal.KindTraces + 1][]route
	plain  [signal.KindTraces + 1]bool
	sets   map[string]*ruleSet
	lake   bool // the lake is on
}

// newRouting groups cfg's pipelines by signal and processor chain.
func newRouting(cfg *config.Config) *routing {
	rt := &routing{sets: map[string]*ruleSet{}}
	for i := range rt.plain {
		rt.plain[i] = true
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Processors.RuleSets)) {
		rt.sets[name] = &ruleSet{name: name, path: cfg.Processors.RuleSets[name].RulesFile}
	}
	lake := cfg.LakeEnabled()
	rt.lake = lake
	exSig := cfg.ExporterSignals()
	for _, kind := range []signal.Kind{signal.KindLogs, signal.KindMetrics, signal.KindTraces} {
		sig := kind.String()
		// Every consumer of the signal: what an empty destination list
		// reaches.
		var all []string
		if lake {
			all = append(all, lakeDest)
		}
		for ex, sigs := range exSig {
			if ex != lakeDest && slices.Contains(sigs, sig) {
				all = append(all, ex)
			}
		}
		slices.Sort(all)
		var rs []route
		for _, pname := range slices.Sorted(maps.Keys(cfg.Pipelines)) {
			if config.ExporterType(pname) != sig {
				continue
			}
			p := cfg.Pipelines[pname]
			var chain []string
			if kind != signal.KindTraces { // rules are for metrics and logs
				chain = p.Processors
			}
			key := strings.Join(chain, "\x00")
			i := slices.IndexFunc(rs, func(r route) bool { return r.key == key })
			if i < 0 {
				r := route{key: key}
				for _, s := range chain {
					r.chain = append(r.chain, rt.sets[s])
				}
				rs = append(rs, r)
				i = len(rs) - 1
			}
			r := &rs[i]
			r.pipelines = append(r.pipelines, pname)
			for _, ex := range p.Exporters {
				if !slices.Contains(r.dest, ex) {
					r.dest = append(r.dest, ex)
				}
			}
		}
		for i := range rs {
			slices.Sort(rs[i].dest)
			rs[i].lake = slices.Contains(rs[i].dest, lakeDest)
			if slices.Equal(rs[i].dest, all) {
				rs[i].dest = nil
				rs[i].lake = lake
			}
		}
		rt.routes[kind] = rs
		rt.plain[kind] = len(rs) == 0 || len(rs) == 1 && len(rs[0].chain) == 0 && rs[0].dest == nil
	}
	return rt
}

// active reports whether any signal needs routing.
func (rt *routing) active() bool {
	for _, p := range rt.plain {
		if !p {
			return true
		}
	}
	return false
}

// checkAggregation refuses rules r for set when the set has aggregate or
// downsample rules and is in more than one metrics route: its state would
// take each point once per route, and its output has no one destination.
func (rt *routing) checkAggregation(set string, r *processor.Rules) error {
	if !r.HasAggregation() {
		return nil
	}
	var in []string
	for _, ro := range rt.routes[signal.KindMetrics] {
		for _, s := range ro.chain {
			if s.name == set {
				in = append(in, strings.Join(ro.pipelines, "+"))
			}
		}
	}
	if len(in) > 1 {
		return fmt.Errorf("rule set %s has aggregate or downsample rules and is in %d processor chains (%s): its aggregates would count each point once per chain; give those pipelines one chain, or the aggregation a set of its own in one chain",
			set, len(in), strings.Join(in, ", "))
	}
	return nil
}

// emitDest is the destination of the aggregate and downsample output of
// set: everyone for the default rules, the route running set otherwise.
func (rt *routing) emitDest(set string) dest {
	if rt == nil || set == "" {
		return nil
	}
	for _, ro := range rt.routes[signal.KindMetrics] {
		for _, s := range ro.chain {
			if s.name == set {
				return ro.dest
			}
		}
	}
	return nil
}

// routeScratch is one route's copy of the batch and its record.
type routeScratch struct {
	metrics signal.Metrics
	logs    signal.Logs
	body    []byte
	rec     []byte
}

func (rs *routeScratch) tooBig() bool {
	return cap(rs.body) > maxPooledBytes || cap(rs.rec) > maxPooledBytes || cap(rs.metrics.Buf) > maxPooledBytes || cap(rs.logs.Buf) > maxPooledBytes
}

// records returns the queue records of a request of kind whose processed
// batch (processors.rules_file applied) is in s and body, with n records:
// one record for everyone when kind is plain, else one a route that kept
// something. kept is the records of the largest route, size the bytes of
// every record, and observe the metrics batch the statistics count (that
// of the route the lake takes, else the first route's; nil for other
// signals).
func (c *consumer) records(s *scratch, kind signal.Kind, tenant string, body []byte, n int) (recs [][]byte, kept, size int, observe *signal.Metrics) {
	rt := c.routes
	if rt == nil || int(kind) >= len(rt.plain) || rt.plain[kind] {
		s.rec = appendRecordBody(s.rec[:0], s, kind, tenant, body)
		s.recs = append(s.recs[:0], s.rec)
		if kind == signal.KindMetrics {
			observe = s.queuedMetrics()
		}
		return s.recs, n, len(s.rec), observe
	}
	routes := rt.routes[kind]
	// The chains' limits, aggregates and effects are per tenant: without
	// processors.rules_file nothing set it for this request yet.
	s.proc.Tenant = tenant
	if kind == signal.KindMetrics && c.stats != nil && c.rules.Load() == nil {
		// Without processors.rules_file Consume did not count the samples
		// before the rules: the statistics' KEPT share needs them.
		c.stats.ObserveBeforeRules(tenant, &s.metrics)
	}
	for len(s.routes) < len(routes) {
		s.routes = append(s.routes, new(routeScratch))
	}
	// The statistics count the lake's route.
	obs := slices.IndexFunc(routes, func(r route) bool { return r.lake })
	if obs < 0 {
		obs = 0
	}
	// The last route with a chain works on the scratch's batch in place;
	// the others on copies made before it runs. Routes without a chain
	// queue body as it is, and the statistics then need the batch intact.
	inPlace := -1
	for i := range routes {
		if len(routes[i].chain) > 0 {
			inPlace = i
		}
	}
	if len(routes[obs].chain) == 0 {
		inPlace = -1
	}
	switch kind {
	case signal.KindMetrics:
		if s.changed {
			s.metrics.ComputeSeriesIDs() // a relabel keeps the input's ids
		}
	case signal.KindLogs:
		if s.changed { // the default rules' output is in proc.OutLogs
			s.logs, s.proc.OutLogs = s.proc.OutLogs, s.logs
		}
	}
	s.recs = s.recs[:0]
	s.routeRefused = refusals{}
	for i := range routes {
		r := &routes[i]
		rs := s.routes[i]
		b, k, changed := body, n, false
		var m *signal.Metrics
		if len(r.chain) > 0 {
			switch kind {
			case signal.KindMetrics:
				m = &s.metrics
				if i != inPlace {
					m = copyMetrics(&rs.metrics, &s.metrics)
				}
				var ref refusals
				changed, k = runMetricsChain(r.chain, m, &s.proc, &ref)
				if ref.n > s.routeRefused.n {
					s.routeRefused = ref
				}
				if changed {
					rs.body = otlp.AppendMetricsProto(rs.body[:0], m)
					b = rs.body
				}
			case signal.KindLogs:
				l := &s.logs
				if i != inPlace {
					l = copyLogs(&rs.logs, &s.logs)
				}
				changed, k = runLogsChain(r.chain, l, &s.proc)
				if changed {
					rs.body = otlp.AppendLogsProto(rs.body[:0], l)
					b = rs.body
				}
			}
		} else if kind == signal.KindMetrics {
			m = &s.metrics
		}
		if i == obs && kind == signal.KindMetrics && k > 0 {
			observe = m
		}
		if k == 0 {
			continue
		}
		kept = max(kept, k)
		enc := s.enc // body as received (remote write) unless a chain changed it
		if changed {
			enc = encOTLP
		}
		rs.rec = appendRecordTo(rs.rec[:0], kind, enc, tenant, r.dest, b)
		s.recs = append(s.recs, rs.rec)
		size += len(rs.rec)
	}
	return s.recs, kept, size, observe
}

// refusals counts the points limit and require rules refused (the
// sender hears of them, consumer.go refusedResult) and names the first
// rule that did.
type refusals struct {
	n  int
	by string
}

func (r *refusals) add(n int, by string) {
	if n > 0 && r.n == 0 {
		r.by = by
	}
	r.n += n
}

// copyMetrics makes dst a copy of src's points.
func copyMetrics(dst, src *signal.Metrics) *signal.Metrics {
	dst.Reset()
	for i := range src.Len() {
		dst.CopyFrom(src, i)
	}
	return dst
}

// copyLogs makes dst a copy of src's records.
func copyLogs(dst, src *signal.Logs) *signal.Logs {
	dst.Reset()
	for i := range src.Len() {
		dst.CopyFrom(src, i)
	}
	return dst
}

// runMetricsChain runs the rule sets of chain on b in order, each set
// loaded once (a reload never splits a batch between two versions of a
// set). Series ids are recomputed after a set that changed the batch: the
// next set's decisions are cached by the ids of the series it sees. The
// points the chain's limit and require rules refused are added to ref.
func runMetricsChain(chain []*ruleSet, b *signal.Metrics, s *processor.Scratch, ref *refusals) (changed bool, kept int) {
	kept = b.Len()
	for _, set := range chain {
		r := set.rules.Load()
		if r == nil {
			continue
		}
		ch, k := r.ProcessMetrics(b, s)
		ref.add(s.Refused, s.RefusedBy)
		kept = k
		if ch {
			changed = true
			b.ComputeSeriesIDs()
		}
		if k == 0 {
			break
		}
	}
	return changed, kept
}

// runLogsChain is runMetricsChain for logs: a set that changes the batch
// leaves its output in s.OutLogs, which becomes b.
func runLogsChain(chain []*ruleSet, b *signal.Logs, s *processor.Scratch) (changed bool, kept int) {
	kept = b.Len()
	for _, set := range chain {
		r := set.rules.Load()
		if r == nil {
			continue
		}
		ch, k := r.ProcessLogs(b, s)
		kept = k
		if ch {
			changed = true
			*b, s.OutLogs = s.OutLogs, *b
		}
		if k == 0 {
			break
		}
	}
	return changed, kept
}

// Validate makes the checks sluice run makes at start beyond
// config.Validate, without starting anything (sluice validate, and sluice
// run before it starts): receivers.iotrace's filters, and
// processors.rules_file and every rule set's file, loaded as sluice run
// would with the checks the routes make.
func Validate(cfg *config.Config) error {
	return errors.Join(validateIOTrace(cfg), validateRules(cfg))
}

func validateRules(cfg *config.Config) error {
	var errs []error
	if path := cfg.Processors.RulesFile; path != "" {
		if _, err := processor.Load(path, nil); err != nil {
			errs = append(errs, fmt.Errorf("processors.rules_file: %w", err))
		}
	}
	rt := newRouting(cfg)
	for _, name := range slices.Sorted(maps.Keys(rt.sets)) {
		path := rt.sets[name].path
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("processors.rule_sets.%s: read rules file: %w", name, err))
			continue
		}
		r, err := processor.ParseSet(data, nil, name)
		if err == nil {
			err = rt.checkAggregation(name, r)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("processors.rule_sets.%s: rules file %s: %w", name, path, err))
		}
	}
	return errors.Join(errs...)
}
