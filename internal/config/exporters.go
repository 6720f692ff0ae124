package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net/textproto"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-dev/sluice/internal/authn"
)

// Exporter types and the built-in lake exporter's name.
const (
	ExporterLake = "lake"
	ExporterOTLP = "otlp"
	ExporterPRW  = "prometheus_remote_write"
)

// protocolHeaders are the headers an exporter sets for its protocol
// (remote write's and OTLP/HTTP's, and those net/http owns), which
// exporters.<name>.headers may not name.
var protocolHeaders = []string{"Content-Type", "Content-Encoding", "Content-Length", "Host", "Transfer-Encoding",
	"X-Prometheus-Remote-Write-Version"}

// Exporter configures one forwarding exporter (exporters.<type>[/<name>]).
// Zero values take the defaults the doc tags name (Resolved fills them).
type Exporter struct {
	Endpoints       []string          `yaml:"endpoints" doc:"otlp over http and prometheus_remote_write: URLs (http://host:4318, https://mimir/api/v1/push); otlp over grpc: host:port, https://host:port (TLS) or http://host:port (plaintext). Several endpoints replicate (mode replicate) or shard (mode shard)."`
	Protocol        string            `yaml:"protocol" doc:"otlp: http (default) or grpc. prometheus_remote_write: 1.0 (default) or 2.0 (an endpoint answering 2.0 with 415, or with a 2xx without X-Prometheus-Remote-Write-*-Written headers as a 1.0 receiver does, gets 1.0 from then on)."`
	Compression     string            `yaml:"compression" doc:"otlp: gzip (default), zstd (http only) or none. prometheus_remote_write: always snappy."`
	Mode            string            `yaml:"mode" doc:"replicate (default: every endpoint gets everything) or shard (prometheus_remote_write only: each series goes to one endpoint by consistent hashing of its labels; adding an endpoint moves about 1/N of the series)."`
	Signals         []string          `yaml:"signals" doc:"Signals forwarded (logs, metrics, traces); default: those of the pipelines that list this exporter. It narrows them: a signal none of them carries is an error."`
	TenantHeader    string            `yaml:"tenant_header" doc:"Header (gRPC metadata) carrying each record's tenant downstream, e.g. X-Scope-OrgID; empty sends none."`
	Headers         map[string]string `yaml:"headers" doc:"Extra headers on every request (use ${ENV} for credentials). Content-Type, Content-Encoding, Content-Length, Host, Transfer-Encoding and X-Prometheus-Remote-Write-Version belong to the protocol and are refused; a User-Agent here replaces sluice/<version>."`
	Timeout         Duration          `yaml:"timeout" doc:"Per request; default 30s."`
	BatchBytes      ByteSize          `yaml:"batch_bytes" doc:"A batch is sent when it holds this many bytes of OTLP bodies; default 1MiB."`
	BatchDelay      Duration          `yaml:"batch_delay" doc:"... or when its first record has waited this long; default 200ms."`
	Concurrency     int               `yaml:"concurrency" doc:"otlp: batches (requests) in flight per endpoint; default 4. prometheus_remote_write: requests in flight per endpoint; default 1. Above 1 each batch is split by series (hash of its labels) into up to this many requests per endpoint sent at once, a series always in the same one, so its samples stay in order (receivers refuse out-of-order samples); batches stay in queue order. Above 1 remote-write records are split by series as received (not decoded) and each lane snappy-encoded again: about twice the CPU per sample of 1, hence the default 1. At most 256."`
	RetryInitial    Duration          `yaml:"retry_initial_backoff" doc:"Shortest first retry delay: retry n waits a random time between this × 2^n and twice that, capped by retry_max_backoff; a longer Retry-After wins. Default 100ms."`
	RetryMax        Duration          `yaml:"retry_max_backoff" doc:"Cap of the retry delay; default 30s. 429, 5xx and transport errors are retried until the backlog bounds drop the data; other 4xx are dropped and counted."`
	BreakerFailures int               `yaml:"breaker_failures" doc:"Consecutive failures that open an endpoint's circuit breaker; default 5."`
	BreakerCooldown Duration          `yaml:"breaker_cooldown" doc:"Open breaker lets one probe through (half-open) after this; default 5s."`
	MaxBacklogBytes ByteSize          `yaml:"max_backlog_bytes" doc:"Queue bytes this exporter may be behind; past it whole old segments are dropped for this exporter only and counted in sluice_exporter_dropped_bytes_total. Default half of queue.max_bytes; must be below queue.max_bytes so a dead backend never fills the queue."`
	MaxBacklogAge   Duration          `yaml:"max_backlog_age" doc:"Age past which this exporter's backlog is dropped (whole segments, counted); default 24h."`
	// Remote write only (as Prometheus's remote_write names them).
	SendNativeHistograms bool        `yaml:"send_native_histograms" doc:"prometheus_remote_write: send native histograms (OTLP exponential histograms) over 1.0 too; default false: 1.0 drops them and counts them in sluice_exporter_dropped_points_total{reason=\"unsupported\"}. 2.0 always carries them."`
	SendMetadata         *bool       `yaml:"send_metadata" doc:"prometheus_remote_write: send metric metadata (type, unit, help): over 1.0 once per metric family and request, over 2.0 on every series; default true. false sends none, also none a remote-write sender sent (such requests are then converted, not forwarded as received)."`
	TLS                  ExporterTLS `yaml:"tls" doc:"TLS to the endpoints: https:// endpoints (and otlp over grpc to a host:port when any tls key is set). A tls block with an http:// endpoint is an error."`
}

// ExporterTLS is an exporter's client side of TLS (exporters.<name>.tls).
// The files are read when sluice starts and again when they change on
// disk: the client certificate and key by authn.ClientCertificate, the CA
// file by the exporter (sending.ClientTLS), for new connections.
type ExporterTLS struct {
	CAFile             string `yaml:"ca_file" doc:"PEM CA certificates to trust instead of the system's roots (a private CA)."`
	CertFile           string `yaml:"cert_file" doc:"PEM client certificate (chain) presented to the endpoints (mutual TLS); needs key_file."`
	KeyFile            string `yaml:"key_file" doc:"PEM private key of cert_file."`
	ServerName         string `yaml:"server_name" doc:"Name the server's certificate is verified against and sent as SNI; default the endpoint's host."`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify" doc:"Do not verify the server's certificate at all: for tests only (anyone on the path can read and change the data). Default false."`
}

// ClientConfig loads the files into a client *tls.Config (nil when no key
// is set), so that a missing file, a CA file without a certificate or a
// key that does not match fails at start-up (and in sluice validate), not
// at the first handshake. Its errors name the key and the file.
func (t ExporterTLS) ClientConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pool, err := authn.LoadCAPool(t.CAFile)
		if errors.Is(err, authn.ErrNoCertificate) {
			return nil, fmt.Errorf("ca_file %w", err)
		}
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		cfg.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("cert_file and key_file must both be set for a client certificate (mutual TLS)")
	}
	if t.CertFile != "" {
		get, err := authn.ClientCertificate(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = get
	}
	return cfg, nil
}

// Enabled reports whether any TLS key is set.
func (t ExporterTLS) Enabled() bool {
	return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify
}

// UnmarshalYAML rejects unknown keys.
func (e *Exporter) UnmarshalYAML(n *yaml.Node) error {
	if errs := checkKeys(n, reflect.TypeFor[Exporter](), "exporter"); len(errs) > 0 {
		return errors.Join(errs...)
	}
	type plain Exporter
	return n.Decode((*plain)(e))
}

// Pipeline says which receivers feed which exporters for one signal
// (pipelines.<signal>[/<name>]).
type Pipeline struct {
	Receivers  []string `yaml:"receivers"`
	Processors []string `yaml:"processors"`
	Exporters  []string `yaml:"exporters"`
}

// UnmarshalYAML rejects unknown keys.
func (p *Pipeline) UnmarshalYAML(n *yaml.Node) error {
	if errs := checkKeys(n, reflect.TypeFor[Pipeline](), "pipeline"); len(errs) > 0 {
		return errors.Join(errs...)
	}
	type plain Pipeline
	return n.Decode((*plain)(p))
}

// ExporterType is the part of an exporter or pipeline name before '/'.
func ExporterType(name string) string {
	t, _, _ := strings.Cut(name, "/")
	return t
}

// Resolved returns e with its defaults filled in, given the queue's size.
func (e Exporter) Resolved(name string, queueMax ByteSize) Exporter {
	def := func(d *Duration, v time.Duration) {
		if *d == 0 {
			*d = Duration(v)
		}
	}
	if e.Protocol == "" {
		e.Protocol = map[string]string{ExporterOTLP: "http", ExporterPRW: "1.0"}[ExporterType(name)]
	}
	if e.Compression == "" {
		e.Compression = map[string]string{ExporterOTLP: "gzip", ExporterPRW: "snappy"}[ExporterType(name)]
	}
	if e.Mode == "" {
		e.Mode = "replicate"
	}
	def(&e.Timeout, 30*time.Second)
	if e.BatchBytes == 0 {
		e.BatchBytes = 1 << 20
	}
	def(&e.BatchDelay, 200*time.Millisecond)
	if e.Concurrency == 0 {
		// Remote write: 1 keeps the pass-through of records as received
		// (the relay's speed); lanes need the decode and convert path.
		e.Concurrency = map[string]int{ExporterPRW: 1}[ExporterType(name)]
		if e.Concurrency == 0 {
			e.Concurrency = 4
		}
	}
	def(&e.RetryInitial, 100*time.Millisecond)
	def(&e.RetryMax, 30*time.Second)
	if e.BreakerFailures == 0 {
		e.BreakerFailures = 5
	}
	def(&e.BreakerCooldown, 5*time.Second)
	if e.MaxBacklogBytes == 0 {
		e.MaxBacklogBytes = queueMax / 2
	}
	def(&e.MaxBacklogAge, 24*time.Hour)
	if e.SendMetadata == nil && ExporterType(name) == ExporterPRW {
		on := true
		e.SendMetadata = &on
	}
	return e
}

// ExporterSignals returns, per exporter named in a pipeline, the signals
// it forwards (its own signals key, else its pipelines' signals). With no
// pipelines configured the result is {lake: all}.
func (c *Config) ExporterSignals() map[string][]string {
	out := map[string][]string{}
	if len(c.Pipelines) == 0 {
		out[ExporterLake] = []string{"logs", "metrics", "traces"}
		return out
	}
	for _, pname := range slices.Sorted(maps.Keys(c.Pipelines)) {
		sig := ExporterType(pname)
		for _, ex := range c.Pipelines[pname].Exporters {
			if !slices.Contains(out[ex], sig) {
				out[ex] = append(out[ex], sig)
			}
		}
	}
	for name, e := range c.Exporters {
		if len(e.Signals) > 0 && out[name] != nil {
			out[name] = e.Signals
		}
	}
	return out
}

// LakeEnabled says whether received data goes into the lake: with no
// pipelines (the embedded default), or when a pipeline lists lake. Without
// it sluice is a forward-only relay: no catalog, lake files or query API.
func (c *Config) LakeEnabled() bool {
	if len(c.Pipelines) == 0 {
		return true
	}
	for _, p := range c.Pipelines {
		if slices.Contains(p.Exporters, ExporterLake) {
			return true
		}
	}
	return false
}

// PipelineSignals returns the signals some pipeline takes (every signal
// when the lake is on, since the lake takes them all). The receivers
// refuse the others rather than acknowledge data no sink reads.
func (c *Config) PipelineSignals() []string {
	if c.LakeEnabled() {
		return slices.Clone(knownSignals)
	}
	var out []string
	for _, s := range knownSignals {
		for pname := range c.Pipelines {
			if ExporterType(pname) == s && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// setNames lists the rule sets' names for an error message.
func setNames(m map[string]RuleSet) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// ruleSetNameRE is what a rule set may be called: it prefixes its rules'
// names in counters and statistics ("<set>/<rule>").
var ruleSetNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

func validateRuleSets(v *validator, c *Config) {
	for _, name := range slices.Sorted(maps.Keys(c.Processors.RuleSets)) {
		k := "processors.rule_sets." + name
		if !ruleSetNameRE.MatchString(name) {
			v.add(k, "a rule set's name must match [A-Za-z0-9_.-]{1,64}")
		}
		if c.Processors.RuleSets[name].RulesFile == "" {
			v.add(k+".rules_file", "is required")
		}
		used := false
		for _, p := range c.Pipelines {
			used = used || slices.Contains(p.Processors, name)
		}
		if !used {
			v.add(k, "not used by any pipeline (list it in pipelines.<p>.processors)")
		}
	}
}

var exporterSuffixRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

var knownSignals = []string{"logs", "metrics", "traces"}

func validateExporters(v *validator, c *Config) {
	for _, name := range slices.Sorted(maps.Keys(c.Exporters)) {
		k := "exporters." + name + "."
		typ := ExporterType(name)
		if _, suffix, ok := strings.Cut(name, "/"); ok && !exporterSuffixRE.MatchString(suffix) {
			v.add("exporters."+name, "the name after / must match [A-Za-z0-9_.-]{1,100}")
			continue
		}
		if name == ExporterLake {
			v.add("exporters."+name, "lake is built in (lake:, queue: configure it); list it in pipelines")
			continue
		}
		if typ != ExporterOTLP && typ != ExporterPRW {
			v.add("exporters."+name, "unknown exporter type %q: want otlp or prometheus_remote_write (optionally /name)", typ)
			continue
		}
		e := c.Exporters[name].Resolved(name, c.Queue.MaxBytes)
		if len(e.Endpoints) == 0 {
			v.add(k+"endpoints", "at least one endpoint is required")
		}
		for i, ep := range e.Endpoints {
			if slices.Contains(e.Endpoints[:i], ep) {
				// Replicated, it would get everything twice; sharded, its
				// two places on the ring would be the same points.
				v.add(k+"endpoints", "%q is listed twice", ep)
			}
			if typ == ExporterOTLP && e.Protocol == "grpc" {
				// host:port, or http:// (plaintext) / https:// (TLS) before it.
				hp, plain := strings.CutPrefix(ep, "http://")
				if !plain {
					hp, _ = strings.CutPrefix(ep, "https://")
				}
				v.addr(k+"endpoints", hp)
				if plain && e.TLS.Enabled() {
					v.add(k+"tls", "endpoint %q is plaintext (http://): drop the tls block or use https:// (or a bare host:port, which tls turns to TLS)", ep)
				}
				continue
			}
			u, err := url.Parse(ep)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.add(k+"endpoints", "%q: want an http:// or https:// URL", ep)
			} else if u.Scheme == "http" && e.TLS.Enabled() {
				v.add(k+"tls", "endpoint %q is plaintext (http://), so the tls settings would not apply to it: use https:// or drop the tls block", ep)
			}
		}
		if t := e.TLS; t.Enabled() {
			if _, err := t.ClientConfig(); err != nil {
				v.add(k+"tls", "%v", err)
			}
		}
		switch typ {
		case ExporterOTLP:
			if e.Protocol != "http" && e.Protocol != "grpc" {
				v.add(k+"protocol", "%q: want http or grpc", e.Protocol)
			}
			if e.Compression != "gzip" && e.Compression != "none" && (e.Compression != "zstd" || e.Protocol == "grpc") {
				v.add(k+"compression", "%q: want gzip, none, or zstd (http only)", e.Compression)
			}
			if e.Mode != "replicate" {
				v.add(k+"mode", "%q: otlp exporters replicate; shard is for prometheus_remote_write", e.Mode)
			}
			if e.SendNativeHistograms {
				v.add(k+"send_native_histograms", "is for prometheus_remote_write (OTLP carries exponential histograms as they are)")
			}
			if e.SendMetadata != nil {
				v.add(k+"send_metadata", "is for prometheus_remote_write (OTLP carries type, unit and description as they are)")
			}
		case ExporterPRW:
			if e.Protocol != "1.0" && e.Protocol != "2.0" {
				v.add(k+"protocol", "%q: want 1.0 or 2.0", e.Protocol)
			}
			if e.Compression != "snappy" {
				v.add(k+"compression", "%q: remote write is always snappy", e.Compression)
			}
			if e.Mode != "replicate" && e.Mode != "shard" {
				v.add(k+"mode", "%q: want replicate or shard", e.Mode)
			}
			for _, s := range e.Signals {
				if s != "metrics" {
					v.add(k+"signals", "%q: remote write carries metrics only", s)
				}
			}
		}
		for _, s := range e.Signals {
			if !slices.Contains(knownSignals, s) {
				v.add(k+"signals", "%q: want logs, metrics or traces", s)
			}
		}
		if e.TenantHeader != "" && !validHeader(e.TenantHeader) {
			v.add(k+"tenant_header", "%q is not a valid header name", e.TenantHeader)
		}
		for _, h := range slices.Sorted(maps.Keys(e.Headers)) {
			switch {
			case !validHeader(h):
				v.add(k+"headers", "%q is not a valid header name", h)
			case slices.Contains(protocolHeaders, textproto.CanonicalMIMEHeaderKey(h)):
				// The protocol's own: a user's value would make the
				// request unreadable to the receiver (the exporter sets
				// them last, so it would be ignored anyway).
				v.add(k+"headers", "%q is set by the exporter for its protocol and cannot be configured", h)
			case e.TenantHeader != "" && strings.EqualFold(h, e.TenantHeader):
				v.add(k+"headers", "%q is the tenant_header, set per record to its tenant", h)
			}
		}
		v.positive(k+"timeout", e.Timeout)
		v.positiveSize(k+"batch_bytes", e.BatchBytes)
		v.positive(k+"batch_delay", e.BatchDelay)
		v.positiveInt(k+"concurrency", e.Concurrency)
		if e.Concurrency > maxExporterConcurrency {
			v.add(k+"concurrency", "%d requests in flight per endpoint is past the most sluice allows, %d", e.Concurrency, maxExporterConcurrency)
		}
		v.positive(k+"retry_initial_backoff", e.RetryInitial)
		v.positive(k+"retry_max_backoff", e.RetryMax)
		v.positiveInt(k+"breaker_failures", e.BreakerFailures)
		v.positive(k+"breaker_cooldown", e.BreakerCooldown)
		v.positive(k+"max_backlog_age", e.MaxBacklogAge)
		if e.MaxBacklogBytes <= 0 || e.MaxBacklogBytes >= c.Queue.MaxBytes {
			v.add(k+"max_backlog_bytes", "%s must be positive and below queue.max_bytes (%s), or a dead backend would fill the queue and stop ingestion", e.MaxBacklogBytes, c.Queue.MaxBytes)
		}
		used := false
		var pipeSignals []string
		for pname, p := range c.Pipelines {
			if slices.Contains(p.Exporters, name) {
				used = true
				pipeSignals = append(pipeSignals, ExporterType(pname))
			}
		}
		if !used {
			v.add("exporters."+name, "not used by any pipeline")
		}
		slices.Sort(pipeSignals)
		pipeSignals = slices.Compact(pipeSignals)
		for _, s := range e.Signals {
			// signals narrows what the exporter's pipelines give it; a
			// signal none of them carries would never reach it.
			if used && slices.Contains(knownSignals, s) && !slices.Contains(pipeSignals, s) {
				v.add(k+"signals", "%q: no %s pipeline lists this exporter (its pipelines carry %s)", s, s, strings.Join(pipeSignals, ", "))
			}
		}
	}
	if c.Receivers.IOTrace.Enabled && !c.LakeEnabled() {
		v.add("receivers.iotrace.enabled", "the I/O tracer writes io_events into the lake only, and no pipeline lists lake (forward only): its records would be queued for no one")
	}
	for _, pname := range slices.Sorted(maps.Keys(c.Pipelines)) {
		p := c.Pipelines[pname]
		k := "pipelines." + pname + "."
		if !slices.Contains(knownSignals, ExporterType(pname)) {
			v.add("pipelines."+pname, "a pipeline is named after its signal: logs, metrics or traces (optionally /name)")
		}
		if len(p.Receivers) == 0 {
			v.add(k+"receivers", "at least one receiver is required")
		}
		for _, r := range p.Receivers {
			if r != "otlp" && r != "prometheus_remote_write" {
				v.add(k+"receivers", "unknown receiver %q (otlp, prometheus_remote_write)", r)
			} else if r == "prometheus_remote_write" && ExporterType(pname) != "metrics" && slices.Contains(knownSignals, ExporterType(pname)) {
				v.add(k+"receivers", "%q receives metrics only; list it in a metrics pipeline", r)
			}
		}
		for i, name := range p.Processors {
			if _, ok := c.Processors.RuleSets[name]; !ok {
				v.add(k+"processors", "%q is not a rule set of processors.rule_sets (defined: %s)", name, setNames(c.Processors.RuleSets))
			} else if slices.Contains(p.Processors[:i], name) {
				v.add(k+"processors", "%q is listed twice", name)
			}
		}
		if len(p.Exporters) == 0 {
			v.add(k+"exporters", "at least one exporter is required (lake, or an exporter of exporters:)")
		}
		for _, ex := range p.Exporters {
			if ex == ExporterLake {
				continue
			}
			if _, ok := c.Exporters[ex]; !ok {
				v.add(k+"exporters", "%q is not defined under exporters:", ex)
			} else if ExporterType(ex) == ExporterPRW && ExporterType(pname) != "metrics" {
				v.add(k+"exporters", "%q: remote write carries metrics only", ex)
			}
		}
	}
}

// maxExporterConcurrency bounds an exporter's requests in flight per
// endpoint: each holds a batch's share in memory (and, for remote write,
// a goroutine and an encode buffer).
const maxExporterConcurrency = 256
