package lake

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// TestFixedColumnsFollowFormat: the index constants the encoder and reader
// use point at the columns package format names, and the io_events columns
// the encoder writes are format.IOEvents, so the descriptors stay the one
// definition of the format.
func TestFixedColumnsFollowFormat(t *testing.T) {
	for _, c := range []struct {
		cols []fixedCol
		i    int
		name string
	}{
		{commonCols[:], cServiceName, format.ColServiceName},
		{commonCols[:], cResourceDropped, format.ColResourceDropped},
		{logCols, lTimestamp, format.ColTimestamp},
		{logCols, lObserved, format.ColObservedTimestamp},
		{logCols, lBody, format.ColBody},
		{logCols, lTraceID, format.ColTraceID},
		{logCols, lDropped, format.ColDropped},
		{metricCols, mTimestamp, format.ColTimestamp},
		{metricCols, mName, format.ColMetricName},
		{metricCols, mSeriesID, format.ColSeriesID},
		{metricCols, mValue, format.ColValue},
		{metricCols, mBucketCounts, format.ColBucketCounts},
		{metricCols, mExpNegCounts, format.ColExpNegativeBucketCounts},
		{metricCols, mSketch, format.ColSketch},
		{spanCols, tTraceID, format.ColTraceID},
		{spanCols, tStart, format.ColStartTimestamp},
		{spanCols, tDuration, format.ColDurationNs},
		{spanCols, tDroppedLinks, format.ColDroppedLinksCount},
	} {
		if c.cols[c.i].name != c.name {
			t.Errorf("column %d is %q, want %q", c.i, c.cols[c.i].name, c.name)
		}
	}
	for _, c := range []struct {
		cols []fixedCol
		n    int
		tb   *format.Table
	}{{logCols, numLogCols, format.Logs}, {metricCols, numMetricCols, format.Metrics}, {spanCols, numSpanCols, format.Traces}} {
		if len(c.cols) != c.n || len(c.tb.Columns) != c.n {
			t.Errorf("%s: %d columns, constants say %d", c.tb.Name, len(c.tb.Columns), c.n)
		}
	}
	if len(ioCols) != len(format.IOEvents.Columns) {
		t.Fatalf("io_events: %d columns, format has %d", len(ioCols), len(format.IOEvents.Columns))
	}
	for i, c := range format.IOEvents.Columns {
		got := ioCols[i]
		if got.name != c.Name || format.Kind(got.kind) != c.Kind {
			t.Errorf("io_events column %d: encoder has %q kind %d, format %q kind %d", i, got.name, got.kind, c.Name, c.Kind)
		}
	}
	if leaf, ok := ioSchema.Lookup(format.ColTime); !ok || leaf.Node.Optional() {
		t.Error("io_events time is not a required column, as format.IOEvents says")
	}
	for _, tb := range format.Tables {
		if SortKey(tb.Name) != tb.Sort {
			t.Errorf("%s: SortKey %q, format says %q", tb.Name, SortKey(tb.Name), tb.Sort)
		}
	}
}
