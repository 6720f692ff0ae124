package processor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v3"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// batch decodes an OTLP/JSON metrics request with one gauge "req" (unit
// "s" -> req_seconds) of n points, user=u<i%users>, from service "api".
func batch(t testing.TB, n, users int) *signal.Metrics {
	t.Helper()
	var pts []string
	for i := 0; i < n; i++ {
		pts = append(pts, fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":%d,"attributes":[{"key":"user.id","value":{"stringValue":"u%d"}},{"key":"code","value":{"intValue":"%d"}}]}`,
			1700000000000000000+int64(i)*1e9, i, i%users, 200+i%2))
	}
	js := `{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"api"}}]},"scopeMetrics":[{"metrics":[{"name":"req","unit":"s","gauge":{"dataPoints":[` +
		strings.Join(pts, ",") + `]}}]}]}]}`
	var m signal.Metrics
	if err := otlp.DecodeMetricsJSON(&m, []byte(js)); err != nil {
		t.Fatal(err)
	}
	return &m
}

func mustParse(t testing.TB, y string) *Rules {
	t.Helper()
	r, err := Parse([]byte(y), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// labelsOf returns the PromQL labels of every point of b.
func labelsOf(b *signal.Metrics) []labels.Labels {
	var s Scratch
	var out []labels.Labels
	for i := 0; i < b.Len(); i++ {
		out = append(out, s.seriesLabels(b, i))
	}
	return out
}

func TestLabelsAsPromQLShowsThem(t *testing.T) {
	b := batch(t, 1, 1)
	got := labelsOf(b)[0].String()
	want := `{__name__="req_seconds", code="200", job="api", service_name="api", user_id="u0"}`
	if got != want {
		t.Fatalf("labels %s, want %s", got, want)
	}
}

func TestDropKeepByPromQLSelector(t *testing.T) {
	b := batch(t, 10, 10)
	r := mustParse(t, `
metrics:
  - name: drop-u3
    match: 'req_seconds{user_id=~"u[34]", job="api"}'
    action: drop
  - name: keep-200
    match: '{code="200"}'
    action: keep
`)
	var s Scratch
	changed, kept := r.ProcessMetrics(b, &s)
	if !changed {
		t.Fatal("no change reported")
	}
	// u0..u9, code 200 for even i; u4 (even) dropped by the first rule.
	if kept != 4 {
		t.Fatalf("kept %d points, want 4 (u0, u2, u6, u8)", kept)
	}
	for _, l := range labelsOf(b) {
		if u := l.Get("user_id"); u == "u4" || l.Get("code") != "200" {
			t.Fatalf("kept %s", l)
		}
	}
	// A batch no rule touches is reported unchanged.
	r2 := mustParse(t, "metrics:\n  - {name: none, match: 'other_metric', action: drop}\n")
	if changed, kept := r2.ProcessMetrics(batch(t, 10, 10), &s); changed || kept != 10 {
		t.Fatalf("changed=%v kept=%d for a rule matching nothing", changed, kept)
	}
}

// TestRelabelEqualsPrometheus checks that the labels of the rewritten
// points (as PromQL shows them) equal relabel.Process on the original label
// sets, for every relabel action that rewrites point labels.
func TestRelabelEqualsPrometheus(t *testing.T) {
	cfgs := `
- {action: replace, source_labels: [user_id], regex: 'u(.*)', target_label: uid, replacement: 'id-$1'}
- {action: labeldrop, regex: user_id}
- {action: uppercase, source_labels: [uid], target_label: uid_up}
- {action: lowercase, source_labels: [uid_up], target_label: uid_low}
- {action: hashmod, source_labels: [uid], modulus: 4, target_label: shard}
- {action: labelmap, regex: 'co(de)', replacement: 'status_$1'}
- {action: drop, source_labels: [uid], regex: 'id-7'}
- {action: keepequal, source_labels: [code], target_label: status_de}
- {action: replace, target_label: __name__, replacement: renamed_total}
`
	var rcs []*relabel.Config
	if err := yaml.Unmarshal([]byte(cfgs), &rcs); err != nil {
		t.Fatal(err)
	}
	r := mustParse(t, "metrics:\n  - name: rl\n    action: relabel\n    relabel:\n"+indent(cfgs, "      "))
	b := batch(t, 10, 10)
	in := labelsOf(b)
	for _, rc := range rcs {
		if err := rc.Validate(model.UTF8Validation); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for _, l := range in {
		lb := labels.NewBuilder(l)
		if relabel.ProcessBuilder(lb, rcs...) {
			want = append(want, lb.Labels().String())
		}
	}
	var s Scratch
	_, kept := r.ProcessMetrics(b, &s)
	if kept != len(want) {
		t.Fatalf("kept %d, Prometheus keeps %d", kept, len(want))
	}
	for i, l := range labelsOf(b) {
		// Renaming to a name without a unit suffix: the PromQL name of the
		// renamed gauge of unit "s" is the new name plus "_seconds"; compare
		// without __name__ and check it separately.
		if got := withoutName(l); got != withoutName(mustLabels(t, want[i])) {
			t.Errorf("point %d: %s, Prometheus gives %s", i, l, want[i])
		}
		if !strings.HasPrefix(l.Get(labels.MetricName), "renamed_total") {
			t.Errorf("point %d: name %q", i, l.Get(labels.MetricName))
		}
	}
}

func indent(s, p string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		b.WriteString(p + l + "\n")
	}
	return b.String()
}

func withoutName(l labels.Labels) string {
	return labels.NewBuilder(l).Del(labels.MetricName).Labels().String()
}

func mustLabels(t *testing.T, s string) labels.Labels {
	t.Helper()
	var b labels.ScratchBuilder
	s = strings.Trim(s, "{}")
	for _, kv := range strings.Split(s, ", ") {
		k, v, _ := strings.Cut(kv, "=")
		b.Add(k, strings.Trim(v, `"`))
	}
	b.Sort()
	return b.Labels()
}

// TestSamplingDeterministic: two processor instances (separate Rules and
// Scratch, as in two processes or after a restart) keep the same series
// and points, and one_in keeps about 1/N of the series.
func TestSamplingDeterministic(t *testing.T) {
	const y = `
metrics:
  - {name: s, action: sample, one_in: 4}
  - {name: p, action: sample, probability: 0.5}
`
	run := func() []string {
		r := mustParse(t, y)
		var s Scratch
		b := batch(t, 4000, 2000)
		if changed, _ := r.ProcessMetrics(b, &s); !changed {
			t.Fatal("sampling kept everything")
		}
		var out []string
		for i, l := range labelsOf(b) {
			out = append(out, fmt.Sprint(l.String(), b.Time[i]))
		}
		return out
	}
	a, b := run(), run()
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatal("two instances sampled differently")
	}
	// 4000 points of 2000 series (x 2 codes... user i%2000, code by i%2):
	// one_in 4 then p 0.5 keeps about 4000/8 = 500.
	if len(a) < 350 || len(a) > 650 {
		t.Fatalf("kept %d points, want about 500", len(a))
	}
}

func TestShadowCountsButKeeps(t *testing.T) {
	r := mustParse(t, "metrics:\n  - {name: sh, match: '{user_id=\"u1\"}', action: drop, shadow: true}\n")
	var s Scratch
	if changed, kept := r.ProcessMetrics(batch(t, 10, 5), &s); changed || kept != 10 {
		t.Fatalf("shadow rule acted: changed=%v kept=%d", changed, kept)
	}
}

func TestLogsDropBySeverityAndAttribute(t *testing.T) {
	js := `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"api"}}]},"scopeLogs":[{"logRecords":[
{"timeUnixNano":"1","severityNumber":5,"body":{"stringValue":"debug"}},
{"timeUnixNano":"2","severityNumber":9,"body":{"stringValue":"info"},"attributes":[{"key":"http.route","value":{"stringValue":"/health"}}]},
{"timeUnixNano":"3","severityNumber":17,"body":{"stringValue":"error"}}]}]}]}`
	var l signal.Logs
	if err := otlp.DecodeLogsJSON(&l, []byte(js)); err != nil {
		t.Fatal(err)
	}
	r := mustParse(t, `
logs:
  - {name: no-debug, action: drop, max_severity: 8}
  - {name: no-health, action: drop, match: '{http_route="/health", service_name="api"}'}
`)
	var s Scratch
	changed, kept := r.ProcessLogs(&l, &s)
	if !changed || kept != 1 || s.OutLogs.SeverityNum[0] != 17 {
		t.Fatalf("changed=%v kept=%d, want only the error record", changed, kept)
	}
}

func TestParseErrorsNameTheProblem(t *testing.T) {
	for y, want := range map[string]string{
		"metrics:\n  - {name: a, action: drop, match: '{a=~\"(\"}'}\n":                                                  "match",
		"metrics:\n  - {name: a, action: explode}\n":                                                                    "unknown action",
		"metrics:\n  - {name: a, action: sample}\n":                                                                     "one_in",
		"metrics:\n  - {name: a, action: drop}\n  - {name: a, action: keep}\n":                                          "name used twice",
		"metrics:\n  - {name: a, action: relabel, relabel: [{action: hashmod, source_labels: [x], target_label: y}]}\n": "modulus",
		"metrics:\n  - {name: a, action: drop, bogus: 1}\n":                                                             "bogus",
	} {
		if _, err := Parse([]byte(y), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one mentioning %q", y, err, want)
		}
	}
}

// TestRemoteWriteStyleLabels: a series without service.name whose points
// carry job and instance attributes (as remote write sends them) shows them
// as job and instance, as the query adapter does, and a relabel of job
// rewrites the attribute.
func TestRemoteWriteStyleLabels(t *testing.T) {
	js := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"up","gauge":{"dataPoints":[{"timeUnixNano":"1","asDouble":1,"attributes":[{"key":"job","value":{"stringValue":"node"}},{"key":"instance","value":{"stringValue":"h:9100"}}]}]}}]}]}]}`
	var b signal.Metrics
	if err := otlp.DecodeMetricsJSON(&b, []byte(js)); err != nil {
		t.Fatal(err)
	}
	if got := labelsOf(&b)[0].String(); got != `{__name__="up", instance="h:9100", job="node"}` {
		t.Fatalf("labels %s", got)
	}
	r := mustParse(t, `
metrics:
  - name: rejob
    match: 'up{job="node"}'
    action: relabel
    relabel: [{action: replace, target_label: job, replacement: nodes}]
`)
	var s Scratch
	if changed, kept := r.ProcessMetrics(&b, &s); !changed || kept != 1 {
		t.Fatalf("changed=%v kept=%d", changed, kept)
	}
	if got := labelsOf(&b)[0].String(); got != `{__name__="up", instance="h:9100", job="nodes"}` {
		t.Fatalf("relabeled %s", got)
	}
}

// TestProcessSteadyStateAllocs: once a batch's series are decided, running
// drop, sample, relabel and limit rules over it allocates nothing.
func TestProcessSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	r := mustParse(t, `
metrics:
  - {name: d, action: drop, match: '{user_id=~"u1.*"}'}
  - {name: s, action: sample, probability: 0.5}
  - name: rl
    action: relabel
    relabel: [{action: replace, target_label: env, replacement: prod}, {action: labeldrop, regex: code}]
  - {name: lim, action: limit, per: metric, max_series: 1000000, window: 1h}
`)
	src := batch(t, 2000, 100)
	var b signal.Metrics // rules work in place: a fresh copy each run
	refill := func() {
		b.Reset()
		for i := range src.Len() {
			b.CopyFrom(src, i)
		}
	}
	s := &Scratch{Tenant: "a", Now: time.Unix(3600, 0)}
	refill()
	r.ProcessMetrics(&b, s)
	refill()
	if n := testing.AllocsPerRun(20, func() { refill(); r.ProcessMetrics(&b, s) }); n != 0 {
		t.Fatalf("%v allocations per batch in steady state", n)
	}
}
