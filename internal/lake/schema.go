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

// fixedCols are a table's format.Columns; the index constants below
// (cServiceName, lTimestamp, mName, ...) are positions in them, which
// TestFixedColumnsFollowFormat checks.
func fixedCols(cols []format.Column) []fixedCol {
	out := make([]fixedCol, len(cols))
	for i, c := range cols {
		out[i] = fixedCol{c.Name, colKind(c.Kind)}
	}
	return out
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

var commonCols = [numCommonCols]fixedCol(fixedCols(format.CommonColumns))

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

var logCols = fixedCols(format.Logs.Columns)

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

var metricCols = fixedCols(format.Metrics.Columns)

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

var spanCols = fixedCols(format.Traces.Columns)

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
