package format

import (
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/signal"
)

// SchemaVersion is written to every file's footer as MetaSchemaVersion.
const SchemaVersion = 1

// Table names, which are also the first path element of each file.
const (
	TableLogs     = "logs"
	TableMetrics  = "metrics"
	TableTraces   = "traces"
	TableRollup   = "metrics_rollup"
	TableIOEvents = "io_events"
)

// Footer key/value metadata keys (docs/schema.md, "Footer key/value
// metadata").
const (
	MetaTable         = "sluice.table"
	MetaTenant        = "sluice.tenant"
	MetaLevel         = "sluice.level"
	MetaSchemaVersion = "sluice.schema_version"
	MetaMinTime       = "sluice.min_time" // decimal unix ns
	MetaMaxTime       = "sluice.max_time" // decimal unix ns
	MetaSort          = "sluice.sort"
	// MetaReplaces is the lineage of a compaction or rollup output: the
	// file ids of the files its swap replaced, space-separated.
	MetaReplaces = "sluice.replaces"
	// MetaRollupTier and MetaRollupSourceRows are metrics_rollup's own:
	// the tier's name ("5m") and the live raw rows of the hour the file
	// was computed from.
	MetaRollupTier       = "sluice.rollup.tier"
	MetaRollupSourceRows = "sluice.rollup.source_rows"
)

// Columns shared by every signal table (logs, metrics, traces), describing
// resource and scope; metrics_rollup has ColServiceName, ColScopeName and
// ColScopeVersion among its label columns.
const (
	ColServiceName       = "service_name"
	ColScopeName         = "scope_name"
	ColScopeVersion      = "scope_version"
	ColScopeSchemaURL    = "scope_schema_url"
	ColScopeDropped      = "scope_dropped_attributes_count"
	ColResourceSchemaURL = "resource_schema_url"
	ColResourceDropped   = "resource_dropped_attributes_count"
)

// Record columns of logs, metrics and traces (a name means the same in
// every table that has it).
const (
	ColTimestamp         = "timestamp"
	ColObservedTimestamp = "observed_timestamp"
	ColSeverityNumber    = "severity_number"
	ColSeverityText      = "severity_text"
	ColBody              = "body"
	ColBodyType          = "body_type"
	ColTraceID           = "trace_id"
	ColSpanID            = "span_id"
	ColFlags             = "flags"
	ColEventName         = "event_name"
	ColDropped           = "dropped_attributes_count"

	ColStartTimestamp          = "start_timestamp"
	ColMetricName              = "metric_name"
	ColMetricType              = "metric_type"
	ColDescription             = "description"
	ColUnit                    = "unit"
	ColTemporality             = "temporality"
	ColIsMonotonic             = "is_monotonic"
	ColSeriesID                = "series_id"
	ColValue                   = "value"
	ColValueInt                = "value_int"
	ColCount                   = "count"
	ColSum                     = "sum"
	ColMin                     = "min"
	ColMax                     = "max"
	ColBucketCounts            = "bucket_counts"
	ColExplicitBounds          = "explicit_bounds"
	ColExpScale                = "exp_scale"
	ColExpZeroCount            = "exp_zero_count"
	ColExpZeroThreshold        = "exp_zero_threshold"
	ColExpPositiveOffset       = "exp_positive_offset"
	ColExpPositiveBucketCounts = "exp_positive_bucket_counts"
	ColExpNegativeOffset       = "exp_negative_offset"
	ColExpNegativeBucketCounts = "exp_negative_bucket_counts"
	ColQuantiles               = "quantiles"
	ColQuantileValues          = "quantile_values"
	ColExemplars               = "exemplars"
	ColMetricMetadata          = "metric_metadata"
	ColSketch                  = "sketch"
	// A float histogram's counts (Prometheus native histograms with float
	// counts): non-null count_float marks one; its integer count columns
	// are null and its integer bucket lists empty.
	ColCountFloat                   = "count_float"
	ColExpZeroCountFloat            = "exp_zero_count_float"
	ColBucketCountsFloat            = "bucket_counts_float"
	ColExpPositiveBucketCountsFloat = "exp_positive_bucket_counts_float"
	ColExpNegativeBucketCountsFloat = "exp_negative_bucket_counts_float"
	// ColResetHint is a native histogram's counter reset hint as remote
	// write sent it: "yes", "no" or "gauge"; null when unknown.
	ColResetHint = "reset_hint"

	ColParentSpanID       = "parent_span_id"
	ColTraceState         = "trace_state"
	ColName               = "name"
	ColKind               = "kind"
	ColEndTimestamp       = "end_timestamp"
	ColDurationNs         = "duration_ns"
	ColStatusCode         = "status_code"
	ColStatusMessage      = "status_message"
	ColEvents             = "events"
	ColLinks              = "links"
	ColDroppedEventsCount = "dropped_events_count"
	ColDroppedLinksCount  = "dropped_links_count"
)

// metrics_rollup's own columns (the others it shares with metrics).
const (
	ColTier           = "tier"
	ColWindowStart    = "window_start"
	ColPoints         = "points"
	ColFirst          = "first"
	ColLast           = "last"
	ColFirstTimestamp = "first_timestamp"
	ColLastTimestamp  = "last_timestamp"
	ColIncrease       = "increase"
	ColResets         = "resets"
	ColBoundsMismatch = "bounds_mismatch"
)

// io_events columns (ColDurationNs and ColFlags are shared).
const (
	ColTime     = "time"
	ColGapNs    = "gap_ns"
	ColPID      = "pid"
	ColTID      = "tid"
	ColComm     = "comm"
	ColSyscall  = "syscall"
	ColFD       = "fd"
	ColRet      = "ret"
	ColErrno    = "errno"
	ColBytes    = "bytes"
	ColPath     = "path"
	ColOldPath  = "old_path"
	ColCgroupID = "cgroup_id"
	ColHostName = "host_name"
)

// Kind is how a fixed column is stored; it decides the Parquet node. The
// first sixteen values are the ones the signal tables use; their order is
// part of no file and may change.
type Kind uint8

const (
	KindTime       Kind = iota // optional TIMESTAMP(NANOS, UTC); 0 is null
	KindInt32                  // required INT32
	KindInt64                  // required INT64
	KindUint32                 // required INT(32, unsigned)
	KindUint64                 // required INT(64, unsigned)
	KindBool                   // required BOOLEAN
	KindDict                   // optional dictionary-encoded string; "" is null
	KindDictReq                // required dictionary-encoded string
	KindStr                    // optional plain string; "" is null
	KindOptDouble              // optional DOUBLE
	KindOptInt64               // optional INT64
	KindOptUint64              // optional INT(64, unsigned)
	KindOptInt32               // optional INT32
	KindOptBytes               // optional BYTE_ARRAY
	KindListU64                // LIST<INT(64, unsigned)>
	KindListF64                // LIST<DOUBLE>
	KindTimeReq                // required TIMESTAMP(NANOS, UTC)
	KindOptBool                // optional BOOLEAN
	KindOptListU64             // optional LIST<INT(64, unsigned)>
	KindOptListF64             // optional LIST<DOUBLE>
	numKinds
)

// Node is the Parquet node of a column of kind k.
func (k Kind) Node() parquet.Node {
	switch k {
	case KindTime:
		return parquet.Optional(parquet.Timestamp(parquet.Nanosecond))
	case KindInt32:
		return parquet.Int(32)
	case KindInt64:
		return parquet.Int(64)
	case KindUint32:
		return parquet.Uint(32)
	case KindUint64:
		return parquet.Uint(64)
	case KindBool:
		return parquet.Leaf(parquet.BooleanType)
	case KindDict:
		return parquet.Optional(parquet.Encoded(parquet.String(), &parquet.RLEDictionary))
	case KindDictReq:
		return parquet.Encoded(parquet.String(), &parquet.RLEDictionary)
	case KindStr:
		return parquet.Optional(parquet.String())
	case KindOptDouble:
		return parquet.Optional(parquet.Leaf(parquet.DoubleType))
	case KindOptInt64:
		return parquet.Optional(parquet.Int(64))
	case KindOptUint64:
		return parquet.Optional(parquet.Uint(64))
	case KindOptInt32:
		return parquet.Optional(parquet.Int(32))
	case KindOptBytes:
		return parquet.Optional(parquet.Leaf(parquet.ByteArrayType))
	case KindListU64:
		return parquet.List(parquet.Uint(64))
	case KindListF64:
		return parquet.List(parquet.Leaf(parquet.DoubleType))
	case KindTimeReq:
		return parquet.Timestamp(parquet.Nanosecond)
	case KindOptBool:
		return parquet.Optional(parquet.Leaf(parquet.BooleanType))
	case KindOptListU64:
		return parquet.Optional(parquet.List(parquet.Uint(64)))
	case KindOptListF64:
		return parquet.Optional(parquet.List(parquet.Leaf(parquet.DoubleType)))
	}
	panic("format: unknown column kind " + strconv.Itoa(int(k)))
}

// IsList reports whether columns of kind k are lists (their leaf is
// <name>.list.element).
func (k Kind) IsList() bool {
	switch k {
	case KindListU64, KindListF64, KindOptListU64, KindOptListF64:
		return true
	}
	return false
}

// Layout is the physical shape of a column of kind k: the leaf's Parquet
// physical type and its maximum repetition and definition levels. Readers
// check a file's column against it before trusting it.
func (k Kind) Layout() (kind parquet.Kind, maxRep, maxDef int) {
	switch k {
	case KindTime, KindOptInt64, KindOptUint64:
		return parquet.Int64, 0, 1
	case KindInt64, KindUint64, KindTimeReq:
		return parquet.Int64, 0, 0
	case KindInt32, KindUint32:
		return parquet.Int32, 0, 0
	case KindOptInt32:
		return parquet.Int32, 0, 1
	case KindBool:
		return parquet.Boolean, 0, 0
	case KindOptBool:
		return parquet.Boolean, 0, 1
	case KindDict, KindStr, KindOptBytes:
		return parquet.ByteArray, 0, 1
	case KindDictReq:
		return parquet.ByteArray, 0, 0
	case KindOptDouble:
		return parquet.Double, 0, 1
	case KindListU64:
		return parquet.Int64, 1, 1
	case KindListF64:
		return parquet.Double, 1, 1
	case KindOptListU64:
		return parquet.Int64, 1, 2
	case KindOptListF64:
		return parquet.Double, 1, 2
	}
	panic("format: unknown column kind " + strconv.Itoa(int(k)))
}

// AttrNode is the Parquet node of an attribute column of value type t.
func AttrNode(t signal.ValueType) parquet.Node {
	switch t {
	case signal.ValueString:
		return parquet.Optional(parquet.Encoded(parquet.String(), &parquet.RLEDictionary))
	case signal.ValueInt:
		return parquet.Optional(parquet.Int(64))
	case signal.ValueDouble:
		return parquet.Optional(parquet.Leaf(parquet.DoubleType))
	case signal.ValueBool, signal.ValueEmpty:
		return parquet.Optional(parquet.Leaf(parquet.BooleanType))
	case signal.ValueBytes:
		return parquet.Optional(parquet.Leaf(parquet.ByteArrayType))
	default: // array, map: OTLP JSON
		return parquet.Optional(parquet.String())
	}
}

// AttrKind is the Parquet physical type of an attribute column of value
// type t (every attribute column is a flat OPTIONAL leaf).
func AttrKind(t signal.ValueType) parquet.Kind {
	switch t {
	case signal.ValueInt:
		return parquet.Int64
	case signal.ValueDouble:
		return parquet.Double
	case signal.ValueBool, signal.ValueEmpty:
		return parquet.Boolean
	}
	return parquet.ByteArray
}

// Column is one fixed (non-attribute) column of a table.
type Column struct {
	Name string
	Kind Kind
}

// LeafPath is the path of the column's leaf; lists nest theirs.
func (c Column) LeafPath() []string {
	if c.Kind.IsList() {
		return []string{c.Name, "list", "element"}
	}
	return []string{c.Name}
}

// Table describes one lake table: its fixed columns in the order files
// hold them, how its rows are sorted, where its time is, and its footer.
type Table struct {
	Name string
	// Columns are the fixed columns. Attribute columns (names.go) follow
	// them in tables with Attributes, then the overflow columns.
	Columns []Column
	// Attributes: files have attribute and overflow columns (for
	// metrics_rollup: the series' label columns, named as in metrics,
	// with ColServiceName, ColScopeName and ColScopeVersion among them).
	Attributes bool
	// Sort is the footer's MetaSort: the columns rows are sorted by
	// ("partition_time" is the row's partition time, docs/schema.md).
	Sort string
	// TimeColumn holds the rows' event time: its statistics stand in for
	// MetaMinTime/MetaMaxTime when a footer lacks them.
	TimeColumn string
	// Footer lists the footer keys every file of the table has.
	Footer []string
	// Bloom is the column whose chunks have a split block bloom filter,
	// or "" for none.
	Bloom string
}

// Column returns the index in t.Columns of the fixed column name, or -1.
func (t *Table) Column(name string) int {
	for i, c := range t.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

var lakeFooter = []string{MetaTable, MetaTenant, MetaLevel, MetaSchemaVersion, MetaMinTime, MetaMaxTime, MetaSort}

// CommonColumns are the first columns of logs, metrics and traces.
var CommonColumns = []Column{
	{ColServiceName, KindDict},
	{ColScopeName, KindDict},
	{ColScopeVersion, KindDict},
	{ColScopeSchemaURL, KindDict},
	{ColScopeDropped, KindUint32},
	{ColResourceSchemaURL, KindDict},
	{ColResourceDropped, KindUint32},
}

func withCommon(cols ...Column) []Column {
	return append(append(make([]Column, 0, len(CommonColumns)+len(cols)), CommonColumns...), cols...)
}

// Logs is the logs table.
var Logs = &Table{
	Name: TableLogs,
	Columns: withCommon(
		Column{ColTimestamp, KindTime},
		Column{ColObservedTimestamp, KindTime},
		Column{ColSeverityNumber, KindInt32},
		Column{ColSeverityText, KindDict},
		Column{ColBody, KindStr},
		Column{ColBodyType, KindDict},
		Column{ColTraceID, KindStr},
		Column{ColSpanID, KindStr},
		Column{ColFlags, KindUint32},
		Column{ColEventName, KindDict},
		Column{ColDropped, KindUint32},
	),
	Attributes: true,
	Sort:       ColServiceName + ",partition_time",
	TimeColumn: ColTimestamp,
	Footer:     lakeFooter,
}

// Metrics is the metrics table (raw data points).
var Metrics = &Table{
	Name: TableMetrics,
	Columns: withCommon(
		Column{ColTimestamp, KindTime},
		Column{ColStartTimestamp, KindTime},
		Column{ColMetricName, KindDict},
		Column{ColMetricType, KindDictReq},
		Column{ColDescription, KindDict},
		Column{ColUnit, KindDict},
		Column{ColTemporality, KindDictReq},
		Column{ColIsMonotonic, KindBool},
		Column{ColSeriesID, KindUint64},
		Column{ColValue, KindOptDouble},
		Column{ColValueInt, KindOptInt64},
		Column{ColFlags, KindUint32},
		Column{ColCount, KindOptUint64},
		Column{ColSum, KindOptDouble},
		Column{ColMin, KindOptDouble},
		Column{ColMax, KindOptDouble},
		Column{ColBucketCounts, KindListU64},
		Column{ColExplicitBounds, KindListF64},
		Column{ColExpScale, KindOptInt32},
		Column{ColExpZeroCount, KindOptUint64},
		Column{ColExpZeroThreshold, KindOptDouble},
		Column{ColExpPositiveOffset, KindOptInt32},
		Column{ColExpPositiveBucketCounts, KindListU64},
		Column{ColExpNegativeOffset, KindOptInt32},
		Column{ColExpNegativeBucketCounts, KindListU64},
		Column{ColQuantiles, KindListF64},
		Column{ColQuantileValues, KindListF64},
		Column{ColExemplars, KindStr},
		Column{ColMetricMetadata, KindStr},
		Column{ColSketch, KindOptBytes},
		Column{ColCountFloat, KindOptDouble},
		Column{ColExpZeroCountFloat, KindOptDouble},
		Column{ColBucketCountsFloat, KindListF64},
		Column{ColExpPositiveBucketCountsFloat, KindListF64},
		Column{ColExpNegativeBucketCountsFloat, KindListF64},
		Column{ColResetHint, KindDict},
	),
	Attributes: true,
	Sort:       ColMetricName + "," + ColSeriesID + "," + ColTimestamp,
	TimeColumn: ColTimestamp,
	Footer:     lakeFooter,
}

// Traces is the traces table (spans).
var Traces = &Table{
	Name: TableTraces,
	Columns: withCommon(
		Column{ColTraceID, KindStr},
		Column{ColSpanID, KindStr},
		Column{ColParentSpanID, KindStr},
		Column{ColTraceState, KindStr},
		Column{ColName, KindDict},
		Column{ColKind, KindInt32},
		Column{ColStartTimestamp, KindTime},
		Column{ColEndTimestamp, KindTime},
		Column{ColDurationNs, KindInt64},
		Column{ColStatusCode, KindInt32},
		Column{ColStatusMessage, KindStr},
		Column{ColFlags, KindUint32},
		Column{ColEvents, KindStr},
		Column{ColLinks, KindStr},
		Column{ColDropped, KindUint32},
		Column{ColDroppedEventsCount, KindUint32},
		Column{ColDroppedLinksCount, KindUint32},
	),
	Attributes: true,
	Sort:       ColServiceName + "," + ColStartTimestamp,
	TimeColumn: ColStartTimestamp,
	Footer:     lakeFooter,
	Bloom:      ColTraceID,
}

// Rollup is the metrics_rollup table: per series and window of a tier,
// aggregates of the raw points (docs/schema.md, "metrics_rollup").
var Rollup = &Table{
	Name: TableRollup,
	Columns: []Column{
		{ColTier, KindDictReq},
		{ColWindowStart, KindTimeReq},
		{ColMetricName, KindDict},
		{ColMetricType, KindDictReq},
		{ColUnit, KindDict},
		{ColTemporality, KindDictReq},
		{ColIsMonotonic, KindBool},
		{ColSeriesID, KindUint64},
		{ColPoints, KindUint64},
		{ColCount, KindOptUint64},
		{ColSum, KindOptDouble},
		{ColMin, KindOptDouble},
		{ColMax, KindOptDouble},
		{ColFirst, KindOptDouble},
		{ColLast, KindOptDouble},
		{ColFirstTimestamp, KindTimeReq},
		{ColLastTimestamp, KindTimeReq},
		{ColIncrease, KindOptDouble},
		{ColResets, KindOptUint64},
		{ColBucketCounts, KindOptListU64},
		{ColExplicitBounds, KindOptListF64},
		{ColBoundsMismatch, KindOptBool},
		{ColSketch, KindOptBytes},
		{ColCountFloat, KindOptDouble},
		{ColBucketCountsFloat, KindOptListF64},
	},
	Attributes: true,
	Sort:       ColMetricName + "," + ColSeriesID + "," + ColWindowStart,
	TimeColumn: ColWindowStart,
	Footer:     append(append([]string(nil), lakeFooter...), MetaRollupTier, MetaRollupSourceRows),
}

// IOEvents is the io_events table (sluice trace --record): one row per
// traced syscall, in the order the tracer saw them.
var IOEvents = &Table{
	Name: TableIOEvents,
	Columns: []Column{
		{ColTime, KindTimeReq},
		{ColDurationNs, KindInt64},
		{ColGapNs, KindInt64},
		{ColPID, KindUint32},
		{ColTID, KindUint32},
		{ColComm, KindDictReq},
		{ColSyscall, KindDictReq},
		{ColFD, KindInt32},
		{ColRet, KindInt64},
		{ColErrno, KindInt32},
		{ColBytes, KindInt64},
		{ColPath, KindDict},
		{ColOldPath, KindDict},
		{ColFlags, KindUint64},
		{ColCgroupID, KindUint64},
		{ColHostName, KindDictReq},
	},
	Sort:       ColTime,
	TimeColumn: ColTime,
	Footer:     lakeFooter,
}

// Tables are the lake's tables.
var Tables = []*Table{Logs, Metrics, Traces, Rollup, IOEvents}

// Lookup returns the table named name, or nil.
func Lookup(name string) *Table {
	for _, t := range Tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// TimeColumn is the event-time column of table (Table.TimeColumn), or
// ColTimestamp for a table sluice does not know.
func TimeColumn(table string) string {
	if t := Lookup(table); t != nil {
		return t.TimeColumn
	}
	return ColTimestamp
}

// SortKey is the footer's MetaSort of table's files, or "" for a table
// sluice does not know.
func SortKey(table string) string {
	if t := Lookup(table); t != nil {
		return t.Sort
	}
	return ""
}
