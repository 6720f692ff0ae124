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
	if d := Default(); len(d.ExporterSignals()["lake"]) != 3 || len(d.ExporterSignals()) != 1 {
		t.Fatal("the embedded default must stay: everything into the lake, nothing else")
	}

	for _, tc := range []struct{ src, want string }{
		{"exporters: {otlp: {endpoints: [http://x:1], bogus: 1}}", "unknown key exporter.bogus"},
		{"exporters: {zipkin: {endpoints: [http://x:1]}}\npipelines: {traces: {receivers: [otlp], exporters: [lake, zipkin]}}", `exporters.zipkin: unknown exporter type "zipkin"`},
		{"exporters: {otlp: {endpoints: [ftp://x]}}\npipelines: {logs: {receivers: [otlp], exporters: [lake, otlp]}}", "exporters.otlp.endpoints"},
		{"exporters: {otlp: {endpoints: [http://x:1]}}", "exporters.otlp: not used by any pipeline"},
		{"exporters: {otlp: {endpoints: [http://x:1], max_backlog_bytes: 2GiB}}\npipelines: {logs: {receivers: [otlp], exporters: [lake, otlp]}}", "below queue.max_bytes"},
		{"exporters: {otlp: {endpoints: [http://x:1], mode: shard}}\npipelines: {logs: {receivers: [otlp], exporters: [lake, otlp]}}", "exporters.otlp.mode"},
		{"exporters: {prometheus_remote_write: {endpoints: [http://x:1]}}\npipelines: {logs: {receivers: [otlp], exporters: [lake, prometheus_remote_write]}}", "remote write carries metrics only"},
		{"pipelines: {logs: {receivers: [otlp], exporters: [lake, nope]}}", `"nope" is not defined`},
		{"pipelines: {spans: {receivers: [otlp], exporters: [lake]}}", "pipelines.spans: a pipeline is named after its signal"},
		{"pipelines: {logs: {receivers: [otlp], exporters: [lake], processors: [x]}}", "pipelines.logs.processors"},
		{"exporters: {otlp: {endpoints: [http://x:1]}}\npipelines: {logs: {receivers: [otlp], exporters: [otlp]}}", "must include lake"},
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
