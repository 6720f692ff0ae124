package sqlq

import (
	"strings"
)

// Tables are the views every session has, in this order.
var Tables = []string{TableLogs, TableMetrics, TableRollup, TableTraces, TableIOEvents}

// View (and catalog table) names.
const (
	TableLogs    = "logs"
	TableMetrics = "metrics"
	TableRollup  = "metrics_rollup"
	TableTraces  = "traces"
	// TableIOEvents holds traced I/O syscalls (sluice trace --record).
	TableIOEvents = "io_events"
)

// hiveTypes fixes the partition columns' types: DuckDB's auto-detection
// otherwise guesses per table (hour=08 came out VARCHAR for one table and
// BIGINT for another).
const hiveTypes = `{'tenant': VARCHAR, 'dt': DATE, 'hour': INTEGER}`

// column is a fixed column as DuckDB 1.5 reads it from sluice's Parquet
// (docs/schema.md): what an empty view carries so that queries over a table
// without files still bind. Attribute columns are per file and not listed.
type column struct{ name, typ string }

var commonColumns = []column{
	{"service_name", "VARCHAR"},
	{"scope_name", "VARCHAR"},
	{"scope_version", "VARCHAR"},
	{"scope_schema_url", "VARCHAR"},
	{"scope_dropped_attributes_count", "UINTEGER"},
	{"resource_schema_url", "VARCHAR"},
	{"resource_dropped_attributes_count", "UINTEGER"},
}

var partitionColumns = []column{
	{"tenant", "VARCHAR"},
	{"dt", "DATE"},
	{"hour", "INTEGER"},
}

var fixedColumns = map[string][]column{
	TableLogs: {
		{"timestamp", "TIMESTAMPTZ"},
		{"observed_timestamp", "TIMESTAMPTZ"},
		{"severity_number", "INTEGER"},
		{"severity_text", "VARCHAR"},
		{"body", "VARCHAR"},
		{"body_type", "VARCHAR"},
		{"trace_id", "VARCHAR"},
		{"span_id", "VARCHAR"},
		{"flags", "UINTEGER"},
		{"event_name", "VARCHAR"},
		{"dropped_attributes_count", "UINTEGER"},
	},
	TableMetrics: metricColumns,
	TableTraces: {
		{"trace_id", "VARCHAR"},
		{"span_id", "VARCHAR"},
		{"parent_span_id", "VARCHAR"},
		{"trace_state", "VARCHAR"},
		{"name", "VARCHAR"},
		{"kind", "INTEGER"},
		{"start_timestamp", "TIMESTAMPTZ"},
		{"end_timestamp", "TIMESTAMPTZ"},
		{"duration_ns", "BIGINT"},
		{"status_code", "INTEGER"},
		{"status_message", "VARCHAR"},
		{"flags", "UINTEGER"},
		{"events", "VARCHAR"},
		{"links", "VARCHAR"},
		{"dropped_attributes_count", "UINTEGER"},
		{"dropped_events_count", "UINTEGER"},
		{"dropped_links_count", "UINTEGER"},
	},
	TableRollup:   rollupColumns,
	TableIOEvents: ioEventColumns,
}

// ioEventColumns are io_events' columns (internal/lake/encode_io.go).
var ioEventColumns = []column{
	{"time", "TIMESTAMPTZ"},
	{"duration_ns", "BIGINT"},
	{"gap_ns", "BIGINT"},
	{"pid", "UINTEGER"},
	{"tid", "UINTEGER"},
	{"comm", "VARCHAR"},
	{"syscall", "VARCHAR"},
	{"fd", "INTEGER"},
	{"ret", "BIGINT"},
	{"errno", "INTEGER"},
	{"bytes", "BIGINT"},
	{"path", "VARCHAR"},
	{"old_path", "VARCHAR"},
	{"flags", "UBIGINT"},
	{"cgroup_id", "UBIGINT"},
	{"host_name", "VARCHAR"},
}

// rollupColumns are metrics_rollup's fixed columns (internal/lake/rollup);
// its label columns (service_name, resource.*, attr.*) exist per file.
var rollupColumns = []column{
	{"tier", "VARCHAR"},
	{"window_start", "TIMESTAMPTZ"},
	{"metric_name", "VARCHAR"},
	{"metric_type", "VARCHAR"},
	{"unit", "VARCHAR"},
	{"temporality", "VARCHAR"},
	{"is_monotonic", "BOOLEAN"},
	{"series_id", "UBIGINT"},
	{"points", "UBIGINT"},
	{"count", "UBIGINT"},
	{"sum", "DOUBLE"},
	{"min", "DOUBLE"},
	{"max", "DOUBLE"},
	{"first", "DOUBLE"},
	{"last", "DOUBLE"},
	{"first_timestamp", "TIMESTAMPTZ"},
	{"last_timestamp", "TIMESTAMPTZ"},
	{"increase", "DOUBLE"},
	{"resets", "UBIGINT"},
	{"bucket_counts", "UBIGINT[]"},
	{"explicit_bounds", "DOUBLE[]"},
	{"bounds_mismatch", "BOOLEAN"},
	{"sketch", "BLOB"},
}

var metricColumns = []column{
	{"timestamp", "TIMESTAMPTZ"},
	{"start_timestamp", "TIMESTAMPTZ"},
	{"metric_name", "VARCHAR"},
	{"metric_type", "VARCHAR"},
	{"description", "VARCHAR"},
	{"unit", "VARCHAR"},
	{"temporality", "VARCHAR"},
	{"is_monotonic", "BOOLEAN"},
	{"series_id", "UBIGINT"},
	{"value", "DOUBLE"},
	{"value_int", "BIGINT"},
	{"flags", "UINTEGER"},
	{"count", "UBIGINT"},
	{"sum", "DOUBLE"},
	{"min", "DOUBLE"},
	{"max", "DOUBLE"},
	{"bucket_counts", "UBIGINT[]"},
	{"explicit_bounds", "DOUBLE[]"},
	{"exp_scale", "INTEGER"},
	{"exp_zero_count", "UBIGINT"},
	{"exp_zero_threshold", "DOUBLE"},
	{"exp_positive_offset", "INTEGER"},
	{"exp_positive_bucket_counts", "UBIGINT[]"},
	{"exp_negative_offset", "INTEGER"},
	{"exp_negative_bucket_counts", "UBIGINT[]"},
	{"quantiles", "DOUBLE[]"},
	{"quantile_values", "DOUBLE[]"},
	{"exemplars", "VARCHAR"},
	{"metric_metadata", "VARCHAR"},
	{"sketch", "BLOB"},
}

// viewSQL is the CREATE VIEW statement of table over files (absolute
// paths); with no files, a typed view over zero rows.
func viewSQL(table string, files []string) string {
	var b strings.Builder
	b.WriteString("CREATE VIEW ")
	b.WriteString(quoteIdent(table))
	b.WriteString(" AS ")
	if len(files) == 0 {
		b.WriteString("SELECT * FROM (SELECT ")
		var cols []column
		// Rollups carry resource and scope only as labels; io_events has neither.
		if table != TableRollup && table != TableIOEvents {
			cols = append(cols, commonColumns...)
		}
		cols = append(append(cols, fixedColumns[table]...), partitionColumns...)
		for i, c := range cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("NULL::")
			b.WriteString(c.typ)
			b.WriteString(" AS ")
			b.WriteString(quoteIdent(c.name))
		}
		b.WriteString(") WHERE false")
		return b.String()
	}
	b.WriteString("SELECT * FROM read_parquet(")
	writeList(&b, files)
	b.WriteString(", union_by_name = true, hive_partitioning = true, hive_types = ")
	b.WriteString(hiveTypes)
	b.WriteString(")")
	return b.String()
}

func writeList(b *strings.Builder, items []string) {
	b.WriteByte('[')
	for i, s := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteString(s))
	}
	b.WriteByte(']')
}

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
