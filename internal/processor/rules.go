package processor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

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
	// aligned to the clock (0: forever).
	MaxSeries int           `yaml:"max_series"`
	Per       string        `yaml:"per"`
	Window    time.Duration `yaml:"window"`
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
)

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
	perTenant   bool
	lim         *limiter
	c           *ruleCounters
}

// Rules is a compiled, immutable rules file.
type Rules struct {
	metrics, logs []rule
	m             *Metrics // may be nil
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
func Parse(data []byte, m *Metrics) (*Rules, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, errEOF) {
		return nil, fmt.Errorf("parse: %w", err)
	}
	return Compile(&f, m)
}

// Compile checks and compiles f. m may be nil (validation only).
func Compile(f *File, m *Metrics) (*Rules, error) {
	seen := map[string]bool{}
	if m == nil {
		m, _ = NewMetrics(nil) // unregistered: validation and tests
	}
	r := Rules{m: m}
	var err error
	if r.metrics, err = compileList(f.Metrics, "metrics", false, seen, m); err != nil {
		return nil, err
	}
	if r.logs, err = compileList(f.Logs, "logs", true, seen, m); err != nil {
		return nil, err
	}
	return &r, nil
}

func compileList(cfgs []RuleConfig, sig string, logs bool, seen map[string]bool, m *Metrics) ([]rule, error) {
	if len(cfgs) > maxRules {
		return nil, fmt.Errorf("%s: %d rules, at most %d", sig, len(cfgs), maxRules)
	}
	out := make([]rule, 0, len(cfgs))
	for i := range cfgs {
		c := &cfgs[i]
		where := fmt.Sprintf("%s rule %d (%q)", sig, i+1, c.Name)
		if c.Name == "" {
			return nil, fmt.Errorf("%s rule %d: name is required", sig, i+1)
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
		if (c.OneIn != 0 || c.Probability != nil) && c.Action != "sample" {
			return nil, fmt.Errorf("%s: one_in and probability are only for action sample", where)
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
			for j, rc := range c.Relabel {
				if rc == nil {
					return nil, fmt.Errorf("%s: relabel %d is empty", where, j+1)
				}
				if err := rc.Validate(model.UTF8Validation); err != nil {
					return nil, fmt.Errorf("%s: relabel %d: %w", where, j+1, err)
				}
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
			if c.MaxSeries < 1 {
				return nil, fmt.Errorf("%s: action limit needs max_series >= 1", where)
			}
			if c.Window < 0 {
				return nil, fmt.Errorf("%s: window %v is negative", where, c.Window)
			}
			switch c.Per {
			case "metric":
			case "tenant":
				ru.perTenant = true
			default:
				return nil, fmt.Errorf("%s: per %q: want metric or tenant", where, c.Per)
			}
			ru.act = actLimit
			ru.lim = m.limits.get(c.Name, c.MaxSeries, c.Window)
		case "":
			return nil, fmt.Errorf("%s: action is required (drop, keep, relabel, sample, limit)", where)
		default:
			return nil, fmt.Errorf("%s: unknown action %q (want drop, keep, relabel, sample, limit)", where, c.Action)
		}
		if c.Action != "limit" && (c.MaxSeries != 0 || c.Per != "" || c.Window != 0) {
			return nil, fmt.Errorf("%s: max_series, per and window are only for action limit", where)
		}
		ru.c = m.forRule(c.Name)
		out = append(out, ru)
	}
	return out, nil
}

// probThreshold maps p to the threshold a uniform 64-bit hash is compared
// with (keep when hash < threshold); p = 1 keeps all.
func probThreshold(p float64) uint64 {
	if p >= 1 {
		return ^uint64(0)
	}
	return uint64(p * (1 << 63) * 2)
}
