package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/processor"
	"github.com/sluice-dev/sluice/internal/signal"
)

func routingOf(t testing.TB, src string) *routing {
	t.Helper()
	cfg, err := config.Parse([]byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return newRouting(&cfg)
}

// TestRoutingGroups: pipelines group by processor chain; a group every
// consumer of its signal is in gets an empty destination list, the others
// name their exporters; without processors nothing routes.
func TestRoutingGroups(t *testing.T) {
	plain := routingOf(t, `exporters: {otlp/a: {endpoints: [http://x:1]}, otlp/b: {endpoints: [http://x:1]}}
pipelines:
  metrics/a: {receivers: [otlp], exporters: [lake, otlp/a]}
  metrics/b: {receivers: [otlp], exporters: [otlp/b]}
  logs: {receivers: [otlp], exporters: [lake]}
`)
	if plain.active() {
		t.Fatalf("no processors and every signal's pipelines reach all its consumers: nothing to route, got %+v", plain.routes)
	}
	rt := routingOf(t, `processors: {rule_sets: {s: {rules_file: s.yaml}, u: {rules_file: u.yaml}}}
exporters: {otlp/a: {endpoints: [http://x:1]}, otlp/b: {endpoints: [http://x:1]}, otlp/c: {endpoints: [http://x:1]}}
pipelines:
  metrics/a: {receivers: [otlp], processors: [s, u], exporters: [lake]}
  metrics/b: {receivers: [otlp], processors: [u], exporters: [otlp/a]}
  metrics/c: {receivers: [otlp], processors: [s, u], exporters: [otlp/b]}
  metrics/d: {receivers: [otlp], exporters: [otlp/c]}
  logs: {receivers: [otlp], exporters: [otlp/a]}
  traces: {receivers: [otlp], processors: [s], exporters: [lake]}
`)
	ms := rt.routes[signal.KindMetrics]
	var got []string
	for _, r := range ms {
		got = append(got, strings.Join(r.pipelines, "+")+"="+strings.Join(r.dest, ","))
	}
	if want := "metrics/a+metrics/c=lake,otlp/b metrics/b=otlp/a metrics/d=otlp/c"; strings.Join(got, " ") != want {
		t.Fatalf("metric routes %q, want %q", got, want)
	}
	if !ms[0].lake || ms[1].lake || len(ms[0].chain) != 2 || ms[0].chain[0].name != "s" || rt.plain[signal.KindMetrics] {
		t.Fatalf("metric routes: %+v", ms)
	}
	// Logs: the lake is on (metrics, traces) but no logs pipeline lists it.
	if ls := rt.routes[signal.KindLogs]; len(ls) != 1 || strings.Join(ls[0].dest, ",") != "otlp/a" || rt.plain[signal.KindLogs] {
		t.Fatalf("logs routes: %+v", ls)
	}
	// Traces have no rules: one route, to every trace consumer.
	if !rt.plain[signal.KindTraces] {
		t.Fatalf("traces routes: %+v", rt.routes[signal.KindTraces])
	}
	if d := rt.emitDest("u"); d != nil && len(d) > 0 {
		// u is in two chains: emitDest answers the first, but a set with
		// aggregates there is refused:
		agg, err := processor.Parse([]byte("metrics:\n  - {name: g, action: aggregate, interval: 1m, outputs: [sum]}\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.checkAggregation("u", agg); err == nil || !strings.Contains(err.Error(), "rule set u has aggregate or downsample rules and is in 2 processor chains") {
			t.Fatalf("aggregates in a set of two chains: %v", err)
		}
		if err := rt.checkAggregation("s", agg); err != nil {
			t.Fatalf("aggregates in a set of one chain refused: %v", err)
		}
	} else {
		t.Fatalf("emitDest(u) = %v", d)
	}
	if d := rt.emitDest("s"); strings.Join(d, ",") != "lake,otlp/b" || rt.emitDest("") != nil {
		t.Fatalf("emitDest(s) = %v, emitDest(\"\") = %v", d, rt.emitDest(""))
	}
}

// TestRecordsPerRouteLogs: a logs request after processors.rules_file runs
// each route's chain on its own copy: every record names its route's
// exporters and holds exactly what its chain kept, and a route without a
// chain gets the request as the default rules left it.
func TestRecordsPerRouteLogs(t *testing.T) {
	rt := routingOf(t, `processors: {rule_sets: {a: {rules_file: a.yaml}, b: {rules_file: b.yaml}}}
exporters: {otlp/x: {endpoints: ['http://127.0.0.1:1']}, otlp/y: {endpoints: ['http://127.0.0.1:1']}}
pipelines:
  logs/a: {receivers: [otlp], processors: [a], exporters: [lake]}
  logs/b: {receivers: [otlp], processors: [b], exporters: [otlp/x]}
  logs/c: {receivers: [otlp], exporters: [otlp/y]}
`)
	parse := func(set, src string) *processor.Rules {
		t.Helper()
		r, err := processor.ParseSet([]byte(src), nil, set)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rt.sets["a"].rules.Store(parse("a", "logs:\n  - {name: no-debug, action: drop, max_severity: 8}\n"))
	rt.sets["b"].rules.Store(parse("b", "logs:\n  - {name: no-x, action: drop, match: '{x=\"1\"}'}\n"))
	def := parse("", "logs:\n  - {name: no-noise, action: drop, match: '{noise=\"1\"}'}\n")
	rec := func(sev int, k, v string) string {
		return fmt.Sprintf(`{"timeUnixNano":"1","severityNumber":%d,"body":{"stringValue":"s%d"},"attributes":[{"key":%q,"value":{"stringValue":%q}}]}`, sev, sev, k, v)
	}
	var in signal.Logs
	if err := otlp.DecodeLogsJSON(&in, []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[`+
		strings.Join([]string{rec(5, "k", "v"), rec(9, "x", "1"), rec(13, "k", "w"), rec(10, "noise", "1")}, ",")+`]}]}]}`)); err != nil {
		t.Fatal(err)
	}
	body := otlp.AppendLogsProto(nil, &in)
	c := &consumer{routes: rt}
	for pass := range 3 { // pooled buffers reused
		s := new(scratch)
		if pass > 0 {
			if p, ok := c.pool.Get().(*scratch); ok {
				s = p
			}
		}
		n, err := s.decode(signal.KindLogs, body, nil, 0, otlp.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		s.proc.Tenant = "acme"
		b, n := s.process(def, signal.KindLogs, body, n)
		if n != 3 || !s.changed {
			t.Fatalf("default rules kept %d (changed %v), want 3", n, s.changed)
		}
		recs, kept, _, _ := c.records(s, signal.KindLogs, "acme", b, n)
		got := map[string]string{}
		for _, r := range recs {
			pr, err := parseRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			var out signal.Logs
			if err := otlp.DecodeLogs(&out, pr.Body); err != nil {
				t.Fatal(err)
			}
			got[strings.Join(pr.destinations(), ",")] = fmt.Sprint(out.SeverityNum)
		}
		want := map[string]string{"lake": "[9 13]", "otlp/x": "[5 13]", "otlp/y": "[5 9 13]"}
		if fmt.Sprint(got) != fmt.Sprint(want) || kept != 3 {
			t.Fatalf("pass %d: records %v (largest route %d), want %v", pass, got, kept, want)
		}
		c.put(s)
	}
}
