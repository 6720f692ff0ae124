package pipeline

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
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
