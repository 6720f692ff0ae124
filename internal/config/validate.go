package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/tenant"
)

// queueRecordOverhead is what the queue and the pipeline add around a
// request body in one queue record: the record header (12 bytes in
// format version 2), the pipeline's header (3 bytes + a tenant of at most
// 64) and some slack.
// A request must fit in one segment after the segment header.
const queueRecordOverhead = 32 + 12 + 3 + 64 + 1024

// Validate reports every problem of c, each naming its key, joined into
// one error; nil when c is usable.
func (c *Config) Validate() error {
	v := validator{lines: c.lines}
	o := &c.Receivers.OTLP
	const r = "receivers.otlp."
	v.addr(r+"grpc_addr", o.GRPCAddr)
	v.addr(r+"http_addr", o.HTTPAddr)
	if o.GRPCAddr == "" && o.HTTPAddr == "" {
		v.add(r+"grpc_addr", "grpc_addr and http_addr are both empty: enable at least one transport")
	}
	if o.TenantHeader != "" && !validHeader(o.TenantHeader) {
		v.add(r+"tenant_header", "%q is not a valid header name", o.TenantHeader)
	}
	if !tenant.Valid(o.DefaultTenant) {
		v.add(r+"default_tenant", "%q must match [A-Za-z0-9._-]{1,64} (it becomes a directory name in the lake)", o.DefaultTenant)
	}
	if strings.ContainsAny(o.BearerToken, " \t\r\n") {
		v.add(r+"bearer_token", "must not contain whitespace")
	}
	v.tls(r+"tls", o.TLS)
	if pw := &c.Receivers.PrometheusRemoteWrite; pw.Enabled {
		const r = "receivers.prometheus_remote_write."
		if pw.MaxRequestBytes <= 0 || pw.MaxRequestBytes > 1<<30 {
			v.add(r+"max_request_bytes", "%s must be positive and at most 1GiB", pw.MaxRequestBytes)
		}
		if pw.MaxConcurrentRequests <= 0 {
			v.add(r+"max_concurrent_requests", "must be positive")
		}
		if pw.MaxConnections <= 0 {
			v.add(r+"max_connections", "must be positive")
		}
		if pw.MaxMetadataFamilies < 0 {
			v.add(r+"max_metadata_families", "must not be negative (0: no limit)")
		}
		v.addr(r+"listen", pw.Listen)
		v.sameAddr(r+"listen", pw.Listen, "query.addr", c.Query.Addr)
		v.sameAddr(r+"listen", pw.Listen, "admin.addr", c.Admin.Addr)
		v.sameAddr(r+"listen", pw.Listen, "receivers.otlp.http_addr", c.Receivers.OTLP.HTTPAddr)
		v.sameAddr(r+"listen", pw.Listen, "receivers.otlp.grpc_addr", c.Receivers.OTLP.GRPCAddr)
	}
	if it := &c.Receivers.IOTrace; it.Enabled {
		const r = "receivers.iotrace."
		if !c.LakeEnabled() {
			v.add(r+"enabled", "traced I/O goes only into the lake, which this config turns off")
		}
		if !tenant.Valid(it.Tenant) {
			v.add(r+"tenant", "%q is not a valid tenant", it.Tenant)
		}
		if len(it.Comm) > 15 {
			v.add(r+"comm", "%q is longer than the kernel's 15 bytes", it.Comm)
		}
		if it.RingBytes < 4096 || it.RingBytes > 1<<30 || it.RingBytes&(it.RingBytes-1) != 0 {
			v.add(r+"ring_bytes", "%s must be a power of two from 4KiB to 1GiB", it.RingBytes)
		}
		if it.MinDuration < 0 {
			v.add(r+"min_duration", "must not be negative")
		}
		switch it.Attach {
		case "auto", "fentry", "tracepoint":
		default:
			v.add(r+"attach", "%q is not auto, fentry or tracepoint", it.Attach)
		}
		if m := &it.Metrics; m.Enabled {
			v.positive(r+"metrics.interval", m.Interval)
			if m.PathDepth < 1 || m.PathDepth > 64 {
				v.add(r+"metrics.path_depth", "%d must be from 1 to 64", m.PathDepth)
			}
			if m.MaxSeries < 1 || m.MaxSeries > 1_000_000 {
				v.add(r+"metrics.max_series", "%d must be from 1 to 1000000", m.MaxSeries)
			}
		}
	}
	switch maxBody := int64(c.Queue.SegmentBytes) - queueRecordOverhead; {
	case o.MaxRequestBytes <= 0:
		v.add(r+"max_request_bytes", "must be positive")
	case o.MaxRequestBytes > 1<<30:
		v.add(r+"max_request_bytes", "%s is more than 1GiB", o.MaxRequestBytes)
	case int64(o.MaxRequestBytes) > maxBody && c.Queue.SegmentBytes > 0:
		v.add(r+"max_request_bytes", "%s does not fit in one queue segment (queue.segment_bytes %s allows at most %d bytes)", o.MaxRequestBytes, c.Queue.SegmentBytes, maxBody)
	}
	v.positiveInt(r+"max_concurrent_requests", o.MaxConcurrentRequests)
	if o.MaxInflightBytes <= o.MaxRequestBytes {
		v.add(r+"max_inflight_bytes", "%s must be more than max_request_bytes (%s): a request could never be read", o.MaxInflightBytes, o.MaxRequestBytes)
	}
	v.positive(r+"body_rate_grace", o.BodyRateGrace)
	v.positiveInt(r+"max_connections", o.MaxConnections)
	v.positive(r+"read_timeout", o.ReadTimeout)
	v.positive(r+"write_timeout", o.WriteTimeout)
	v.positive(r+"idle_timeout", o.IdleTimeout)
	if o.MaxAttrsPerRecord < 0 {
		v.add(r+"max_attributes_per_record", "must not be negative")
	}
	if o.MaxAttrsPerRequest < 0 {
		v.add(r+"max_attributes_per_request", "must not be negative")
	}
	if o.MaxTenants < 0 {
		v.add(r+"max_tenants", "must not be negative (0: no limit)")
	}
	if o.MaxRecordsPerRequest < 0 {
		v.add(r+"max_records_per_request", "must not be negative")
	}
	v.sameAddr(r+"grpc_addr", o.GRPCAddr, r+"http_addr", o.HTTPAddr)
	v.sameAddr("admin.addr", c.Admin.Addr, r+"grpc_addr", o.GRPCAddr)
	v.sameAddr("admin.addr", c.Admin.Addr, r+"http_addr", o.HTTPAddr)

	q := &c.Queue
	switch q.FullPolicy {
	case "backpressure", "drop_oldest":
	default:
		v.add("queue.full_policy", "%q: want backpressure or drop_oldest", q.FullPolicy)
	}
	if q.SegmentBytes < 64<<10 || q.SegmentBytes > 1<<32-1 {
		v.add("queue.segment_bytes", "%s out of range [64KiB, 4GiB)", q.SegmentBytes)
	}
	if q.MaxBytes < 2*q.SegmentBytes {
		v.add("queue.max_bytes", "%s must be at least 2 × queue.segment_bytes (%s)", q.MaxBytes, q.SegmentBytes)
	}
	if q.GroupCommitDelay < 0 {
		v.add("queue.group_commit_delay", "must not be negative")
	}
	v.positive("queue.retry_after", q.RetryAfter)

	l := &c.Lake
	if strings.TrimSpace(l.Root) == "" {
		v.add("lake.root", "must not be empty")
	}
	v.positiveSize("lake.target_file_bytes", l.TargetFileBytes)
	v.positiveSize("lake.max_buffered_bytes", l.MaxBufferedBytes)
	v.positiveInt("lake.row_group_rows", l.RowGroupRows)
	if l.MaxAttributeColumns < 1 || l.MaxAttributeColumns > MaxAttributeColumnsLimit {
		v.add("lake.max_attribute_columns", "%d out of range [1, %d]", l.MaxAttributeColumns, MaxAttributeColumnsLimit)
	}
	v.positive("lake.max_future_skew", l.MaxFutureSkew)
	v.positive("lake.flush_interval", l.FlushInterval)
	v.positiveSize("lake.checkpoint_buffered_bytes", l.CheckpointBufferedBytes)
	if l.HandoffMaxBytes < 0 {
		v.add("lake.handoff_max_bytes", "must not be negative (0 turns the handoff off)")
	}
	if l.TailMaxBytes < 0 {
		v.add("lake.tail_max_bytes", "must not be negative (0 turns tail serving off)")
	}
	if l.CheckpointQueueBytes < 0 {
		v.add("lake.checkpoint_queue_bytes", "must not be negative")
	} else if l.CheckpointQueueBytes > q.MaxBytes && q.MaxBytes > 0 {
		v.add("lake.checkpoint_queue_bytes", "%s is more than queue.max_bytes (%s): the queue would fill before a checkpoint frees it", l.CheckpointQueueBytes, q.MaxBytes)
	}

	validateS3(&v, &l.S3)

	if dsn := c.Catalog.DSN; strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		// Not quoted: the DSN may hold a password.
		if _, err := url.Parse(dsn); err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			v.add("catalog.dsn", "PostgreSQL DSN is not a valid URL: %v", err)
		}
	} else if strings.HasPrefix(dsn, "pgx:") {
		v.add("catalog.dsn", "write a PostgreSQL DSN as postgres://user:pass@host:port/db")
	}
	validateUpkeep(&v, &c.Upkeep)
	validateExporters(&v, c)
	v.addr("admin.addr", c.Admin.Addr)
	validateQuery(&v, c)

	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.add("log.level", "%q: want debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		v.add("log.format", "%q: want text or json", c.Log.Format)
	}
	v.positive("shutdown_timeout", c.ShutdownTimeout)
	validateStats(&v, &c.Stats)
	v.positiveInt("processors.max_rule_effects", c.Processors.MaxRuleEffects)
	validateRuleSets(&v, c)
	return errors.Join(v.errs...)
}

// MaxStatsSeries bounds stats.max_series (a table of 2^31 12-byte slots).
const MaxStatsSeries = 1 << 30

func validateStats(v *validator, s *Stats) {
	const k = "stats."
	if s.Window.D() < time.Second {
		v.add(k+"window", "%s is shorter than 1s", s.Window)
	}
	if s.MaxSeries < 1 || s.MaxSeries > MaxStatsSeries {
		v.add(k+"max_series", "%d out of range [1, %d]", s.MaxSeries, MaxStatsSeries)
	}
	v.positiveInt(k+"max_metrics", s.MaxMetrics)
	v.positiveInt(k+"max_label_pairs", s.MaxLabelPairs)
}

func validateS3(v *validator, s *S3) {
	const k = "lake.s3."
	if !s.Enabled() {
		if s.Prefix != "" || s.Endpoint != "" || s.AccessKeyID != "" || s.SecretAccessKey != "" || s.SessionToken != "" {
			v.add(k+"bucket", "must be set when other lake.s3 keys are (without a bucket the lake stays under lake.root)")
		}
		return
	}
	if len(s.Bucket) < 3 || len(s.Bucket) > 63 || strings.ContainsAny(s.Bucket, "/ \t") {
		v.add(k+"bucket", "%q is not a bucket name (3 to 63 characters, no slashes or spaces)", s.Bucket)
	}
	if strings.Contains(s.Prefix, "//") || strings.Contains("/"+s.Prefix+"/", "/../") || strings.Contains("/"+s.Prefix+"/", "/./") {
		v.add(k+"prefix", "%q: want slash-separated names without empty, . or .. parts", s.Prefix)
	}
	if s.Endpoint != "" {
		if u, err := url.Parse(s.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(k+"endpoint", "%q: want a URL such as https://s3.example.com or http://127.0.0.1:7070", s.Endpoint)
		}
	}
	if (s.AccessKeyID == "") != (s.SecretAccessKey == "") {
		v.add(k+"access_key_id", "access_key_id and secret_access_key must be set together")
	}
	if s.SessionToken != "" && s.AccessKeyID == "" {
		v.add(k+"session_token", "needs access_key_id and secret_access_key")
	}
	if s.PartSize < 5<<20 || s.PartSize > 5<<30 {
		v.add(k+"part_size", "%s out of range [5MiB, 5GiB]", s.PartSize)
	}
	v.positiveInt(k+"max_retries", s.MaxRetries)
}

func validateUpkeep(v *validator, u *Upkeep) {
	const k = "upkeep."
	v.positive(k+"interval", u.Interval)
	v.positive(k+"lease_ttl", u.LeaseTTL)
	if u.SweepGrace < 0 {
		v.add(k+"sweep_grace", "must not be negative")
	}
	v.positiveSize(k+"compaction.target_file_bytes", u.Compaction.TargetFileBytes)
	if u.Compaction.MinAge < 0 {
		v.add(k+"compaction.min_age", "must not be negative")
	}
	tiers := map[string]bool{}
	for i, t := range u.Rollup.Tiers {
		switch {
		case t <= 0:
			v.add(k+"rollup.tiers", "tier %s must be positive", t)
		case time.Hour%time.Duration(t) != 0:
			v.add(k+"rollup.tiers", "tier %s does not divide 1h", t)
		case i > 0 && (t <= u.Rollup.Tiers[i-1] || u.Rollup.Tiers[i-1] > 0 && t%u.Rollup.Tiers[i-1] != 0):
			v.add(k+"rollup.tiers", "tier %s is not a larger multiple of the tier before it (%s)", t, u.Rollup.Tiers[i-1])
		}
		tiers[tierName(t.D())] = true
	}
	if u.Rollup.MinAge < 0 {
		v.add(k+"rollup.min_age", "must not be negative")
	}
	if u.Rollup.Enabled && len(u.Rollup.Tiers) == 0 {
		v.add(k+"rollup.tiers", "empty while rollups are enabled")
	}
	r := &u.Retention
	ages := func(key string, ds ...*Duration) {
		for _, d := range ds {
			if d != nil && *d < 0 {
				v.add(key, "must not be negative, got %s", *d)
			}
		}
	}
	checkTiers := func(key string, m map[string]Duration) {
		for _, name := range slices.Sorted(maps.Keys(m)) {
			d := m[name]
			ages(key+"."+name, &d)
			// A tier left out of upkeep.rollup.tiers may keep its
			// default 0 (keep forever: nothing to delete); an age for it
			// would be a rule that never runs.
			if !tiers[name] && d != 0 {
				v.add(key+"."+name, "not a tier of upkeep.rollup.tiers (%s)", u.Rollup.Tiers)
			}
		}
	}
	ages(k+"retention.logs", &r.Logs)
	ages(k+"retention.metrics", &r.Metrics)
	ages(k+"retention.traces", &r.Traces)
	ages(k+"retention.io_events", &r.IOEvents)
	checkTiers(k+"retention.metrics_rollup", r.MetricsRollup)
	for _, name := range slices.Sorted(maps.Keys(r.Tenants)) {
		o := r.Tenants[name]
		key := k + "retention.tenants." + name
		if !tenant.Valid(name) {
			v.add(key, "%q is not a tenant name ([A-Za-z0-9._-]{1,64})", name)
		}
		ages(key, o.Logs, o.Metrics, o.Traces, o.IOEvents)
		checkTiers(key+".metrics_rollup", o.MetricsRollup)
	}
	// Rollups are computed from raw metrics and recomputed while an hour's
	// tiers are incomplete: a tier deleted before its raw data would be
	// rolled up and deleted again at every pass.
	rollupOrder := func(key string, raw Duration, tierAge func(string) Duration) {
		for _, tier := range slices.Sorted(maps.Keys(tiers)) {
			if age := tierAge(tier); age > 0 && (raw == 0 || raw > age) {
				v.add(key+".metrics_rollup."+tier, "%s is shorter than metrics (%s, 0 = forever): keep every rollup tier at least as long as the raw metrics it is computed from", age, raw)
			}
		}
	}
	rollupOrder(k+"retention", r.Metrics, func(t string) Duration { return r.MetricsRollup[t] })
	for _, name := range slices.Sorted(maps.Keys(r.Tenants)) {
		o := r.Tenants[name]
		raw := r.Metrics
		if o.Metrics != nil {
			raw = *o.Metrics
		}
		rollupOrder(k+"retention.tenants."+name, raw, func(t string) Duration {
			if d, ok := o.MetricsRollup[t]; ok {
				return d
			}
			return r.MetricsRollup[t]
		})
	}
}

// tierName names a rollup tier as the metrics_rollup table does
// (rollup.TierName): "30s", "1m", "5m", "1h".
func tierName(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

type validator struct {
	errs  []error
	lines lines
}

// add reports a problem of key, at the line of the file that sets it (or
// its nearest enclosing key) when the config came from a file.
func (v *validator) add(key, format string, args ...any) {
	msg := fmt.Sprintf("%s: %s", key, fmt.Sprintf(format, args...))
	if l := v.lines.line(key); l > 0 {
		msg = fmt.Sprintf("line %d: %s", l, msg)
	}
	v.errs = append(v.errs, errors.New(msg))
}

func (v *validator) positive(key string, d Duration) {
	if d <= 0 {
		v.add(key, "must be a positive duration, got %s", d)
	}
}

func (v *validator) positiveSize(key string, b ByteSize) {
	if b <= 0 {
		v.add(key, "must be a positive size, got %s", b)
	}
}

func (v *validator) positiveInt(key string, n int) {
	if n <= 0 {
		v.add(key, "must be positive, got %d", n)
	}
}

func (v *validator) addr(key, addr string) {
	if addr == "" {
		return
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.add(key, "%q: want host:port, e.g. localhost:4318 or 0.0.0.0:4318", addr)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.add(key, "%q: port %q is not a number in 0..65535", addr, port)
	}
}

// sameAddr reports two listeners configured on one fixed address, or on
// addresses whose binds would collide: one port on the same host
// (localhost is 127.0.0.1), or on a wildcard host and another.
func (v *validator) sameAddr(ka, a, kb, b string) {
	if a == "" || b == "" {
		return
	}
	if a == b {
		if _, port, err := net.SplitHostPort(a); err == nil && port == "0" {
			return // two free ports
		}
		v.add(ka, "%q is also %s", a, kb)
		return
	}
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return
	}
	if bindsCollide(ha, hb) {
		v.add(ka, "%q and %s %q bind the same port on the same host", a, kb, b)
	}
}

// bindsCollide reports whether listening on hosts a and b with one port
// fails with "address already in use" on Linux: the same address, or a
// wildcard of the family of the other (an empty host and :: take both).
func bindsCollide(a, b string) bool {
	norm := func(h string) string {
		if strings.EqualFold(h, "localhost") {
			return "127.0.0.1"
		}
		if ip := net.ParseIP(h); ip != nil {
			return ip.String()
		}
		return strings.ToLower(h)
	}
	a, b = norm(a), norm(b)
	if a == b {
		return true
	}
	v4 := func(h string) bool { ip := net.ParseIP(h); return ip != nil && ip.To4() != nil || h != "" && ip == nil }
	for _, p := range [2][2]string{{a, b}, {b, a}} {
		switch p[0] {
		case "", "::":
			return true
		case "0.0.0.0":
			if v4(p[1]) {
				return true
			}
		}
	}
	return false
}

func (v *validator) tls(key string, t TLS) {
	if !t.Enabled() {
		return
	}
	if t.CertFile == "" || t.KeyFile == "" {
		v.add(key, "cert_file and key_file must both be set to enable TLS")
	}
	before := len(v.errs)
	v.file(key+".cert_file", t.CertFile)
	v.file(key+".key_file", t.KeyFile)
	v.file(key+".client_ca_file", t.ClientCAFile)
	if len(v.errs) > before || t.CertFile == "" || t.KeyFile == "" {
		return
	}
	// Load them as sluice run will, so that a key that does not match its
	// certificate, or a file that is no PEM, fails here and not at start.
	if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
		v.add(key+".key_file", "cert_file %q and key_file %q: %v", t.CertFile, t.KeyFile, err)
	}
	if t.ClientCAFile != "" {
		if _, err := authn.LoadCAPool(t.ClientCAFile); err != nil {
			v.add(key+".client_ca_file", "%v", err)
		}
	}
}

func (v *validator) file(key, path string) {
	if path == "" {
		return
	}
	if _, err := os.Stat(path); err != nil {
		v.add(key, "%v", err)
	}
}

func validHeader(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	return s != "" && textproto.CanonicalMIMEHeaderKey(s) != ""
}
