package lake

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/signal"
)

// SchemaVersion is written to every file's footer as sluice.schema_version.
const SchemaVersion = 1

// Table names, which are also the first path element of each file.
const (
	TableLogs    = "logs"
	TableMetrics = "metrics"
	TableTraces  = "traces"
)

// Footer key/value metadata keys.
const (
	MetaTable         = "sluice.table"
	MetaTenant        = "sluice.tenant"
	MetaLevel         = "sluice.level"
	MetaSchemaVersion = "sluice.schema_version"
	MetaMinTime       = "sluice.min_time"
	MetaMaxTime       = "sluice.max_time"
	MetaSort          = "sluice.sort"
)

func tableName(k signal.Kind) string {
	switch k {
	case signal.KindLogs:
		return TableLogs
	case signal.KindMetrics:
		return TableMetrics
	case signal.KindTraces:
		return TableTraces
	}
	return ""
}

// colKind is how a fixed column is stored; it decides the Parquet node.
type colKind uint8

const (
	kTime      colKind = iota // optional TIMESTAMP(NANOS, UTC); 0 is null
	kInt32                    // required INT32
	kInt64                    // required INT64
	kUint32                   // required INT(32, unsigned)
	kUint64                   // required INT(64, unsigned)
	kBool                     // required BOOLEAN
	kDict                     // optional dictionary-encoded string; "" is null
	kDictReq                  // required dictionary-encoded string
	kStr                      // optional plain string; "" is null
	kOptDouble                // optional DOUBLE
	kOptInt64                 // optional INT64
	kOptUint64                // optional INT(64, unsigned)
	kOptInt32                 // optional INT32
	kOptBytes                 // optional BYTE_ARRAY
	kListU64                  // LIST<INT(64, unsigned)>
	kListF64                  // LIST<DOUBLE>
)

type fixedCol struct {
	name string
	kind colKind
}

func (k colKind) node() parquet.Node {
	switch k {
	case kTime:
		return parquet.Optional(parquet.Timestamp(parquet.Nanosecond))
	case kInt32:
		return parquet.Int(32)
	case kInt64:
		return parquet.Int(64)
	case kUint32:
		return parquet.Uint(32)
	case kUint64:
		return parquet.Uint(64)
	case kBool:
		return parquet.Leaf(parquet.BooleanType)
	case kDict:
		return parquet.Optional(parquet.Encoded(parquet.String(), &parquet.RLEDictionary))
	case kDictReq:
		return parquet.Encoded(parquet.String(), &parquet.RLEDictionary)
	case kStr:
		return parquet.Optional(parquet.String())
	case kOptDouble:
		return parquet.Optional(parquet.Leaf(parquet.DoubleType))
	case kOptInt64:
		return parquet.Optional(parquet.Int(64))
	case kOptUint64:
		return parquet.Optional(parquet.Uint(64))
	case kOptInt32:
		return parquet.Optional(parquet.Int(32))
	case kOptBytes:
		return parquet.Optional(parquet.Leaf(parquet.ByteArrayType))
	case kListU64:
		return parquet.List(parquet.Uint(64))
	case kListF64:
		return parquet.List(parquet.Leaf(parquet.DoubleType))
	}
	panic("lake: unknown column kind " + strconv.Itoa(int(k)))
}

func (k colKind) isList() bool { return k == kListU64 || k == kListF64 }

// attrNode is the node of an attribute column of type t.
func attrNode(t signal.ValueType) parquet.Node {
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

// Columns shared by every table, describing resource and scope.
const (
	cServiceName = iota
	cScopeName
	cScopeVersion
	cScopeSchemaURL
	cScopeDropped
	cResourceSchemaURL
	cResourceDropped
	numCommonCols
)

var commonCols = [numCommonCols]fixedCol{
	cServiceName:       {"service_name", kDict},
	cScopeName:         {"scope_name", kDict},
	cScopeVersion:      {"scope_version", kDict},
	cScopeSchemaURL:    {"scope_schema_url", kDict},
	cScopeDropped:      {"scope_dropped_attributes_count", kUint32},
	cResourceSchemaURL: {"resource_schema_url", kDict},
	cResourceDropped:   {"resource_dropped_attributes_count", kUint32},
}

// Logs columns, after the common ones.
const (
	lTimestamp = numCommonCols + iota
	lObserved
	lSeverityNumber
	lSeverityText
	lBody
	lBodyType
	lTraceID
	lSpanID
	lFlags
	lEventName
	lDropped
	numLogCols
)

var logCols = func() []fixedCol {
	c := append(make([]fixedCol, 0, numLogCols), commonCols[:]...)
	return append(c,
		fixedCol{"timestamp", kTime},
		fixedCol{"observed_timestamp", kTime},
		fixedCol{"severity_number", kInt32},
		fixedCol{"severity_text", kDict},
		fixedCol{"body", kStr},
		fixedCol{"body_type", kDict},
		fixedCol{"trace_id", kStr},
		fixedCol{"span_id", kStr},
		fixedCol{"flags", kUint32},
		fixedCol{"event_name", kDict},
		fixedCol{"dropped_attributes_count", kUint32},
	)
}()

// Metrics columns, after the common ones.
const (
	mTimestamp = numCommonCols + iota
	mStart
	mName
	mType
	mDescription
	mUnit
	mTemporality
	mMonotonic
	mSeriesID
	mValue
	mValueInt
	mFlags
	mCount
	mSum
	mMin
	mMax
	mBucketCounts
	mBounds
	mExpScale
	mExpZeroCount
	mExpZeroThreshold
	mExpPosOffset
	mExpPosCounts
	mExpNegOffset
	mExpNegCounts
	mQuantiles
	mQuantileValues
	mExemplars
	mMetadata
	mSketch
	numMetricCols
)

var metricCols = func() []fixedCol {
	c := append(make([]fixedCol, 0, numMetricCols), commonCols[:]...)
	return append(c,
		fixedCol{"timestamp", kTime},
		fixedCol{"start_timestamp", kTime},
		fixedCol{"metric_name", kDict},
		fixedCol{"metric_type", kDictReq},
		fixedCol{"description", kDict},
		fixedCol{"unit", kDict},
		fixedCol{"temporality", kDictReq},
		fixedCol{"is_monotonic", kBool},
		fixedCol{"series_id", kUint64},
		fixedCol{"value", kOptDouble},
		fixedCol{"value_int", kOptInt64},
		fixedCol{"flags", kUint32},
		fixedCol{"count", kOptUint64},
		fixedCol{"sum", kOptDouble},
		fixedCol{"min", kOptDouble},
		fixedCol{"max", kOptDouble},
		fixedCol{"bucket_counts", kListU64},
		fixedCol{"explicit_bounds", kListF64},
		fixedCol{"exp_scale", kOptInt32},
		fixedCol{"exp_zero_count", kOptUint64},
		fixedCol{"exp_zero_threshold", kOptDouble},
		fixedCol{"exp_positive_offset", kOptInt32},
		fixedCol{"exp_positive_bucket_counts", kListU64},
		fixedCol{"exp_negative_offset", kOptInt32},
		fixedCol{"exp_negative_bucket_counts", kListU64},
		fixedCol{"quantiles", kListF64},
		fixedCol{"quantile_values", kListF64},
		fixedCol{"exemplars", kStr},
		fixedCol{"metric_metadata", kStr},
		fixedCol{"sketch", kOptBytes},
	)
}()

// Traces columns, after the common ones.
const (
	tTraceID = numCommonCols + iota
	tSpanID
	tParentSpanID
	tTraceState
	tName
	tKind
	tStart
	tEnd
	tDuration
	tStatusCode
	tStatusMessage
	tFlags
	tEvents
	tLinks
	tDropped
	tDroppedEvents
	tDroppedLinks
	numSpanCols
)

var spanCols = func() []fixedCol {
	c := append(make([]fixedCol, 0, numSpanCols), commonCols[:]...)
	return append(c,
		fixedCol{"trace_id", kStr},
		fixedCol{"span_id", kStr},
		fixedCol{"parent_span_id", kStr},
		fixedCol{"trace_state", kStr},
		fixedCol{"name", kDict},
		fixedCol{"kind", kInt32},
		fixedCol{"start_timestamp", kTime},
		fixedCol{"end_timestamp", kTime},
		fixedCol{"duration_ns", kInt64},
		fixedCol{"status_code", kInt32},
		fixedCol{"status_message", kStr},
		fixedCol{"flags", kUint32},
		fixedCol{"events", kStr},
		fixedCol{"links", kStr},
		fixedCol{"dropped_attributes_count", kUint32},
		fixedCol{"dropped_events_count", kUint32},
		fixedCol{"dropped_links_count", kUint32},
	)
}()

func fixedColsOf(table string) []fixedCol {
	switch table {
	case TableLogs:
		return logCols
	case TableMetrics:
		return metricCols
	case TableTraces:
		return spanCols
	case TableIOEvents:
		return ioReadCols
	}
	return nil
}

// leafPath is the path of a fixed column's leaf; lists nest theirs.
func leafPath(c fixedCol) []string {
	if c.kind.isList() {
		return []string{c.name, "list", "element"}
	}
	return []string{c.name}
}

// schemaHash hashes the sorted column names with their types, so that two
// files with the same hash have the same columns.
func schemaHash(s *parquet.Schema) string {
	cols := s.Columns()
	lines := make([]string, 0, len(cols))
	for _, p := range cols {
		leaf, _ := s.Lookup(p...)
		lines = append(lines, strings.Join(p, ".")+" "+leaf.Node.Type().String())
	}
	slices.Sort(lines)
	var h xxhash.Digest
	for _, l := range lines {
		_, _ = h.WriteString(l)
		_, _ = h.Write([]byte{'\n'})
	}
	return fmt.Sprintf("%016x", h.Sum64())
}
