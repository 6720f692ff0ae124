package format

import "testing"

// TestColumnPositions: the reader's position constants point at the
// columns of those names in the descriptors.
func TestColumnPositions(t *testing.T) {
	for _, c := range []struct {
		tb   *Table
		i    int
		name string
	}{
		{Logs, cServiceName, ColServiceName}, {Logs, cScopeName, ColScopeName}, {Logs, cScopeVersion, ColScopeVersion},
		{Logs, cScopeSchemaURL, ColScopeSchemaURL}, {Logs, cScopeDropped, ColScopeDropped},
		{Logs, cResourceSchemaURL, ColResourceSchemaURL}, {Logs, cResourceDropped, ColResourceDropped},
		{Logs, lTimestamp, ColTimestamp}, {Logs, lObserved, ColObservedTimestamp}, {Logs, lSeverityNumber, ColSeverityNumber},
		{Logs, lSeverityText, ColSeverityText}, {Logs, lBody, ColBody}, {Logs, lBodyType, ColBodyType},
		{Logs, lTraceID, ColTraceID}, {Logs, lSpanID, ColSpanID}, {Logs, lFlags, ColFlags}, {Logs, lEventName, ColEventName},
		{Logs, lDropped, ColDropped},
		{Metrics, mTimestamp, ColTimestamp}, {Metrics, mStart, ColStartTimestamp}, {Metrics, mName, ColMetricName},
		{Metrics, mType, ColMetricType}, {Metrics, mDescription, ColDescription}, {Metrics, mUnit, ColUnit},
		{Metrics, mTemporality, ColTemporality}, {Metrics, mMonotonic, ColIsMonotonic}, {Metrics, mSeriesID, ColSeriesID},
		{Metrics, mValue, ColValue}, {Metrics, mValueInt, ColValueInt}, {Metrics, mFlags, ColFlags}, {Metrics, mCount, ColCount},
		{Metrics, mSum, ColSum}, {Metrics, mMin, ColMin}, {Metrics, mMax, ColMax}, {Metrics, mBucketCounts, ColBucketCounts},
		{Metrics, mBounds, ColExplicitBounds}, {Metrics, mExpScale, ColExpScale}, {Metrics, mExpZeroCount, ColExpZeroCount},
		{Metrics, mExpZeroThreshold, ColExpZeroThreshold}, {Metrics, mExpPosOffset, ColExpPositiveOffset},
		{Metrics, mExpPosCounts, ColExpPositiveBucketCounts}, {Metrics, mExpNegOffset, ColExpNegativeOffset},
		{Metrics, mExpNegCounts, ColExpNegativeBucketCounts}, {Metrics, mQuantiles, ColQuantiles},
		{Metrics, mQuantileValues, ColQuantileValues}, {Metrics, mExemplars, ColExemplars},
		{Metrics, mMetadata, ColMetricMetadata}, {Metrics, mSketch, ColSketch},
		{Traces, tTraceID, ColTraceID}, {Traces, tSpanID, ColSpanID}, {Traces, tParentSpanID, ColParentSpanID},
		{Traces, tTraceState, ColTraceState}, {Traces, tName, ColName}, {Traces, tKind, ColKind}, {Traces, tStart, ColStartTimestamp},
		{Traces, tEnd, ColEndTimestamp}, {Traces, tDuration, ColDurationNs}, {Traces, tStatusCode, ColStatusCode},
		{Traces, tStatusMessage, ColStatusMessage}, {Traces, tFlags, ColFlags}, {Traces, tEvents, ColEvents},
		{Traces, tLinks, ColLinks}, {Traces, tDropped, ColDropped}, {Traces, tDroppedEvents, ColDroppedEventsCount},
		{Traces, tDroppedLinks, ColDroppedLinksCount},
	} {
		if c.tb.Columns[c.i].Name != c.name {
			t.Errorf("%s column %d is %q, want %q", c.tb.Name, c.i, c.tb.Columns[c.i].Name, c.name)
		}
	}
	if len(Logs.Columns) != numLogCols || len(Metrics.Columns) != numMetricCols || len(Traces.Columns) != numSpanCols {
		t.Errorf("column counts %d %d %d, constants %d %d %d", len(Logs.Columns), len(Metrics.Columns), len(Traces.Columns),
			numLogCols, numMetricCols, numSpanCols)
	}
}
