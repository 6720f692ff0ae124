package format

// Positions of the fixed columns in the descriptors' Columns, for the
// reader's switches (TestColumnPositions checks them against the names).

// Logs, Metrics and Traces start with CommonColumns.
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
	mCountFloat
	mExpZeroCountFloat
	mBucketCountsFloat
	mExpPosCountsFloat
	mExpNegCountsFloat
	mResetHint
	numMetricCols
)

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
