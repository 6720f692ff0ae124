package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-dev/sluice/internal/tenant"
)

// Config is the whole configuration of `sluice run`. Field tags drive
// parsing (yaml), the generated reference (doc) and, for values derived
// from other keys when left empty, the documented default (derived).
type Config struct {
	Receivers       Receivers           `yaml:"receivers" doc:"Where telemetry comes in."`
	Queue           Queue               `yaml:"queue" doc:"The durable write-ahead queue between receivers and the lake."`
	Lake            Lake                `yaml:"lake" doc:"The Parquet lake and how often it is checkpointed."`
	Catalog         Catalog             `yaml:"catalog" doc:"The catalog of lake segments and committed queue positions."`
	Upkeep          Upkeep              `yaml:"upkeep" doc:"Lake upkeep that sluice run does in the background: compaction, rollups, retention and the sweeper (docs/upkeep.md)."`
	Query           Query               `yaml:"query" doc:"The query HTTP API: Prometheus-compatible PromQL over the lake (docs/query.md)."`
	Admin           Admin               `yaml:"admin" doc:"The admin HTTP server: /metrics, /healthz, /readyz."`
	Log             Log                 `yaml:"log" doc:"Process logs (stderr)."`
	Exporters       map[string]Exporter `yaml:"exporters" doc:"Forwarding exporters by name, <type>[/<name>] with type otlp or prometheus_remote_write; each reads the queue with a cursor of its own (at-least-once delivery). Keys: docs/config.md#exporters-and-pipelines."`
	Pipelines       map[string]Pipeline `yaml:"pipelines" doc:"Per signal (<signal>[/<name>]): {receivers: [otlp], processors: [], exporters: [lake, otlp/x]}. Empty: everything received goes into the lake. Keys: docs/config.md#exporters-and-pipelines."`
	Processors      Processors          `yaml:"processors" doc:"Processing rules between the receivers and the queue: what a rule drops is never stored nor forwarded (docs/rules.md)."`
	Stats           Stats               `yaml:"stats" doc:"Live statistics of the metric series stored: active series, samples/s, bytes/s and label cardinality per tenant and metric, served on /api/v1/status/tsdb and /api/v1/status/sluice (docs/stats.md)."`
	ShutdownTimeout Duration            `yaml:"shutdown_timeout" doc:"Upper bound on a graceful shutdown (SIGTERM/SIGINT): draining requests in flight, the final lake checkpoint and closing. Data not committed by then stays in the queue and is replayed at the next start."`

	// lines is where the file set each key, for Validate's messages; nil
	// for the defaults. Shared by copies and never written after Parse
	// (Override copies it).
	lines lines
}

// Override forgets the file's line of key: a command-line flag set it, so
// a problem with its value is not the file's.
func (c *Config) Override(key string) {
	if c.lines == nil {
		return
	}
	l := make(lines, len(c.lines)+1)
	for k, v := range c.lines {
		if !strings.HasPrefix(k, key+".") && !strings.HasPrefix(k, key+"[") {
			l[k] = v
		}
	}
	l[key] = 0 // no line: line() stops here rather than at the section
	c.lines = l
}

// Processors configures the processing rules (docs/rules.md).
type Processors struct {
	RulesFile      string             `yaml:"rules_file" doc:"YAML rules file (docs/rules.md) every pipeline runs first, once per request; empty: no rules. Checked by sluice validate; a sluice run that cannot load it does not start."`
	RuleSets       map[string]RuleSet `yaml:"rule_sets" doc:"Named rule sets, {name: {rules_file: FILE}}, that pipelines.<p>.processors lists in the order a pipeline runs them (after rules_file). Each set is reloaded on its own; its rules are named <set>/<rule> in counters and statistics, and its limit and aggregate state is its own (docs/rules.md#rules-per-pipeline)."`
	ReloadInterval Duration           `yaml:"reload_interval" doc:"How often sluice run checks the rules file for changes (SIGHUP reloads at once); 0 only on SIGHUP. An invalid new file keeps the old rules (logged, counted in sluice_processor_reload_failures_total)."`
	MaxRuleEffects int                `yaml:"max_rule_effects" doc:"(rule, tenant, metric name) entries of what each metric rule dropped or changed (and the points each limit found over its limit), shown on /api/v1/status/sluice and in sluice top's rules tab (about 150 bytes each plus the names); past it new entries are not made and their points are counted in sluice_processor_rule_effects_overflow_points_total (docs/stats.md)."`
}

// RuleSet is one named rule set (processors.rule_sets.<name>).
type RuleSet struct {
	RulesFile string `yaml:"rules_file" doc:"YAML rules file of the set (docs/rules.md)."`
}

// UnmarshalYAML rejects unknown keys.
func (r *RuleSet) UnmarshalYAML(n *yaml.Node) error {
	if errs := checkKeys(n, reflect.TypeFor[RuleSet](), "rule set"); len(errs) > 0 {
		return errors.Join(errs...)
	}
	type plain RuleSet
	return n.Decode((*plain)(r))
}

// Stats bounds the live statistics (docs/stats.md).
type Stats struct {
	Enabled       bool     `yaml:"enabled" doc:"Keep the statistics (50-200 ns per data point of a known series on one core, docs/stats.md); off: /api/v1/status/tsdb answers empty lists."`
	Window        Duration `yaml:"window" doc:"Activity window, aligned to the clock: a series is active while it had a point in the current or the previous window. At least 1s."`
	MaxSeries     int      `yaml:"max_series" doc:"Active series tracked (in a table of at most twice as many 12-byte slots: 24 MiB at 1000000). Past it new series are not counted (sluice_stats_series_overflow_total) and the numbers are lower bounds. 1..1073741824."`
	MaxMetrics    int      `yaml:"max_metrics" doc:"(tenant, metric name) entries tracked; past it new names are not counted (sluice_stats_metrics_overflow_total)."`
	MaxLabelPairs int      `yaml:"max_label_pairs" doc:"(tenant, label, value) entries tracked for the cardinality lists (about 150 bytes each plus up to 256 bytes of value), and as many (tenant, metric family, label, value) ones (about 100 bytes each); past it new pairs are not counted (sluice_stats_label_pairs_overflow_total)."`
}

// Receivers groups the receivers.
type Receivers struct {
	OTLP                  OTLP                  `yaml:"otlp" doc:"OTLP over gRPC and HTTP (protobuf or JSON; gzip, zstd or none)."`
	PrometheusRemoteWrite PrometheusRemoteWrite `yaml:"prometheus_remote_write" doc:"Prometheus remote write 1.0 and 2.0 on POST /api/v1/write of the query API (query.addr) and, when listen is set, on an address of its own; both behind query.auth (a token needs the write scope), query.tls and the tenant header (receivers.otlp.tenant_header). Acknowledged after fsync in the queue, like OTLP."`
	IOTrace               IOTrace               `yaml:"iotrace" doc:"The eBPF I/O syscall tracer of sluice trace as a source: traced calls are queued like received records (durable queue, then the lake's io_events table through the same writer and catalog). Needs root (or CAP_BPF and CAP_PERFMON), BTF and the lake; see docs/trace.md."`
}

// IOTrace configures the eBPF I/O tracer source (docs/trace.md).
type IOTrace struct {
	Enabled     bool           `yaml:"enabled" doc:"Trace I/O syscalls into the lake's io_events table. Off by default; sluice run fails at start, naming what is missing, when this machine cannot trace (sluice trace --check)."`
	Tenant      string         `yaml:"tenant" doc:"Tenant of the recorded io_events rows."`
	PID         uint32         `yaml:"pid" doc:"Trace only this process id (kernel filter); 0 all."`
	TID         uint32         `yaml:"tid" doc:"Trace only this thread id (kernel filter; its process's other threads still send their opens, closes and dups, so its fds keep their paths); 0 all."`
	Comm        string         `yaml:"comm" doc:"Trace only tasks with exactly this command name, at most 15 bytes (kernel filter); empty all."`
	Cgroup      uint64         `yaml:"cgroup" doc:"Trace only this cgroup v2 id (the inode number of its directory; kernel filter); 0 all."`
	Syscalls    string         `yaml:"syscalls" doc:"Comma-separated syscalls or groups (all, open, read, write, sync, stat, fd, meta, newfd), as sluice trace --syscalls (kernel filter); the newfd calls (pipe, socket, eventfd and the like) are always traced for the fd → path table."`
	MinDuration Duration       `yaml:"min_duration" doc:"Drop calls shorter than this (kernel filter)."`
	PathPrefix  string         `yaml:"path_prefix" doc:"Keep only calls on paths under this prefix (first thing in user space)."`
	PathGlob    string         `yaml:"path_glob" doc:"Keep only calls on paths matching this absolute glob, as sluice trace --path-glob: * ? [..] within a path component, ** any number of components (first thing in user space)."`
	RingBytes   ByteSize       `yaml:"ring_bytes" doc:"Kernel ring buffer size, a power of two from 4KiB to 1GiB: locked kernel memory. A full ring counts its lost records (sluice_iotrace_lost_total), never silently."`
	Attach      string         `yaml:"attach" doc:"auto, fentry or tracepoint, as sluice trace --attach."`
	Metrics     IOTraceMetrics `yaml:"metrics" doc:"Traced I/O also as OTLP-shaped metrics into the pipeline (sluice_io_operations_total, sluice_io_bytes_total, sluice_io_errors_total, sluice_io_duration_seconds per comm, syscall and path_prefix), queued for the tenant above so PromQL serves them."`
}

// IOTraceMetrics configures the traced I/O metrics (receivers.iotrace.metrics).
type IOTraceMetrics struct {
	Enabled   bool     `yaml:"enabled" doc:"Aggregate traced calls into cumulative per (comm, syscall, path_prefix) counters and a latency histogram, queued as one OTLP metrics record (resource service.name sluice-iotrace, host.name) every interval."`
	Interval  Duration `yaml:"interval" doc:"How often the cumulative metrics are queued (one point per series and metric each time)."`
	PathDepth int      `yaml:"path_depth" doc:"path_prefix is the path's first this many components (/var/lib for 2); a shorter path is its own prefix; calls without a path have an empty path_prefix."`
	MaxSeries int      `yaml:"max_series" doc:"Most (comm, syscall, path_prefix) series kept; calls of new series beyond it are folded into comm=other, path_prefix=other of their syscall and counted (sluice_iotrace_metrics_overflow_total)."`
}

// PrometheusRemoteWrite configures the remote-write receiver.
type PrometheusRemoteWrite struct {
	Enabled               bool     `yaml:"enabled" doc:"Serve POST /api/v1/write on query.addr (when set) and on listen (when set)."`
	Listen                string   `yaml:"listen" doc:"host:port of a listener of its own serving only POST /api/v1/write, with the query address's TLS (query.tls) and tokens (query.auth, write scope); empty: remote write on query.addr only. Port 0 picks a free port (printed at start as prw=)."`
	MaxRequestBytes       ByteSize `yaml:"max_request_bytes" doc:"Largest request body, snappy-compressed and decoded; larger requests get 413. Its OTLP form (about the same size) must fit in one queue segment, else the request gets 400."`
	MaxConcurrentRequests int      `yaml:"max_concurrent_requests" doc:"Requests read and processed at once; others wait for a slot (memory is bounded by about 3 × max_request_bytes per slot)."`
	MaxConnections        int      `yaml:"max_connections" doc:"Connections open at once on listen (remote write's own listener; on query.addr query.max_connections applies). One more is closed as soon as it is accepted and counted in sluice_http_connections_refused_total{server=\"remote write\"}. A Prometheus opens up to its queue_config.max_shards connections."`
	MaxMetadataFamilies   int      `yaml:"max_metadata_families" doc:"Metric families per tenant whose metadata (type, help, unit), sent without series as Prometheus sends it, the catalog keeps for /api/v1/metadata; entries of further families are dropped and counted (sluice_prw_metadata_families_total{result=\"refused\"}). 0: no limit."`
}

// OTLP configures the OTLP receiver.
type OTLP struct {
	GRPCAddr              string   `yaml:"grpc_addr" doc:"host:port for OTLP/gRPC; empty disables gRPC. Port 0 picks a free port (printed at start)."`
	HTTPAddr              string   `yaml:"http_addr" doc:"host:port for OTLP/HTTP (POST /v1/logs, /v1/metrics, /v1/traces); empty disables HTTP."`
	TenantHeader          string   `yaml:"tenant_header" doc:"Header (gRPC metadata key) naming the tenant, e.g. X-Scope-OrgID; empty puts everything under default_tenant. A tenant must match [A-Za-z0-9._-]{1,64}. A request with the header twice, or with an empty one (what a client sends when the variable meant to fill it is unset), is refused (400 / InvalidArgument), on every receiver and query endpoint alike. Tenant names are case-sensitive and kept as sent, but a name that differs only in case from a tenant the lake already has is refused (400), since both would share one directory on a case-insensitive file system."`
	DefaultTenant         string   `yaml:"default_tenant" doc:"Tenant of requests without the tenant header."`
	MaxTenants            int      `yaml:"max_tenants" doc:"Most tenants this process accepts data for (OTLP and remote write), the lake's existing tenants included. A request for a new tenant past it is refused (400 / InvalidArgument naming this key) and counted in sluice_pipeline_limited_requests_total{limit=\"max_tenants\"}; known tenants go on. Each tenant costs a lake directory, a file per partition and checkpoint, and a dozen series on /metrics, and clients name tenants themselves unless query.auth binds tokens to them. 0 means no limit."`
	BearerToken           string   `yaml:"bearer_token" doc:"When set, every request must carry 'Authorization: Bearer TOKEN'. Use ${ENV} rather than writing secrets into the file."`
	TLS                   TLS      `yaml:"tls" doc:"TLS for both transports; plaintext when cert_file and key_file are empty. The files are read again when they change on disk (checked at most once a second, on a handshake): a rotated certificate or CA needs no restart; files that do not load keep the ones in use (logged, sluice_tls_reloads_total{result=\"failed\"})."`
	MaxRequestBytes       ByteSize `yaml:"max_request_bytes" doc:"Largest request body, compressed and decompressed; larger requests get 413 / RESOURCE_EXHAUSTED. Must fit in one queue segment."`
	MaxConcurrentRequests int      `yaml:"max_concurrent_requests" doc:"Requests processed (decoded and queued) at once. A request takes a slot only after its body is read, so slow clients never hold one; a request finding none free within 250ms gets 429 / RESOURCE_EXHAUSTED."`
	MaxInflightBytes      ByteSize `yaml:"max_inflight_bytes" doc:"Memory bound on request bodies held at once, being read or processed (decompressed; gRPC messages once received). A body reserves as its bytes arrive; one that cannot within 250ms gets 429 / RESOURCE_EXHAUSTED with a retry hint. More than max_request_bytes."`
	MinBodyRate           ByteSize `yaml:"min_body_rate" doc:"Minimum rate (bytes per second, on the wire) of an HTTP request body once body_rate_grace has passed: by grace + t the client must have sent min_body_rate × t bytes, else it gets 408 and sluice_receiver_slow_clients_total counts it. 0 disables (read_timeout still bounds the body)."`
	BodyRateGrace         Duration `yaml:"body_rate_grace" doc:"Time a request body may take before min_body_rate applies."`
	MaxConnections        int      `yaml:"max_connections" doc:"Connections open at once per transport (gRPC, HTTP). One more is closed as soon as it is accepted and counted in sluice_receiver_connections_refused_total, so that clients cannot take the file descriptors the queue and the lake writer need. Keep it well below the process's open-file limit (ulimit -n)."`
	ReadTimeout           Duration `yaml:"read_timeout" doc:"Bound on reading one whole request. A gRPC stream that has not sent its whole message by then is ended (DeadlineExceeded) and counted in sluice_receiver_slow_clients_total."`
	WriteTimeout          Duration `yaml:"write_timeout" doc:"Bound on processing and answering one request (HTTP)."`
	IdleTimeout           Duration `yaml:"idle_timeout" doc:"Idle keep-alive connections are closed after this."`
	MaxAttrsPerRecord     int      `yaml:"max_attributes_per_record" doc:"Most attributes of one log record, data point or span, and of one resource or scope. A request with a set past it is refused whole (400 / InvalidArgument naming the limit) and counted in sluice_pipeline_limited_requests_total{limit=\"max_attributes_per_record\"}. 0 means no limit."`
	MaxAttrsPerRequest    int      `yaml:"max_attributes_per_request" doc:"Most attributes of one request, all sets together; past it the request is refused like max_attributes_per_record. 0 means no limit."`
	MaxRecordsPerRequest  int      `yaml:"max_records_per_request" doc:"Most log records, data points or spans of one request, and most resources, scopes and metrics holding them, counted before it is decoded: each takes a few hundred bytes once decoded however few it has on the wire, so 16MiB of empty records would take gigabytes. Past it the request is refused whole (400 / InvalidArgument naming the limit) and counted in sluice_receiver_limited_requests_total{limit=\"max_records_per_request\"}. 0 means no limit."`
}

// TLS names PEM files.
type TLS struct {
	CertFile     string `yaml:"cert_file" doc:"PEM certificate (chain) of the server."`
	KeyFile      string `yaml:"key_file" doc:"PEM private key of the server."`
	ClientCAFile string `yaml:"client_ca_file" doc:"When set, clients must present a certificate signed by one of these CAs (mutual TLS)."`
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.ClientCAFile != "" }

// Queue configures the durable queue.
type Queue struct {
	Dir              string   `yaml:"dir" derived:"<lake.root>/_queue" doc:"Directory of the queue segments. The default's underscore prefix hides it from Hive-style lake readers."`
	MaxBytes         ByteSize `yaml:"max_bytes" doc:"Cap on the queue's size on disk. When reached, full_policy applies."`
	SegmentBytes     ByteSize `yaml:"segment_bytes" doc:"Size of one segment file; at most max_bytes/2. Space is released a whole segment at a time."`
	FullPolicy       string   `yaml:"full_policy" doc:"What happens when the queue is full: backpressure (requests get 429 / RESOURCE_EXHAUSTED with a retry hint, remote write 503 with one; nothing is lost) or drop_oldest (the oldest unwritten data is deleted and counted in sluice_queue_dropped_records_total)."`
	GroupCommitDelay Duration `yaml:"group_commit_delay" doc:"How long an fsync waits for more requests to join it, only while requests arrive concurrently (one of the last 8 fsyncs served more than one, or requests wait beside it); a lone sender never waits. Fewer fsyncs cost less CPU (about 15% of sluice run at 100 logs per request, BENCHMARKS.md). 0: never wait; everything arriving during an fsync still shares the next one."`
	RetryAfter       Duration `yaml:"retry_after" doc:"Retry hint sent with backpressure answers (Retry-After / RetryInfo)."`
	MinFreeBytes     ByteSize `yaml:"min_free_bytes" derived:"min(512MiB, a tenth of the file system)" doc:"Free space the queue leaves on the file system of queue.dir. An append that would leave less is refused with 429 / RESOURCE_EXHAUSTED (remote write: 503) and a retry hint (under either full_policy; counted in sluice_pipeline_rejected_records_total{reason=\"disk\"}), /readyz answers 503, and the lake writer checkpoints at once: the headroom is what it needs to turn queued data into Parquet and release queue segments, so a disk that filled up recovers by itself once space is freed. Keep it above what one checkpoint writes (about lake.checkpoint_queue_bytes). 0 means the derived default."`
}

// MaxAttributeColumnsLimit is the highest lake.max_attribute_columns (and
// --max-attribute-columns of sluice compact and rollup).
const MaxAttributeColumnsLimit = 10000

// Lake configures the lake writer and its checkpoints.
type Lake struct {
	Root                    string   `yaml:"root" doc:"Lake root directory: <root>/<table>/tenant=<t>/dt=YYYY-MM-DD/hour=HH/<id>.parquet. With lake.s3.bucket set the files go to S3 instead, and the root keeps only local state: the queue, the SQLite catalog and the lock file."`
	TargetFileBytes         ByteSize `yaml:"target_file_bytes" doc:"A partition's buffer is written as a file when its estimated size reaches this."`
	MaxBufferedBytes        ByteSize `yaml:"max_buffered_bytes" doc:"Memory bound over all buffered partitions; past it the largest is written out."`
	RowGroupRows            int      `yaml:"row_group_rows" doc:"Rows per Parquet row group."`
	MaxAttributeColumns     int      `yaml:"max_attribute_columns" doc:"Cap on the attribute columns of one file (ingest, compaction and rollups). Past it the least used attributes of the file go, with their types, to one overflow column per scope (resource_overflow, scope_overflow, attr_overflow; see docs/schema.md), so no request can make a file unwritable. At most 10000."`
	MaxFutureSkew           Duration `yaml:"max_future_skew" doc:"A record time further than this in the future is not used for partitioning (see docs/schema.md): the record is filed by its arrival time, where the PromQL API does not look for it, so remote write into the lake refuses a series with such a sample (400 naming it; docs/config.md, Remote write) and OTLP into the lake such a data point (a partial success naming it, sluice_pipeline_rejected_records_total{reason=\"timestamp\"}; 400 when every point of the request is such)."`
	FlushInterval           Duration `yaml:"flush_interval" doc:"Checkpoint period: buffered data is written to files and committed to the catalog with the queue position it covers, then the queue space is released. Data becomes visible to readers of the catalog at checkpoints."`
	CheckpointBufferedBytes ByteSize `yaml:"checkpoint_buffered_bytes" doc:"Checkpoint early when the writer buffers more than this."`
	CheckpointQueueBytes    ByteSize `yaml:"checkpoint_queue_bytes" derived:"queue.max_bytes/4" doc:"Checkpoint early when this many queue bytes were read since the last checkpoint, so the queue never fills while the lake waits for flush_interval. 0 means queue.max_bytes/4."`
	TailMaxBytes            ByteSize `yaml:"tail_max_bytes" doc:"Queries also read what was acknowledged but is not yet in a lake file (the queue's tail, encoded in memory; docs/design/freshness.md). This bounds that memory: past it, which only a lake loop that cannot commit reaches, the newest records are queryable only after the next checkpoint (sluice_lake_tail_build_errors_total counts it). 0 turns tail serving off: data is queryable from its checkpoint on."`
	HandoffMaxBytes         ByteSize `yaml:"handoff_max_bytes" doc:"Memory for remote-write requests handed from the receiver to the lake loop already snappy-decoded, so the lake loop does not decode them again (the queue keeps them as received and stays the source of truth). Past it, which only a lake loop that lags behind the receiver reaches, requests are decoded from the queue as before (sluice_lake_handoff_dropped_total counts them). 0 turns the handoff off."`
	S3                      S3       `yaml:"s3" doc:"Lake files in an S3 bucket (AWS S3 or an S3-compatible server) instead of under lake.root; enabled by setting bucket. See docs/s3.md."`
}

// S3 configures the S3 lake store.
type S3 struct {
	Bucket          string   `yaml:"bucket" doc:"Bucket of the lake files; empty keeps them under lake.root."`
	Prefix          string   `yaml:"prefix" doc:"Key prefix of the lake in the bucket: files are <prefix>/<table>/tenant=<t>/dt=YYYY-MM-DD/hour=HH/<id>.parquet."`
	Region          string   `yaml:"region" doc:"AWS region; empty takes AWS_REGION or the shared AWS config, else us-east-1."`
	Endpoint        string   `yaml:"endpoint" doc:"Base URL of an S3-compatible server, e.g. http://127.0.0.1:7070; empty means AWS S3 (or AWS_ENDPOINT_URL)."`
	AccessKeyID     string   `yaml:"access_key_id" doc:"Static access key; empty uses the standard AWS credential chain (AWS_ACCESS_KEY_ID, shared files, instance or pod role). Use ${ENV} rather than writing secrets into the file."`
	SecretAccessKey string   `yaml:"secret_access_key" doc:"Secret of access_key_id; use ${ENV}."`
	SessionToken    string   `yaml:"session_token" doc:"Session token of temporary credentials; use ${ENV}."`
	ForcePathStyle  bool     `yaml:"force_path_style" doc:"Address the bucket in the URL path rather than the host name; most S3-compatible servers (MinIO, versitygw, Ceph) need it."`
	PartSize        ByteSize `yaml:"part_size" doc:"Files up to this size are sent with one PUT; larger ones are multipart uploads of parts this size (at least 5MiB, at most 5GiB). Two parts per file in flight are held in memory."`
	MaxRetries      int      `yaml:"max_retries" doc:"Attempts per S3 request (the AWS SDK's standard retryer, with exponential backoff); a failure after that fails the checkpoint, which is retried from the queue."`
}

// Enabled reports whether the lake is in S3.
func (s S3) Enabled() bool { return s.Bucket != "" }

// Catalog configures the catalog database.
type Catalog struct {
	DSN string `yaml:"dsn" derived:"sqlite:<lake.root>/catalog.db" doc:"Catalog database: sqlite:<path> or a bare path (SQLite, the embedded default), or postgres://user:pass@host:port/db?sslmode=require (PostgreSQL, for several sluice processes sharing one catalog; the database must exist, tables go in its search_path schema). Put the password in ${ENV}."`
}

// Upkeep configures the background upkeep of `sluice run` (internal/upkeep).
type Upkeep struct {
	Enabled    bool             `yaml:"enabled" doc:"Run compaction, rollups, retention and the sweeper in the background of sluice run. The same work is available as commands: sluice compact, sluice rollup, sluice retention."`
	Interval   Duration         `yaml:"interval" doc:"Pause between the end of one upkeep pass (compaction, rollups, retention, sweep, in that order) and the start of the next."`
	LeaseTTL   Duration         `yaml:"lease_ttl" doc:"Catalog lease on a partition while upkeep works on it, renewed while work goes on. A process that dies holding one blocks that partition for upkeep this long."`
	SweepGrace Duration         `yaml:"sweep_grace" doc:"Files of replaced segments (compacted, rolled up again or past retention) are deleted this long after the swap, so queries that listed them can finish. 0 deletes them at the next pass."`
	Compaction UpkeepCompaction `yaml:"compaction" doc:"Merging the small segments of a partition into large sorted files."`
	Rollup     UpkeepRollup     `yaml:"rollup" doc:"Metric rollups into the metrics_rollup table."`
	Retention  Retention        `yaml:"retention" doc:"How long data is kept. An age applies to whole hour partitions: an hour goes once its end is older than the age, so data lives between age and age + 1h. 0 keeps forever (the default: sluice deletes nothing unless told). Deleted partitions are marked replaced in the catalog at once and their files go after sweep_grace. Per tenant: tenants: {acme: {logs: 720h, metrics_rollup: {1h: 0}}}, where a key left out follows the global rule and 0 keeps that tenant's data forever."`
}

// UpkeepCompaction configures background compaction.
type UpkeepCompaction struct {
	Enabled         bool     `yaml:"enabled" doc:"Compact in the background."`
	TargetFileBytes ByteSize `yaml:"target_file_bytes" doc:"Segments this big are left alone; compacted files roll at about this size."`
	MinAge          Duration `yaml:"min_age" doc:"A partition is compacted only once its hour ended this long ago, so compaction does not chase the writer still filling the hour."`
}

// UpkeepRollup configures background rollups.
type UpkeepRollup struct {
	Enabled bool       `yaml:"enabled" doc:"Roll metrics up in the background."`
	Tiers   []Duration `yaml:"tiers" doc:"Rollup tiers, finest first; each a multiple of the one before and dividing 1h."`
	MinAge  Duration   `yaml:"min_age" doc:"An hour is rolled up once it ended this long ago; data arriving later for it makes the next pass recompute it."`
}

// Retention holds the age after which data is deleted, per table and per
// rollup tier; 0 keeps forever.
type Retention struct {
	Logs          Duration                   `yaml:"logs" doc:"Age of logs partitions."`
	Metrics       Duration                   `yaml:"metrics" doc:"Age of raw metrics partitions."`
	Traces        Duration                   `yaml:"traces" doc:"Age of traces partitions."`
	IOEvents      Duration                   `yaml:"io_events" doc:"Age of io_events partitions (traced I/O syscalls that sluice trace --record writes)."`
	MetricsRollup map[string]Duration        `yaml:"metrics_rollup" doc:"Age per rollup tier, e.g. {1m: 720h, 5m: 2160h, 1h: 9600h}; each key a tier of upkeep.rollup.tiers. A tier may not go before raw metrics (0 or shorter than metrics): rollups are computed from the raw data and would be recomputed."`
	Tenants       map[string]TenantRetention `yaml:"tenants" doc:"Per-tenant overrides: tenant name to any of logs, metrics, traces, io_events, metrics_rollup."`
}

// TenantRetention overrides Retention for one tenant; nil (absent) keys
// follow the global rule, an explicit 0 keeps forever.
type TenantRetention struct {
	Logs          *Duration           `yaml:"logs,omitempty"`
	Metrics       *Duration           `yaml:"metrics,omitempty"`
	Traces        *Duration           `yaml:"traces,omitempty"`
	IOEvents      *Duration           `yaml:"io_events,omitempty"`
	MetricsRollup map[string]Duration `yaml:"metrics_rollup,omitempty"`
}

// UnmarshalYAML rejects unknown keys: a typo in an override would
// otherwise silently keep data forever, or not.
func (t *TenantRetention) UnmarshalYAML(n *yaml.Node) error {
	if errs := checkKeys(n, reflect.TypeFor[TenantRetention](), "tenant override"); len(errs) > 0 {
		return errors.Join(errs...)
	}
	type plain TenantRetention
	return n.Decode((*plain)(t))
}

// Query configures the query HTTP API served by sluice run (when addr is
// set) and by sluice query-server.
type Query struct {
	Addr           string    `yaml:"addr" doc:"host:port of the query API (Prometheus HTTP API under /api/v1/); empty disables it in sluice run. sluice query-server listens here unless --addr is given (localhost:9090 when this is empty). Requests carry the tenant in receivers.otlp.tenant_header, as for ingestion."`
	Timeout        Duration  `yaml:"timeout" doc:"Upper bound on one query; a request's timeout parameter may lower it. A query past it fails with 503 (errorType timeout)."`
	MaxSeries      int       `yaml:"max_series" doc:"Most series one query may select over all its selectors; more fail with 422 (errorType cost_limit). 0 means no limit."`
	MaxSamples     int       `yaml:"max_samples" doc:"Most samples one query may load from the lake, and the PromQL engine's limit on samples in memory at once; more fail with 422."`
	MaxBytes       ByteSize  `yaml:"max_bytes" doc:"Most compressed column bytes one query may read from the lake; more fail with 422 (errorType cost_limit). 0 means no limit."`
	MaxPoints      int       `yaml:"max_points" doc:"Most points per series of a range query, (end-start)/step; more get 400, as in Prometheus."`
	LookbackDelta  Duration  `yaml:"lookback_delta" doc:"How far back an instant vector selector looks for a sample (Prometheus's --query.lookback-delta)."`
	Rollups        bool      `yaml:"rollups" doc:"Let range queries read gauges and sums from metrics_rollup: per hour, the coarsest tier no wider than the step whose rollup reflects the hour's current raw rows, serving each window's last value at its time; histograms, summaries, instant queries and hours without a fresh tier read raw points."`
	MaxConcurrency int       `yaml:"max_concurrency" derived:"GOMAXPROCS, at least 2" doc:"Queries (PromQL, series, labels, metadata, logs and traces search) evaluated at once; more wait in a queue (Prometheus's --query.max-concurrency). 0 means GOMAXPROCS, at least 2."`
	MaxConnections int       `yaml:"max_connections" doc:"Connections open at once on query.addr (queries, and remote write when it is served there). One more is closed as soon as it is accepted and counted in sluice_http_connections_refused_total{server=\"query API\"}, so that clients cannot take the file descriptors the queue and the lake writer need. Keep it well below the process's open-file limit (ulimit -n)."`
	MaxQueued      int       `yaml:"max_queued" doc:"Queries that may wait for a slot; past it a query gets 429 (errorType too_many_requests, Retry-After: 1) at once. Waiting counts against query.timeout. 0: none wait."`
	MaxQueryBytes  ByteSize  `yaml:"max_query_bytes" derived:"max_total_bytes / max_concurrency" doc:"Memory budget of one query: samples loaded from the lake, the engine's samples in memory (its sample limit is this / 32 bytes, or max_samples if lower) and the result; more fail with 422 (errorType cost_limit) naming this key. 0 means max_total_bytes / max_concurrency."`
	MaxTotalBytes  ByteSize  `yaml:"max_total_bytes" derived:"1/4 of GOMEMLIMIT, else of the cgroup memory limit, else of physical memory" doc:"Memory ceiling of all running queries together: each running query reserves its whole max_query_bytes from it when admitted (its lake reads and answer are charged to that reservation), so at most max_total_bytes / max_query_bytes queries run at once; one that cannot reserve waits in the max_queued queue within its timeout (503 timeout naming this key) or gets 429 when the queue is full. 0 means a quarter of GOMEMLIMIT, else of the cgroup memory limit, else of physical memory."`
	MaxQueryLength ByteSize  `yaml:"max_query_length" doc:"Longest PromQL expression (query) or selector (match[]); longer ones fail with 422 (errorType cost_limit) before parsing."`
	MaxQueryDepth  int       `yaml:"max_query_depth" doc:"Deepest PromQL expression or selector, counted before parsing as the deepest nesting of (), [] and {} plus the number of binary operators (outside label matchers and strings); deeper ones fail with 422 (errorType cost_limit), since parsing and planning cost grows with depth times length (4,000 chained additions take seconds)."`
	Auth           QueryAuth `yaml:"auth" doc:"Bearer-token authentication of every query endpoint (docs/query.md#authentication). Without tokens the API answers anyone who reaches query.addr."`
	TLS            TLS       `yaml:"tls" doc:"TLS for the query API; plaintext when cert_file and key_file are empty. With client_ca_file, clients must present a certificate signed by it (mutual TLS). The files are read again when they change on disk, as receivers.otlp.tls's."`
}

// QueryAuth configures authentication of the query API.
type QueryAuth struct {
	Tokens []QueryToken `yaml:"tokens" doc:"Accepted bearer tokens, each {token: ${ENV}, scope: read|write|readwrite (default read), tenant: NAME (optional)}. A request must carry 'Authorization: Bearer TOKEN' (else 401); a token without the endpoint's scope gets 403 (POST /api/v1/write needs write, every other endpoint read); a token with a tenant serves only that tenant (another tenant in the tenant header gets 403, no header means the token's tenant). Empty: no authentication."`
}

// QueryToken is one accepted bearer token of the query API.
type QueryToken struct {
	Token  string `yaml:"token"`
	Scope  string `yaml:"scope,omitempty"`
	Tenant string `yaml:"tenant,omitempty"`
}

// UnmarshalYAML rejects unknown keys: a misspelt tenant would otherwise
// leave a token unbound.
func (t *QueryToken) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a token is a mapping {token: ..., scope: ..., tenant: ...}", n.Line)
	}
	if errs := checkKeys(n, reflect.TypeFor[QueryToken](), "query.auth.tokens[]"); len(errs) > 0 {
		return errors.Join(errs...)
	}
	type plain QueryToken
	return n.Decode((*plain)(t))
}

// Admin configures the admin HTTP server.
type Admin struct {
	Addr string `yaml:"addr" doc:"host:port of /metrics (Prometheus), /healthz (process up) and /readyz (receivers started and queue open; 503 while shutting down); empty disables it."`
	// Off by default: profiles expose internals and cost CPU while taken.
	Pprof bool `yaml:"pprof" doc:"Also serve Go's profiling endpoints under /debug/pprof/ (CPU, heap, goroutines, ...) on the admin address. Enable only where the admin port is trusted."`
}

// Log configures process logging.
type Log struct {
	Level  string `yaml:"level" doc:"debug, info, warn or error."`
	Format string `yaml:"format" doc:"text (logfmt-like) or json."`
}

//go:embed defaults.yaml
var defaultsYAML []byte

// Default returns the embedded defaults: what `sluice run` uses without a
// config file.
func Default() Config {
	var c Config
	if err := yaml.Unmarshal(defaultsYAML, &c); err != nil {
		panic("config: embedded defaults do not parse: " + err.Error()) // a broken build, not bad input
	}
	return c
}

// Load reads the config file at path (defaults only when path is "") and
// expands ${ENV} references with os.LookupEnv. It does not validate.
func Load(path string) (Config, error) {
	if path == "" {
		return Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data, os.LookupEnv)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse overlays the YAML in data on the defaults. lookup resolves
// environment references (os.LookupEnv in production). Every problem found
// (bad YAML, unset variable, unknown key, wrong type) is returned, joined.
func Parse(data []byte, lookup func(string) (string, bool)) (Config, error) {
	c := Default()
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, errEOF) {
			return c, nil // empty file: defaults
		}
		return Config{}, err
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return Config{}, fmt.Errorf("line %d: a config file holds one YAML document", more.Line)
	}
	var errs []error
	errs = append(errs, expandNode(&root, "", lookup)...)
	ls := lines{}
	errs = append(errs, checkTree(&root, configType, "", ls)...)
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	if err := root.Decode(&c); err != nil {
		return Config{}, err
	}
	c.lines = ls
	return c, nil
}

// QueueDir is queue.dir, or <lake.root>/_queue when empty.
func (c *Config) QueueDir() string {
	if c.Queue.Dir != "" {
		return c.Queue.Dir
	}
	return filepath.Join(c.Lake.Root, "_queue")
}

// CatalogDSN is catalog.dsn, or the SQLite file <lake.root>/catalog.db.
func (c *Config) CatalogDSN() string {
	if c.Catalog.DSN != "" {
		return c.Catalog.DSN
	}
	return "sqlite:" + filepath.Join(c.Lake.Root, "catalog.db")
}

// CheckpointQueueBytes is lake.checkpoint_queue_bytes, or queue.max_bytes/4.
func (c *Config) CheckpointQueueBytes() int64 {
	if c.Lake.CheckpointQueueBytes > 0 {
		return int64(c.Lake.CheckpointQueueBytes)
	}
	return int64(c.Queue.MaxBytes) / 4
}

// Redacted returns a copy safe to print or log: secrets replaced.
func (c Config) Redacted() Config {
	if c.Receivers.OTLP.BearerToken != "" {
		c.Receivers.OTLP.BearerToken = "<redacted>"
	}
	if c.Lake.S3.SecretAccessKey != "" {
		c.Lake.S3.SecretAccessKey = "<redacted>"
	}
	if c.Lake.S3.SessionToken != "" {
		c.Lake.S3.SessionToken = "<redacted>"
	}
	if len(c.Query.Auth.Tokens) > 0 {
		toks := make([]QueryToken, len(c.Query.Auth.Tokens))
		for i, t := range c.Query.Auth.Tokens {
			t.Token = "<redacted>"
			toks[i] = t
		}
		c.Query.Auth.Tokens = toks
	}
	return c
}

// YAML renders c as a config file (used by `sluice validate --print`).
func (c Config) YAML() string {
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	_ = enc.Encode(c) // plain data: cannot fail
	_ = enc.Close()
	return b.String()
}

// validateQuery checks the query section.
func validateQuery(v *validator, c *Config) {
	q := &c.Query
	v.addr("query.addr", q.Addr)
	v.sameAddr("query.addr", q.Addr, "admin.addr", c.Admin.Addr)
	v.sameAddr("query.addr", q.Addr, "receivers.otlp.http_addr", c.Receivers.OTLP.HTTPAddr)
	v.sameAddr("query.addr", q.Addr, "receivers.otlp.grpc_addr", c.Receivers.OTLP.GRPCAddr)
	v.positive("query.timeout", q.Timeout)
	v.positive("query.lookback_delta", q.LookbackDelta)
	v.positiveInt("query.max_samples", q.MaxSamples)
	v.positiveInt("query.max_points", q.MaxPoints)
	if q.MaxSeries < 0 {
		v.add("query.max_series", "must not be negative, got %d", q.MaxSeries)
	}
	if q.MaxBytes < 0 {
		v.add("query.max_bytes", "must not be negative, got %d", q.MaxBytes)
	}
	if q.MaxConcurrency < 0 {
		v.add("query.max_concurrency", "must not be negative, got %d", q.MaxConcurrency)
	}
	if q.MaxConnections <= 0 {
		v.add("query.max_connections", "must be positive, got %d", q.MaxConnections)
	}
	if q.MaxQueued < 0 {
		v.add("query.max_queued", "must not be negative, got %d", q.MaxQueued)
	}
	if q.MaxQueryBytes < 0 {
		v.add("query.max_query_bytes", "must not be negative, got %d", q.MaxQueryBytes)
	}
	if q.MaxTotalBytes < 0 {
		v.add("query.max_total_bytes", "must not be negative, got %d", q.MaxTotalBytes)
	} else if q.MaxTotalBytes > 0 && q.MaxQueryBytes > q.MaxTotalBytes {
		v.add("query.max_query_bytes", "%s is more than query.max_total_bytes (%s)", q.MaxQueryBytes, q.MaxTotalBytes)
	}
	v.positiveSize("query.max_query_length", q.MaxQueryLength)
	v.positiveInt("query.max_query_depth", q.MaxQueryDepth)
	seen := map[string]int{}
	for i, t := range q.Auth.Tokens {
		k := fmt.Sprintf("query.auth.tokens[%d]", i)
		switch {
		case t.Token == "":
			v.add(k+".token", "must not be empty (an empty token is never 'authentication off'; remove the entry instead)")
		case strings.ContainsAny(t.Token, " \t\r\n"):
			v.add(k+".token", "must not contain whitespace")
		default:
			if j, ok := seen[t.Token]; ok {
				v.add(k+".token", "same token as query.auth.tokens[%d]", j)
			}
			seen[t.Token] = i
		}
		switch t.Scope {
		case "", "read", "write", "readwrite":
		default:
			v.add(k+".scope", "%q: want read, write or readwrite", t.Scope)
		}
		if t.Tenant != "" && !tenant.Valid(t.Tenant) {
			v.add(k+".tenant", "%q is not a tenant name ([A-Za-z0-9._-]{1,64})", t.Tenant)
		}
	}
	v.tls("query.tls", q.TLS)
}
