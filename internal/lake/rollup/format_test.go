package rollup

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// TestFixedColumnsFollowFormat: the column constants of write.go index
// format.Rollup's columns, which fixedNames and fixedNode are built from.
func TestFixedColumnsFollowFormat(t *testing.T) {
	if len(format.Rollup.Columns) != numFixed {
		t.Fatalf("format.Rollup has %d columns, write.go %d", len(format.Rollup.Columns), numFixed)
	}
	for _, c := range []struct {
		i    int
		name string
	}{
		{cTier, format.ColTier}, {cWindowStart, format.ColWindowStart}, {cSeriesID, format.ColSeriesID},
		{cPoints, format.ColPoints}, {cFirstTS, format.ColFirstTimestamp}, {cLastTS, format.ColLastTimestamp},
		{cResets, format.ColResets}, {cBuckets, format.ColBucketCounts}, {cBounds, format.ColExplicitBounds},
		{cMismatch, format.ColBoundsMismatch}, {cSketch, format.ColSketch},
		{cCountFloat, format.ColCountFloat}, {cBucketsFloat, format.ColBucketCountsFloat},
	} {
		if fixedNames[c.i] != c.name {
			t.Errorf("column %d is %q, want %q", c.i, fixedNames[c.i], c.name)
		}
	}
	for _, n := range []string{format.ColServiceName, format.ColScopeName, "attr.k", "resource.k#int", format.ColAttrOverflow} {
		if !isLabel(n) {
			t.Errorf("%q is not a label column", n)
		}
	}
	for _, n := range []string{format.ColTimestamp, format.ColMetricName, "attr.k#nope", "attributes"} {
		if isLabel(n) {
			t.Errorf("%q is a label column", n)
		}
	}
}
