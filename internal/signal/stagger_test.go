package signal

import (
	"reflect"
	"testing"
)

// TestGrowPointsStaggersColumns: once AppendSeriesPoints has grown the
// point columns past a page, the arrays of the columns of one element size
// (which advance together, a point at a time) start in different L1 cache
// sets (address bits 6-11), so that element p of each is in a set of its
// own; and the columns keep every value through the growth. (5,000 points:
// the 4- and 8-byte columns' arrays are over 32 KB, so they start on a
// page plus their stagger; the 1-byte ones anywhere.)
func TestGrowPointsStaggersColumns(t *testing.T) {
	var m Metrics
	for i := range 5000 {
		m.AppendSeriesPoints(uint32(i%7), 0, 0, Range{}, uint64(i), []int64{int64(i)}, []int64{int64(i + 1)}, []uint64{uint64(i * 3)})
	}
	for i := range 5000 {
		if m.Time[i] != int64(i) || m.StartTime[i] != int64(i+1) || m.Number[i] != uint64(i*3) || m.SeriesID[i] != uint64(i) || m.Desc[i] != uint32(i%7) {
			t.Fatalf("point %d changed by the growth", i)
		}
	}
	sets := map[[2]uintptr]string{}
	v := reflect.ValueOf(&m).Elem()
	for _, name := range []string{"Desc", "Resource", "Scope", "StartTime", "Time", "Attr", "Flags", "Exemplars", "SeriesID",
		"NumberType", "Number", "Count", "Sum", "Min", "Max", "Has", "BucketCounts", "Bounds", "Scale", "ZeroCount",
		"ZeroThreshold", "PosOffset", "PosCounts", "NegOffset", "NegCounts", "Quantiles", "FloatCounts"} {
		col := v.FieldByName(name)
		if col.Len() != 5000 {
			t.Fatalf("%s: %d points", name, col.Len())
		}
		size := col.Type().Elem().Size()
		if size == 1 {
			continue
		}
		set := [2]uintptr{size, col.Pointer() >> 6 & 63}
		if other, ok := sets[set]; ok {
			t.Fatalf("%s and %s (%d-byte elements) start in the same L1 set %d", name, other, size, set[1])
		}
		sets[set] = name
	}
}
