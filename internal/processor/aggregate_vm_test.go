package processor

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// valueOf returns the value of the one emitted line starting with prefix.
func valueOf(t *testing.T, got []string, prefix string) float64 {
	t.Helper()
	var found []string
	for _, l := range got {
		if strings.HasPrefix(l, prefix) {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d lines start with %s in:\n%s", len(found), prefix, strings.Join(got, "\n"))
	}
	v, err := strconv.ParseFloat(found[0][strings.LastIndex(found[0], " = ")+3:], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// TestAggregateVmagentSampleOutputs: count_series, unique_samples, stddev
// and stdvar as vmagent's lib/streamaggr defines them (population
// deviation; distinct input series; distinct values), hand-computed.
func TestAggregateVmagentSampleOutputs(t *testing.T) {
	r, m := parseWith(t, `
metrics:
  - name: spread
    action: aggregate
    interval: 1m
    flush_delay: 0s
    by: [path]
    outputs: [count_series, unique_samples, stddev, stdvar, count_samples]
`)
	a := map[string]string{"path": "/x", "host": "a"}
	b := map[string]string{"path": "/x", "host": "b"}
	c := map[string]string{"path": "/x", "host": "c"}
	// /x: 2, 4, 4, 4, 5, 5, 7, 9 from three series: mean 5, variance 4.
	in := metricBatch(t, "lat", "gauge",
		inPoint{a, 1 * time.Second, 2}, inPoint{b, 2 * time.Second, 4}, inPoint{c, 3 * time.Second, 4},
		inPoint{a, 11 * time.Second, 4}, inPoint{b, 12 * time.Second, 5}, inPoint{c, 13 * time.Second, 5},
		inPoint{a, 21 * time.Second, 7}, inPoint{b, 22 * time.Second, 9})
	r.ProcessMetrics(in, &Scratch{Tenant: "t"})
	got := flushed(t, m, 60*time.Second)
	p := `t {__name__="lat:1m_by_path_`
	near(t, "count_series", valueOf(t, got, p+`count_series"`), 3)
	near(t, "unique_samples", valueOf(t, got, p+`unique_samples"`), 5)
	near(t, "count_samples", valueOf(t, got, p+`count_samples"`), 8)
	near(t, "stdvar", valueOf(t, got, p+`stdvar"`), 4)
	near(t, "stddev", valueOf(t, got, p+`stddev"`), 2)

	// The next interval starts over: one series, one value.
	r.ProcessMetrics(metricBatch(t, "lat", "gauge", inPoint{a, 70 * time.Second, 3}, inPoint{a, 80 * time.Second, 3}), &Scratch{Tenant: "t"})
	got = flushed(t, m, 120*time.Second)
	near(t, "count_series", valueOf(t, got, p+`count_series"`), 1)
	near(t, "unique_samples", valueOf(t, got, p+`unique_samples"`), 1)
	near(t, "stddev", valueOf(t, got, p+`stddev"`), 0)
}

// TestAggregateVmagentCounterOutputs: total and increase count a new
// series from 0 once the warm-up (stale intervals) is over, as vmagent's
// do; total_prometheus and increase_prometheus take its first sample as a
// baseline only; rate_avg is rate_sum over the series with a rate.
func TestAggregateVmagentCounterOutputs(t *testing.T) {
	r, m := parseWith(t, `
metrics:
  - name: ctr
    action: aggregate
    interval: 1m
    flush_delay: 0s
    without: [host]
    outputs: [total, total_prometheus, increase, increase_prometheus, rate_sum, rate_avg]
`)
	h1 := map[string]string{"host": "a"}
	h2 := map[string]string{"host": "b"}
	h3 := map[string]string{"host": "c"}
	s := &Scratch{Tenant: "t"}
	r.ProcessMetrics(metricBatch(t, "c", "counter",
		inPoint{h1, 0, 10}, inPoint{h2, 10 * time.Second, 100}, inPoint{h1, 20 * time.Second, 15},
		inPoint{h1, 40 * time.Second, 3}, inPoint{h2, 50 * time.Second, 130}), s)
	p := `t {__name__="c_total:1m_without_host_`
	got := flushed(t, m, 60*time.Second)
	// In the warm-up every series' first sample is a baseline: both agree.
	near(t, "total", valueOf(t, got, p+`total"`), 38)
	near(t, "total_prometheus", valueOf(t, got, p+`total_prometheus"`), 38)
	near(t, "increase", valueOf(t, got, p+`increase"`), 38)
	near(t, "rate_sum", valueOf(t, got, p+`rate_sum"`), 8.0/40+30.0/40)
	near(t, "rate_avg", valueOf(t, got, p+`rate_avg"`), (8.0/40+30.0/40)/2)
	for k := 1; k <= 4; k++ { // h1 +5, then +1 a minute
		r.ProcessMetrics(metricBatch(t, "c", "counter", inPoint{h1, time.Duration(k) * time.Minute, float64(7 + k)}), s)
		flushed(t, m, time.Duration(k+1)*time.Minute)
	}
	// Past the warm-up, h3 is new: its first value 7 counts from 0.
	r.ProcessMetrics(metricBatch(t, "c", "counter",
		inPoint{h1, 300 * time.Second, 12}, inPoint{h3, 310 * time.Second, 7}, inPoint{h3, 320 * time.Second, 9}), s)
	got = flushed(t, m, 360*time.Second)
	near(t, "increase_prometheus", valueOf(t, got, p+`increase_prometheus"`), 3)
	near(t, "increase", valueOf(t, got, p+`increase"`), 10)
	near(t, "total_prometheus", valueOf(t, got, p+`total_prometheus"`), 38+5+1+1+1+3)
	near(t, "total", valueOf(t, got, p+`total"`), 38+5+1+1+1+10)
	near(t, "rate_sum", valueOf(t, got, p+`rate_sum"`), 1.0/60+2.0/10)
	near(t, "rate_avg", valueOf(t, got, p+`rate_avg"`), (1.0/60+2.0/10)/2)
}

// TestAggregateInputOutputRelabel: input_relabel_configs relabel the
// series before they are grouped (a series they drop is not taken and
// passes), output_relabel_configs the series emitted (one they drop is not
// written), as vmagent's per-aggregation relabeling.
func TestAggregateInputOutputRelabel(t *testing.T) {
	r, m := parseWith(t, `
metrics:
  - name: by-zone
    action: aggregate
    interval: 1m
    flush_delay: 0s
    by: [zone]
    outputs: [sum, count]
    input_relabel_configs:
      - source_labels: [host]
        regex: '(.)-.*'
        target_label: zone
      - source_labels: [host]
        regex: 'canary-.*'
        action: drop
    output_relabel_configs:
      - source_labels: [__name__]
        regex: '(.*)_count'
        action: drop
      - source_labels: [__name__]
        regex: 'req:1m_by_zone_(.*)'
        target_label: __name__
        replacement: 'req_zone_$1'
      - target_label: env
        replacement: prod
`)
	in := metricBatch(t, "req", "gauge",
		inPoint{map[string]string{"host": "a-1"}, 1 * time.Second, 1},
		inPoint{map[string]string{"host": "a-2"}, 2 * time.Second, 2},
		inPoint{map[string]string{"host": "b-1"}, 3 * time.Second, 4},
		inPoint{map[string]string{"host": "canary-1"}, 4 * time.Second, 100})
	if _, kept := r.ProcessMetrics(in, &Scratch{Tenant: "t"}); kept != 1 {
		t.Fatalf("kept %d points, want 1: the series input relabeling drops passes", kept)
	}
	wantLines(t, flushed(t, m, 60*time.Second),
		`t {__name__="req_zone_sum", env="prod", zone="a"} @60s = 3`,
		`t {__name__="req_zone_sum", env="prod", zone="b"} @60s = 4`)
	if _, err := Parse([]byte(`
metrics:
  - name: x
    action: drop
    input_relabel_configs: [{target_label: a, replacement: b}]
`), nil); err == nil || !strings.Contains(err.Error(), "input_relabel_configs") {
		t.Fatalf("input_relabel_configs on a drop rule: %v", err)
	}
	if _, err := Parse([]byte(`
metrics:
  - name: x
    action: aggregate
    interval: 1m
    outputs: [sum]
    output_relabel_configs: [{action: replace, target_label: a, regex: '('}]
`), nil); err == nil || !strings.Contains(err.Error(), `line 3: metrics rule 1 ("x")`) {
		t.Fatalf("bad output_relabel_configs: %v", err)
	}
}

// TestRulesFileErrorsNameLine: a bad rule is named by its line, list,
// number and name, whether its value's own parser (a regex, a duration)
// or the rule's checks refuse it.
func TestRulesFileErrorsNameLine(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"metrics:\n  - name: ok\n    action: drop\n  - name: bad-window\n    action: limit\n    per: metric\n    max_series: 1\n    window: 10x\n",
			`line 4: metrics rule 2 ("bad-window")`},
		{"metrics:\n  - name: ok\n    action: drop\n  - name: bad-limit\n    action: limit\n    per: nothing\n",
			`line 4: metrics rule 2 ("bad-limit"): per "nothing"`},
		{"logs:\n  - name: l\n    action: sample\n", `line 2: logs rule 1 ("l"): action sample needs`},
		{"metrics:\n  - name: r\n    action: relabel\n    relabel: [{source_labels: [a], regex: '[', target_label: b}]\n",
			`line 2: metrics rule 1 ("r")`},
	} {
		_, err := Parse([]byte(c.yaml), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %s", c.yaml, err, c.want)
		}
	}
}
