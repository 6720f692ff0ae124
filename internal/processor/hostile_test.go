package processor

import (
	"strings"
	"testing"
	"time"
)

// TestHostileRulesFiles: what `sluice validate` and a reload meet in a
// rules file written carelessly or with intent. Each is refused quickly
// with a message naming the problem, or, where harmless, accepted.
func TestHostileRulesFiles(t *testing.T) {
	bomb := "a: &a [x, x, x, x, x, x, x, x, x]\n"
	for _, c := range []string{"b", "c", "d", "e", "f", "g", "h"} {
		prev := string(rune(c[0] - 1))
		bomb += c + ": &" + c + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+", ", 9), ", ") + "]\n"
	}
	for _, c := range []struct{ name, yaml, want string }{
		{"second document", "metrics:\n  - {name: a, action: drop}\n---\nmetrics:\n  - {name: b, action: keep}\n", "more than one YAML document"},
		{"trailing separator", "metrics:\n  - {name: a, action: drop}\n---\n", ""},
		{"leading separator", "---\nmetrics:\n  - {name: a, action: drop}\n", ""},
		{"unknown field in a relabel", "metrics:\n  - {name: a, action: relabel, relabel: [{action: replace, target_label: x, replacment: y}]}\n", "replacment"},
		{"duplicate key", "metrics:\n  - {name: a, action: drop, name: b}\n", `"name" already defined`},
		{"duplicate name", "metrics:\n  - {name: a, action: drop}\nlogs:\n  - {name: a, action: drop}\n", "name used twice"},
		{"huge repeat in a match", `metrics: [{name: a, action: drop, match: '{a=~"((x{1000}){1000}){1000}"}'}]`, "invalid repeat count"},
		{"huge repeat in a relabel", `metrics: [{name: a, action: relabel, relabel: [{regex: '((x{1000}){1000}){1000}', target_label: x}]}]`, "invalid repeat count"},
		{"long regex", `metrics: [{name: a, action: drop, match: '{a=~"` + strings.Repeat("(a|b)*", 5000) + `"}'}]`, ""},
		{"alias bomb", bomb + "metrics: []\n", "not found in type"},
		{"alias bomb in a rule", bomb + "metrics: [{name: a, action: require, labels: *h}]\n", "unmarshal errors"},
		{"window of a nanosecond", "metrics:\n  - {name: a, action: limit, per: metric, max_series: 1, window: 1ns}\n", "at least 1s"},
		{"modulus 0", "metrics:\n  - {name: a, action: relabel, relabel: [{action: hashmod, source_labels: [a], target_label: b, modulus: 0}]}\n", "non-zero modulus"},
	} {
		start := time.Now()
		_, err := Parse([]byte(c.yaml), nil)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", c.name, d)
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.want)
		}
	}
}
