package processor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// File is the rules file (docs/rules.md): an ordered list of rules per
// signal.
type File struct {
	Metrics []RuleConfig `yaml:"metrics"`
	Logs    []RuleConfig `yaml:"logs"`

	// lines are the rules' lines in the file, when parsed from one, so
	// an error names where the rule is.
	metricLines, logLines []int
}

// RuleConfig is one rule as written in the file.
type RuleConfig struct {
	// Name identifies the rule in counters and logs; unique per file.
	Name string `yaml:"name"`
	// Match is a Prometheus series selector ({...} or name{...}); empty
	// matches everything.
	Match string `yaml:"match"`
	// Action is drop, keep, relabel or sample.
	Action string `yaml:"action"`
	// Relabel holds Prometheus relabel_configs (action relabel).
	Relabel []*relabel.Config `yaml:"relabel"`
	// OneIn keeps one series in OneIn (metrics) or one record in OneIn
	// (logs), by hash (action sample).
	OneIn uint64 `yaml:"one_in"`
	// Probability keeps each point (record) with this probability (action
	// sample).
	Probability *float64 `yaml:"probability"`
	// MaxSeverity, for logs, narrows the match to records whose
	// severity_number is at most this (1..24); a record of unspecified
	// severity (0) never matches it.
	MaxSeverity int32 `yaml:"max_severity"`
	// MaxSeries, Per and Window configure action limit: at most MaxSeries
	// distinct series per group (Per: metric or tenant) in each Window
	// aligned to the clock (0: forever). Per label: at most MaxValues
	// distinct values of Label per metric.
	MaxSeries int           `yaml:"max_series"`
	Per       string        `yaml:"per"`
	Window    time.Duration `yaml:"window"`
	Label     string        `yaml:"label"`
	MaxValues int           `yaml:"max_values"`
	// ExceedAction is what a limit does to a series over it: refuse
	// (default), strip_label (remove Label from it), sample (keep one
	// series in OneIn of those over) or report (count only).
	ExceedAction string `yaml:"exceed_action"`
	// MaxGroups bounds a limit's groups (metrics, tenants) per window;
	// the series of a group beyond it count as over the limit.
	MaxGroups int `yaml:"max_groups"`
	// Labels are the labels action require needs on every series.
	Labels []string `yaml:"labels"`
	// Interval, Outputs, By, Without, KeepInput and FlushDelay configure
	// actions aggregate and downsample (docs/rules.md); MaxGroups bounds
	// their groups too.
	Interval   time.Duration  `yaml:"interval"`
	Outputs    []string       `yaml:"outputs"`
	By         []string       `yaml:"by"`
	Without    []string       `yaml:"without"`
	KeepInput  bool           `yaml:"keep_input"`
	FlushDelay *time.Duration `yaml:"flush_delay"`
	// InputRelabel and OutputRelabel are vmagent's input_relabel_configs
	// and output_relabel_configs of an aggregate or downsample rule: the
	// first relabels the series the rule takes (before grouping; one it
	// drops is not taken), the second the series it emits.
	InputRelabel  []*relabel.Config `yaml:"input_relabel_configs"`
	OutputRelabel []*relabel.Config `yaml:"output_relabel_configs"`
	// Shadow makes the rule count what it would do without doing it (for a
	// limit: report only).
	Shadow bool `yaml:"shadow"`
}

type action uint8

const (
	actDrop action = iota
	actKeep
	actRelabel
	actSampleOneIn
	actSampleProb
	actLimit
	actRequire
	actAggregate
	actDownsample
)

// DefaultFlushDelay is how long after an interval's end aggregate and
// downsample rules wait for late points before emitting it.
const DefaultFlushDelay = 10 * time.Second

// DefaultMaxAggregateGroups is an aggregate or downsample rule's
// max_groups when unset: output series per interval.
const DefaultMaxAggregateGroups = 1000000

// per groups of a limit.
const (
	perMetric uint8 = iota
	perTenant
	perLabel
)

// exceed actions of a limit.
const (
	exRefuse uint8 = iota
	exStrip
	exSample
	exReport
)

// DefaultMaxGroups is a limit's max_groups when unset.
const DefaultMaxGroups = 100000

// maxRules bounds the rules per signal.
const maxRules = 64

// rule is a compiled RuleConfig.
type rule struct {
	name        string
	act         action
	nameMs      []*labels.Matcher // on __name__
	ms          []*labels.Matcher // on other labels
	relabel     []*relabel.Config
	oneIn       uint64
	threshold   uint64 // probability * 2^64 (saturating)
	maxSeverity int32
	shadow      bool
	per         uint8
	exceed      uint8
	label       string   // per label, strip_label
	required    []string // action require
	lim         *limiter
	agg         *aggregator // aggregate, downsample
	by, without []string
	inRelabel   []*relabel.Config // aggregate, downsample: input_relabel_configs
	aggPrefix   string            // "<interval>" then "_by_..." or "_without_..."
	keepInput   bool
	multiOut    bool // downsample with several outputs
	c           *ruleCounters
	nameHash    uint64 // of name, keys the effects table
}

// Rules is a compiled, immutable rules file.
type Rules struct {
	metrics, logs []rule
	m             *Metrics // may be nil
	cache         *decisionCache
}

// Empty reports whether there are no rules at all.
func (r *Rules) Empty() bool { return r == nil || len(r.metrics)+len(r.logs) == 0 }

// MetricRules and LogRules are the number of rules per signal.
func (r *Rules) MetricRules() int { return len(r.metrics) }
func (r *Rules) LogRules() int    { return len(r.logs) }

// Load reads and compiles a rules file. m may be nil (validation only).
func Load(path string, m *Metrics) (*Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read rules file: %w", err)
	}
	r, err := Parse(data, m)
	if err != nil {
		return nil, fmt.Errorf("rules file %s: %w", path, err)
	}
	return r, nil
}

// Parse compiles rules from YAML. m may be nil (validation only).
func Parse(data []byte, m *Metrics) (*Rules, error) { return ParseSet(data, m, "") }

// ParseSet is Parse for the named rule set set (processors.rule_sets):
// its rules are named "<set>/<name>" in counters, logs and the effects
// table, so their limit and aggregate state is the set's own, and the
// output of its aggregate and downsample rules is flushed under set (see
// Metrics.FlushSets). An empty set is Parse.
func ParseSet(data []byte, m *Metrics, set string) (*Rules, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, errEOF) {
		return nil, fmt.Errorf("parse: %w", locateError(data, err))
	}
	// A second document ("---") would be ignored: two files pasted into
	// one would lose the rules of the second without a word. An empty one
	// (a trailing "---", as generated YAML has) is fine.
	for {
		var more yaml.Node
		err := dec.Decode(&more)
		if errors.Is(err, errEOF) {
			break
		}
		if err != nil || !emptyDocument(&more) {
			return nil, errors.New("parse: the file holds more than one YAML document (---); put every rule in one")
		}
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) == nil {
		f.metricLines = ruleLines(&doc, "metrics")
		f.logLines = ruleLines(&doc, "logs")
	}
	return CompileSet(&f, m, set)
}

// ruleItems returns the rule nodes of list sig ("metrics", "logs") of a
// parsed rules file.
func ruleItems(doc *yaml.Node, sig string) []*yaml.Node {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == sig && doc.Content[i+1].Kind == yaml.SequenceNode {
			return doc.Content[i+1].Content
		}
	}
	return nil
}

func ruleLines(doc *yaml.Node, sig string) []int {
	var ls []int
	for _, n := range ruleItems(doc, sig) {
		ls = append(ls, n.Line)
	}
	return ls
}

// locateError names the rule (list, number, name and line) whose value
// made err, a decode error of data: a value's own parser (a relabel
// regex, a duration) says what is wrong but not where. It decodes each
// rule alone to find the first one that fails; err as it was when none
// does (an error outside the rules, or one that already says its line).
func locateError(data []byte, err error) error {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		return err // a syntax error: yaml names its line
	}
	for _, sig := range []string{"metrics", "logs"} {
		for i, n := range ruleItems(&doc, sig) {
			one, merr := yaml.Marshal(n)
			if merr != nil {
				continue
			}
			dec := yaml.NewDecoder(bytes.NewReader(one))
			dec.KnownFields(true)
			var rc RuleConfig
			if dec.Decode(&rc) == nil {
				continue
			}
			var name string
			for k := 0; k+1 < len(n.Content); k += 2 {
				if n.Content[k].Value == "name" {
					name = n.Content[k+1].Value
				}
			}
			return fmt.Errorf("line %d: %s rule %d (%q): %w", n.Line, sig, i+1, name, err)
		}
	}
	return err
}

// emptyDocument reports whether n is a document of nothing but null.
func emptyDocument(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// Compile checks and compiles f. m may be nil (validation only).
func Compile(f *File, m *Metrics) (*Rules, error) { return CompileSet(f, m, "") }

// CompileSet is Compile for the named rule set set (see ParseSet).
func CompileSet(f *File, m *Metrics, set string) (*Rules, error) {
	if set != "" {
		q := *f
		q.Metrics = qualify(f.Metrics, set)
		q.Logs = qualify(f.Logs, set)
		f = &q
	}
	seen := map[string]bool{}
	if m == nil {
		m, _ = NewMetrics(nil) // unregistered: validation and tests
	}
	r := Rules{m: m, cache: newDecisionCache()}
	var err error
	if r.metrics, err = compileList(f.Metrics, f.metricLines, "metrics", false, seen, m); err != nil {
		return nil, err
	}
	if r.logs, err = compileList(f.Logs, f.logLines, "logs", true, seen, m); err != nil {
		return nil, err
	}
	for i := range r.metrics {
		if a := r.metrics[i].agg; a != nil {
			a.mu.Lock()
			a.set = set
			a.mu.Unlock()
		}
	}
	return &r, nil
}

// qualify names the rules of cfgs "<set>/<name>" (a rule without a name
// keeps none, so compileList still refuses it).
func qualify(cfgs []RuleConfig, set string) []RuleConfig {
	out := slices.Clone(cfgs)
	for i := range out {
		if out[i].Name != "" {
			out[i].Name = set + "/" + out[i].Name
		}
	}
	return out
}

func compileList(cfgs []RuleConfig, lines []int, sig string, logs bool, seen map[string]bool, m *Metrics) ([]rule, error) {
	if len(cfgs) > maxRules {
		return nil, fmt.Errorf("%s: %d rules, at most %d", sig, len(cfgs), maxRules)
	}
	out := make([]rule, 0, len(cfgs))
	for i := range cfgs {
		c := &cfgs[i]
		at := ""
		if i < len(lines) && len(lines) == len(cfgs) {
			at = fmt.Sprintf("line %d: ", lines[i])
		}
		where := fmt.Sprintf("%s%s rule %d (%q)", at, sig, i+1, c.Name)
		if c.Name == "" {
			return nil, fmt.Errorf("%s%s rule %d: name is required", at, sig, i+1)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("%s: name used twice", where)
		}
		seen[c.Name] = true
		ru := rule{name: c.Name, shadow: c.Shadow, maxSeverity: c.MaxSeverity}
		if c.Match != "" {
			ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector(c.Match)
			if err != nil {
				return nil, fmt.Errorf("%s: match %q: %w", where, c.Match, err)
			}
			for _, mt := range ms {
				if mt.Name == labels.MetricName {
					ru.nameMs = append(ru.nameMs, mt)
				} else {
					ru.ms = append(ru.ms, mt)
				}
			}
		}
		if c.MaxSeverity != 0 && (!logs || c.MaxSeverity < 1 || c.MaxSeverity > 24) {
			return nil, fmt.Errorf("%s: max_severity applies to logs only and must be 1..24", where)
		}
		if len(c.Relabel) > 0 && c.Action != "relabel" {
			return nil, fmt.Errorf("%s: relabel is only for action relabel", where)
		}
		if c.Probability != nil && c.Action != "sample" {
			return nil, fmt.Errorf("%s: probability is only for action sample", where)
		}
		if c.OneIn != 0 && c.Action != "sample" && !(c.Action == "limit" && c.ExceedAction == "sample") {
			return nil, fmt.Errorf("%s: one_in is only for action sample and for a limit's exceed_action sample", where)
		}
		if len(c.Labels) > 0 && c.Action != "require" {
			return nil, fmt.Errorf("%s: labels is only for action require", where)
		}
		switch c.Action {
		case "drop":
			ru.act = actDrop
		case "keep":
			ru.act = actKeep
		case "relabel":
			if logs {
				return nil, fmt.Errorf("%s: relabel applies to metrics only", where)
			}
			if len(c.Relabel) == 0 {
				return nil, fmt.Errorf("%s: action relabel needs a relabel list", where)
			}
			if err := validateRelabel("relabel", c.Relabel); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			ru.act, ru.relabel = actRelabel, c.Relabel
		case "sample":
			switch {
			case c.OneIn != 0 && c.Probability != nil:
				return nil, fmt.Errorf("%s: set one of one_in and probability", where)
			case c.OneIn != 0:
				ru.act, ru.oneIn = actSampleOneIn, c.OneIn
			case c.Probability != nil:
				p := *c.Probability
				if !(p >= 0 && p <= 1) {
					return nil, fmt.Errorf("%s: probability %v is not in [0, 1]", where, p)
				}
				ru.act, ru.threshold = actSampleProb, probThreshold(p)
			default:
				return nil, fmt.Errorf("%s: action sample needs one_in (>= 1) or probability", where)
			}
		case "limit":
			if logs {
				return nil, fmt.Errorf("%s: limit applies to metrics only", where)
			}
			if err := compileLimit(&ru, c, m); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		case "require":
			if logs {
				return nil, fmt.Errorf("%s: require applies to metrics only", where)
			}
			if len(c.Labels) == 0 {
				return nil, fmt.Errorf("%s: action require needs labels", where)
			}
			for _, l := range c.Labels {
				if !model.LabelName(l).IsValid() || l == labels.MetricName {
					return nil, fmt.Errorf("%s: required label %q is not a label name", where, l)
				}
			}
			ru.act, ru.required = actRequire, c.Labels
		case "aggregate", "downsample":
			if logs {
				return nil, fmt.Errorf("%s: %s applies to metrics only", where, c.Action)
			}
			if err := compileAggregate(&ru, c, m); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		case "":
			return nil, fmt.Errorf("%s: action is required (drop, keep, relabel, sample, limit, require, aggregate, downsample)", where)
		default:
			return nil, fmt.Errorf("%s: unknown action %q (want drop, keep, relabel, sample, limit, require, aggregate, downsample)", where, c.Action)
		}
		if c.Action != "limit" && (c.MaxSeries != 0 || c.Per != "" || c.Window != 0 || c.Label != "" ||
			c.MaxValues != 0 || c.ExceedAction != "") {
			return nil, fmt.Errorf("%s: max_series, max_values, per, label, window and exceed_action are only for action limit", where)
		}
		if c.MaxGroups != 0 && c.Action != "limit" && c.Action != "aggregate" && c.Action != "downsample" {
			return nil, fmt.Errorf("%s: max_groups is only for actions limit, aggregate and downsample", where)
		}
		if c.Action != "aggregate" && c.Action != "downsample" && (c.Interval != 0 || len(c.Outputs) > 0 ||
			len(c.By) > 0 || len(c.Without) > 0 || c.KeepInput || c.FlushDelay != nil ||
			len(c.InputRelabel) > 0 || len(c.OutputRelabel) > 0) {
			return nil, fmt.Errorf("%s: interval, outputs, by, without, keep_input, flush_delay, input_relabel_configs and output_relabel_configs are only for actions aggregate and downsample", where)
		}
		ru.c = m.forRule(c.Name)
		ru.nameHash = xxhash.Sum64String(c.Name)
		out = append(out, ru)
	}
	return out, nil
}

// validateRelabel checks a relabel list (key: its key in the file).
func validateRelabel(key string, rcs []*relabel.Config) error {
	for j, rc := range rcs {
		if rc == nil {
			return fmt.Errorf("%s %d is empty", key, j+1)
		}
		if err := rc.Validate(model.UTF8Validation); err != nil {
			return fmt.Errorf("%s %d: %w", key, j+1, err)
		}
	}
	return nil
}

// probThreshold maps p to the threshold a uniform 64-bit hash is compared
// with (keep when hash < threshold); p = 1 keeps all.
func probThreshold(p float64) uint64 {
	if p >= 1 {
		return ^uint64(0)
	}
	return uint64(p * (1 << 63) * 2)
}

// compileLimit checks and compiles the fields of action limit.
func compileLimit(ru *rule, c *RuleConfig, m *Metrics) error {
	if c.Window < 0 || c.Window > 0 && c.Window < time.Second {
		// A window shorter than a second would start over on nearly
		// every request: a limit that never limits.
		return fmt.Errorf("window %v: want 0 (never resets) or at least 1s", c.Window)
	}
	max := c.MaxSeries
	switch c.Per {
	case "metric":
		ru.per = perMetric
	case "tenant":
		ru.per = perTenant
	case "label":
		ru.per = perLabel
		if c.Label == "" {
			return errors.New("per label needs label (the label whose distinct values per metric are limited)")
		}
		if c.MaxSeries != 0 {
			return errors.New("per label limits values: set max_values, not max_series")
		}
		if c.MaxValues < 1 {
			return errors.New("per label needs max_values >= 1")
		}
		max = c.MaxValues
	default:
		return fmt.Errorf("per %q: want metric, tenant or label", c.Per)
	}
	if ru.per != perLabel {
		if c.MaxValues != 0 {
			return fmt.Errorf("max_values is for per label; per %s takes max_series", c.Per)
		}
		if max < 1 {
			return errors.New("action limit needs max_series >= 1")
		}
	}
	if c.Label != "" && (!model.LabelName(c.Label).IsValid() || c.Label == labels.MetricName) {
		return fmt.Errorf("label %q is not a label name (nor __name__)", c.Label)
	}
	switch c.ExceedAction {
	case "", "refuse":
		ru.exceed = exRefuse
	case "strip_label":
		if c.Label == "" {
			return errors.New("exceed_action strip_label needs label (the label to strip)")
		}
		ru.exceed = exStrip
	case "sample":
		if c.OneIn < 2 {
			return errors.New("exceed_action sample needs one_in >= 2 (keep one series in one_in of those over the limit)")
		}
		ru.exceed, ru.oneIn = exSample, c.OneIn
	case "report":
		ru.exceed = exReport
	default:
		return fmt.Errorf("exceed_action %q: want refuse, strip_label, sample or report", c.ExceedAction)
	}
	if c.Label != "" && ru.per != perLabel && ru.exceed != exStrip {
		return errors.New("label is for per label and for exceed_action strip_label")
	}
	groups := c.MaxGroups
	if groups < 0 {
		return fmt.Errorf("max_groups %d is negative", groups)
	}
	if groups == 0 {
		groups = DefaultMaxGroups
	}
	ru.act, ru.label = actLimit, c.Label
	ru.lim = m.limits.get(c.Name, limitSpec{max: max, maxGroups: groups, window: c.Window, per: ru.per, label: c.Label})
	return nil
}

// compileAggregate checks and compiles the fields of actions aggregate and
// downsample.
func compileAggregate(ru *rule, c *RuleConfig, m *Metrics) error {
	down := c.Action == "downsample"
	if c.Interval < time.Second || c.Interval%time.Second != 0 {
		return fmt.Errorf("interval %v: want whole seconds, at least 1s", c.Interval)
	}
	if 24*time.Hour%c.Interval != 0 {
		return fmt.Errorf("interval %v does not divide a day (intervals are aligned to the clock)", c.Interval)
	}
	outs, err := parseOutputs(c.Outputs, down)
	if err != nil {
		return err
	}
	if down && (len(c.By) > 0 || len(c.Without) > 0 || c.KeepInput) {
		return errors.New("downsample works per series: by, without and keep_input are for aggregate")
	}
	if len(c.By) > 0 && len(c.Without) > 0 {
		return errors.New("set one of by and without")
	}
	for _, l := range append(slices.Clone(c.By), c.Without...) {
		if !model.LabelName(l).IsValid() || l == labels.MetricName {
			return fmt.Errorf("label %q in by/without is not a label name (nor __name__)", l)
		}
	}
	delay := DefaultFlushDelay
	if c.FlushDelay != nil {
		delay = *c.FlushDelay
	}
	if delay < 0 {
		return fmt.Errorf("flush_delay %v is negative", delay)
	}
	groups := c.MaxGroups
	if groups < 0 {
		return fmt.Errorf("max_groups %d is negative", groups)
	}
	if groups == 0 {
		groups = DefaultMaxAggregateGroups
	}
	if err := validateRelabel("input_relabel_configs", c.InputRelabel); err != nil {
		return err
	}
	if err := validateRelabel("output_relabel_configs", c.OutputRelabel); err != nil {
		return err
	}
	// A changed relabel list is a changed rule: its state starts over
	// (its groups or output series are other ones).
	relabels, err := yaml.Marshal([2][]*relabel.Config{c.InputRelabel, c.OutputRelabel})
	if err != nil {
		return fmt.Errorf("relabel configs: %w", err)
	}
	ru.inRelabel = c.InputRelabel
	ru.act = actAggregate
	if down {
		ru.act = actDownsample
	}
	ru.by, ru.without, ru.keepInput, ru.multiOut = c.By, c.Without, c.KeepInput, down && len(outs) > 1
	// The labels in the name are sorted and without duplicates, as
	// vmagent writes them: by [b, a] and by [a, b] are one aggregation.
	ru.aggPrefix = model.Duration(c.Interval).String()
	switch {
	case len(c.By) > 0:
		ru.aggPrefix += "_by_" + strings.Join(slices.Compact(slices.Sorted(slices.Values(c.By))), "_")
	case len(c.Without) > 0:
		ru.aggPrefix += "_without_" + strings.Join(slices.Compact(slices.Sorted(slices.Values(c.Without))), "_")
	}
	names := make([]string, len(c.Outputs))
	for i, o := range c.Outputs {
		names[i] = strings.ReplaceAll(o, " ", "")
	}
	spec := aggSpec{interval: c.Interval, delay: delay, outputs: strings.Join(names, ","), downsample: down, maxGroups: groups,
		relabels: string(relabels)}
	ru.agg = m.aggs.get(c.Name, spec, outs, c.OutputRelabel, m.aggCounters(c.Name))
	return nil
}
