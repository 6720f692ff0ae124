package lake

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/signal"
)

// The file format is package format's; the names below are kept for the
// packages that import them from here.

// SchemaVersion is written to every file's footer as sluice.schema_version.
const SchemaVersion = format.SchemaVersion

// Table names, which are also the first path element of each file.
const (
	TableLogs    = format.TableLogs
	TableMetrics = format.TableMetrics
	TableTraces  = format.TableTraces
)

// Footer key/value metadata keys.
const (
	MetaTable         = format.MetaTable
	MetaTenant        = format.MetaTenant
	MetaLevel         = format.MetaLevel
	MetaSchemaVersion = format.MetaSchemaVersion
	MetaMinTime       = format.MetaMinTime
	MetaMaxTime       = format.MetaMaxTime
	MetaSort          = format.MetaSort
)

// bloomColumn is the column of table's files with a bloom filter, or "".
func bloomColumn(table string) string {
	if t := format.Lookup(table); t != nil {
		return t.Bloom
	}
	return ""
}

func sortKey(table string) string { return format.SortKey(table) }

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

// colKind is format.Kind under the names the encoder and reader of this
// package use.
type colKind uint8

const (
	kTime      = colKind(format.KindTime)
	kInt32     = colKind(format.KindInt32)
	kInt64     = colKind(format.KindInt64)
	kUint32    = colKind(format.KindUint32)
	kUint64    = colKind(format.KindUint64)
	kBool      = colKind(format.KindBool)
	kDict      = colKind(format.KindDict)
	kDictReq   = colKind(format.KindDictReq)
	kStr       = colKind(format.KindStr)
	kOptDouble = colKind(format.KindOptDouble)
	kOptInt64  = colKind(format.KindOptInt64)
	kOptUint64 = colKind(format.KindOptUint64)
	kOptInt32  = colKind(format.KindOptInt32)
	kOptBytes  = colKind(format.KindOptBytes)
	kListU64   = colKind(format.KindListU64)
	kListF64   = colKind(format.KindListF64)
)

type fixedCol struct {
	name string
	kind colKind
}

func (k colKind) node() parquet.Node { return format.Kind(k).Node() }

func (k colKind) isList() bool { return format.Kind(k).IsList() }

// attrNode is the node of an attribute column of type t.
func attrNode(t signal.ValueType) parquet.Node { return format.AttrNode(t) }

// fixedCols are a table's format.Columns; the positions below
// (cServiceName, lTimestamp, mName, ...) are looked up in them by name, so
// the order of a table's columns is written down once, in package format.
func fixedCols(cols []format.Column) []fixedCol {
	out := make([]fixedCol, len(cols))
	for i, c := range cols {
		out[i] = fixedCol{c.Name, colKind(c.Kind)}
	}
	return out
}

// Columns shared by every table, describing resource and scope.
var (
	cServiceName       = position(format.CommonColumns, format.ColServiceName)
	cScopeName         = position(format.CommonColumns, format.ColScopeName)
	cScopeVersion      = position(format.CommonColumns, format.ColScopeVersion)
	cScopeSchemaURL    = position(format.CommonColumns, format.ColScopeSchemaURL)
	cScopeDropped      = position(format.CommonColumns, format.ColScopeDropped)
	cResourceSchemaURL = position(format.CommonColumns, format.ColResourceSchemaURL)
	cResourceDropped   = position(format.CommonColumns, format.ColResourceDropped)
)

var commonCols = fixedCols(format.CommonColumns)

// Logs columns, after the common ones.
var (
	lTimestamp      = position(format.Logs.Columns, format.ColTimestamp)
	lObserved       = position(format.Logs.Columns, format.ColObservedTimestamp)
	lSeverityNumber = position(format.Logs.Columns, format.ColSeverityNumber)
	lSeverityText   = position(format.Logs.Columns, format.ColSeverityText)
	lBody           = position(format.Logs.Columns, format.ColBody)
	lBodyType       = position(format.Logs.Columns, format.ColBodyType)
	lTraceID        = position(format.Logs.Columns, format.ColTraceID)
	lSpanID         = position(format.Logs.Columns, format.ColSpanID)
	lFlags          = position(format.Logs.Columns, format.ColFlags)
	lEventName      = position(format.Logs.Columns, format.ColEventName)
	lDropped        = position(format.Logs.Columns, format.ColDropped)
	numLogCols      = len(format.Logs.Columns)
)

var logCols = fixedCols(format.Logs.Columns)

// Metrics columns, after the common ones.
var (
	mTimestamp        = position(format.Metrics.Columns, format.ColTimestamp)
	mStart            = position(format.Metrics.Columns, format.ColStartTimestamp)
	mName             = position(format.Metrics.Columns, format.ColMetricName)
	mType             = position(format.Metrics.Columns, format.ColMetricType)
	mDescription      = position(format.Metrics.Columns, format.ColDescription)
	mUnit             = position(format.Metrics.Columns, format.ColUnit)
	mTemporality      = position(format.Metrics.Columns, format.ColTemporality)
	mMonotonic        = position(format.Metrics.Columns, format.ColIsMonotonic)
	mSeriesID         = position(format.Metrics.Columns, format.ColSeriesID)
	mValue            = position(format.Metrics.Columns, format.ColValue)
	mValueInt         = position(format.Metrics.Columns, format.ColValueInt)
	mFlags            = position(format.Metrics.Columns, format.ColFlags)
	mCount            = position(format.Metrics.Columns, format.ColCount)
	mSum              = position(format.Metrics.Columns, format.ColSum)
	mMin              = position(format.Metrics.Columns, format.ColMin)
	mMax              = position(format.Metrics.Columns, format.ColMax)
	mBucketCounts     = position(format.Metrics.Columns, format.ColBucketCounts)
	mBounds           = position(format.Metrics.Columns, format.ColExplicitBounds)
	mExpScale         = position(format.Metrics.Columns, format.ColExpScale)
	mExpZeroCount     = position(format.Metrics.Columns, format.ColExpZeroCount)
	mExpZeroThreshold = position(format.Metrics.Columns, format.ColExpZeroThreshold)
	mExpPosOffset     = position(format.Metrics.Columns, format.ColExpPositiveOffset)
	mExpPosCounts     = position(format.Metrics.Columns, format.ColExpPositiveBucketCounts)
	mExpNegOffset     = position(format.Metrics.Columns, format.ColExpNegativeOffset)
	mExpNegCounts     = position(format.Metrics.Columns, format.ColExpNegativeBucketCounts)
	mQuantiles        = position(format.Metrics.Columns, format.ColQuantiles)
	mQuantileValues   = position(format.Metrics.Columns, format.ColQuantileValues)
	mExemplars        = position(format.Metrics.Columns, format.ColExemplars)
	mMetadata         = position(format.Metrics.Columns, format.ColMetricMetadata)
	mSketch           = position(format.Metrics.Columns, format.ColSketch)
	mCountFloat       = position(format.Metrics.Columns, format.ColCountFloat)
	mZeroCountFloat   = position(format.Metrics.Columns, format.ColExpZeroCountFloat)
	mBucketsFloat     = position(format.Metrics.Columns, format.ColBucketCountsFloat)
	mPosCountsFloat   = position(format.Metrics.Columns, format.ColExpPositiveBucketCountsFloat)
	mNegCountsFloat   = position(format.Metrics.Columns, format.ColExpNegativeBucketCountsFloat)
	mResetHint        = position(format.Metrics.Columns, format.ColResetHint)
	numMetricCols     = len(format.Metrics.Columns)
)

var metricCols = fixedCols(format.Metrics.Columns)

// Traces columns, after the common ones.
var (
	tTraceID       = position(format.Traces.Columns, format.ColTraceID)
	tSpanID        = position(format.Traces.Columns, format.ColSpanID)
	tParentSpanID  = position(format.Traces.Columns, format.ColParentSpanID)
	tTraceState    = position(format.Traces.Columns, format.ColTraceState)
	tName          = position(format.Traces.Columns, format.ColName)
	tKind          = position(format.Traces.Columns, format.ColKind)
	tStart         = position(format.Traces.Columns, format.ColStartTimestamp)
	tEnd           = position(format.Traces.Columns, format.ColEndTimestamp)
	tDuration      = position(format.Traces.Columns, format.ColDurationNs)
	tStatusCode    = position(format.Traces.Columns, format.ColStatusCode)
	tStatusMessage = position(format.Traces.Columns, format.ColStatusMessage)
	tFlags         = position(format.Traces.Columns, format.ColFlags)
	tEvents        = position(format.Traces.Columns, format.ColEvents)
	tLinks         = position(format.Traces.Columns, format.ColLinks)
	tDropped       = position(format.Traces.Columns, format.ColDropped)
	tDroppedEvents = position(format.Traces.Columns, format.ColDroppedEventsCount)
	tDroppedLinks  = position(format.Traces.Columns, format.ColDroppedLinksCount)
	numSpanCols    = len(format.Traces.Columns)
)

var spanCols = fixedCols(format.Traces.Columns)

// position is the index of the column name in cols; a name missing from
// its table is a broken build, found at start-up.
func position(cols []format.Column, name string) int {
	for i, c := range cols {
		if c.Name == name {
			return i
		}
	}
	panic("lake: column " + name + " is not in its table")
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
