package processor

import (
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v3"

	"github.com/sluice-dev/sluice/internal/prw"
)

// TestRelabelEdgeCasesAsPrometheus: on remote-write and OTLP series alike,
// a relabel gives what Prometheus's relabel.Process gives for regex
// anchoring, separator, modulus, empty source_labels and empty values,
// except in two documented ways (docs/rules.md, Relabel): labels it adds
// whose names begin with "__" are removed after it (as vmagent does), and
// a series it leaves without __name__ is dropped (Prometheus's scrape
// refuses a sample without a metric name).
func TestRelabelEdgeCasesAsPrometheus(t *testing.T) {
	cases := []string{
		`- {action: labeldrop, regex: __name__}`,
		`- {action: replace, target_label: __name__, replacement: ''}`,
		`- {action: replace, target_label: __tmp_x, replacement: 'v'}`,
		`- {action: replace, source_labels: [l__d], target_label: __tmp_x}
- {action: replace, source_labels: [__tmp_x], target_label: y}`,
		`- {action: replace, source_labels: [], regex: '.*', target_label: z, replacement: 'k'}`,
		`- {action: replace, source_labels: [l__d, "lbl.dot"], separator: '|', target_label: z}`,
		`- {action: replace, source_labels: [l__d], regex: 'a', target_label: l__d, replacement: ''}`,
		`- {action: replace, source_labels: [l__d], regex: 'x|a', target_label: z, replacement: 'p$1'}`,
		`- {action: replace, source_labels: [l__d], regex: 'b', target_label: z, replacement: 'p'}`,
		`- {action: hashmod, source_labels: [l__d, "lbl.dot"], modulus: 1000000, target_label: h}`,
		`- {action: replace, source_labels: [__name__], regex: 'n', target_label: z, replacement: 'unanchored'}`,
		`- {action: replace, source_labels: [__name__], regex: 'n.*', target_label: z, replacement: 'anchored'}`,
		`- {action: labelmap, regex: 'l(.*)', replacement: 'm$1'}`,
		`- {action: labelkeep, regex: '__name__|l__d'}`,
		`- {action: keep, source_labels: [l__d], regex: 'a'}`,
		`- {action: drop, source_labels: [l__d], regex: 'a'}`,
		`- {action: dropequal, source_labels: [l__d], target_label: "lbl.dot"}`,
	}
	for _, scope := range []string{prw.ScopeName, "otel"} {
		for _, cfgs := range cases {
			var rcs []*relabel.Config
			if err := yaml.Unmarshal([]byte(cfgs), &rcs); err != nil {
				t.Fatal(err)
			}
			for _, rc := range rcs {
				if err := rc.Validate(model.UTF8Validation); err != nil {
					t.Fatal(err)
				}
			}
			r, err := Parse([]byte("metrics:\n  - name: rl\n    action: relabel\n    relabel:\n"+indent(cfgs, "      ")), nil)
			if err != nil {
				t.Errorf("%s: %v", cfgs, err)
				continue
			}
			b := oddBatch(t, scope, "nm")
			in := labelsOf(b)[0]
			lb := labels.NewBuilder(in)
			keep := relabel.ProcessBuilder(lb, rcs...)
			var s Scratch
			_, kept := r.ProcessMetrics(b, &s)
			got := "dropped"
			if kept == 1 {
				got = labelsOf(b)[0].String()
			}
			want := "dropped"
			if keep && lb.Get(labels.MetricName) != "" {
				lb.Range(func(l labels.Label) {
					if strings.HasPrefix(l.Name, "__") && l.Name != labels.MetricName {
						lb.Del(l.Name)
					}
				})
				want = lb.Labels().String()
			}
			if got != want {
				t.Errorf("%s %s\n  in   %s\n  got  %s\n  prom %s", scope, cfgs, in, got, want)
			}
		}
	}
}
