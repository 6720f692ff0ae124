package config

import (
	"strings"
	"testing"
)

func TestExportersAndPipelines(t *testing.T) {
	good := `
exporters:
  otlp/down:
    endpoints: [http://127.0.0.1:4318]
    compression: zstd
  prometheus_remote_write:
    endpoints: [http://a:9090/api/v1/write, http://b:9090/api/v1/write]
    mode: shard
    max_backlog_bytes: 100MiB
pipelines:
  logs:
    receivers: [otlp]
    exporters: [lake, otlp/down]
  metrics:
    receivers: [otlp]
    exporters: [lake, otlp/down, prometheus_remote_write]
`
	c, err := Parse([]byte(good), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid exporters refused: %v", err)
	}
	sig := c.ExporterSignals()
	if strings.Join(sig["otlp/down"], ",") != "logs,metrics" || strings.Join(sig["prometheus_remote_write"], ",") != "metrics" || len(sig["lake"]) != 2 {
		t.Fatalf("signals per exporter: %v", sig)
	}
	e := c.Exporters["otlp/down"].Resolved("otlp/down", c.Queue.MaxBytes)
	if e.Protocol != "http" || e.MaxBacklogBytes != c.Queue.MaxBytes/2 || e.BreakerFailures != 5 {
		t.Fatalf("defaults not resolved: %+v", e)
	}
	w := c.Exporters["prometheus_remote_write"].Resolved("prometheus_remote_write", c.Queue.MaxBytes)
	if e.Concurrency != 4 || w.Concurrency != 1 {
		t.Fatalf("concurrency defaults: otlp 4, prometheus_remote_write 1 (pass-through); got %d, %d", e.Concurrency, w.Concurrency)
	}
	if w.SendNativeHistograms || w.SendMetadata == nil || !*w.SendMetadata {
		t.Fatalf("remote write defaults: send_native_histograms false, send_metadata true; got %v, %v", w.SendNativeHistograms, w.SendMetadata)
	}
	c2, err := Parse([]byte("exporters: {prometheus_remote_write: {endpoints: [http://x:1], send_native_histograms: true, send_metadata: false, concurrency: 8}}\npipelines: {metrics: {receivers: [otlp], exporters: [lake, prometheus_remote_write]}}"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Validate(); err != nil {
		t.Fatal(err)
	}
	if w := c2.Exporters["prometheus_remote_write"].Resolved("prometheus_remote_write", c2.Queue.MaxBytes); !w.SendNativeHistograms || *w.SendMetadata || w.Concurrency != 8 {
		t.Fatalf("send_native_histograms: true, send_metadata: false not kept: %v, %v", w.SendNativeHistograms, *w.SendMetadata)
	}
	if d := Default(); len(d.ExporterSignals()["lake"]) != 3 || len(d.ExporterSignals()) != 1 {
		t.Fatal("the embedded default must stay: everything into the lake, nothing else")
	}

	for _, tc := range []struct{ src, want string }{
		{"exporters: {otlp: {endpoints: [http://x:1], bogus: 1}}", "line 1: unknown key exporters.otlp.bogus"},
		{"exporters: {zipkin: {endpoints: [http://x:1]}}\npipelines: {traces: {receivers: [otlp], exporters: [lake, zipkin]}}", `exporters.zipkin: unknown exporter type "zipkin"`},
		{"exporters: {otlp: {endpoints: [ftp://x]}}\npipelines: {logs: {receivers: [otlp], exporters: [lake, otlp]}}", "exporters.otlp.endpoints"},
		{"exporters: {otlp: {endpoints: [http://x:1]}}", "exporters.otlp: not used by any pipeline"},
		{"exporters: {otlp: {endpoints: [http://x:1], max_backlog_bytes: 2GiB}}\npipelines: {logs: {receivers: [otlp], exporters: [lake, otlp]}}", "below queue.max_bytes"},
		{"exporters: {otlp: {endpoints: [http://x:1], mode: shard}}\npipelines: {logs: {receivers: [otlp], exporters: [lake, otlp]}}", "exporters.otlp.mode"},
		{"exporters: {prometheus_remote_write: {endpoints: [http://x:1]}}\npipelines: {logs: {receivers: [otlp], exporters: [lake, prometheus_remote_write]}}", "remote write carries metrics only"},
		{"exporters: {prometheus_remote_write: {endpoints: [http://x:1], concurrency: -2}}\npipelines: {metrics: {receivers: [otlp], exporters: [prometheus_remote_write]}}", "exporters.prometheus_remote_write.concurrency"},
		{"exporters: {otlp: {endpoints: [http://x:1], concurrency: 100000}}\npipelines: {metrics: {receivers: [otlp], exporters: [otlp]}}", "exporters.otlp.concurrency"},
		{"pipelines: {logs: {receivers: [otlp], exporters: [lake, nope]}}", `"nope" is not defined`},
		{"exporters: {prometheus_remote_write: {endpoints: [http://x:1], headers: {content-encoding: gzip}}}\npipelines: {metrics: {receivers: [otlp], exporters: [prometheus_remote_write]}}", `exporters.prometheus_remote_write.headers: "content-encoding" is set by the exporter for its protocol`},
		{"exporters: {prometheus_remote_write: {endpoints: [http://x:1], headers: {X-Prometheus-Remote-Write-Version: 2.0.0}}}\npipelines: {metrics: {receivers: [otlp], exporters: [prometheus_remote_write]}}", `"X-Prometheus-Remote-Write-Version" is set by the exporter`},
		{"exporters: {otlp: {endpoints: [http://x:1], headers: {Content-Type: text/plain}}}\npipelines: {logs: {receivers: [otlp], exporters: [otlp]}}", `exporters.otlp.headers: "Content-Type" is set by the exporter`},
		{"exporters: {otlp: {endpoints: [http://x:1], headers: {\"bad name\": x}}}\npipelines: {logs: {receivers: [otlp], exporters: [otlp]}}", `exporters.otlp.headers: "bad name" is not a valid header name`},
		{"exporters: {otlp: {endpoints: [http://x:1], tenant_header: X-Scope-OrgID, headers: {x-scope-orgid: a}}}\npipelines: {logs: {receivers: [otlp], exporters: [otlp]}}", `"x-scope-orgid" is the tenant_header`},
		{"exporters: {otlp: {endpoints: [http://x:1], send_native_histograms: true}}\npipelines: {metrics: {receivers: [otlp], exporters: [lake, otlp]}}", "exporters.otlp.send_native_histograms: is for prometheus_remote_write"},
		{"exporters: {otlp: {endpoints: [http://x:1], send_metadata: false}}\npipelines: {metrics: {receivers: [otlp], exporters: [lake, otlp]}}", "exporters.otlp.send_metadata: is for prometheus_remote_write"},
		{"pipelines: {spans: {receivers: [otlp], exporters: [lake]}}", "pipelines.spans: a pipeline is named after its signal"},
		{"pipelines: {logs: {receivers: [otlp], exporters: [lake], processors: [x]}}", "pipelines.logs.processors"},
		{"pipelines: {logs: {receivers: [otlp], exporters: [lake], processors: [x]}}", `"x" is not a rule set of processors.rule_sets (defined: none)`},
		{"processors: {rule_sets: {a: {rules_file: a.yaml}}}\npipelines: {logs: {receivers: [otlp], exporters: [lake], processors: [a, a]}}", `pipelines.logs.processors: "a" is listed twice`},
		{"processors: {rule_sets: {a: {rules_file: a.yaml}}}\npipelines: {logs: {receivers: [otlp], exporters: [lake]}}", "processors.rule_sets.a: not used by any pipeline"},
		{"processors: {rule_sets: {a: {}}}\npipelines: {logs: {receivers: [otlp], exporters: [lake], processors: [a]}}", "processors.rule_sets.a.rules_file: is required"},
		{"processors: {rule_sets: {a/b: {rules_file: a.yaml}}}\npipelines: {logs: {receivers: [otlp], exporters: [lake], processors: [a/b]}}", "a rule set's name must match"},
		{"processors: {rule_sets: {a: {rules_file: a.yaml, bogus: 1}}}", "line 1: unknown key processors.rule_sets.a.bogus"},
		{"receivers: {prometheus_remote_write: {listen: 'nope'}}", "receivers.prometheus_remote_write.listen"},
		{"receivers: {iotrace: {enabled: true}}\nexporters: {otlp: {endpoints: [http://x:1]}}\npipelines: {metrics: {receivers: [otlp], exporters: [otlp]}}", "receivers.iotrace.enabled: the I/O tracer writes io_events into the lake only"},
		{"receivers: {prometheus_remote_write: {listen: 'localhost:9090'}}", `receivers.prometheus_remote_write.listen: "localhost:9090" is also query.addr`},
		{"exporters: {prometheus_remote_write: {endpoints: [http://x:1/w, http://x:1/w], mode: shard}}\npipelines: {metrics: {receivers: [otlp], exporters: [prometheus_remote_write]}}", `exporters.prometheus_remote_write.endpoints: "http://x:1/w" is listed twice`},
		{"exporters: {otlp: {endpoints: [x:1, x:1], protocol: grpc}}\npipelines: {logs: {receivers: [otlp], exporters: [otlp]}}", `exporters.otlp.endpoints: "x:1" is listed twice`},
		{"exporters: {otlp: {endpoints: [http://x:1]}}\npipelines: {logs: {receivers: [prometheus_remote_write], exporters: [otlp]}}", `pipelines.logs.receivers: "prometheus_remote_write" receives metrics only`},
		{"exporters: {otlp: {endpoints: [http://x:1], signals: [traces]}}\npipelines: {logs: {receivers: [otlp], exporters: [lake, otlp]}}", `exporters.otlp.signals: "traces": no traces pipeline lists this exporter (its pipelines carry logs)`},
	} {
		c, err := Parse([]byte(tc.src), env(nil))
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n  got %v, want an error containing %q", tc.src, err, tc.want)
		}
	}
}

// TestPipelineRouting: pipelines of one signal may differ in their
// exporters (the lake in some only) and in their rule sets.
func TestPipelineRouting(t *testing.T) {
	c, err := Parse([]byte(`processors: {rule_sets: {strict: {rules_file: s.yaml}, tidy: {rules_file: t.yaml}}}
exporters: {otlp: {endpoints: [http://x:1]}}
pipelines:
  metrics/lake: {receivers: [otlp], processors: [strict, tidy], exporters: [lake]}
  metrics/down: {receivers: [otlp], processors: [tidy], exporters: [otlp]}
  logs: {receivers: [otlp], exporters: [otlp]}
  traces: {receivers: [otlp], exporters: [lake]}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid routing refused: %v", err)
	}
	if !c.LakeEnabled() {
		t.Fatal("a pipeline lists lake: the lake is on")
	}
}

// TestForwardOnly: pipelines without the lake are a relay: valid, with
// the lake off, and only their signals taken.
func TestForwardOnly(t *testing.T) {
	c, err := Parse([]byte(`receivers: {prometheus_remote_write: {listen: "127.0.0.1:0"}}
exporters: {prometheus_remote_write/down: {endpoints: [http://x:1/api/v1/write]}}
pipelines: {metrics: {receivers: [prometheus_remote_write], exporters: [prometheus_remote_write/down]}}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("a forward-only config must be valid: %v", err)
	}
	if c.LakeEnabled() {
		t.Fatal("no pipeline lists lake, yet LakeEnabled")
	}
	if got := strings.Join(c.PipelineSignals(), ","); got != "metrics" {
		t.Fatalf("PipelineSignals = %q, want metrics", got)
	}
	if d := Default(); !d.LakeEnabled() || len(d.PipelineSignals()) != 3 {
		t.Fatal("the embedded default must write every signal into the lake")
	}
}
